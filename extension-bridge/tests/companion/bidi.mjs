// A minimal WebDriver BiDi client for Debian's firefox-esr, and one small page interface over it
// and over Chromium (playwright-core), so the companion test runs the same steps in both.
//
// Why our own client: Playwright's Firefox BiDi channel (`firefox.launch({channel:
// "moz-firefox"})`) sends `emulation.setMediaFeaturesOverride`, which Firefox ESR 153 does not
// know, and fails; geckodriver's npm package downloads a binary at install (no network here).
// Firefox speaks BiDi itself when started with `--remote-debugging-port`:
//   firefox-esr --headless --remote-debugging-port=0 --profile <fresh dir>
// prints `WebDriver BiDi listening on ws://127.0.0.1:<port>` on stderr; a WebSocket to
// `ws://127.0.0.1:<port>/session` then takes `session.new` (W3C WebDriver BiDi, "session.new":
// https://w3c.github.io/webdriver-bidi/#command-session-new).
//
// Node 20 has no global WebSocket without `--experimental-websocket` (Node ≥ 20.10), and the
// `ws` package is not in extension-bridge/node_modules: the test runs node with that flag
// (companion-e2e.mjs re-executes itself with it when needed).
//
// The page interface (both browsers): { browser, goto(url), evaluate(fn, arg), screenshot(path),
// reload(), close() }; Chromium's also has cdp() (a DevTools Protocol session on the page).
// `fn` is a function serialized with toString() and run in the page with one JSON-serializable
// argument; its (awaited) result comes back JSON-serialized, so only JSON values cross.
// Exceptions in the page reject with the page's message.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const FIREFOX = "/usr/bin/firefox-esr";
const CHROMIUM = "/usr/bin/chromium";

/** Preferences of the fresh Firefox profile: no first-run pages, updates, telemetry or
 * network chatter that could slow a headless test down. */
const FIREFOX_PREFS = {
  "browser.shell.checkDefaultBrowser": false,
  "browser.startup.homepage_override.mstone": "ignore",
  "browser.startup.page": 0,
  "browser.aboutwelcome.enabled": false,
  "datareporting.policy.dataSubmissionEnabled": false,
  "toolkit.telemetry.reportingpolicy.firstRun": false,
  "app.update.disabledForTesting": true,
  "app.normandy.enabled": false,
  "browser.safebrowsing.malware.enabled": false,
  "browser.safebrowsing.phishing.enabled": false,
  "network.captive-portal-service.enabled": false,
  "network.connectivity-service.enabled": false,
  "extensions.update.enabled": false,
  "browser.newtabpage.enabled": false,
  "dom.disable_open_during_load": false,
};

/** A BiDi connection: `send(method, params)` → the command's `result`, or throws with the
 * error's `error: message`. Events are ignored (the test polls the DOM instead). */
class BidiConnection {
  /** @param {WebSocket} socket an open socket */
  constructor(socket) {
    this.socket = socket;
    this.nextId = 1;
    this.pending = new Map();
    this.closed = null;
    socket.addEventListener("message", (event) => {
      const message = JSON.parse(typeof event.data === "string" ? event.data : Buffer.from(event.data).toString("utf8"));
      if (message.id === undefined) return; // an event
      const waiter = this.pending.get(message.id);
      if (!waiter) return;
      this.pending.delete(message.id);
      if (message.type === "error") waiter.reject(new Error(`${waiter.method}: ${message.error}: ${message.message}`));
      else waiter.resolve(message.result);
    });
    socket.addEventListener("close", () => {
      this.closed = "the BiDi socket closed";
      for (const waiter of this.pending.values()) waiter.reject(new Error(`${waiter.method}: ${this.closed}`));
      this.pending.clear();
    });
  }

  /** Sends one command and waits for its answer (at most `timeoutMs`). */
  send(method, params = {}, timeoutMs = 30000) {
    if (this.closed) return Promise.reject(new Error(`${method}: ${this.closed}`));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method}: no answer in ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        method,
        resolve: (v) => { clearTimeout(timer); resolve(v); },
        reject: (e) => { clearTimeout(timer); reject(e); },
      });
      this.socket.send(JSON.stringify({ id, method, params }));
    });
  }
}

/** Wraps `fn` so that it takes a JSON string and returns a JSON string (undefined → null). */
function jsonWrapped(fn) {
  return `async (json) => JSON.stringify((await (${fn.toString()})(JSON.parse(json))) ?? null)`;
}

/**
 * Starts firefox-esr headless with a fresh profile and a BiDi session on one tab.
 * `initScripts`: script sources run in every document before its own scripts
 * (`script.addPreloadScript`), in order. `env`: the browser's environment.
 * Rejects when Firefox does not print its BiDi address within 90 s (its stderr is in the message;
 * a first start on a busy 2-core machine takes tens of seconds).
 * @returns {Promise<Page>}
 */
