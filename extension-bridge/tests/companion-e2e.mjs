#!/usr/bin/env node
// The companion test of issue 17: the userscript (dist/review-locally.user.js) on stand-in GitLab
// merge-request pages in headless Chromium or Firefox, against the real daemon, driven by
// host/tests/browser_companion.rs:
//
//   node tests/companion-e2e.mjs --browser chromium|firefox --binary PATH --home DIR --artifacts DIR
//        [--userscript PATH]   (a built userscript to test instead of building this tree's)
//        [--keep-going 1]      (print a failed step and go on with the next)
//
// Real things only: the fixture git repository (built here with real commits), the daemon
// (`serve`, with REVIEW_AGENT_GATEWAY_FAULT_FINDING_DELAY_MS so a review lasts long enough to
// reload or cancel in the middle), a stand-in GitLab (companion/gitlab-standin.mjs: pages in the
// three diff markups from the real `git diff`, REST endpoints with GitLab's position and CSRF
// rules), a fake OpenAI-compatible model server (companion/fake-model.mjs), a GM stand-in
// (companion/gm.mjs) as the userscript manager's storage, and the browser (Chromium through
// playwright-core, Firefox through our WebDriver BiDi client, companion/bidi.mjs), both driven
// by in-page DOM calls only so they behave alike. No extension: the WebSocket transport, with
// the token from GM storage.
//
// Steps, each printing one line the Rust test asserts (prefixed with the browser's name):
//  0. self-check of the stand-ins: the stand-in refuses a POST without the CSRF token (401) and
//     positions GitLab refuses (400), accepts the right ones (201); the fake model streams; GM
//     storage round-trips.
//  1. token: the token in the old localStorage key is moved into GM storage, not left in
//     localStorage.
//  2. a review on the Rapid Diffs page, the page reloaded mid-review: every finding once, each
//     under its line.
//  3. cancel (merge request !2): the panel and the gateway's run end cancelled.
//  4. chat on a selected line: the model's file_read call shown, the answer streamed, stop.
//  5. draft notes for an added line and a context line: the recorded POSTs carry GitLab's
//     positions (new_line only; old_line and new_line of the same unchanged line).
//  6. the notes published, the page reloaded: both findings marked, the button refuses.
//  7. a finding dismissed: hidden, counted, stored by the gateway.
//  8. a new head commit: "review new commits" reviews only the new file; earlier findings are
//     carried over; the dismissed one stays hidden.
//  9. Rapid Diffs' parallel view, the Vue and classic markups: findings under their lines.
// 10. GitLab under the path prefix /gitlab: the REST calls go under it.
// 11. dark mode (html.gl-dark): the panel is readable on the dark page.
// 12. the interface language: 简体中文 chosen in the settings dialog, the panel in Chinese (and
//     still after a reload); "Automatic" then follows the browser, English here.
// The browsers run with an English UI language (LANGUAGE=en), so "Automatic" is English in the
// steps before 12, whose checks read some of the panel's English texts.
// Screenshots: <artifacts>/<browser>-<state>.png. Exits 1 with a message on the first failure.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { launch } from "./companion/bidi.mjs";
import { startFakeModel } from "./companion/fake-model.mjs";
import { startStandin } from "./companion/gitlab-standin.mjs";
import { asManagerRunsIt, gmStandinSource } from "./companion/gm.mjs";
import { pageHelpersSource } from "./companion/page-helpers.mjs";
import { freePort } from "./fixture.mjs";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
/** Pause after each finding in the daemon: 5 findings take about 2 s, time to reload or cancel. */
const FINDING_DELAY_MS = "400";
const MR = "/group/project/-/merge_requests";
const cleanups = [];
let browserName = "?";
let step = "start";

function fail(message) {
  throw new Error(`${step}: ${message}`);
}
function check(condition, message) { if (!condition) fail(message); }
const say = (line) => console.log(`${browserName} ${line}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function args() {
  const out = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) out[argv[i].replace(/^--/, "")] = argv[i + 1];
  for (const k of ["browser", "binary", "home", "artifacts"]) {
    if (!out[k]) throw new Error(`missing --${k}; usage: companion-e2e.mjs --browser chromium|firefox --binary PATH --home DIR --artifacts DIR`);
  }
  return out;
}

function run(cmd, argv, opts = {}) {
  const r = spawnSync(cmd, argv, { encoding: "utf8", ...opts });
  if (r.status !== 0) fail(`${cmd} ${argv.join(" ")} exited ${r.status}: ${r.stderr}`);
  return r.stdout.trim();
}

// === the fixture repository ===

/** base: app.py (41 lines) and lib.py; head: app.py loses `import sys` and gains three eval
 * lines at the top (new lines 2–4; `def load(path):` becomes the context line old 4 / new 6)
 * and one at the end (line 44, a second hunk); lib.py, a decoy, changes lines 2–4 without eval.
 * head2 (a later push): a new file extra.py with one eval line (2). */
function fixture(home) {
  const repo = join(home, "repo");
  mkdirSync(repo, { recursive: true });
  const git = (...a) => run("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", ...a], { cwd: repo });
  const filler = Array.from({ length: 10 }, (_, i) => `def f${i + 1}():\n    return ${i + 1}\n\n`).join("");
  const tail = "def last(values):\n    total = 0\n    for v in values:\n        total += v\n    return total\n";
  const top = "\n\ndef load(path):\n    with open(path) as f:\n        return f.read()\n";
  git("init", "-q", "-b", "main");
  writeFileSync(join(repo, "app.py"), `import os\nimport sys${top}${filler}${tail}`);
  writeFileSync(join(repo, "lib.py"), "a = 1\nb = 2\nc = 3\nd = 4\n\n\ndef g():\n    return a\n");
  git("add", "-A"); git("commit", "-q", "-m", "base");
  const base = git("rev-parse", "HEAD");
  writeFileSync(join(repo, "app.py"), `import os\nv0 = eval(x0)\nv1 = eval(x1)\nv2 = eval(x2)${top}${filler}${tail}v9 = eval(x9)\n`);
  writeFileSync(join(repo, "lib.py"), "a = 1\nb = 20\nc = 30\nd = 40\n\n\ndef g():\n    return a\n");
  git("add", "-A"); git("commit", "-q", "-m", "evals");
  const head = git("rev-parse", "HEAD");
  writeFileSync(join(repo, "extra.py"), "import os\nw = eval(y)\n");
  git("add", "-A"); git("commit", "-q", "-m", "extra");
  const head2 = git("rev-parse", "HEAD");
  git("checkout", "-q", head); // the work tree at the first head; the gateway reads commits
  return { repo, base, head, head2 };
}

// === the page ===

/** Polls `fn(arg)` in the page until it returns a truthy value; fails with `what` and the
 * panel's state after `timeoutMs`. */
async function waitIn(page, what, fn, arg, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await page.evaluate(fn, arg);
      if (last) return last;
    } catch (e) {
      last = `evaluate failed: ${e.message}`; // a navigation in between
    }
    if (Date.now() > deadline) {
      const state = await page.evaluate(() => window.__t?.state()).catch(() => null);
      fail(`timed out waiting for ${what}; panel: ${JSON.stringify(state)?.slice(0, 3000)}`);
    }
    await sleep(100);
  }
}
const state = (page) => page.evaluate(() => window.__t.state());
const waitPanel = (page) => waitIn(page, "the userscript's panel #review-agent-gateway", () => !!window.__t?.panel());
const waitState = (page, states, timeoutMs = 30000) =>
  waitIn(page, `panel data-state in ${states.join("|")}`, (s) => s.includes(window.__t?.panel()?.dataset.state) && window.__t.state(), states, timeoutMs);
async function click(page, action, scope) {
  const clicked = await page.evaluate(({ action, scope }) => window.__t.click(action, scope), { action, scope });
  check(clicked, `no visible button[data-rag-action=${action}]${scope ? ` in ${scope}` : ""}: ${JSON.stringify(await state(page))?.slice(0, 2000)}`);
}

/** Every finding once (distinct fingerprints), and those of `paths` each placed under its line. */
function checkFindings(s, expectLines, label) {
  const fps = s.findings.map((f) => f.fingerprint);
  check(new Set(fps).size === fps.length, `${label}: a finding shown twice: ${JSON.stringify(s.findings.map((f) => `${f.path}:${f.line} ${f.fingerprint}`))}`);
  check(!s.duplicates?.length, `${label}: shown twice: ${JSON.stringify(s.duplicates)}`);
  const shown = s.findings.filter((f) => f.status !== "dismissed").map((f) => `${f.path}:${f.line}`).sort();
  check(JSON.stringify(shown) === JSON.stringify([...expectLines].sort()), `${label}: findings ${JSON.stringify(shown)}, expected ${JSON.stringify([...expectLines].sort())}`);
  for (const f of s.findings.filter((x) => x.status !== "dismissed")) {
    check(f.placed, `${label}: finding ${f.path}:${f.line} (${f.side}) is not in a .rag-row right after its diff line's row`);
  }
}

