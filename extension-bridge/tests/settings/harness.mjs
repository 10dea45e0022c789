// What every step of the settings-page test (tests/settings-e2e.mjs, issue 18) shares: the
// fixture repository, a daemon started with a config of the step's own, logging in through the
// real `review-agent-gateway settings` command, and small checks. A step module exports
// `async function run(ctx)`; see settings-e2e.mjs for `ctx`.
import { execFile, spawn, spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { createInterface } from "node:readline";

import { freePort } from "../fixture.mjs";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Runs a command; its trimmed stdout (throws with its stderr when it fails). */
export function run(cmd, argv, opts = {}) {
  const r = spawnSync(cmd, argv, { encoding: "utf8", ...opts });
  if (r.status !== 0) throw new Error(`${cmd} ${argv.join(" ")} exited ${r.status}: ${r.stderr}`);
  return r.stdout.trim();
}

/** A git repository under `dir` with a base commit and a head commit on `main` adding three
 * findings of the built-in rules to app.py (an eval on lines 2–4). Returns { repo, base, head }. */
export function fixtureRepo(dir) {
  mkdirSync(dir, { recursive: true });
  const git = (...a) => run("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", ...a], { cwd: dir });
  git("init", "-q", "-b", "main");
  writeFileSync(join(dir, "app.py"), "import os\n\n\ndef f():\n    return 1\n");
  git("add", "-A"); git("commit", "-q", "-m", "base");
  const base = git("rev-parse", "HEAD");
  writeFileSync(join(dir, "app.py"), "import os\nv0 = eval(x0)\nv1 = eval(x1)\nv2 = eval(x2)\n\n\ndef f():\n    return 1\n");
  git("add", "-A"); git("commit", "-q", "-m", "evals");
  const head = git("rev-parse", "HEAD");
  return { repo: dir, base, head };
}

/**
 * Starts `binary serve` with `home` as REVIEW_AGENT_GATEWAY_HOME and `config` (TOML text, to
 * which `port = N` is prepended) as its config.toml. `extraEnv` is added to the daemon's
 * environment only. Returns { port, base, env, token, api, stop, stderr }: `env` is what
 * commands of this gateway run with; `api(method, path, body, headers)` calls /v1 with the
 * bearer token and answers { status, body }; `stderr()` is the daemon's log so far.
 */
export async function startDaemon({ binary, home, config = "", extraEnv = {} }) {
  const port = await freePort();
  mkdirSync(join(home, "config"), { recursive: true });
  writeFileSync(join(home, "config/config.toml"), `port = ${port}\n${config}`);
  const env = { ...process.env, HOME: home, REVIEW_AGENT_GATEWAY_HOME: home, OPENAI_API_KEY: "", ANTHROPIC_API_KEY: "",
    DBUS_SESSION_BUS_ADDRESS: `unix:path=${home}/no-bus`, BROWSER: "true" };
  delete env.XDG_CONFIG_HOME;
  delete env.REVIEW_AGENT_GATEWAY_PORT;
  const daemon = spawn(binary, ["serve"], { env: { ...env, ...extraEnv }, stdio: ["ignore", "pipe", "pipe"] });
  // The daemon's log goes on to this process's stderr, and is kept for `stderr()`.
  const log = [];
  daemon.stderr.on("data", (chunk) => { log.push(chunk); process.stderr.write(chunk); });
  const listening = await new Promise((resolve) => {
    createInterface({ input: daemon.stdout }).once("line", resolve);
    daemon.once("exit", (code) => resolve(`exited ${code}`));
  });
  if (!String(listening).startsWith("listening on")) throw new Error(`serve: ${listening}`);
  const token = run(binary, ["token", "show"], { env });
  const base = `http://127.0.0.1:${port}`;
  const api = async (method, path, body, headers = {}) => {
    const r = await fetch(base + path, { method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...headers },
      body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await r.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* not JSON */ }
    return { status: r.status, body: json, text };
  };
  const stop = () => new Promise((resolve) => {
    if (daemon.exitCode !== null) return resolve();
    daemon.once("exit", () => resolve());
    daemon.kill("SIGTERM");
  });
  return { port, base, env, token: () => run(binary, ["token", "show"], { env }), api, stop, process: daemon,
    stderr: () => Buffer.concat(log).toString("utf8") };
}

/** A login code from the real command: { url, code } (`--valid-for` seconds, default 120).
 * Asynchronous: the command asks the daemon's health, which probes the providers — a fake
 * provider served by this process must be able to answer meanwhile. */
export async function loginCode(binary, env, validFor) {
  const argv = ["settings", "--no-open", ...(validFor ? ["--valid-for", String(validFor)] : [])];
  const { stdout: out } = await promisify(execFile)(binary, argv, { env, encoding: "utf8" });
  const url = /Settings page: (\S+)/.exec(out)?.[1];
  const code = /Login code:\s+([0-9a-f]{32})/.exec(out)?.[1];
  if (!url || !code) throw new Error(`settings printed no address and code:\n${out}`);
  return { url, code };
}

/** Logs `page` in to the daemon of `env` the way the command opens the browser
 * (`…/settings/login#code=…`); resolves on the Status page. */
export async function login(page, binary, env) {
  const { url, code } = await loginCode(binary, env);
  await page.goto(`${url}#code=${code}`);
  await page.waitForURL(/\/settings\/status$/, { timeout: 15000 });
}

/** Polls `fn(arg)` in the page until it returns a truthy value (its value), else throws `what`. */
export async function waitIn(page, what, fn, arg, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await page.evaluate(fn, arg).catch(() => null);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** The page's text (whitespace collapsed). */
export async function text(page, selector = "main") {
  return (await page.locator(selector).first().innerText()).replace(/\s+/g, " ");
}

/** Submits the form holding the button whose accessible name is `name` (a real click). */
export async function press(page, name) {
  await Promise.all([
    page.waitForLoadState("load"),
    page.getByRole("button", { name, exact: true }).first().click(),
  ]);
}

/** The flash message of the page (`{ ok, text }`), or null. */
export async function flash(page) {
  return page.evaluate(() => {
    const el = document.querySelector(".flash");
    return el ? { ok: el.classList.contains("ok"), text: el.textContent.replace(/\s+/g, " ").trim() } : null;
  });
}
