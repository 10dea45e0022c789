#!/usr/bin/env node
// End-to-end test of the companion extension, the client library and the userscript in headless
// Chromium (driven by host/tests/browser_e2e.rs, which passes the gateway binary and a temporary
// home):
//
//   node tests/e2e.mjs --binary PATH --home DIR --artifacts DIR
//
// Everything is real: the git fixture repository, the daemon (`serve`, with the crash tests'
// per-finding pause REVIEW_AGENT_GATEWAY_FAULT_FINDING_DELAY_MS so a review lasts long enough to
// break a connection in the middle of it), the native host registered by our own `install`, the
// extension loaded unpacked, and the browser. Steps, each printing one line the Rust test asserts:
//
//  1. A second browser profile without the host manifest: the options page says the host is
//     missing and shows `review-agent-gateway install --browser chromium`; the userscript there
//     falls back to the WebSocket at once.
//  2. The daemon killed (-9) mid-review and started again while a page follows the review over
//     the WebSocket: the client opens a new socket, finds the run interrupted, resumes it, and
//     the page sees every event once, seq gap-free, and the five findings.
//  3. The userscript on a page with GitLab's classic (HAML) diff markup, then on one with its
//     Vue diff markup, reviewing extension → native host → daemon; each finding is asserted
//     under its own diff line (a decoy file has the same line numbers, a removed line the same
//     `data-interop-line`). Screenshots.
//  4. The options page: status (native messaging, protocol and gateway version), adding
//     http://localhost:<port> as a GitLab origin (its host permission is granted by the build's
//     --dev-host-permission: a headless browser cannot answer the permission prompt), a review
//     through the extension there, removing it again; then the WebSocket and SSE fallbacks.
//  5. A file_read_diff answer over 1 MiB through the extension: the host sends it as `chunk`
//     frames (Chrome refuses a single host message over 1 MiB), the background reassembles it,
//     and the page gets the fixture's bytes (non-ASCII, escapes, control characters) intact.
//  6. The native host killed mid-session: an open run_check call gets a retryable
//     gateway.unavailable, the review being streamed is followed again from its last seq (every
//     event once), the background starts a new host, and the next request works.
// Exits 1 with a message on any failure.
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { createInterface } from "node:readline";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { fixtureRepo, freePort } from "./fixture.mjs";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const CHROMIUM = "/usr/bin/chromium";
const INSTALL_HINT = "run the install steps of .ci/run (apt-get install -y chromium; npm ci in extension-bridge/)";
/** Pause after each finding in the daemon (the crash tests' fault injection): 5 findings make a
 * review last about 1.5 s, long enough to break its stream after the second finding. */
const FINDING_DELAY_MS = "300";
const cleanups = [];
/** The userscript manager's storage (GM.getValue/setValue/deleteValue of the GM4 API), kept by
 * this test across page loads as a manager keeps it, outside the page's own storage. */
const gmStorage = new Map();
const GM_STAND_IN = `window.GM = {
  getValue: async (k, d) => (await window.__gmStorage("get", k)) ?? d,
  setValue: (k, v) => window.__gmStorage("set", k, v).then(() => undefined),
  deleteValue: (k) => window.__gmStorage("delete", k).then(() => undefined),
};`;

function fail(message) {
  console.error(`e2e FAILED: ${message}`);
  process.exitCode = 1;
  throw new Error(message);
}
function check(condition, message) { if (!condition) fail(message); }

function args() {
  const out = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) out[argv[i].replace(/^--/, "")] = argv[i + 1];
  for (const k of ["binary", "home", "artifacts"]) if (!out[k]) fail(`missing --${k}; usage: e2e.mjs --binary PATH --home DIR --artifacts DIR`);
  return out;
}

function run(cmd, argv, opts = {}) {
  const r = spawnSync(cmd, argv, { encoding: "utf8", ...opts });
  if (r.status !== 0) fail(`${cmd} ${argv.join(" ")} exited ${r.status}: ${r.stderr}`);
  return r.stdout.trim();
}


