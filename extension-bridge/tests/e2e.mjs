#!/usr/bin/env node
// End-to-end test of the companion extension and the client library in headless Chromium
// (driven by host/tests/browser_e2e.rs, which passes the gateway binary and a temporary home):
//
//   node tests/e2e.mjs --binary PATH --home DIR --artifacts DIR
//
// 1. A real git repository (a base commit and a head commit adding five `eval(` calls) mapped
//    in the home's config for the GitLab origin played by a page on 127.0.0.1.
// 2. `review-agent-gateway install --browser chromium` with HOME=<home>: the host manifest goes
//    to <home>/.config/chromium/NativeMessagingHosts/, and that directory's parent is the
//    browser's fresh --user-data-dir (Chromium reads hosts from <user-data-dir>/NativeMessagingHosts).
// 3. The extension built with `--dev-origin http://127.0.0.1` and loaded unpacked; its id must be
//    the one its `key` gives and the installer allows by default.
// 4. A page standing in for a GitLab merge-request page (GitLab's diff markup and REST API
//    answer) runs the reference userscript (built with the client library inlined, injected as
//    a userscript manager would); clicking "Review locally" reviews extension → native host →
//    daemon; each finding is asserted under its diff line in the DOM and a screenshot is saved. Then the same page on http://localhost (no content script there:
//    the extension is absent) falls back to the WebSocket, and with the WebSocket refused, to
//    HTTP + SSE.
// Exits 1 with a message on any failure.
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { createInterface } from "node:readline";
import net from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const CHROMIUM = "/usr/bin/chromium";
const INSTALL_HINT = "run the install steps of .ci/run (apt-get install -y chromium; npm ci in extension-bridge/)";
const cleanups = [];

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

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

/** The Chrome extension id of a manifest `key` (base64 DER public key). */
export function chromeId(key) {
  const hex = createHash("sha256").update(Buffer.from(key, "base64")).digest("hex").slice(0, 32);
  return [...hex].map((c) => String.fromCharCode(97 + parseInt(c, 16))).join("");
}

/** The stand-in merge-request page: GitLab's diff markup (`.diff-file[data-path]`, line rows with
 * `td.old_line` / `td.new_line[data-linenumber]`) for app.py (line 1 kept, lines 2–6 added) and a
 * decoy README.md whose line numbers overlap, so a finding placed by line number alone fails. */