/** The findings of a review of base..head: the eval rule on the added lines, the model's
 * finding on the context line. */
const firstFindingsOf = (contextLine) => ["app.py:2", "app.py:3", "app.py:4", "app.py:44", `app.py:${contextLine.new}`].sort();

/** Reads an SSE answer (`event:`/`data:` blocks) into `{ type, data }` events until it ends or
 * `stop(event)` returns true. */
async function readSse(response, stop = () => false) {
  const events = [];
  if (!response.body) return events;
  const decoder = new TextDecoder();
  let text = "";
  for await (const chunk of response.body) {
    text += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = text.indexOf("\n\n")) >= 0) {
      const block = text.slice(0, end);
      text = text.slice(end + 2);
      const type = block.match(/^event:\s*(.*)$/m)?.[1];
      const data = block.match(/^data:\s*(.*)$/m)?.[1];
      if (!type || !data) continue;
      const event = { type, data: JSON.parse(data) };
      events.push(event);
      if (stop(event)) return events;
    }
  }
  return events;
}

async function main() {
  const { browser, binary, home, artifacts, ...extra } = args();
  const keepGoing = extra["keep-going"] === "1";
  browserName = browser;
  mkdirSync(artifacts, { recursive: true });
  const shot = (page, name) => page.screenshot(join(artifacts, `${browser}-${name}.png`));
  const started = Date.now();

  // --- the fixture, the stand-ins, the daemon ---
  const { repo, base, head, head2 } = fixture(home);
  // !2 shows base..head2 (another diff than !1: no review cache hit, a review to cancel).
  const standin = await startStandin({ repo, base, head, heads: { 2: head2 } });
  cleanups.push(() => standin.close());
  const contextLine = { path: "app.py", old: 4, new: 6, text: "def load(path):" };
  const model = await startFakeModel({
    finding: { path: "app.py", line: contextLine.new, title: "load() leaks nothing but reads the whole file",
      content: "Reading **the whole file** with `f.read()` can exhaust memory; stream it.\n\n<img src=x onerror=alert(1)>",
      existingCode: "        return f.read()", suggestionCode: "        yield from f" },
    chatReadPath: "app.py",
    answer: "The selected line evaluates **untrusted input** with `eval`, which runs arbitrary code. Use a literal parser such as ast.literal_eval instead, and validate the input first. ".repeat(2),
    answerDeltas: 24, deltaMs: 200,
  });
  cleanups.push(() => model.close());

  const port = await freePort();
  mkdirSync(join(home, "config"), { recursive: true });
  writeFileSync(join(home, "config/config.toml"),
    `port = ${port}\nallowed_origins = ["${standin.origin}"]\ndefault_provider = "fake"\n\n` +
    `[[mappings]]\ngitlab_origin = "${standin.origin}"\nproject_path = "group/project"\nlocal_path = ${JSON.stringify(repo)}\n\n${model.toml("fake")}`);
  const env = { ...process.env, HOME: home, REVIEW_AGENT_GATEWAY_HOME: home, OPENAI_API_KEY: "", ANTHROPIC_API_KEY: "",
    DBUS_SESSION_BUS_ADDRESS: `unix:path=${home}/no-bus` };
  delete env.XDG_CONFIG_HOME;
  delete env.REVIEW_AGENT_GATEWAY_PORT;
  const daemon = spawn(binary, ["serve"], { env: { ...env, REVIEW_AGENT_GATEWAY_FAULT_FINDING_DELAY_MS: FINDING_DELAY_MS }, stdio: ["ignore", "pipe", "inherit"] });
  cleanups.push(() => daemon.kill("SIGTERM"));
  const listening = await new Promise((resolve) => {
    createInterface({ input: daemon.stdout }).once("line", resolve);
    daemon.once("exit", (code) => resolve(`exited ${code}`));
  });
  check(String(listening).startsWith("listening on"), `serve: ${listening}`);
  const token = run(binary, ["token", "show"], { env });
  const gatewayGet = async (path) => {
    const r = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { authorization: `Bearer ${token}`, origin: standin.origin } });
    return { status: r.status, body: await r.json().catch(() => null) };
  };

  // --- 0. the stand-ins check themselves ---
  step = "self-check";
  {
    const s = standin.session();
    const refs = standin.diffRefs();
    const post = async (position, csrf = s.csrf) => {
      const r = await fetch(standin.url(`/api/v4/projects/42/merge_requests/1/draft_notes`), {
        method: "POST", headers: { "content-type": "application/json", cookie: s.cookie, ...(csrf ? { "x-csrf-token": csrf } : {}) },
        body: JSON.stringify({ note: "self-check", position: { position_type: "text", ...refs, old_path: "app.py", new_path: "app.py", ...position } }) });
      return r.status;
    };
    const cases = [
      ["no CSRF token", await post({ new_line: 2 }, null), 401],
      ["wrong CSRF token", await post({ new_line: 2 }, "nope"), 401],
      ["added line with old_line too", await post({ old_line: 2, new_line: 2 }), 400],
      ["added line", await post({ new_line: 2 }), 201],
      ["context line, new_line only", await post({ new_line: contextLine.new }), 400],
      ["context line, equal numbers", await post({ old_line: contextLine.new, new_line: contextLine.new }), 400],
      ["context line, both", await post({ old_line: contextLine.old, new_line: contextLine.new }), 201],
      ["removed line", await post({ old_line: 2 }), 201],
      ["unchanged line outside the hunks", await post({ old_line: 20, new_line: 22 }), 201],
      ["unchanged line outside the hunks, unshifted", await post({ old_line: 20, new_line: 20 }), 400],
      ["old head_sha", await post({ new_line: 2, head_sha: base }), 400],
      ["file not in the diff", await post({ new_line: 2, old_path: "nope.py", new_path: "nope.py" }), 400],
    ];
    const wrong = cases.filter(([, got, want]) => got !== want);
    check(wrong.length === 0, `the stand-in's rules: ${JSON.stringify(wrong)}`);
    const mrByPath = await fetch(standin.url(`/gitlab/api/v4/projects/group%2Fproject/merge_requests/1`), { headers: { cookie: s.cookie } }).then((r) => r.json());
    check(mrByPath.diff_refs?.head_sha === head, `GET MR by path under /gitlab: ${JSON.stringify(mrByPath)}`);
    const anonymous = await fetch(standin.url(`/api/v4/projects/42/merge_requests/1`)).then((r) => r.status);
    check(anonymous === 401, `GET MR without a session: ${anonymous}`);
    const diffs = await fetch(standin.url(`/api/v4/projects/42/merge_requests/1/diffs?per_page=1&page=1`), { headers: { cookie: s.cookie } });
    const first = await diffs.json();
    check(diffs.headers.get("x-next-page") === "2" && diffs.headers.get("x-total-pages") === "2" && first[0].new_path === "app.py" &&
      first[0].diff.startsWith("@@ -1,5 +1,7 @@") && first[0].diff.includes("@@ -39,3 +41,4 @@"), `diffs page 1: ${diffs.headers.get("x-next-page")} ${JSON.stringify(first).slice(0, 400)}`);
    say(`self-check: stand-in GitLab enforces CSRF and position rules (${cases.length} cases), paginates diffs`);
    standin.reset({ notes: true });

    // The fake model: a chat's first turn asks for file_read, the next streams text.
    const ask = async (messages, tools) => {
      const r = await fetch(`${model.baseUrl}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "fake-model", stream: true, messages, tools: tools.map((name) => ({ type: "function", function: { name, parameters: {} } })) }) });
      return r.text();
    };
    const toolTurn = await ask([{ role: "user", content: "why?" }], ["file_read"]);
    check(toolTurn.includes('"name":"file_read"') && toolTurn.includes('\\"path\\":\\"app.py\\"') && toolTurn.trimEnd().endsWith("data: [DONE]"), `fake model tool turn: ${toolTurn.slice(0, 500)}`);
    const reviewTurn = await ask([{ role: "user", content: "### app.py (modified)\n..." }], ["report_finding"]);
    check(reviewTurn.includes('"name":"report_finding"'), `fake model review turn: ${reviewTurn.slice(0, 300)}`);
    model.requests.length = 0;
    say("self-check: fake model answers tool calls and streams");
    // GM storage round trip (as the page's GM stand-in calls it).
    const gmCall = (body) => fetch(standin.url("/__test/gm"), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }).then((r) => r.json());
    await gmCall({ op: "set", key: "probe", value: { a: [1] } });
    const got = await gmCall({ op: "get", key: "probe" });
    await gmCall({ op: "delete", key: "probe" });
    check(got.found && got.value.a[0] === 1 && !(await gmCall({ op: "get", key: "probe" })).found, `GM storage: ${JSON.stringify(got)}`);
  }

  // The gateway with these stand-ins, without the browser: the review finds what the steps
  // expect (four eval rule findings and the model's finding on the context line), and a chat
  // runs the model's file_read call and streams its answer (cancelled after the first delta).
  step = "gateway self-check";
  {
    const post = (path, body, signal) => fetch(`http://127.0.0.1:${port}${path}`, { method: "POST", signal,
      headers: { authorization: `Bearer ${token}`, origin: standin.origin, "content-type": "application/json" }, body: JSON.stringify(body) });
    const target = { gitlabOrigin: standin.origin, projectPath: "group/project", mergeRequestIid: 99,
      diffRefs: { baseSha: base, startSha: base, headSha: head } };
    const review = await post("/v1/reviews", { requestId: `self-check-${Date.now()}`, mode: "merge-request", target,
      // (the files named: another request than the page's, so no review cache entry is left
      // for the page's review to replay)
      scope: { filePaths: ["app.py", "lib.py"], selection: null }, policy: { minConfidence: "low" } });
    const events = await readSse(review);
    const found = events.filter((e) => e.type === "finding.created").map((e) => `${e.data.finding.path}:${e.data.finding.startLine}`).sort();
    check(JSON.stringify(found) === JSON.stringify(firstFindingsOf(contextLine)), `the gateway's review: ${review.status} ${JSON.stringify(found)} ${JSON.stringify(events.filter((e) => /failed|warning/.test(e.type)))}`);
    const abort = new AbortController();
    const chatEvents = [];
    const chat = await post("/v1/chat", { requestId: `self-check-chat-${Date.now()}`, messages: [{ role: "user", content: "Is it safe?" }],
      context: { kind: "selection", gitlabOrigin: standin.origin, projectPath: "group/project", mergeRequestIid: 1, filePath: "app.py",
        startLine: 2, endLine: 2, text: "v0 = eval(x0)", headSha: head }, toolsEnabled: true }, abort.signal);
    await readSse(chat, (e) => { chatEvents.push(e); return e.type === "text.delta"; });
    const runId = chatEvents[0]?.data?.runId;
    const cancelled = runId ? (await post(`/v1/runs/${runId}/cancel`, {})).status : "no run id";
    abort.abort();
    const types = chatEvents.map((e) => e.type);
    check(types.includes("tool.started") && types.includes("tool.completed") && types.at(-1) === "text.delta" && cancelled === 200,
      `the gateway's chat: ${chat.status} ${types.join(",")} cancel ${cancelled} ${JSON.stringify(chatEvents.filter((e) => /tool|failed/.test(e.type)))}`);
    say(`self-check: the gateway reviews ${found.join(" ")} and chats through the fake model (file_read, then text)`);
    model.requests.length = 0;
  }

  // --- the browser: GM stand-in, helpers, then the userscript, in every document ---
  step = "launch";
  // The userscript as built from this tree, or (`--userscript PATH`) a copy built elsewhere.
  let userscriptPath = extra.userscript;
  if (!userscriptPath) {
    const dist = join(home, "dist");
    run(process.execPath, [join(root, "build.mjs"), "--out", dist]);
    userscriptPath = join(dist, "review-locally.user.js");
  }
  const userscript = readFileSync(userscriptPath, "utf8");
  const page = await launch(browser, { initScripts: [gmStandinSource(), pageHelpersSource(), asManagerRunsIt(userscript)],
    env: { ...env, LANGUAGE: "en", LC_ALL: "C.UTF-8" } });
  cleanups.push(() => page.close());
  say(`launched; stand-ins up in ${Date.now() - started} ms`);

  // The stand-in's pages, read by the helpers as GitLab's own code reads each markup: the
  // context line, an added line, the removed line, the decoy file, in all three markups.
  step = "pages";
  for (const [markup, view] of [["rapid", "inline"], ["rapid", "parallel"], ["vue", "inline"], ["classic", "inline"]]) {
    await page.goto(standin.url(`/gitlab${MR}/1/diffs?markup=${markup}&view=${view}&theme=dark`));
    const seen = await page.evaluate((c) => {
      const text = (row) => row?.textContent.replace(/\s+/g, " ").trim() ?? null;
      return { markup: window.__t.markup(), dark: document.documentElement.classList.contains("gl-dark"),
        context: text(window.__t.rowOf("app.py", c.new)), contextOld: text(window.__t.rowOf("app.py", c.old, "old")),
        added: text(window.__t.rowOf("app.py", 44)), removed: text(window.__t.rowOf("app.py", 2, "old")),
        decoy: text(window.__t.rowOf("lib.py", 2)), csrf: document.querySelector('meta[name="csrf-token"]')?.content.length,
        project: document.body.dataset.projectFullPath };
    }, contextLine);
    // (a parallel row holds both sides: a removed line sits beside the added one)
    check(seen.markup === markup && seen.dark && seen.context?.endsWith("def load(path):") && seen.contextOld === seen.context &&
      seen.added?.endsWith("v9 = eval(x9)") && seen.removed?.includes("import sys") && seen.decoy?.endsWith("b = 20") &&
      seen.csrf > 20 && seen.project === "group/project", `the ${markup} ${view} page: ${JSON.stringify(seen)}`);
    await shot(page, `page-${markup}-${view}-dark`);
  }
  // The GM stand-in in the page: values survive a reload and never reach localStorage.
  await page.evaluate(async () => { await GM.setValue("probe", { n: 1, s: "é" }); });
  await page.reload();
  const gmSeen = await page.evaluate(async () => ({ value: await GM.getValue("probe", null), keys: await GM.listValues(),
    fallback: await GM.getValue("absent", "default"), local: Object.keys(localStorage).length }));
  await page.evaluate(async () => { await GM.deleteValue("probe"); });
  check(gmSeen.value?.s === "é" && gmSeen.keys.includes("probe") && gmSeen.fallback === "default" && gmSeen.local === 0 && !standin.gm.has("probe"),
    `the GM stand-in across a reload: ${JSON.stringify(gmSeen)}`);
  say("pages: rapid, vue and classic markup rendered from the git diff; lines found as GitLab's code finds them; GM storage survives a reload");

  // State the steps share: the page's last state, the findings steps 5–8 act on.
  const firstFindings = firstFindingsOf(contextLine);
  const byLine = (st, line, path = "app.py") => st?.findings.find((f) => f.path === path && f.line === line);
  let s = null;
  let added = null;
  let context = null;
  let dismissed = null;
  // After step 8: app.py:3 dismissed, extra.py:2 new.
  const expected8 = ["app.py:2", "app.py:4", "app.py:44", `app.py:${contextLine.new}`, "extra.py:2"].sort();
  const failures = [];
  /** Runs one step; with --keep-going a failure is printed and the next step runs. */
  const stage = async (body) => {
    try {
      await body();
    } catch (e) {
      if (!keepGoing) throw e;
      failures.push(e.message);
      console.log(`${browser} step FAILED at ${e.message.slice(0, 1500)}`);
    }
  };

  // --- 1. the token: moved from localStorage into GM storage ---
  await stage(async () => {
    step = "token";
    await page.goto(standin.url("/blank"));
    await page.evaluate((o) => localStorage.setItem("review-agent-gateway", JSON.stringify(o)), { token, port });
    await page.goto(standin.url(`${MR}/1/diffs?markup=rapid`));
    await waitPanel(page);
  });

  // --- 2. a review, the page reloaded in the middle ---
  await stage(async () => {
    step = "reload mid-review";
    await click(page, "review");
    await waitIn(page, "a running review with a finding", () => window.__t.panel()?.dataset.state === "running" && Number(window.__t.panel().querySelector('[data-rag="progress"]')?.dataset.findings) >= 1, null, 20000);
    const before = (await state(page)).findings.length;
    check(before < firstFindings.length, `the review had all ${before} findings before the reload: not mid-review`);
    // The old localStorage token was moved into GM storage by now (at the latest when the
    // review needed it).
    step = "token";
    await waitIn(page, "the token to leave localStorage", () => localStorage.getItem("review-agent-gateway") === null ||
      !(localStorage.getItem("review-agent-gateway") ?? "").includes("token"), null, 5000);
    const stored = standin.gm.get("settings");
    check(stored?.token === token, `GM settings after the move: ${JSON.stringify(stored)}`);
    const inLocal = await page.evaluate((t) => Object.keys(localStorage).filter((k) => (localStorage.getItem(k) ?? "").includes(t)), token);
    check(inLocal.length === 0, `the token is still in localStorage under ${inLocal}`);
    say("token: moved from localStorage into GM storage; localStorage holds no token");
    step = "reload mid-review";
    await page.reload();
    await waitPanel(page);
    s = await waitState(page, ["done", "failed", "error", "cancelled", "interrupted"], 40000);
    check(s.state === "done", `after the reload the review ended ${s.state}: ${s.error}`);
    checkFindings(s, firstFindings, "restored review");
    check(Number(s.progress?.findings) === firstFindings.length, `progress says ${s.progress?.findings} findings`);
    const modelFinding = s.findings.find((f) => f.line === contextLine.new);
    check(modelFinding.markdownHtml?.includes("<strong>the whole file</strong>") && modelFinding.markdownHtml.includes("<code>f.read()</code>") &&
      !modelFinding.markdownHtml.includes("<img"), `the finding's Markdown: ${modelFinding.markdownHtml}`);
    await shot(page, "review-restored");
    say(`reload mid-review: ${before} findings before the reload, ${s.findings.length} after, each once and under its line; Markdown rendered safely`);
  });

  // The settings dialog shows what GM storage holds; saving keeps it there.
  await stage(async () => {
    step = "settings";
    await click(page, "settings");
    const dialog = await waitIn(page, "the settings dialog", () => {
      const form = document.querySelector('[data-rag="settings"]');
      const token = form?.querySelector('input[name="token"]');
      return window.__t.visible(form) && token && { token: token.value, port: form.querySelector('input[name="port"]')?.value ?? null };
    }, null, 5000);
    check(dialog.token === token && Number(dialog.port) === port, `the settings dialog shows ${JSON.stringify({ ...dialog, token: dialog.token === token ? "(the token)" : dialog.token })}`);
    await click(page, "save-settings", '[data-rag="settings"]');
    await sleep(300);
    check(standin.gm.get("settings")?.token === token, `GM settings after saving the dialog: ${JSON.stringify(standin.gm.get("settings"))}`);
    const afterSave = await page.evaluate((t) => Object.keys(localStorage).filter((k) => (localStorage.getItem(k) ?? "").includes(t)), token);
    check(afterSave.length === 0, `the token is in localStorage after saving the settings: ${afterSave}`);
    say("settings: the dialog shows the stored token and port; saving keeps the token in GM storage only");
  });

  // --- 3. cancel (merge request !2, base..head2) ---
  await stage(async () => {
    step = "cancel";
    await page.goto(standin.url(`${MR}/2/diffs?markup=rapid`));
    await waitPanel(page);
    await click(page, "review");
    // Running, its run known (data-run-id: the gateway answered run.created), cancel offered.
    await waitIn(page, "a running review with its run id", () => window.__t.panel()?.dataset.state === "running" &&
      !!window.__t.panel().dataset.runId && window.__t.state().buttons.includes("cancel"), null, 20000);
    await click(page, "cancel");
    s = await waitState(page, ["cancelled", "done", "failed", "error"], 15000);
    check(s.state === "cancelled", `the cancelled review ended ${s.state}: ${JSON.stringify({ ...s, findings: s.findings.map((f) => `${f.path}:${f.line}`) })}`);
    const allOfTwo = firstFindings.length + 1; // and extra.py:2
    const run = await gatewayGet(`/v1/runs/${s.runId}`);
    check(run.body?.data?.state === "cancelled", `the gateway's run ${s.runId}: ${JSON.stringify(run.body)?.slice(0, 500)}`);
    await shot(page, "cancelled");
    say(`cancel: the review ended cancelled (the gateway's run too) with ${s.findings.length} of ${allOfTwo} findings`);
  });

  // --- 4. chat on a selection ---
  await stage(async () => {
    step = "chat";
    await page.goto(standin.url(`${MR}/1/diffs?markup=rapid`));
    await waitState(page, ["done"], 15000);
    // A selection in a file's header asks about the whole file, as far as the page shows it.
    const wholeFile = await page.evaluate(() => {
      const file = [...document.querySelectorAll("diff-file")].find((f) => JSON.parse(f.dataset.fileData).new_path === "app.py");
      const header = file?.querySelector(".rd-diff-file-header");
      if (!header) return null;
      const range = document.createRange();
      range.selectNodeContents(header);
      window.getSelection().removeAllRanges();
      window.getSelection().addRange(range);
      document.dispatchEvent(new Event("selectionchange"));
      const lines = [...file.querySelectorAll('[data-position="new"] [data-line-number]')].map((a) => Number(a.dataset.lineNumber));
      return `app.py:L${Math.min(...lines)}–${Math.max(...lines)}`;
    });
    check(wholeFile, "no Rapid Diffs file header for app.py");
    const askLabel = await waitIn(page, "the ask button for the whole file", () => {
      const ask = [...document.querySelectorAll('button[data-rag-action="ask"]')].find(window.__t.visible);
      return ask?.textContent ?? "";
    }, null, 5000);
    check(askLabel.endsWith(wholeFile), `a selection of app.py's header offers "${askLabel}", not the whole file ${wholeFile}`);
    check(await page.evaluate(() => window.__t.selectLine("app.py", 2)), "cannot select app.py:2");
    await waitIn(page, "the ask button for app.py:L2 after a selection", () =>
      [...document.querySelectorAll('button[data-rag-action="ask"]')].some((b) => window.__t.visible(b) && b.textContent.endsWith("app.py:L2")), null, 5000);
    await page.evaluate(() => window.__t.click("ask"));
    await waitIn(page, "the chat box", () => window.__t.visible(document.querySelector('[data-rag="chat"] textarea[name="question"]')), null, 5000);
    await page.evaluate(() => {
      const box = document.querySelector('[data-rag="chat"] textarea[name="question"]');
      box.value = "Is this line safe?";
      box.dispatchEvent(new Event("input", { bubbles: true }));
    });
    await click(page, "send", '[data-rag="chat"]');
    await waitIn(page, "the file_read tool shown completed", () => !!document.querySelector('[data-rag="chat"] .rag-tool[data-tool="file_read"][data-state="completed"]'), null, 20000);
    const first = await waitIn(page, "answer text", () => document.querySelector('[data-rag="chat"] .rag-chat-answer')?.textContent.length || 0, null, 10000);
    const second = await waitIn(page, "more answer text", (n) => {
      const len = document.querySelector('[data-rag="chat"] .rag-chat-answer')?.textContent.length ?? 0;
      return len > n ? len : 0;
    }, first, 10000);
    await click(page, "stop", '[data-rag="chat"]');
    const chat = await waitIn(page, "the chat stopped", () => {
      const box = document.querySelector('[data-rag="chat"]');
      return ["stopped", "done", "error"].includes(box?.dataset.state) && { state: box.dataset.state, answer: box.querySelector(".rag-chat-answer").textContent,
        tools: [...box.querySelectorAll(".rag-tool")].map((t) => ({ ...t.dataset })) };
    }, null, 10000);
    check(chat.state === "stopped", `the chat ended ${chat.state}`);
    // The gateway cancels the run and closes the model's stream (soon, not at once on a busy machine).
    const answer = model.requests.find((r) => r.kind === "chat-answer");
    for (let i = 0; i < 100 && answer && !answer.closedEarly && answer.deltasSent < 24; i++) await sleep(100);
    check(answer && answer.closedEarly && answer.deltasSent < 24, `the model's answer stream: ${JSON.stringify(model.requests.map(({ text, ...r }) => r))}`);
    const asked = model.requests.find((r) => r.kind === "chat-tool");
    check(asked, `no chat tool turn: ${JSON.stringify(model.requests)}`);
    // The selection reached the model: the selected line's text and the question.
    check(asked.text.includes("v0 = eval(x0)") && asked.text.includes("Is this line safe?"),
      `the chat's first request lacks the selection or the question: ${asked.text.slice(0, 1500)}`);
    await shot(page, "chat-stopped");
    say(`chat: file_read shown (${chat.tools.map((t) => `${t.tool}:${t.state}`).join(",")}), answer streamed (${first} then ${second} chars), stopped after ${answer.deltasSent} of 24 deltas`);
    say(`chat on a file: its header asks about the whole file (${wholeFile})`);
  });

  // --- 5. draft notes: an added line and a context line ---
  await stage(async () => {
    step = "publish";
    standin.reset();
    s = await state(page);
    added = byLine(s, 2);
    context = byLine(s, contextLine.new);
    const publish = async (f) => {
      await click(page, "publish", `.rag-finding[data-fingerprint="${f.fingerprint}"]`);
      await waitIn(page, `finding ${f.path}:${f.line} marked published`, (fp) => {
        const b = document.querySelector(`.rag-finding[data-fingerprint="${fp}"] button[data-rag-action="publish"]`);
        return b?.dataset.published === "true" && b.disabled;
      }, f.fingerprint, 10000);
    };
    await publish(added);
    await publish(context);
    const drafts = standin.posts.filter((p) => p.path.endsWith("/draft_notes"));
    check(drafts.length === 2 && drafts.every((p) => p.status === 201), `draft-note POSTs: ${JSON.stringify(drafts)}`);
    const refs = standin.diffRefs();
    const want = [
      { ...refs, position_type: "text", old_path: "app.py", new_path: "app.py", old_line: null, new_line: 2 },
      { ...refs, position_type: "text", old_path: "app.py", new_path: "app.py", old_line: contextLine.old, new_line: contextLine.new },
    ];
    drafts.forEach((p, i) => {
      const got = p.body.position;
      const norm = { ...got, old_line: got.old_line ?? null, new_line: got.new_line ?? null };
      for (const [k, v] of Object.entries(want[i])) check(norm[k] === v, `draft ${i + 1} position.${k} = ${JSON.stringify(norm[k])}, want ${JSON.stringify(v)} (${JSON.stringify(got)})`);
      const fp = [added, context][i].fingerprint;
      check(p.body.note.trimEnd().endsWith(`<!-- review-agent-gateway fingerprint=${fp} -->`), `draft ${i + 1} lacks the marker of ${fp}: ${p.body.note.slice(-200)}`);
      check(typeof p.csrf === "string" && p.csrf.length > 0, `draft ${i + 1} without X-CSRF-Token`);
    });
    await shot(page, "published");
    say(`draft notes: added line posted as new_line 2 only; context line as old_line ${contextLine.old} + new_line ${contextLine.new}; both carry the fingerprint marker`);
  });

  // --- 6. the notes published; a second review marks them and refuses to post again ---
  await stage(async () => {
    step = "second review";
    {
      const ses = standin.session();
      const r = await fetch(standin.url(`/api/v4/projects/42/merge_requests/1/draft_notes/bulk_publish`), { method: "POST", headers: { cookie: ses.cookie, "x-csrf-token": ses.csrf } });
      check(r.status === 204 && standin.discussions.get(1).length === 2, `bulk_publish: ${r.status}`);
    }
    // A hostile merge request: someone else's note carrying app.py:4's marker must not count
    // (only the user's own notes and drafts do).
    const spoofed = byLine(s, 4);
    check(spoofed, "no app.py:4 finding to spoof a note for");
    standin.discussions.get(1).push({ id: "spoof", individual_note: true, notes: [{ id: 999, type: "DiscussionNote", system: false,
      body: `Thanks! <!-- review-agent-gateway fingerprint=${spoofed.fingerprint} -->`, author: { id: 2, username: "someone-else" } }] });
    standin.reset();
    await page.reload();
    await waitPanel(page);
    await waitState(page, ["done", "idle"], 20000);
    // The second review: the same head, so the same run (its requestId), shown again.
    await click(page, "review");
    await sleep(200);
    s = await waitState(page, ["done"], 20000);
    s = await waitIn(page, "the posted findings marked", (lines) => {
      const st = window.__t.state();
      return lines.every((l) => st.findings.find((f) => f.path === "app.py" && f.line === l)?.publish?.published) && st;
    }, [2, contextLine.new], 10000).catch(() => s);
    for (const f of [byLine(s, 2), byLine(s, contextLine.new)]) {
      check(f?.publish?.published && f.publish.disabled && /comment exists/i.test(f.publish.text),
        `after the second review: ${JSON.stringify(f)}; panel error ${JSON.stringify(s.error)}; REST calls ${JSON.stringify(standin.requests)}`);
    }
    const notSpoofed = byLine(s, 4);
    check(notSpoofed && !notSpoofed.publish?.published && !notSpoofed.publish?.disabled,
      `another user's note with app.py:4's marker disabled its button: ${JSON.stringify(notSpoofed)}`);
    await page.evaluate((fp) => document.querySelector(`.rag-finding[data-fingerprint="${fp}"] button[data-rag-action="publish"]`)?.click(), added.fingerprint);
    await sleep(500);
    check(standin.posts.length === 0, `a POST after the second review: ${JSON.stringify(standin.posts)}`);
    say("second review: both posted findings marked \"Comment exists\"; clicking posts nothing; another user's note with a marker does not count");
  });

  // --- 7. dismiss ---
  await stage(async () => {
    step = "dismiss";
    dismissed = byLine(s, 3);
    await click(page, "dismiss", `.rag-finding[data-fingerprint="${dismissed.fingerprint}"]`);
    s = await waitIn(page, "the dismissed finding hidden", (fp) => {
      const st = window.__t.state();
      const f = st.findings.find((x) => x.fingerprint === fp);
      return (!f || !f.visible) && st;
    }, dismissed.fingerprint, 10000);
    check(/1/.test(s.dismissedCount ?? ""), `dismissed count: ${s.dismissedCount}`);
    const stored7 = await gatewayGet(`/v1/dismissals?gitlabOrigin=${encodeURIComponent(standin.origin)}&projectPath=group%2Fproject`);
    check(stored7.status === 200 && stored7.body?.data?.dismissals?.some((d) => d.fingerprint === dismissed.fingerprint), `GET /v1/dismissals: ${JSON.stringify(stored7)}`);
    say(`dismiss: app.py:3 hidden, "${s.dismissedCount}" shown, the gateway stores it`);
  });

  // --- 8. a new head commit: review new commits only ---
  await stage(async () => {
    step = "incremental";
    standin.setHead(head2);
    const modelCallsBefore = model.requests.length;
    await page.reload();
    await waitPanel(page);
    await waitIn(page, "the review-new-commits button", () => window.__t.state().buttons.includes("review-new-commits"), null, 15000);
    await click(page, "review-new-commits");
    s = await waitState(page, ["done", "failed", "error"], 40000);
    check(s.state === "done", `the incremental review ended ${s.state}: ${s.error}`);
    const skipped = Object.fromEntries(s.skipped.map((x) => [x.path, x.reason]));
    check(skipped["app.py"] === "unchanged_since" && skipped["lib.py"] === "unchanged_since", `skipped: ${JSON.stringify(s.skipped)}`);
    const visible = s.findings.filter((f) => f.visible && f.status !== "dismissed");
    const lines = visible.map((f) => `${f.path}:${f.line}`).sort();
    check(JSON.stringify(lines) === JSON.stringify(expected8), `findings after the incremental review: ${JSON.stringify(lines)}, want ${JSON.stringify(expected8)}`);
    check(visible.filter((f) => f.path === "app.py").every((f) => f.carriedOver) && !visible.find((f) => f.path === "extra.py").carriedOver,
      `carried over: ${JSON.stringify(visible.map((f) => [f.path, f.line, f.carriedOver]))}`);
    check(!s.findings.some((f) => f.fingerprint === dismissed.fingerprint && f.visible), "the dismissed finding is shown again");
    const newCalls = model.requests.slice(modelCallsBefore);
    check(newCalls.every((r) => r.files.every((f) => f === "extra.py")) && newCalls.some((r) => r.files.includes("extra.py")),
      `the model was asked about other files than extra.py: ${JSON.stringify(newCalls.map((r) => ({ kind: r.kind, files: r.files })))}`);
    await shot(page, "incremental");
    say(`incremental: app.py and lib.py skipped (unchanged_since), extra.py:2 new, ${visible.length - 1} carried over, the dismissed finding stays hidden`);
  });

  // --- 9. Rapid Diffs' parallel view, the Vue and classic markups ---
  await stage(async () => {
    for (const [markup, view] of [["rapid", "parallel"], ["vue", "inline"], ["classic", "inline"]]) {
      step = `${markup} markup`;
      await page.goto(standin.url(`${MR}/1/diffs?markup=${markup}&view=${view}`));
      await waitPanel(page);
      s = await waitState(page, ["done", "idle"], 15000);
      if (s.state === "idle") { await click(page, "review"); s = await waitState(page, ["done"], 40000); }
      check(s.markup === markup, `data-markup ${s.markup} on the ${markup} page`);
      checkFindings({ findings: s.findings.filter((f) => f.visible) }, expected8, `${markup} markup`);
      await shot(page, view === "inline" ? markup : `${markup}-${view}`);
      say(`${markup} markup${view === "inline" ? "" : ` (${view} view)`}: ${s.findings.filter((f) => f.visible).length} findings under their lines`);
    }
  });

  // --- 9b. a file rendered after the findings came: they move beside its lines ---
  await stage(async () => {
    step = "late file";
    await page.goto(standin.url(`${MR}/1/diffs?markup=rapid&late=app.py`));
    await waitPanel(page);
    s = await waitState(page, ["done"], 15000);
    const early = await page.evaluate(() => !document.querySelector("diff-file[data-file-data*='app.py']") &&
      [...document.querySelectorAll('[data-rag="unplaced"] .rag-finding')].filter((f) => f.dataset.path === "app.py").length);
    check(early > 0, `before app.py is on the page its findings should wait in the panel (${early})`);
    await page.evaluate(() => window.__addLateFiles());
    s = await waitIn(page, "app.py's findings beside their lines", () => {
      const st = window.__t.state();
      return !document.querySelector('[data-rag="unplaced"] .rag-finding[data-path="app.py"]') && document.querySelector("diff-file[data-file-data*='app.py']") && st;
    }, null, 10000);
    checkFindings({ findings: s.findings.filter((f) => f.visible) }, expected8, "late file");
    say(`late file: ${early} app.py findings waited in the panel, then moved beside their lines when GitLab added the file`);
  });

  // --- 10. GitLab under a path prefix ---
  await stage(async () => {
    step = "path prefix";
    await page.goto(standin.url("/blank")); // no request of the previous page lands after the reset
    await sleep(200);
    standin.reset();
    await page.goto(standin.url(`/gitlab${MR}/1/diffs?markup=rapid`));
    await waitPanel(page);
    s = await waitState(page, ["done", "idle"], 15000);
    if (s.state === "idle") { await click(page, "review"); s = await waitState(page, ["done", "failed", "error"], 40000); }
    check(s.state === "done", `under /gitlab the review ended ${s.state}: ${s.error}`);
    const outside = standin.requests.filter((r) => !r.split(" ")[1].startsWith("/gitlab/api/v4/"));
    check(standin.requests.length > 0 && outside.length === 0, `REST calls from the /gitlab page: ${JSON.stringify(standin.requests)}`);
    checkFindings({ findings: s.findings.filter((f) => f.visible) }, s.findings.filter((f) => f.visible).map((f) => `${f.path}:${f.line}`), "path prefix");
    check(s.findings.filter((f) => f.visible).length >= 1, "no findings under /gitlab");
    await shot(page, "path-prefix");
    say(`path prefix: ${standin.requests.length} REST calls, all under /gitlab/api/v4; findings under their lines`);
  });

  // --- 11. dark mode ---
  await stage(async () => {
    step = "dark mode";
    await page.goto(standin.url(`${MR}/1/diffs?markup=rapid&theme=dark`));
    await waitPanel(page);
    await waitState(page, ["done"], 15000);
    const colours = await page.evaluate(() => {
      const lum = (c) => { const [r, g, b] = (c.match(/[\d.]+/g) ?? [0, 0, 0]).map(Number); return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255; };
      const back = (el) => { for (let e = el; e; e = e.parentElement) { const c = getComputedStyle(e).backgroundColor; const a = c.match(/rgba\(.*,\s*([\d.]+)\)/); if (c !== "transparent" && !(a && Number(a[1]) === 0)) return c; } return "rgb(255, 255, 255)"; };
      const panel = window.__t.panel();
      const text = panel.querySelector(".rag-finding .rag-markdown") ?? panel;
      return { dark: document.documentElement.classList.contains("gl-dark"), background: lum(back(panel)), text: lum(getComputedStyle(text).color),
        findingBackground: lum(back(document.querySelector(".rag-finding") ?? panel)) };
    });
    check(colours.dark && colours.background < 0.35 && colours.findingBackground < 0.35 && colours.text > 0.6, `dark mode colours (luminance 0–1): ${JSON.stringify(colours)}`);
    await shot(page, "dark");
    say(`dark mode: panel background luminance ${colours.background.toFixed(2)}, text ${colours.text.toFixed(2)}`);
  });

  // --- 12. the interface language chosen in ⚙ ---
  await stage(async () => {
    step = "language";
    await page.goto(standin.url(`${MR}/1/diffs?markup=rapid`));
    await waitPanel(page);
    await waitState(page, ["done"], 15000);
    const panelTexts = () => {
      const panel = window.__t.panel();
      return { state: panel.dataset.state, lang: panel.lang, languages: navigator.languages,
        review: panel.querySelector('button[data-rag-action="review"]').textContent,
        status: panel.querySelector(".rag-status").textContent,
        settingsTitle: panel.querySelector('button[data-rag-action="settings"]').getAttribute("aria-label"),
        finding: document.querySelector('.rag-finding button[data-rag-action="dismiss"]')?.textContent ?? null };
    };
    /** An in-page function of the panel's texts: `cond(texts)`. */
    const onTexts = (cond) => new Function(`return (${cond})((${panelTexts})());`);
    const english = await page.evaluate(panelTexts);
    check(english.review === "Review" && english.lang === "en", `"Automatic" with the browser's ${JSON.stringify(english.languages)}: ${JSON.stringify(english)}`);
    /** Chooses `value` in the settings dialog's "Interface language" and saves; the menu's options. */
    const chooseLanguage = async (value) => {
      await click(page, "settings");
      const options = await waitIn(page, "the settings dialog's interface language menu", (v) => {
        const select = document.querySelector('[data-rag="settings"] select[name="uiLanguage"]');
        if (!window.__t.visible(select)) return null;
        const options = [...select.options].map((o) => `${o.value}=${o.textContent}`);
        select.value = v;
        select.dispatchEvent(new Event("change", { bubbles: true }));
        return options;
      }, value, 5000);
      await click(page, "save-settings", '[data-rag="settings"]');
      return options;
    };
    const options = await chooseLanguage("zh-CN");
    check(JSON.stringify(options) === JSON.stringify(["=Automatic", "en=English", "zh-CN=简体中文"]), `the interface language menu: ${JSON.stringify(options)}`);
    const chinese = await waitIn(page, "the panel in Chinese", onTexts((p) => p.state === "done" && p.review === "审查" && p.status.startsWith("已审查") && p), null, 20000);
    check(chinese.lang === "zh-CN" && chinese.settingsTitle === "网关设置" && /[\u4e00-\u9fff]/.test(chinese.finding ?? ""), `the panel in Chinese: ${JSON.stringify(chinese)}`);
    check(standin.gm.get("settings")?.uiLanguage === "zh-CN" && standin.gm.get("settings")?.token === token, `GM settings: ${JSON.stringify({ ...standin.gm.get("settings"), token: "…" })}`);
    await shot(page, "zh-CN");
    await page.reload();
    await waitPanel(page);
    const reloaded = await waitIn(page, "the panel in Chinese after a reload", onTexts((p) => p.state === "done" && p), null, 15000);
    check(reloaded.review === "审查" && reloaded.status.startsWith("已审查"), `after a reload: ${JSON.stringify(reloaded)}`);
    await chooseLanguage("");
    const automatic = await waitIn(page, "the panel in English again", onTexts((p) => p.state === "done" && p.review === "Review" && p.status.startsWith("reviewed") && p), null, 20000);
    check(!("uiLanguage" in (standin.gm.get("settings") ?? {})), `"Automatic" stored: ${JSON.stringify({ ...standin.gm.get("settings"), token: "…" })}`);
    say(`language: 简体中文 chosen in ⚙: Review button "${chinese.review}", status "${chinese.status}", a finding's "${chinese.finding}"; kept after a reload; Automatic is ${automatic.lang} again`);
  });

  step = "end";
  if (failures.length) fail(`${failures.length} steps failed (--keep-going)`);
  const leaked = await page.evaluate((t) => Object.keys(localStorage).filter((k) => (localStorage.getItem(k) ?? "").includes(t)), token);
  check(leaked.length === 0 && standin.gm.get("settings")?.token === token, `token in localStorage: ${leaked}`);
  say(`companion ok in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${artifacts}`);
}

// Firefox needs a WebSocket client: Node 20 has one behind --experimental-websocket.
const wantsFirefox = process.argv.includes("firefox");
if (wantsFirefox && typeof WebSocket === "undefined" && !process.env.COMPANION_REEXEC) {
  const r = spawnSync(process.execPath, ["--experimental-websocket", "--no-warnings", ...process.argv.slice(1)],
    { stdio: "inherit", env: { ...process.env, COMPANION_REEXEC: "1" } });
  process.exit(r.status ?? 1);
}
try {
  await main();
} catch (e) {
  console.error(`${browserName} companion FAILED at ${e.message}\n${e.stack ?? ""}`);
  process.exitCode = 1;
} finally {
  for (const c of cleanups.reverse()) { try { await c(); } catch { /* best effort */ } }
}
// Only the cleanups above keep the loop alive; nothing else should. Exit now in case a socket lingers.
process.exit(process.exitCode ?? 0);
