#!/usr/bin/env node
// End-to-end test of the companion extension in headless Firefox ESR (driven by
// host/tests/browser_firefox_e2e.rs, which passes the gateway binary and a temporary home):
//
//   node tests/firefox-e2e.mjs --binary PATH --home DIR
//
// 1. A real git repository (a base commit and a head commit adding five `eval(` calls) mapped
//    in the home's config for the GitLab origin played by a page on 127.0.0.1.
// 2. `review-agent-gateway install --browser firefox` with HOME=<home>: the host manifest goes to
//    <home>/.mozilla/native-messaging-hosts/, where Firefox (run with that HOME) looks.
// 3. The extension built with `--dev-origin http://127.0.0.1`, run by `web-ext run` (a temporary
//    add-on in a fresh profile) in /usr/bin/firefox-esr with --headless.
// 4. Firefox opens a page standing in for a GitLab merge-request page (GitLab's diff markup and
//    REST API answer). There is no driver for Firefox here and web-ext cannot add init scripts,
//    so the page itself loads the built userscript with a <script> tag — as a userscript manager
//    with `@grant none` runs it, in the page — and a small harness script on the page clicks
//    "Review locally", waits for the panel to say done or error, and POSTs what the DOM shows
//    (each finding with the diff row above it) to /report on the test's server. The review goes
//    userscript → content script → background → native host → daemon.
// 5. The server answers each report with the next page to open. The steps: before `install`
//    (Firefox's "No such native application" must reach the page: the reason is read from the
//    port's `error`, where Firefox puts it); the review through the extension; a file_read_diff
//    answer over 1 MiB of JSON through the extension (chunk frames, reassembled intact); the
//    same page on http://localhost (no content script there: the extension is absent) falling
//    back to the WebSocket, then, with the WebSocket refused, to HTTP + SSE.
//    Set FIREFOX_E2E_VERBOSE=1 to see web-ext's and Firefox's output as it happens.
// Exits 1 with a message on any failure.
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { createInterface } from "node:readline";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { fixtureRepo, freePort } from "./fixture.mjs";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const FIREFOX = "/usr/bin/firefox-esr";
const ADDON_ID = "companion@review-agent-gateway";
const INSTALL_HINT = "run the install steps of .ci/run (apt-get install -y firefox-esr; npm ci in extension-bridge/)";
const STEP_TIMEOUT_MS = 30000; // one review, in the page
const TOTAL_TIMEOUT_MS = 90000; // Firefox's start and every step
const cleanups = [];

function fail(message) {
  console.error(`firefox e2e FAILED: ${message}`);
  process.exitCode = 1;
  throw new Error(message);
}
function check(condition, message) { if (!condition) fail(message); }

function args() {
  const out = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) out[argv[i].replace(/^--/, "")] = argv[i + 1];
  for (const k of ["binary", "home"]) if (!out[k]) fail(`missing --${k}; usage: firefox-e2e.mjs --binary PATH --home DIR`);
  return out;
}

function run(cmd, argv, opts = {}) {
  const r = spawnSync(cmd, argv, { encoding: "utf8", ...opts });
  if (r.status !== 0) fail(`${cmd} ${argv.join(" ")} exited ${r.status}: ${r.stderr}`);
  return r.stdout.trim();
}


/** The harness the page runs after the userscript: waits for the content script's marker (the
 * temporary add-on may be installed after the first load; then the page reloads), clicks
 * "Review locally", waits for a final state and POSTs the DOM's account of it to /report. */