const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The Chrome extension id of a manifest `key` (base64 DER public key). */
export function chromeId(key) {
  const hex = createHash("sha256").update(Buffer.from(key, "base64")).digest("hex").slice(0, 32);
  return [...hex].map((c) => String.fromCharCode(97 + parseInt(c, 16))).join("");
}

/** Pids of this test's gateway processes running `subcommand` (`serve`, `native-host`): found by
 * their REVIEW_AGENT_GATEWAY_HOME, which only this run's home has. */
function gatewayProcesses(home, subcommand) {
  const pids = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0")[1] !== subcommand) continue;
      if (readFileSync(`/proc/${name}/environ`, "utf8").split("\0").includes(`REVIEW_AGENT_GATEWAY_HOME=${home}`)) pids.push(Number(name));
    } catch { /* gone meanwhile */ }
  }
  return pids;
}

/** Whether a process runs `program` (any path to it) with exactly `args` (step 6's run_check). */
function processRunning(program, args) {
  return readdirSync("/proc").some((name) => {
    try {
      if (!/^\d+$/.test(name)) return false;
      const [argv0, ...rest] = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").slice(0, -1);
      return argv0.split("/").pop() === program && JSON.stringify(rest) === JSON.stringify(args);
    } catch { return false; }
  });
}

async function waitFor(what, predicate, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() > deadline) fail(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

// --- the stand-in GitLab merge-request pages ------------------------------------------------
// app.py: line 1 kept, old line 2 (`import sys`) removed, new lines 2–6 added (the findings);
// README.md, a decoy, has rows with the same new line numbers.
const APP_ROWS = [
  { old: 1, new: 1, type: null, code: "import os" },
  { old: 2, new: null, type: "old", code: "-import sys" },
  ...[2, 3, 4, 5, 6].map((n) => ({ old: null, new: n, type: "new", code: `+v${n - 2} = eval(x${n - 2})` })),
];
const README_ROWS = [1, 2, 3, 4, 5, 6].map((n) => ({ old: n, new: n, type: null, code: `line ${n}` }));

/** GitLab's classic (HAML) diff markup: `.diff-file[data-path]`, one `tr.line_holder` per line
 * with `td.old_line` / `td.new_line[data-linenumber]`. */
function classicPage() {
  const row = (r) => `<tr class="line_holder"><td class="old_line diff-line-num" data-linenumber="${r.old ?? ""}">${r.old ?? ""}</td>` +
    `<td class="new_line diff-line-num" data-linenumber="${r.new ?? ""}">${r.new ?? ""}</td><td class="line_content">${r.code}</td></tr>`;
  const file = (path, rows) => `<div class="diff-file file-holder" data-path="${path}"><div class="file-title">${path}</div>` +
    `<table class="code diff-wrap-lines">${rows.map(row).join("")}</table></div>`;
  return mergeRequestPage(`${file("README.md", README_ROWS)}\n${file("app.py", APP_ROWS)}`);
}

/** GitLab's Vue diff markup, inline view, as app/assets/javascripts/diffs/components/diff_row.vue
 * renders it: `div.diff-grid-row.line_holder` rows whose left side carries the interoperability
 * attributes of diffs/utils/interoperability.js (getInteropInlineAttributes: `data-interop-type`
 * old|new, `data-interop-line`, and `data-interop-old-line` / `data-interop-new-line` only when
 * the line has that number), line-number links `a[data-linenumber]`, and the file container of
 * diff_file.vue (`.diff-file.file-holder[data-path]`, the new path). The removed line's
 * `data-interop-line="2"` is the decoy for a script that would read that attribute. */
function vuePage() {
  const attr = (name, value) => (value == null ? "" : ` ${name}="${value}"`);
  const row = (r) => {
    const type = r.type === "old" ? "old" : "new";
    const interop = attr("data-interop-type", type) + attr("data-interop-line", type === "old" ? r.old : r.new) +
      attr("data-interop-new-line", r.new) + attr("data-interop-old-line", r.old);
    const lineClass = r.type === "old" ? " old" : r.type === "new" ? " new" : "";
    return `<div class="diff-grid-row diff-tr line_holder"><div data-testid="left-side" class="diff-grid-left left-side"${interop}>` +
      `<div data-testid="left-line-number" class="diff-td diff-line-num${lineClass}">${r.old ? `<a data-linenumber="${r.old}" href="#L${r.old}"></a>` : ""}</div>` +
      `<div class="diff-td diff-line-num${lineClass}">${r.new ? `<a data-linenumber="${r.new}" href="#L${r.new}"></a>` : ""}</div>` +
      `<div class="diff-td line-coverage left-side"></div>` +
      `<div data-testid="left-content" class="diff-td line_content with-coverage left-side${lineClass}"><span class="line">${r.code}</span></div></div></div>`;
  };
  const file = (path, rows) => `<div class="diff-file file-holder" data-path="${path}"><div class="js-file-title file-title">${path}</div>` +
    `<div class="diff-content"><div class="diff-viewer"><div class="diff-grid diff-table code">${rows.map(row).join("")}</div></div></div></div>`;
  return mergeRequestPage(`${file("README.md", README_ROWS)}\n${file("app.py", APP_ROWS)}`);
}

function mergeRequestPage(files) {
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>Merge request !1 · group/project</title>
<style>.diff-grid-left{display:grid;grid-template-columns:3em 3em 0 1fr;font:12px monospace}
.diff-grid-left a[data-linenumber]::before{content:attr(data-linenumber)}</style></head>
<body><h1>group/project !1</h1><div class="files" id="diffs">
${files}
</div></body></html>`;
}


async function main() {
  const { binary, home, artifacts } = args();
  check(existsSync(CHROMIUM), `${CHROMIUM} is missing: ${INSTALL_HINT}`);
  let chromium;
  try {
    ({ chromium } = await import("playwright-core"));
  } catch {
    fail(`playwright-core is not installed in extension-bridge/node_modules: ${INSTALL_HINT}`);
  }
  mkdirSync(artifacts, { recursive: true });

  // The fixture repository: base, head (the reviewed commit) and a branch `big` adding build.log.
  const { repo, base, head, log } = fixtureRepo(home, run, "import os\nimport sys\n");

  // The page server: the MR pages (classic and Vue markup), GitLab's REST answer, a blank page
  // and the client library (imported by steps that drive the client directly).
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    const html = (body) => res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(body);
    if (url.pathname === "/group/project/-/merge_requests/1") html(classicPage());
    else if (url.pathname === "/group/project/-/merge_requests/1/diffs") html(vuePage());
    else if (req.url === "/api/v4/projects/group%2Fproject/merge_requests/1") {
      // GitLab's REST API answer, the fields the userscript reads.
      res.writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ iid: 1, diff_refs: { base_sha: base, start_sha: base, head_sha: head } }));
    } else if (/^\/api\/v4\/projects\/group%2Fproject\/merge_requests\/1\/(draft_notes|discussions)$/.test(url.pathname)) {
      res.writeHead(200, { "content-type": "application/json" }).end("[]"); // no comments yet
    } else if (url.pathname === "/blank") html("<!doctype html><title>blank</title>");
    else if (url.pathname === "/client/index.js") {
      res.writeHead(200, { "content-type": "text/javascript" }).end(readFileSync(join(root, "client/index.js")));
    } else if (url.pathname === "/favicon.ico") res.writeHead(204).end();
    else res.writeHead(404).end();
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => server.close());
  const pagePort = server.address().port;
  const gitlabOrigin = `http://127.0.0.1:${pagePort}`;
  const plainOrigin = `http://localhost:${pagePort}`;

  // The gateway home: config (run_check allows `sleep` for step 6), then install into the profile.
  const port = await freePort();
  mkdirSync(join(home, "config"), { recursive: true });
  writeFileSync(join(home, "config/config.toml"),
    `port = ${port}\nallowed_origins = ["${gitlabOrigin}", "${plainOrigin}"]\n\n` +
    [gitlabOrigin, plainOrigin].map((o) =>
      `[[mappings]]\ngitlab_origin = "${o}"\nproject_path = "group/project"\nlocal_path = ${JSON.stringify(repo)}\n`).join("\n") +
    `\n[tools.run_check]\nenabled = true\ntimeout_seconds = 60\n\n[[tools.run_check.commands]]\nargv = ["sleep", "*"]\n`);
  const env = { ...process.env, HOME: home, REVIEW_AGENT_GATEWAY_HOME: home };
  delete env.XDG_CONFIG_HOME;
  delete env.REVIEW_AGENT_GATEWAY_PORT;
  delete env.REVIEW_AGENT_GATEWAY_FAULT_FINDING_DELAY_MS;
  console.log(run(binary, ["install", "--browser", "chromium"], { env }));
  const userDataDir = join(home, ".config/chromium");
  const hostManifest = JSON.parse(readFileSync(join(userDataDir, "NativeMessagingHosts/com.review_agent.gateway.json"), "utf8"));
  const gatewayVersion = run(binary, ["--version"], { env }).split(/\s+/).pop();

  // The extension, built for Chrome with the loopback page as a GitLab origin, and localhost
  // granted (not matched) for the options page's "Add".
  const dist = join(home, "dist");
  run(process.execPath, [join(root, "build.mjs"), "--dev-origin", "http://127.0.0.1", "--dev-host-permission", "http://localhost", "--out", dist]);
  const extension = join(dist, "chrome");
  const manifest = JSON.parse(readFileSync(join(extension, "manifest.json"), "utf8"));
  const id = chromeId(manifest.key);
  check(JSON.stringify(hostManifest.allowed_origins) === JSON.stringify([`chrome-extension://${id}/`]),
    `install allowed ${JSON.stringify(hostManifest.allowed_origins)}, not the companion's chrome-extension://${id}/ (COMPANION_CHROME_EXTENSION_ID in installer/src/lib.rs)`);

  // The daemon (the native host would start one itself; this one the test can stop and crash).
  const daemonEnv = { ...env, REVIEW_AGENT_GATEWAY_FAULT_FINDING_DELAY_MS: FINDING_DELAY_MS };
  async function startDaemon() {
    const child = spawn(binary, ["serve"], { env: daemonEnv, stdio: ["ignore", "pipe", "inherit"] });
    const listening = await new Promise((resolve) => {
      createInterface({ input: child.stdout }).once("line", resolve);
      child.once("exit", (code) => resolve(`exited ${code}`));
    });
    check(String(listening).startsWith("listening on"), `serve: ${listening}`);
    return child;
  }
  let daemon = await startDaemon();
  cleanups.push(() => daemon.kill("SIGTERM"));
  const token = run(binary, ["token", "show"], { env });
  const userscript = readFileSync(join(dist, "review-locally.user.js"), "utf8");

  async function launch(profileDir) {
    const context = await chromium.launchPersistentContext(profileDir, {
      executablePath: CHROMIUM,
      headless: false,
      ignoreDefaultArgs: ["--disable-extensions"],
      args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        `--disable-extensions-except=${extension}`, `--load-extension=${extension}`],
      env,
    });
    const worker = context.serviceWorkers()[0] ?? (await context.waitForEvent("serviceworker", { timeout: 15000 }));
    check(worker.url().startsWith(`chrome-extension://${id}/`), `the extension runs as ${worker.url()}, not ${id}`);
    // The userscript as a userscript manager runs it, on every load, with the manager's storage
    // (GM.getValue/setValue, here kept by this test: gmStorage) in place of the page's.
    await context.exposeBinding("__gmStorage", (_source, op, key, value) => {
      if (op === "set") gmStorage.set(key, value); else if (op === "delete") gmStorage.delete(key);
      return op === "get" ? gmStorage.get(key) ?? null : null;
    });
    await context.addInitScript({ content: `${GM_STAND_IN}\n${userscript}` });
    const page = await context.newPage();
    page.on("pageerror", (e) => console.log(`page error: ${e.message}`));
    return { context, page, worker };
  }

  /** Runs the userscript on `path` of `origin` (connect() options in its settings), clicks
   * "Review locally", and checks each finding under its own new-side diff line. */
  async function userscriptReview(page, origin, options, expectTransport, { path = "/group/project/-/merge_requests/1", label = expectTransport, screenshot } = {}) {
    await page.goto(`${origin}/blank`);
    gmStorage.set("settings", { port, token, ...options });
    await page.goto(`${origin}${path}`);
    await page.click("[data-rag-action=review]", { timeout: 15000 });
    try {
      await page.waitForSelector(":is(#review-agent-gateway[data-state=done], #review-agent-gateway[data-state=error], #review-agent-gateway[data-state=failed], #review-agent-gateway[data-state=cancelled])", { state: "attached", timeout: 60000 });
    } catch {
      fail(`${label}: the userscript did not finish: ${await page.evaluate(() => document.body.outerHTML)}`);
    }
    const state = await page.evaluate(() => {
      const panel = document.querySelector("#review-agent-gateway");
      return { ...panel.dataset, status: `${panel.querySelector(".rag-status").textContent} ${panel.querySelector("[data-rag=error]").textContent}`.trim(),
        shown: panel.querySelector("[data-rag=progress]").dataset.findings,
        // Each finding with the path and new line number of the diff row its own row follows
        // (classic: its td.new_line; Vue: its data-interop-new-line).
        findings: [...document.querySelectorAll(".rag-finding")].map((item) => {
          const own = document.querySelector(`.rag-row[data-fingerprint="${item.dataset.fingerprint}"]`);
          let above = own?.previousElementSibling;
          while (above?.classList.contains("rag-row")) above = above.previousElementSibling;
          const line = above?.querySelector("[data-interop-new-line]")?.dataset.interopNewLine ??
            above?.querySelector("td.new_line")?.dataset.linenumber;
          return { path: item.dataset.path, line: Number(item.dataset.line), text: item.closest(".rag-group").textContent,
            rowPath: own?.closest(".diff-file")?.dataset.path ?? null, rowLine: Number(line) };
        }) };
    });
    if (screenshot) await page.screenshot({ path: join(artifacts, screenshot), fullPage: true });
    check(state.state === "done", `${label}: the userscript failed: ${state.status}`);
    check(state.transport === expectTransport, `${label}: expected transport ${expectTransport}, got ${state.transport} (${state.status})`);
    const lines = state.findings.map((f) => `${f.path}:${f.line}`).sort();
    check(JSON.stringify(lines) === JSON.stringify(["app.py:2", "app.py:3", "app.py:4", "app.py:5", "app.py:6"]),
      `${label}: findings in the DOM: ${JSON.stringify(state.findings)}`);
    for (const f of state.findings) {
      check(f.rowPath === f.path && f.rowLine === f.line, `${label}: finding ${f.path}:${f.line} shown under ${f.rowPath}:${f.rowLine}`);
      check(f.text.includes("eval"), `${label}: finding text ${JSON.stringify(f.text)} does not say eval`);
    }
    check(state.shown === "5", `${label}: the progress counts ${state.shown} findings (${state.status})`);
    console.log(`${label}: 5 findings in the DOM next to their lines; ${state.status}`);
    return state;
  }

  /** Starts a review in `page` with the client library itself (imported from the page's
   * origin); its events, errors and the client's debug lines collect in `window.__review`. */
  async function startClientReview(page, origin, options, request) {
    await page.goto(`${origin}/blank`);
    return page.evaluate(async ({ options, request }) => {
      const { connect } = await import("/client/index.js");
      const state = (window.__review = { events: [], debug: [], error: null, done: false, transport: null });
      const debug = console.debug;
      console.debug = (...a) => { state.debug.push(a.join(" ")); debug(...a); };
      const gateway = (window.__gateway = await connect(options));
      state.transport = gateway.transportKind;
      (async () => {
        try {
          for await (const event of gateway.review(request)) state.events.push(event);
        } catch (e) {
          state.error = { code: e.code, message: e.message };
        } finally {
          state.done = true;
        }
      })();
      return state.transport;
    }, { options, request });
  }
  const findingsSeen = (page) => page.evaluate(() => window.__review.events.filter((e) => e.type === "finding.created").length);
  const reviewRequest = (origin, requestId, extra = {}) => ({
    requestId, mode: "merge-request",
    target: { gitlabOrigin: origin, projectPath: "group/project", mergeRequestIid: 1, diffRefs: { baseSha: base, startSha: base, headSha: head } },
    scope: { filePaths: null, selection: null }, policy: { minConfidence: "low" }, ...extra,
  });

  /** The client review of `page` once it ended: every event once, seq 1..n without a gap, one
   * run.completed at the end, the five findings once each; returns the client's debug lines. */
  async function checkResumedReview(page, label) {
    await waitFor(`${label}: the review to end`, () => page.evaluate(() => window.__review.done), 30000);
    const { events, debug, error } = await page.evaluate(() => window.__review);
    check(!error, `${label}: the review failed: ${JSON.stringify(error)} (client: ${debug.join(" | ")})`);
    const seqs = events.map((e) => e.seq);
    check(JSON.stringify(seqs) === JSON.stringify(seqs.map((_, i) => i + 1)), `${label}: seqs are not 1..n once each: ${seqs.join(",")}`);
    check(new Set(events.map((e) => e.runId)).size === 1, `${label}: events of several runs`);
    check(events[0]?.type === "run.created" && events.at(-1)?.type === "run.completed" &&
      events.filter((e) => e.type === "run.completed").length === 1, `${label}: events ${events.map((e) => e.type).join(",")}`);
    const findings = events.filter((e) => e.type === "finding.created").map((e) => e.finding);
    const lines = findings.map((f) => `${f.path}:${f.startLine}`).sort();
    check(JSON.stringify(lines) === JSON.stringify(["app.py:2", "app.py:3", "app.py:4", "app.py:5", "app.py:6"]) &&
      new Set(findings.map((f) => f.fingerprint)).size === 5, `${label}: findings ${JSON.stringify(lines)}`);
    return { events, debug };
  }

  // 1. A profile without the host manifest: the options page names the install command, and
  //    the userscript falls back to the WebSocket without waiting for the missing host.
  {
    const { context, page } = await launch(join(home, "profile-without-host"));
    await page.goto(`chrome-extension://${id}/options.html`);
    await page.waitForSelector("#status:not([data-state=checking])", { timeout: 15000 });
    const status = await page.evaluate(() => ({
      state: document.getElementById("status").dataset.state,
      text: document.getElementById("status").textContent,
      command: document.getElementById("install-command").textContent,
      shown: !document.getElementById("install").hidden,
    }));
    await page.screenshot({ path: join(artifacts, "browser-e2e-options-no-host.png"), fullPage: true });
    const command = "review-agent-gateway install --browser chromium";
    check(status.state === "missing" && status.shown && status.command === command && status.text.includes(command),
      `options without the host: ${JSON.stringify(status)}`);
    console.log(`options without host: ${status.text}`);
    const started = Date.now();
    await userscriptReview(page, gitlabOrigin, {}, "websocket", { label: "no host, extension present" });
    check(Date.now() - started < 8000, `falling back took ${Date.now() - started} ms`);
    await context.close();
  }

  // The main profile, with the host registered by `install`.
  const { context, page, worker } = await launch(userDataDir);
  cleanups.push(() => context.close());
  console.log(`extension loaded: ${worker.url()}`);

  // 2. The daemon crashes mid-review and comes back while the page follows it over the WebSocket.
  {
    check(gatewayProcesses(home, "native-host").length === 0, "a native host runs already (it would restart the daemon itself)");
    const transport = await startClientReview(page, plainOrigin, { port, token, transports: ["websocket"] }, reviewRequest(plainOrigin, "ws-crash"));
    check(transport === "websocket", `step 2 connected over ${transport}`);
    await waitFor("two findings before the crash", async () => (await findingsSeen(page)) >= 2);
    daemon.kill("SIGKILL");
    await once(daemon, "exit");
    const before = await findingsSeen(page);
    daemon = await startDaemon();
    const { events, debug } = await checkResumedReview(page, "websocket, daemon killed");
    check(before < 5, `the crash came after the last finding (${before} seen)`);
    check(debug.some((l) => /interrupted; resuming it/.test(l)), `the client did not resume the interrupted run: ${debug.join(" | ")}`);
    console.log(`websocket resume: daemon killed after ${before} findings and restarted; ${events.length} events, seq 1..${events.length} once each, 5 findings`);
  }

  // 3. The userscript through the extension, on GitLab's classic and Vue diff markup.
  const viaExtension = await userscriptReview(page, gitlabOrigin, {}, "extension", { screenshot: "browser-e2e-extension.png" });
  check(viaExtension.origin === gitlabOrigin, `the extension stamped origin ${viaExtension.origin}, expected ${gitlabOrigin}`);
  await userscriptReview(page, gitlabOrigin, {}, "extension", { path: "/group/project/-/merge_requests/1/diffs", label: "extension, Vue diff markup", screenshot: "browser-e2e-extension-vue.png" });

  // 4. The options page: status, then localhost added as a GitLab origin, used, and removed.
  {
    const options = await context.newPage();
    await options.goto(`chrome-extension://${id}/options.html`);
    await options.waitForSelector("#status:not([data-state=checking])", { timeout: 15000 });
    const shown = await options.evaluate(() => Object.fromEntries(["status", "transport", "protocol-version", "gateway-version"]
      .map((k) => [k, document.getElementById(k).textContent])));
    const state = await options.getAttribute("#status", "data-state");
    check(state === "connected" && shown.transport.startsWith("native messaging") && shown["protocol-version"] === "1.0" &&
      shown["gateway-version"] === gatewayVersion, `options status: ${state} ${JSON.stringify(shown)} (gateway ${gatewayVersion})`);
    console.log(`options: ${shown.status} transport ${shown.transport}, protocol ${shown["protocol-version"]}, gateway ${shown["gateway-version"]}`);
    await options.fill("#origin", `${plainOrigin}/some/path`);
    await options.click("#add button");
    await options.waitForSelector(`#origins li[data-origin="${plainOrigin}"]`, { timeout: 5000 });
    const registered = await options.evaluate(() => chrome.scripting.getRegisteredContentScripts());
    check(registered.length === 1 && JSON.stringify(registered[0].matches) === JSON.stringify([`${plainOrigin}/*`]),
      `registered content scripts: ${JSON.stringify(registered)}`);
    await options.screenshot({ path: join(artifacts, "browser-e2e-options.png"), fullPage: true });
    const added = await userscriptReview(page, plainOrigin, {}, "extension", { label: "extension, origin added in options" });
    check(added.origin === plainOrigin, `the extension stamped origin ${added.origin} on ${plainOrigin}`);
    await options.bringToFront();
    await options.click(`#origins li[data-origin="${plainOrigin}"] button.remove`);
    await options.waitForSelector(`#origins li[data-origin="${plainOrigin}"]`, { state: "detached", timeout: 5000 });
    const left = await options.evaluate(async () => ({
      scripts: await chrome.scripting.getRegisteredContentScripts(), stored: (await chrome.storage.local.get("gitlabOrigins")).gitlabOrigins }));
    check(left.scripts.length === 0 && left.stored.length === 0, `after Remove: ${JSON.stringify(left)}`);
    console.log(`options: added ${plainOrigin} (review via extension there), removed it`);
    await options.close();
  }
  // Without the origin, that page has no content script: the WebSocket, then SSE.
  await userscriptReview(page, plainOrigin, {}, "websocket", { screenshot: "browser-e2e-websocket.png" });
  await userscriptReview(page, plainOrigin, { wsUrl: `ws://127.0.0.1:${await freePort()}/v1/ws` }, "sse", { screenshot: "browser-e2e-sse.png" });

  // 5. An answer over 1 MiB through the extension: chunk frames, reassembled intact.
  {
    await page.goto(`${gitlabOrigin}/blank`);
    const got = await page.evaluate(async ({ origin, head }) => {
      const { connect } = await import("/client/index.js");
      const gateway = await connect({ transports: ["extension"] });
      const result = await gateway.callTool("file_read_diff", { base: head, head: "big", paths: ["build.log"], maxBytes: 1048576 },
        { gitlabOrigin: origin, projectPath: "group/project" });
      const lines = result.output.files[0].hunks.flatMap((h) => h.lines.map((l) => l.text));
      const bytes = new TextEncoder().encode(lines.map((l) => `${l}\n`).join(""));
      const digest = [...new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))].map((b) => b.toString(16).padStart(2, "0")).join("");
      return { transport: gateway.transportKind, jsonBytes: new TextEncoder().encode(JSON.stringify(result)).length,
        lines: lines.length, digest, truncated: result.truncated };
    }, { origin: gitlabOrigin, head });
    const want = createHash("sha256").update(log).digest("hex");
    check(got.transport === "extension", `step 5 went over ${got.transport}`);
    check(got.jsonBytes > 1024 * 1024, `the answer is ${got.jsonBytes} bytes of JSON, not over 1 MiB: it proves no chunking`);
    check(!got.truncated && got.lines === 8000 && got.digest === want, `build.log through the extension: ${JSON.stringify(got)}, want sha256 ${want}`);
    console.log(`chunked: file_read_diff answer of ${got.jsonBytes} bytes of JSON through the extension, ${got.lines} lines, sha256 matches`);
  }

  // 6. The native host dies mid-session: open requests fail retryably, the review stream is
  //    followed again from its last seq, and the background starts a new host.
  {
    // Another scope than step 3's review: not a cache hit, a real (slow) run.
    await startClientReview(page, gitlabOrigin, { transports: ["extension"] },
      reviewRequest(gitlabOrigin, "host-crash", { scope: { filePaths: ["app.py"], selection: null } }));
    const sleepArgv = ["sleep", `31.${process.pid}`]; // unique: no other run's command is taken for ours
    await page.evaluate(({ origin, argv }) => {
      window.__check = { done: false };
      window.__gateway.callTool("run_check", { argv }, { gitlabOrigin: origin, projectPath: "group/project", ref: "WORKTREE" })
        .then((r) => { window.__check = { done: true, result: r }; },
          (e) => { window.__check = { done: true, error: { code: e.code, retryable: e.retryable, message: e.message } }; });
    }, { origin: gitlabOrigin, argv: sleepArgv });
    await waitFor("two findings and the run_check command running", async () => {
      const call = await page.evaluate(() => window.__check);
      if (call.done) fail(`run_check ended before the host was killed: ${JSON.stringify(call)}`);
      return (await findingsSeen(page)) >= 2 && processRunning("sleep", sleepArgv.slice(1));
    });
    const hosts = gatewayProcesses(home, "native-host");
    check(hosts.length === 1, `native hosts running: ${hosts}`);
    process.kill(hosts[0], "SIGKILL");
    const before = await findingsSeen(page);
    const checkCall = await waitFor("the run_check call to fail", () => page.evaluate(() => window.__check.done && window.__check));
    check(checkCall.error?.code === "gateway.unavailable" && checkCall.error.retryable === true,
      `the open run_check call after the host died: ${JSON.stringify(checkCall)}`);
    const { events, debug } = await checkResumedReview(page, "extension, native host killed");
    check(before < 5, `the host died after the last finding (${before} seen)`);
    check(debug.some((l) => /following run \S+ after seq \d+/.test(l)), `the client did not follow the run again: ${debug.join(" | ")}`);
    const health = await page.evaluate(() => window.__gateway.health());
    const now = gatewayProcesses(home, "native-host");
    check(health?.service && now.length === 1 && now[0] !== hosts[0], `after the host died: health ${JSON.stringify(health)}, hosts ${now}`);
    await waitFor("the daemon to kill the orphaned run_check command", () => !processRunning("sleep", sleepArgv.slice(1)), 5000);
    console.log(`native host killed after ${before} findings: run_check got ${checkCall.error.code} (retryable), review followed again: ${events.length} events once each, 5 findings; new host ${now[0]} answers`);
  }
  console.log(`e2e ok; screenshots in ${artifacts}`);
}

try {
  await main();
} catch (e) {
  if (!process.exitCode) { console.error(`e2e FAILED: ${e.stack ?? e}`); process.exitCode = 1; }
} finally {
  for (const c of cleanups.reverse()) { try { await c(); } catch { /* best effort */ } }
  // Anything of this run's home still running (a daemon a native host started, a host the
  // browser left): stopped by pid.
  const { home } = (() => { try { return args(); } catch { return {}; } })();
  if (home) for (const pid of [...gatewayProcesses(home, "native-host"), ...gatewayProcesses(home, "serve")]) { try { process.kill(pid, "SIGTERM"); } catch { /* gone */ } }
}