export async function launchFirefox({ initScripts = [], env = process.env, binary = FIREFOX } = {}) {
  if (typeof WebSocket !== "function") throw new Error("no global WebSocket: run node with --experimental-websocket (Node ≥ 20.10)");
  const profile = mkdtempSync(join(tmpdir(), "companion-firefox-"));
  writeFileSync(join(profile, "user.js"), Object.entries(FIREFOX_PREFS).map(([k, v]) => `user_pref(${JSON.stringify(k)}, ${JSON.stringify(v)});\n`).join(""));
  const child = spawn(binary, ["--headless", "--no-remote", "--remote-debugging-port=0", "--profile", profile, "about:blank"],
    { env: { ...env, MOZ_HEADLESS: "1" }, stdio: ["ignore", "ignore", "pipe"] });
  const stderr = [];
  const stop = () => {
    if (child.exitCode === null) child.kill("SIGKILL");
    rmSync(profile, { recursive: true, force: true });
  };
  try {
    return await bidiSession(child, stderr, initScripts, stop);
  } catch (e) {
    stop();
    throw e;
  }
}

/** The BiDi session of a started Firefox `child` and the page interface over it; `stop()`
 * ends the browser for good. */
async function bidiSession(child, stderr, initScripts, stop) {
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`firefox printed no BiDi address in 90 s: ${stderr.join("\n")}`)), 90000);
    createInterface({ input: child.stderr }).on("line", (line) => {
      stderr.push(line);
      const m = line.match(/WebDriver BiDi listening on (ws:\/\/\S+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    child.once("exit", (code) => { clearTimeout(timer); reject(new Error(`firefox exited ${code}: ${stderr.join("\n")}`)); });
  });
  const socket = new WebSocket(`${url.replace(/\/$/, "")}/session`);
  await new Promise((resolve, reject) => {
    socket.addEventListener("open", resolve, { once: true });
    socket.addEventListener("error", () => reject(new Error(`cannot open ${url}/session`)), { once: true });
  });
  const bidi = new BidiConnection(socket);
  await bidi.send("session.new", { capabilities: { alwaysMatch: { acceptInsecureCerts: true } } });
  for (const source of initScripts) {
    await bidi.send("script.addPreloadScript", { functionDeclaration: `() => {\n${source}\n}` });
  }
  const tree = await bidi.send("browsingContext.getTree", {});
  const context = tree.contexts[0].context;

  async function evaluate(fn, arg) {
    const result = await bidi.send("script.callFunction", {
      functionDeclaration: jsonWrapped(fn),
      arguments: [{ type: "string", value: JSON.stringify(arg ?? null) }],
      target: { context },
      awaitPromise: true,
      resultOwnership: "none",
    }, 60000);
    if (result.type === "exception") throw new Error(`in the page: ${result.exceptionDetails.text}`);
    return JSON.parse(result.result.value);
  }

  return {
    browser: "firefox",
    goto: (target) => bidi.send("browsingContext.navigate", { context, url: target, wait: "complete" }),
    evaluate,
    async screenshot(path) {
      const { data } = await bidi.send("browsingContext.captureScreenshot", { context, origin: "document" });
      writeFileSync(path, Buffer.from(data, "base64"));
    },
    reload: () => bidi.send("browsingContext.reload", { context, wait: "complete" }),
    async close() {
      try { await bidi.send("browser.close", {}, 5000); } catch { /* closing anyway */ }
      socket.close();
      if (child.exitCode === null) await Promise.race([new Promise((r) => child.once("exit", r)), new Promise((r) => setTimeout(r, 5000))]);
      stop();
    },
  };
}

/**
 * Starts Debian's Chromium headless through playwright-core (no browser download:
 * `executablePath`) with the same page interface as [`launchFirefox`].
 * @returns {Promise<Page>}
 */
export async function launchChromium({ initScripts = [], env = process.env, binary = CHROMIUM } = {}) {
  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({
    executablePath: binary,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
    env,
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  for (const source of initScripts) await context.addInitScript({ content: source });
  const page = await context.newPage();
  page.on("pageerror", (e) => console.log(`chromium page error: ${e.message}`));
  return {
    browser: "chromium",
    goto: (target) => page.goto(target, { waitUntil: "load" }),
    async evaluate(fn, arg) {
      // The same JSON round trip as Firefox, so both browsers see and return the same values.
      const wrapped = new Function(`return ${jsonWrapped(fn)}`)();
      return JSON.parse(await page.evaluate(wrapped, JSON.stringify(arg ?? null)));
    },
    screenshot: (path) => page.screenshot({ path, fullPage: true }),
    reload: () => page.reload({ waitUntil: "load" }),
    close: () => browser.close(),
    /** A Chrome DevTools Protocol session on the page (Chromium only; bench/companion.mjs reads
     * `Performance.getMetrics` through it). */
    cdp: () => context.newCDPSession(page),
  };
}

/** The page interface of `name` ("chromium" or "firefox"). */
export function launch(name, options) {
  if (name === "chromium") return launchChromium(options);
  if (name === "firefox") return launchFirefox(options);
  throw new Error(`unknown browser ${name}: chromium or firefox`);
}