function harness(step) {
  return `(${async (step) => {
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    const url = new URL(location.href);
    const attempt = Number(url.searchParams.get("attempt") ?? 0);
    if (step.expectExtension) {
      for (let i = 0; i < 20 && document.documentElement.dataset.reviewAgentGateway !== "extension"; i++) await sleep(100);
      if (document.documentElement.dataset.reviewAgentGateway !== "extension" && attempt < 50) {
        url.searchParams.set("attempt", String(attempt + 1));
        location.replace(url);
        return;
      }
    }
    const report = (body) => fetch("/report", { method: "POST", body: JSON.stringify({ step: step.name, attempt, ...body }) })
      .then((r) => r.json()).then((next) => { if (next.url) location.assign(next.url); });
    if (step.toolCall) {
      // An answer over 1 MiB: the host sends it as chunk frames, the background reassembles it.
      try {
        const { connect } = await import("/client/index.js");
        const gateway = await connect({ transports: ["extension"] });
        const { name, input } = step.toolCall;
        const result = await gateway.callTool(name, input, { gitlabOrigin: location.origin, projectPath: "group/project" });
        const lines = result.output.files[0].hunks.flatMap((h) => h.lines.map((l) => l.text));
        const bytes = new TextEncoder().encode(lines.map((l) => `${l}\n`).join(""));
        const digest = [...new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))].map((b) => b.toString(16).padStart(2, "0")).join("");
        await report({ state: "done", transport: gateway.transportKind, jsonBytes: new TextEncoder().encode(JSON.stringify(result)).length,
          lines: lines.length, digest, truncated: result.truncated });
      } catch (e) {
        await report({ state: "error", status: `${e.code ?? ""} ${e.message}` });
      }
      return;
    }
    let panel = null;
    for (let i = 0; i < 100 && !(panel = document.querySelector("#review-agent-gateway")); i++) await sleep(20);
    if (!panel) { await report({ error: "the userscript added no panel" }); return; }
    panel.querySelector("[data-rag-action=review]").click();
    const deadline = Date.now() + step.timeoutMs;
    while (!["done", "error", "failed", "cancelled"].includes(panel.dataset.state) && Date.now() < deadline) await sleep(50);
    await report({
      ...panel.dataset,
      status: `${panel.querySelector(".rag-status").textContent} ${panel.querySelector("[data-rag=error]").textContent}`.trim(),
      shown: panel.querySelector("[data-rag=progress]").dataset.findings,
      marker: document.documentElement.dataset.reviewAgentGateway ?? null,
      // Each finding with the diff row its own row follows (a group's first place holds the
      // group, the others a pointer row).
      findings: [...document.querySelectorAll(".rag-finding")].map((item) => {
        const own = document.querySelector(`.rag-row[data-fingerprint="${item.dataset.fingerprint}"]`);
        let above = own?.previousElementSibling;
        while (above?.classList.contains("rag-row")) above = above.previousElementSibling;
        return { path: item.dataset.path, line: Number(item.dataset.line), text: item.closest(".rag-group").textContent,
          rowPath: own?.closest(".diff-file")?.dataset.path ?? null,
          rowLine: Number(above?.querySelector("td.new_line")?.dataset.linenumber) };
      }),
    });
  }})(${JSON.stringify(step)});`;
}


/** The stand-in merge-request page: GitLab's diff markup (`.diff-file[data-path]`, line rows with
 * `td.old_line` / `td.new_line[data-linenumber]`) for app.py (line 1 kept, lines 2–6 added) and a
 * decoy README.md whose line numbers overlap; then the userscript's settings, the userscript and
 * the harness. */