function mergeRequestPage() {
  const row = (oldLine, newLine, code) => `<tr class="line_holder"><td class="old_line diff-line-num" data-linenumber="${oldLine ?? ""}">${oldLine ?? ""}</td>` +
    `<td class="new_line diff-line-num" data-linenumber="${newLine}">${newLine}</td><td class="line_content">${code}</td></tr>`;
  const file = (path, rows) => `<div class="diff-file file-holder" data-path="${path}"><div class="file-title">${path}</div>` +
    `<table class="code diff-wrap-lines">${rows.join("")}</table></div>`;
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>Merge request !1 · group/project</title></head>
<body><h1>group/project !1</h1><div class="files">
${file("README.md", [1, 2, 3, 4, 5, 6].map((n) => row(n, n, `line ${n}`)))}
${file("app.py", [row(1, 1, "import os"), ...[2, 3, 4, 5, 6].map((n) => row(null, n, `+v${n - 2} = eval(x${n - 2})`))])}
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

  // The fixture repository.
  const repo = join(home, "repo");
  mkdirSync(repo, { recursive: true });
  const git = (...a) => run("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", ...a], { cwd: repo });
  git("init", "-q", "-b", "main");
  writeFileSync(join(repo, "app.py"), "import os\n");
  git("add", "-A"); git("commit", "-q", "-m", "base");
  const base = git("rev-parse", "HEAD");
  writeFileSync(join(repo, "app.py"), "import os\n" + [0, 1, 2, 3, 4].map((i) => `v${i} = eval(x${i})\n`).join(""));
  git("add", "-A"); git("commit", "-q", "-m", "five findings");
  const head = git("rev-parse", "HEAD");

  // The page server: the MR page and the client library.
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    if (url.pathname === "/group/project/-/merge_requests/1") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(mergeRequestPage());
    } else if (req.url === "/api/v4/projects/group%2Fproject/merge_requests/1") {
      // GitLab's REST API answer, the fields the userscript reads.
      res.writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ iid: 1, diff_refs: { base_sha: base, start_sha: base, head_sha: head } }));
    } else if (url.pathname === "/blank") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end("<!doctype html><title>blank</title>");
    } else if (url.pathname === "/favicon.ico") {
      res.writeHead(204).end();
    } else res.writeHead(404).end();
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => server.close());
  const pagePort = server.address().port;
  const gitlabOrigin = `http://127.0.0.1:${pagePort}`;
  const plainOrigin = `http://localhost:${pagePort}`;

  // The gateway home: config, then install into the browser profile.
  const port = await freePort();
  mkdirSync(join(home, "config"), { recursive: true });
  writeFileSync(join(home, "config/config.toml"),
    `port = ${port}\nallowed_origins = ["${gitlabOrigin}", "${plainOrigin}"]\n\n` +
    [gitlabOrigin, plainOrigin].map((o) =>
      `[[mappings]]\ngitlab_origin = "${o}"\nproject_path = "group/project"\nlocal_path = ${JSON.stringify(repo)}\n`).join("\n"));
  const env = { ...process.env, HOME: home, REVIEW_AGENT_GATEWAY_HOME: home };
  delete env.XDG_CONFIG_HOME;
  delete env.REVIEW_AGENT_GATEWAY_PORT;
  console.log(run(binary, ["install", "--browser", "chromium"], { env }));
  const userDataDir = join(home, ".config/chromium");
  const hostManifest = JSON.parse(readFileSync(join(userDataDir, "NativeMessagingHosts/com.review_agent.gateway.json"), "utf8"));

  // The extension, built for Chrome with the loopback page as a GitLab origin.
  const dist = join(home, "dist");
  run(process.execPath, [join(root, "build.mjs"), "--dev-origin", "http://127.0.0.1", "--out", dist]);
  const extension = join(dist, "chrome");
  const manifest = JSON.parse(readFileSync(join(extension, "manifest.json"), "utf8"));
  const id = chromeId(manifest.key);
  check(JSON.stringify(hostManifest.allowed_origins) === JSON.stringify([`chrome-extension://${id}/`]),
    `install allowed ${JSON.stringify(hostManifest.allowed_origins)}, not the companion's chrome-extension://${id}/ (COMPANION_CHROME_EXTENSION_ID in installer/src/lib.rs)`);

  // The daemon (the native host would start one itself; this one the test can stop).
  const daemon = spawn(binary, ["serve"], { env, stdio: ["ignore", "pipe", "inherit"] });
  cleanups.push(() => daemon.kill("SIGTERM"));
  const listening = await new Promise((resolve) => {
    createInterface({ input: daemon.stdout }).once("line", resolve);
    daemon.once("exit", (code) => resolve(`exited ${code}`));
  });
  check(String(listening).startsWith("listening on"), `serve: ${listening}`);
  const token = run(binary, ["token", "show"], { env });

  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: false,
    ignoreDefaultArgs: ["--disable-extensions"],
    args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
      `--disable-extensions-except=${extension}`, `--load-extension=${extension}`],
    env,
  });
  cleanups.push(() => context.close());
  const worker = context.serviceWorkers()[0] ?? (await context.waitForEvent("serviceworker", { timeout: 15000 }));
  check(worker.url().startsWith(`chrome-extension://${id}/`), `the extension runs as ${worker.url()}, not ${id}`);
  console.log(`extension loaded: ${worker.url()}`);

  // The userscript as a userscript manager with `@grant none` runs it: in the page, on every load.
  await context.addInitScript({ content: readFileSync(join(dist, "review-locally.user.js"), "utf8") });
  const page = await context.newPage();
  page.on("pageerror", (e) => console.log(`page error: ${e.message}`));
  async function review(origin, options, expectTransport, screenshot) {
    // The userscript's settings (README: token and connect() options in localStorage).
    await page.goto(`${origin}/blank`);
    await page.evaluate((o) => localStorage.setItem("review-agent-gateway", JSON.stringify(o)), { port, token, ...options });
    await page.goto(`${origin}/group/project/-/merge_requests/1`);
    await page.click("button.review-locally-button", { timeout: 15000 });
    try {
      await page.waitForSelector(".review-locally[data-state=done], .review-locally[data-state=error], .review-locally[data-state=cancelled]", { state: "attached", timeout: 60000 });
    } catch {
      fail(`${expectTransport}: the userscript did not finish: ${await page.evaluate(() => document.body.outerHTML)}`);
    }
    const state = await page.evaluate(() => {
      const panel = document.querySelector(".review-locally");
      return { ...panel.dataset, status: panel.querySelector(".review-locally-status").textContent,
        // Each finding with the path and new line number of the diff row right above it.
        findings: [...document.querySelectorAll(".review-locally-finding")].map((box) => {
          const above = box.closest("tr")?.previousElementSibling;
          return { path: box.dataset.path, line: Number(box.dataset.line), text: box.textContent,
            rowPath: box.closest(".diff-file")?.dataset.path ?? null,
            rowLine: Number(above?.querySelector("td.new_line")?.dataset.linenumber) };
        }) };
    });
    if (screenshot) await page.screenshot({ path: join(artifacts, screenshot), fullPage: true });
    check(state.state === "done", `${expectTransport}: the userscript failed: ${state.status}`);
    check(state.transport === expectTransport, `expected transport ${expectTransport}, got ${state.transport} (${state.status})`);
    const lines = state.findings.map((f) => `${f.path}:${f.line}`).sort();
    check(JSON.stringify(lines) === JSON.stringify(["app.py:2", "app.py:3", "app.py:4", "app.py:5", "app.py:6"]),
      `${expectTransport}: findings in the DOM: ${JSON.stringify(state.findings)}`);
    for (const f of state.findings) {
      check(f.rowPath === f.path && f.rowLine === f.line, `${expectTransport}: finding ${f.path}:${f.line} shown under ${f.rowPath}:${f.rowLine}`);
      check(f.text.includes("eval"), `${expectTransport}: finding text ${JSON.stringify(f.text)} does not say eval`);
    }
    check(state.runFindings === "5", `${expectTransport}: getRun gave ${state.runFindings} findings (${state.status})`);
    console.log(`${expectTransport}: ${state.findings.length} findings in the DOM next to their lines; ${state.status}`);
    return state;
  }

  const viaExtension = await review(gitlabOrigin, {}, "extension", "browser-e2e-extension.png");
  check(viaExtension.origin === gitlabOrigin, `the extension stamped origin ${viaExtension.origin}, expected ${gitlabOrigin}`);
  await review(plainOrigin, {}, "websocket", "browser-e2e-websocket.png");
  await review(plainOrigin, { wsUrl: `ws://127.0.0.1:${await freePort()}/v1/ws` }, "sse", "browser-e2e-sse.png");
  console.log(`e2e ok; screenshots in ${artifacts}`);
}

try {
  await main();
} catch (e) {
  if (!process.exitCode) { console.error(`e2e FAILED: ${e.stack ?? e}`); process.exitCode = 1; }
} finally {
  for (const c of cleanups.reverse()) { try { await c(); } catch { /* best effort */ } }
}