function mergeRequestPage(step, options) {
  const row = (oldLine, newLine, code) => `<tr class="line_holder"><td class="old_line diff-line-num" data-linenumber="${oldLine ?? ""}">${oldLine ?? ""}</td>` +
    `<td class="new_line diff-line-num" data-linenumber="${newLine}">${newLine}</td><td class="line_content">${code}</td></tr>`;
  const file = (path, rows) => `<div class="diff-file file-holder" data-path="${path}"><div class="file-title">${path}</div>` +
    `<table class="code diff-wrap-lines">${rows.join("")}</table></div>`;
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>Merge request !1 · group/project</title></head>
<body><h1>group/project !1</h1><div class="files">
${file("README.md", [1, 2, 3, 4, 5, 6].map((n) => row(n, n, `line ${n}`)))}
${file("app.py", [row(1, 1, "import os"), ...[2, 3, 4, 5, 6].map((n) => row(null, n, `+v${n - 2} = eval(x${n - 2})`))])}
</div>
<script>// The userscript manager's storage (GM4 API), holding the userscript's settings.
window.GM = (() => {
  const values = new Map([["settings", ${JSON.stringify(options)}]]);
  return { getValue: async (k, d) => (values.has(k) ? values.get(k) : d), setValue: async (k, v) => { values.set(k, v); }, deleteValue: async (k) => { values.delete(k); } };
})();</script>
<script src="/review-locally.user.js"></script>
<script>${harness(step)}</script>
</body></html>`;
}

async function main() {
  const { binary, home } = args();
  check(existsSync(FIREFOX), `${FIREFOX} is missing: ${INSTALL_HINT}`);
  const webExt = join(root, "node_modules/web-ext/bin/web-ext.js");
  check(existsSync(webExt), `${webExt} is missing: ${INSTALL_HINT}`);
  // Firefox also reads system-wide host manifests; one there would answer the "no-host" step.
  for (const dir of ["/usr/lib/mozilla/native-messaging-hosts", "/usr/lib64/mozilla/native-messaging-hosts"]) {
    const system = join(dir, "com.review_agent.gateway.json");
    check(!existsSync(system), `${system} exists (install --system): Firefox would use it instead of the test's; remove it with \`review-agent-gateway uninstall --system\``);
  }
  const started = Date.now();
  const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;

  // The fixture repository.
  const { repo, base, head, log } = fixtureRepo(home, run, "import os\n");

  // The extension and the userscript, built with the loopback page as a GitLab origin.
  const dist = join(home, "dist");
  run(process.execPath, [join(root, "build.mjs"), "--dev-origin", "http://127.0.0.1", "--out", dist]);
  const extension = join(dist, "firefox");
  const manifest = JSON.parse(readFileSync(join(extension, "manifest.json"), "utf8"));
  check(manifest.browser_specific_settings?.gecko?.id === ADDON_ID, `the Firefox build's gecko.id is ${manifest.browser_specific_settings?.gecko?.id}`);
  const userscript = readFileSync(join(dist, "review-locally.user.js"), "utf8");

  const port = await freePort();
  const token = { value: null };
  const reports = new Map(); // step name -> report
  let steps = [];
  let install = null; // set once the gateway home is written; run after the "no-host" step
  let finished;
  const allDone = new Promise((resolve) => { finished = resolve; });

  // The page server: the MR page per step, the userscript, GitLab's REST answer, /report.
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    if (url.pathname === "/group/project/-/merge_requests/1") {
      const step = steps.find((s) => s.name === url.searchParams.get("step")) ?? steps[0];
      res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" })
        .end(mergeRequestPage({ name: step.name, expectExtension: step.transport === "extension", timeoutMs: STEP_TIMEOUT_MS,
          toolCall: step.toolCall ?? null }, { port, token: token.value, ...step.options }));
    } else if (url.pathname === "/client/index.js") {
      res.writeHead(200, { "content-type": "text/javascript; charset=utf-8" }).end(readFileSync(join(root, "client/index.js")));
    } else if (url.pathname === "/review-locally.user.js") {
      res.writeHead(200, { "content-type": "text/javascript; charset=utf-8" }).end(userscript);
    } else if (req.url === "/api/v4/projects/group%2Fproject/merge_requests/1") {
      res.writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ iid: 1, diff_refs: { base_sha: base, start_sha: base, head_sha: head } }));
    } else if (/^\/api\/v4\/projects\/group%2Fproject\/merge_requests\/1\/(draft_notes|discussions)$/.test(url.pathname)) {
      res.writeHead(200, { "content-type": "application/json" }).end("[]"); // no comments yet
    } else if (url.pathname === "/report" && req.method === "POST") {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        let report;
        try { report = JSON.parse(body); } catch { report = { error: `not JSON: ${body}` }; }
        reports.set(report.step, report);
        console.log(`[${elapsed()}] report of ${report.step} (page load ${report.attempt + 1}): ${report.state ?? report.error} — ${report.status ?? ""}`);
        const step = steps.find((s) => s.name === report.step);
        try { step?.after?.(); } catch (e) { report.error = `after ${report.step}: ${e.message}`; }
        const next = report.error ? null : steps[steps.indexOf(step) + 1];
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ url: next?.url ?? null }));
        if (!next) finished();
      });
    } else if (url.pathname === "/favicon.ico") {
      res.writeHead(204).end();
    } else res.writeHead(404).end();
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => server.close());
  const pagePort = server.address().port;
  const gitlabOrigin = `http://127.0.0.1:${pagePort}`;
  const plainOrigin = `http://localhost:${pagePort}`;
  const page = (origin, name) => `${origin}/group/project/-/merge_requests/1?step=${name}`;
  steps = [
    // Before `install`: the extension is there, the host is not; Firefox's reason reaches the page.
    { name: "no-host", transport: "extension", url: page(gitlabOrigin, "no-host"), options: { transports: ["extension"] },
      error: "No such native application com.review_agent.gateway", after: () => install() },
    { name: "extension", transport: "extension", url: page(gitlabOrigin, "extension"), options: {} },
    { name: "chunked", transport: "extension", url: page(gitlabOrigin, "chunked"), options: {},
      toolCall: { name: "file_read_diff", input: { base: head, head: "big", paths: ["build.log"], maxBytes: 1048576 } } },
    { name: "websocket", transport: "websocket", url: page(plainOrigin, "websocket"), options: {} },
    { name: "sse", transport: "sse", url: page(plainOrigin, "sse"), options: { wsUrl: `ws://127.0.0.1:${await freePort()}/v1/ws` } },
  ];

  // The gateway home: config, then install into the test HOME.
  mkdirSync(join(home, "config"), { recursive: true });
  writeFileSync(join(home, "config/config.toml"),
    `port = ${port}\nallowed_origins = ["${gitlabOrigin}", "${plainOrigin}"]\n\n` +
    [gitlabOrigin, plainOrigin].map((o) =>
      `[[mappings]]\ngitlab_origin = "${o}"\nproject_path = "group/project"\nlocal_path = ${JSON.stringify(repo)}\n`).join("\n"));
  const env = { ...process.env, HOME: home, REVIEW_AGENT_GATEWAY_HOME: home };
  delete env.XDG_CONFIG_HOME;
  delete env.REVIEW_AGENT_GATEWAY_PORT;
  const hostManifestPath = join(home, ".mozilla/native-messaging-hosts/com.review_agent.gateway.json");
  install = () => {
    console.log(run(binary, ["install", "--browser", "firefox"], { env }));
    check(existsSync(hostManifestPath), `install wrote no ${hostManifestPath}`);
    const hostManifest = JSON.parse(readFileSync(hostManifestPath, "utf8"));
    check(JSON.stringify(hostManifest.allowed_extensions) === JSON.stringify([ADDON_ID]),
      `install allowed ${JSON.stringify(hostManifest.allowed_extensions)}, not the companion's ${ADDON_ID} (COMPANION_FIREFOX_EXTENSION_ID in installer/src/lib.rs)`);
  };

  // The daemon (the native host would start one itself; this one the test can stop).
  const daemon = spawn(binary, ["serve"], { env, stdio: ["ignore", "pipe", "inherit"] });
  cleanups.push(() => daemon.kill("SIGTERM"));
  const listening = await new Promise((resolve) => {
    createInterface({ input: daemon.stdout }).once("line", resolve);
    daemon.once("exit", (code) => resolve(`exited ${code}`));
  });
  check(String(listening).startsWith("listening on"), `serve: ${listening}`);
  token.value = run(binary, ["token", "show"], { env });

  // Firefox with the extension as a temporary add-on; its HOME is the test's, so it finds the
  // host manifest install wrote. web-ext's temporary profile goes under the test home too.
  const tmp = join(home, "tmp");
  mkdirSync(tmp, { recursive: true });
  const firefoxLog = [];
  const firefox = spawn(process.execPath, [webExt, "run", "--source-dir", extension, "--firefox", FIREFOX,
    "--no-reload", "--no-input", "--no-config-discovery", "--verbose", "--start-url", steps[0].url,
    "--pref", "devtools.console.stdout.chrome=true", "--pref", "devtools.console.stdout.content=true",
    "--pref", "datareporting.policy.dataSubmissionEnabled=false",
    "--args=--headless"],
  { env: { ...env, MOZ_HEADLESS: "1", TMPDIR: tmp }, stdio: ["ignore", "pipe", "pipe"], detached: true });
  for (const stream of [firefox.stdout, firefox.stderr]) {
    createInterface({ input: stream }).on("line", (line) => {
      firefoxLog.push(line);
      if (process.env.FIREFOX_E2E_VERBOSE) console.log(`firefox: ${line}`);
    });
  }
  const firefoxExit = new Promise((resolve) => firefox.once("exit", (code, signal) => resolve(`web-ext exited ${code ?? signal}`)));
  cleanups.push(async () => {
    if (firefox.exitCode !== null) return;
    try { process.kill(-firefox.pid, "SIGTERM"); } catch { /* gone */ }
    const timer = setTimeout(() => { try { process.kill(-firefox.pid, "SIGKILL"); } catch { /* gone */ } }, 5000);
    await firefoxExit;
    clearTimeout(timer);
  });

  const outcome = await Promise.race([
    allDone.then(() => "done"),
    firefoxExit,
    new Promise((resolve) => setTimeout(() => resolve(`timed out after ${TOTAL_TIMEOUT_MS / 1000} s`), TOTAL_TIMEOUT_MS).unref()),
  ]);
  const tail = () => firefoxLog.slice(-80).join("\n");
  check(outcome === "done", `${outcome}; reports: ${JSON.stringify([...reports.values()])}\n--- web-ext/firefox output (last lines)\n${tail()}`);

  for (const step of steps) {
    const state = reports.get(step.name);
    check(state, `no report for ${step.name}`);
    check(!state.error, `${step.name}: ${state.error}`);
    if (step.error) {
      // The reason, and the extension's remediation (install the host), not the generic one.
      check(state.state === "error" && state.status.includes(step.error) && state.marker === "extension"
          && state.status.includes("review-agent-gateway install"),
        `${step.name}: expected the content script's marker and an error saying ${JSON.stringify(step.error)}, got ${state.state} (marker ${state.marker}): ${state.status}`);
      console.log(`firefox ${step.name}: the page says ${JSON.stringify(state.status)}`);
      continue;
    }
    if (step.toolCall) {
      const want = createHash("sha256").update(log).digest("hex");
      check(state.state === "done" && state.transport === "extension", `${step.name}: ${state.transport}: ${state.status}\n--- web-ext/firefox output (last lines)\n${tail()}`);
      check(state.jsonBytes > 1024 * 1024, `the answer is ${state.jsonBytes} bytes of JSON, not over 1 MiB: it proves no chunking`);
      check(!state.truncated && state.lines === 8000 && state.digest === want, `build.log through the extension: ${JSON.stringify(state)}, want sha256 ${want}`);
      console.log(`firefox chunked: file_read_diff answer of ${state.jsonBytes} bytes of JSON through the extension, ${state.lines} lines, sha256 matches`);
      continue;
    }
    check(state.state === "done", `${step.name}: the userscript failed: ${state.status}\n--- web-ext/firefox output (last lines)\n${tail()}`);
    check(state.transport === step.transport, `expected transport ${step.transport}, got ${state.transport} (${state.status})`);
    const lines = state.findings.map((f) => `${f.path}:${f.line}`).sort();
    check(JSON.stringify(lines) === JSON.stringify(["app.py:2", "app.py:3", "app.py:4", "app.py:5", "app.py:6"]),
      `${step.name}: findings in the DOM: ${JSON.stringify(state.findings)}`);
    for (const f of state.findings) {
      check(f.rowPath === f.path && f.rowLine === f.line, `${step.name}: finding ${f.path}:${f.line} shown under ${f.rowPath}:${f.rowLine}`);
      check(f.text.includes("eval"), `${step.name}: finding text ${JSON.stringify(f.text)} does not say eval`);
    }
    check(state.shown === "5", `${step.name}: the progress counts ${state.shown} findings (${state.status})`);
    console.log(`firefox ${step.name}: ${state.findings.length} findings in the DOM next to their lines; ${state.status}`);
  }
  const viaExtension = reports.get("extension");
  check(viaExtension.origin === gitlabOrigin, `the extension stamped origin ${viaExtension.origin}, expected ${gitlabOrigin}`);
  console.log(`firefox e2e ok in ${elapsed()}`);
}

try {
  await main();
} catch (e) {
  if (!process.exitCode) { console.error(`firefox e2e FAILED: ${e.stack ?? e}`); process.exitCode = 1; }
} finally {
  for (const c of cleanups.reverse()) { try { await c(); } catch { /* best effort */ } }
}
