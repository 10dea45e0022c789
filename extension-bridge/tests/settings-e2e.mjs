#!/usr/bin/env node
// The settings-page test of issue 18 in headless Chromium (playwright-core, Debian's chromium),
// driven by host/tests/browser_settings.rs:
//
//   node tests/settings-e2e.mjs --binary PATH --home DIR --artifacts DIR [--only a,b]
//
// Real things only: the daemon (`serve`) with a real config, logins through the real
// `review-agent-gateway settings` command, mapping proposals made through the real
// `POST /v1/repository-mappings`, reviews of a real git repository, a fake OpenAI-compatible
// model server where a model is needed (tests/companion/fake-model.mjs), and axe-core (npm) for
// accessibility. Each step prints one line the Rust test asserts; screenshots go to
// <artifacts>/chromium-<page>.png.
//
// Steps (this file, then the modules of tests/settings/ in order):
//  login     a code opens the page and leaves the address bar; the same code again, and an
//            expired one, are refused; the /v1 token does not open the page, its cookie does not
//            open /v1; the security headers (CSP, no framing) on every answer.
//  status    the Status page with the daemon's real facts.
//  mappings  a proposal made through /v1 confirmed (checked to be a repository, written to
//            config.toml), another rejected, one with no repository refused with its error.
//  <modules> tests/settings/*.mjs steps (providers, rules, agents) with their own lines.
//  runs      a review watched live on the Runs page and on its own page, to completion; a
//            review cancelled from its page, then resumed to completion.
//  token     shown as `token show` prints it; rotated: the old token refused, the new one taken.
//  language  简体中文 from the menu (kept in a cookie), then English again.
//  csrf      a cross-site page (another origin, same site and cross site) submitting a
//            settings form: refused (403), nothing changed.
//  a11y      axe-core on every page: no serious or critical violation.
//  logout    the session ends; the pages ask for a login again.
// Exits 1 with a message on the first failure.
import { createServer } from "node:http";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

import { startFakeModel } from "./companion/fake-model.mjs";
import { freePort } from "./fixture.mjs";
import { fixtureRepo, flash, login, loginCode, press, run, sleep, startDaemon, text, waitIn } from "./settings/harness.mjs";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
/** The step modules of tests/settings/, in order; each exports `prepare(shared)` (optional:
 * config text and environment for the daemon) and `run(ctx)`. */
const MODULES = ["providers", "rules", "agents"];
/** Pause after each finding in the daemon, so a review lasts long enough to watch and cancel. */
const FINDING_DELAY_MS = "700";

const cleanups = [];
let step = "start";
const say = (line) => console.log(`chromium ${line}`);
function fail(message) { throw new Error(`${step}: ${message}`); }
function check(condition, message) { if (!condition) fail(message); }

function args() {
  const out = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) out[argv[i].replace(/^--/, "")] = argv[i + 1];
  for (const k of ["binary", "home", "artifacts"]) {
    if (!out[k]) throw new Error(`missing --${k}; usage: settings-e2e.mjs --binary PATH --home DIR --artifacts DIR`);
  }
  return out;
}

async function main() {
  const { binary, home, artifacts, only } = args();
  const wanted = (name) => !only || only.split(",").includes(name);
  mkdirSync(artifacts, { recursive: true });
  const started = Date.now();
  const { repo, head, base } = fixtureRepo(join(home, "repo"));
  const other = fixtureRepo(join(home, "other-repo"));
  const model = await startFakeModel({
    finding: { path: "app.py", line: 2, title: "eval of input", content: "Use `ast.literal_eval`." },
    chatReadPath: "app.py", answer: "ok", answerDeltas: 1, deltaMs: 1 });
  cleanups.push(() => model.close());
  const modules = [];
  for (const name of MODULES) {
    const file = join(root, "tests/settings", `${name}.mjs`);
    if (existsSync(file) && wanted(name)) modules.push({ name, ...(await import(file)) });
  }
  const shared = { binary, home, artifacts, repo, head, base, model, say, check, sleep };
  let config = `${model.toml("fake")}\n`;
  let extraEnv = { REVIEW_AGENT_GATEWAY_FAULT_FINDING_DELAY_MS: FINDING_DELAY_MS };
  for (const m of modules) {
    const prepared = m.prepare ? await m.prepare(shared) : null;
    if (prepared?.config) config += `\n${prepared.config}\n`;
    if (prepared?.env) extraEnv = { ...extraEnv, ...prepared.env };
    if (prepared?.cleanup) cleanups.push(prepared.cleanup);
  }
  const gw = await startDaemon({ binary, home, config, extraEnv });
  cleanups.push(() => gw.stop());

  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--lang=en-US"],
  });
  cleanups.push(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 }, locale: "en-US" });
  const page = await context.newPage();
  // The page asks before a removal or a rotation: say yes (the text is checked where it matters).
  const dialogs = [];
  page.on("dialog", (dialog) => { dialogs.push(dialog.message()); dialog.accept(); });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  const shot = (name) => page.screenshot({ path: join(artifacts, `chromium-${name}.png`), fullPage: true });
  const go = async (path) => { await page.goto(gw.base + path); };

  // --- login ---
  step = "login";
  {
    const { url, code } = await loginCode(binary, gw.env);
    await page.goto(`${url}#code=${code}`);
    await page.waitForURL(/\/settings\/status$/, { timeout: 15000 });
    const href = await page.evaluate(() => location.href);
    check(!href.includes(code) && !href.includes("#"), `the code stayed in the address bar: ${href}`);
    // A second browser (no cookie) with the same code: refused.
    const other = await browser.newContext();
    const p2 = await other.newPage();
    await p2.goto(`${url}#code=${code}`);
    await waitIn(p2, "the second use refused", () => document.body.textContent.includes("settings.code_invalid"));
    check(p2.url().endsWith("/settings/login"), `a used code led to ${p2.url()}`);
    // An expired code: refused.
    const expired = await loginCode(binary, gw.env, 1);
    await sleep(1500);
    await p2.goto("about:blank");
    await p2.goto(`${expired.url}#code=${expired.code}`);
    await waitIn(p2, "the expired code refused", () => document.body.textContent.includes("settings.code_expired"));
    await p2.screenshot({ path: join(artifacts, "chromium-login-refused.png") });
    // Typing the printed code (a headless box) works as well.
    const typed = await loginCode(binary, gw.env);
    await p2.goto(typed.url);
    await p2.fill("#code", typed.code);
    await Promise.all([p2.waitForURL(/\/settings\/status$/), p2.click("#login button[type=submit]")]);
    await other.close();
    // The /v1 token does not open the page; the page's cookie does not open /v1.
    const withToken = await fetch(`${gw.base}/settings/status`, { headers: { authorization: `Bearer ${gw.token()}` }, redirect: "manual" });
    check(withToken.status === 303 && withToken.headers.get("location") === "/settings/login",
      `the bearer token opened the page: ${withToken.status}`);
    const cookie = (await context.cookies(`${gw.base}/settings/status`)).find((c) => c.name === "rag_settings");
    check(cookie && cookie.httpOnly && cookie.sameSite === "Strict" && cookie.path === "/settings", `the cookie: ${JSON.stringify(cookie)}`);
    const v1 = await fetch(`${gw.base}/v1/capabilities`, { headers: { cookie: `rag_settings=${cookie.value}` } });
    check(v1.status === 401, `the cookie opened /v1: ${v1.status}`);
    const inPage = await page.evaluate(async () => (await fetch("/v1/capabilities")).status);
    check(inPage === 401, `the page reached /v1 without the token: ${inPage}`);
    const headers = (await fetch(`${gw.base}/settings/status`, { headers: { cookie: `rag_settings=${cookie.value}` } })).headers;
    check(headers.get("content-security-policy")?.includes("frame-ancestors 'none'") && headers.get("x-frame-options") === "DENY",
      "no framing headers");
    check(headers.get("content-security-policy")?.includes("script-src 'self'") && !headers.get("content-security-policy").includes("unsafe"),
      `the CSP: ${headers.get("content-security-policy")}`);
    // The Host check: a rebinding name is refused even with the cookie.
    const rebound = await rawGet(gw.port, "/settings/status", { host: `evil.example:${gw.port}`, cookie: `rag_settings=${cookie.value}` });
    check(rebound.status === 403 && rebound.body.includes("request.host_not_allowed"), `a foreign Host: ${rebound.status}`);
    say("login: code used once and gone from the URL; reused and expired codes refused; token and cookie kept apart");
  }

  // --- status ---
  step = "status";
  {
    await go("/settings/status");
    const t = await text(page);
    const version = run(binary, ["--version"]).split(/\s+/).pop();
    check(t.includes(version), `no version ${version} in: ${t.slice(0, 300)}`);
    check(t.includes(`127.0.0.1:${gw.port}`), "no listening address");
    const health = await page.locator('#provider-health tr[data-provider="fake"]').innerText();
    check(health.includes("ready"), `the fake provider: ${health}`);
    check(/landlock|unconfined/.test(await page.locator("#sandbox-mode").innerText()), "no sandbox mode");
    check(await page.locator("#store-status").innerText() === "ok", "store not ok");
    await shot("status");
    say("status: version, address, provider ready, sandbox and store shown");
  }

  // --- mappings ---
  step = "mappings";
  let pendingId;
  {
    const propose = async (projectPath, localPath) => {
      const r = await gw.api("POST", "/v1/repository-mappings", { gitlabOrigin: "https://gitlab.example.com", projectPath, localPath, defaultRef: "main" });
      check(r.status === 202 && r.body?.data?.id, `propose ${projectPath}: ${r.status} ${r.text}`);
      return r.body.data.id;
    };
    const good = await propose("group/project", repo);
    const bad = await propose("group/rejected", other.repo);
    const missing = await propose("group/missing", join(home, "no-such-clone"));
    pendingId = await propose("group/kept", other.repo);
    // A hostile page's proposal: shown as text, never as markup.
    const hostile = '"><img src=x onerror="window.__xss=1"><script>window.__xss=2</script>';
    const hostileId = await propose(`group/${encodeURIComponent("x")}${hostile}`, `/tmp/${hostile}`).catch(() => null);
    await go("/settings/mappings");
    if (hostileId) {
      check(await page.evaluate(() => window.__xss === undefined && !document.querySelector("main img, main script")),
        "a proposal's text became markup");
      check((await text(page)).includes("<script>window.__xss=2</script>"), "the hostile proposal is not shown as text");
    }
    for (const id of [good, bad, missing, pendingId]) check(await page.locator(`tr[data-proposal="${id}"]`).count() === 1, `proposal ${id} not listed`);
    await shot("mappings-pending");
    await page.locator(`tr[data-proposal="${good}"] button.primary`).click();
    await page.waitForLoadState("load");
    let f = await flash(page);
    check(f?.ok && f.text.includes("group/project"), `confirm: ${JSON.stringify(f)}`);
    check(await page.locator('#mappings tr[data-project="group/project"]').count() === 1, "the confirmed mapping is not listed");
    const toml = readFileSync(join(home, "config/config.toml"), "utf8");
    check(toml.includes(`local_path = "${repo}"`) && toml.includes('project_path = "group/project"'), `config.toml:\n${toml}`);
    check(run(binary, ["mappings", "list"], { env: gw.env }).includes("group/project"), "mappings list does not show it");
    await page.locator(`tr[data-proposal="${bad}"] button:not(.primary)`).click();
    await page.waitForLoadState("load");
    f = await flash(page);
    check(f?.ok && await page.locator(`tr[data-proposal="${bad}"]`).count() === 0, `reject: ${JSON.stringify(f)}`);
    check(!readFileSync(join(home, "config/config.toml"), "utf8").includes("group/rejected"), "a rejected proposal was written");
    await page.locator(`tr[data-proposal="${missing}"] button.primary`).click();
    await page.waitForLoadState("load");
    f = await flash(page);
    check(f && !f.ok && /config\.local_path_missing|repository\.not_found/.test(f.text), `a missing clone confirmed: ${JSON.stringify(f)}`);
    check(await page.locator(`tr[data-proposal="${missing}"]`).count() === 1, "the refused proposal disappeared");
    // The default ref: one that does not resolve is refused, one that does is written.
    const refInput = page.locator('#mappings tr[data-project="group/project"] input[name=ref]');
    await refInput.fill("no-such-branch");
    await press(page, "Save");
    f = await flash(page);
    check(f && !f.ok && f.text.includes("repository.revision_missing"), `a bad ref: ${JSON.stringify(f)}`);
    await page.locator('#mappings tr[data-project="group/project"] input[name=ref]').fill(head);
    await press(page, "Save");
    f = await flash(page);
    check(f?.ok, `a good ref: ${JSON.stringify(f)}`);
    check(readFileSync(join(home, "config/config.toml"), "utf8").includes(`default_ref = "${head}"`), "the ref was not written");
    await page.locator('#mappings tr[data-project="group/project"] input[name=ref]').fill("main");
    await press(page, "Save");
    // Allowed origins: one added (normalized), a bad one refused, then removed again.
    await page.fill("#new-origin", "not an origin");
    await press(page, "Allow");
    f = await flash(page);
    check(f && !f.ok && f.text.includes("config.invalid") && f.text.includes("is not an origin"), `a bad origin: ${JSON.stringify(f)}`);
    await page.fill("#new-origin", "https://GitLab.Other.example/");
    await press(page, "Allow");
    f = await flash(page);
    check(f?.ok && await page.locator('#origins li[data-origin="https://gitlab.other.example"] button').count() === 1, `add an origin: ${JSON.stringify(f)}`);
    const allowed = await fetch(`${gw.base}/v1/health`, { headers: { origin: "https://gitlab.other.example" } });
    check(allowed.status === 200 && allowed.headers.get("access-control-allow-origin") === "https://gitlab.other.example",
      `the added origin is not allowed by /v1: ${allowed.status}`);
    check(await page.locator('#origins li[data-origin="https://gitlab.example.com"] button').count() === 0, "a mapping's origin is removable");
    await shot("mappings");
    await page.locator('#origins li[data-origin="https://gitlab.other.example"] button').click();
    await page.waitForLoadState("load");
    check(await page.locator('#origins li[data-origin="https://gitlab.other.example"]').count() === 0, "the origin was not removed");
    say("mappings: a proposal confirmed into config.toml, one rejected, a missing clone refused, the default ref checked, an origin allowed and removed");
  }

  // --- the modules' steps ---
  for (const m of modules) {
    step = m.name;
    await m.run({ ...shared, gw, page, context, browser, shot, go, fail, check, errors });
  }

  // --- runs ---
  step = "runs";
  // POST /v1/reviews answers the run's event stream: the run id from its first event, the rest
  // read in the background (the page is what this step watches).
  const review = async (requestId, extra = {}) => {
    const r = await fetch(`${gw.base}/v1/reviews`, { method: "POST",
      headers: { authorization: `Bearer ${gw.token()}`, "content-type": "application/json" },
      body: JSON.stringify({ requestId, mode: "merge-request",
        target: { gitlabOrigin: "https://gitlab.example.com", projectPath: "group/project", mergeRequestIid: 7,
          diffRefs: { baseSha: base, startSha: base, headSha: head } }, ...extra }) });
    check(r.status === 200, `review ${requestId}: ${r.status} ${r.status === 200 ? "" : await r.text()}`);
    const reader = r.body.getReader();
    let buffered = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) fail(`review ${requestId}: the stream ended before run.created`);
      buffered += new TextDecoder().decode(value);
      const m = /"runId":"(run_[0-9A-Z]+)"/.exec(buffered);
      if (m) {
        (async () => { for (;;) { const { done: end } = await reader.read().catch(() => ({ done: true })); if (end) return; } })();
        return m[1];
      }
    }
  };
  {
    await go("/settings/runs");
    await page.evaluate(() => { window.__sameDocument = true; });
    await waitIn(page, "the live list connected", () => document.getElementById("live-state")?.textContent.length > 0);
    const runId = await review("settings-live-1");
    await waitIn(page, "the run listed as running", (id) => document.querySelector(`tr[data-run="${id}"]`)?.dataset.state === "running", runId);
    await shot("runs-live");
    await waitIn(page, "the run listed as completed", (id) => document.querySelector(`tr[data-run="${id}"]`)?.dataset.state === "completed", runId, 30000);
    check(await page.evaluate(() => window.__sameDocument === true), "the Runs page reloaded instead of updating live");
    const findings = await page.locator(`tr[data-run="${runId}"] td`).nth(5).innerText();
    check(findings === "3", `findings in the list: ${findings}`);
    // A run's own page, live.
    const id2 = await review("settings-live-2", { policy: { minConfidence: "low" } });
    await go(`/settings/runs/${id2}`);
    await waitIn(page, "the timeline growing", () => document.querySelectorAll("#timeline li").length >= 3);
    await shot("run-live");
    await waitIn(page, "the run page completed", () => document.getElementById("run-state")?.textContent === "completed", null, 30000);
    const t = await text(page);
    check(t.includes("app.py") && t.includes("run.completed") && await page.locator("table.findings tbody tr").count() === 3,
      `the finished run page: ${t.slice(0, 400)}`);
    await shot("run");
    // Cancel from the page, then resume.
    const id3 = await review("settings-cancel", { policy: { minConfidence: "medium" } });
    await go(`/settings/runs/${id3}`);
    await press(page, "Cancel run");
    await waitIn(page, "the run cancelled", () => document.getElementById("run-state")?.textContent === "cancelled", null, 20000);
    await press(page, "Resume run");
    await waitIn(page, "the resumed run completed", () => document.getElementById("run-state")?.textContent === "completed", null, 30000);
    say("runs: a review watched live to completion in the list and on its page; cancelled and resumed from the page");
  }

  // --- token ---
  step = "token";
  {
    await go("/settings/token");
    const before = gw.token();
    await page.locator("summary").click();
    check(await page.locator("#token-value").inputValue() === before, "the page shows another token");
    await press(page, "Rotate the token");
    check(dialogs.some((d) => d.startsWith("Rotate the token?")), `no confirmation asked: ${JSON.stringify(dialogs)}`);
    const f = await flash(page);
    const after = gw.token();
    check(f?.ok && after !== before, `rotate: ${JSON.stringify(f)}`);
    check(await page.locator("#token-value").inputValue() === after, "the page shows the old token");
    const old = await fetch(`${gw.base}/v1/capabilities`, { headers: { authorization: `Bearer ${before}` } });
    const fresh = await fetch(`${gw.base}/v1/capabilities`, { headers: { authorization: `Bearer ${after}` } });
    check(old.status === 401 && fresh.status === 200, `old ${old.status}, new ${fresh.status}`);
    await shot("token");
    say("token: shown, rotated; the old one refused, the new one taken");
  }

  // --- language ---
  step = "language";
  {
    await go("/settings/status");
    await Promise.all([page.waitForLoadState("load"), page.selectOption("#lang", "zh-CN")]);
    await waitIn(page, "the page in Chinese", () => document.documentElement.lang === "zh-CN" && document.querySelector("nav a")?.textContent === "状态");
    await shot("status-zh-CN");
    await go("/settings/mappings");
    check((await text(page)).includes("已确认的映射"), "the Chinese choice was not kept");
    await Promise.all([page.waitForLoadState("load"), page.selectOption("#lang", "en")]);
    await waitIn(page, "the page in English again", () => document.documentElement.lang === "en");
    say("language: 简体中文 from the menu, kept across pages, then English");
  }

  // --- csrf ---
  step = "csrf";
  {
    const attackerPort = await freePort();
    const target = `${gw.base}/settings/mappings/reject`;
    const attacker = createServer((req, res) => {
      res.writeHead(200, { "content-type": "text/html" }).end(
        `<!doctype html><form id=f method=post action="${target}"><input name=id value="${pendingId}"><input name=csrf value="guess"></form>` +
        "<script>document.getElementById('f').submit()</script>");
    });
    await new Promise((r) => attacker.listen(attackerPort, "127.0.0.1", r));
    cleanups.push(() => new Promise((r) => attacker.close(r)));
    for (const host of ["127.0.0.1", "localhost"]) {
      const p = await context.newPage();
      await p.goto(`http://${host}:${attackerPort}/`);
      await p.waitForURL(target, { timeout: 10000 });
      const body = await p.content();
      check(body.includes("origin.not_allowed"), `the cross-site form from ${host} was not refused: ${body.slice(0, 300)}`);
      await p.close();
    }
    // A same-origin request without this session's anti-CSRF token is refused too.
    const forged = await page.evaluate(async (id) => (await fetch("/settings/mappings/reject", {
      method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: `id=${id}&csrf=nope` })).status, pendingId);
    check(forged === 403, `a form without the token: ${forged}`);
    await go("/settings/mappings");
    check(await page.locator(`tr[data-proposal="${pendingId}"]`).count() === 1, "the proposal was changed by a forged request");
    say("csrf: cross-site and forged forms refused (403), nothing changed");
  }

  // --- a11y ---
  step = "a11y";
  {
    const axe = readFileSync(join(root, "node_modules/axe-core/axe.min.js"), "utf8");
    const pages = ["/settings/status", "/settings/mappings", "/settings/runs", "/settings/token",
      ...(await page.evaluate(() => [...document.querySelectorAll("nav a")].map((a) => new URL(a.href).pathname)))];
    const firstRun = await page.evaluate(async () => {
      const r = await fetch("/settings/runs");
      const m = /\/settings\/runs\/(run_[0-9A-Z]+)/.exec(await r.text());
      return m && m[0];
    });
    if (firstRun) pages.push(firstRun);
    const report = [];
    for (const path of [...new Set(pages)]) {
      await go(path);
      await page.evaluate(axe);
      const { bad, passed } = await page.evaluate(async () => {
        // eslint-disable-next-line no-undef
        const r = await axe.run(document);
        return { passed: r.passes.length, bad: r.violations.filter((v) => v.impact === "serious" || v.impact === "critical")
          .map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", ")}`) };
      });
      // A scan that checked nothing would pass too: axe must have run its rules.
      check(passed >= 10, `axe-core checked only ${passed} rules on ${path}`);
      if (bad.length) report.push(`${path}: ${bad.join("; ")}`);
    }
    // The login page, logged out.
    const anon = await browser.newContext();
    const p = await anon.newPage();
    await p.goto(`${gw.base}/settings/login`);
    await p.evaluate(axe);
    const loginResult = await p.evaluate(async () => (await axe.run(document)).violations
      .filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => v.id));
    if (loginResult.length) report.push(`/settings/login: ${loginResult.join(", ")}`);
    await anon.close();
    check(report.length === 0, `accessibility:\n${report.join("\n")}`);
    say(`a11y: axe-core found no serious or critical violation on ${pages.length + 1} pages`);
  }

  // --- logout ---
  step = "logout";
  {
    await go("/settings/status");
    await press(page, "Log out");
    check(page.url().endsWith("/settings/login"), `after logout: ${page.url()}`);
    await go("/settings/runs");
    check(page.url().endsWith("/settings/login"), `a page opened after logout: ${page.url()}`);
    say("logout: the session ended");
  }

  check(errors.length === 0, `errors in the page: ${errors.join("; ")}`);
  say(`settings ok in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/** A GET with exactly these headers (node's fetch will not send another Host). */
function rawGet(port, path, headers) {
  return new Promise((resolve, reject) => {
    import("node:http").then(({ request }) => {
      const req = request({ host: "127.0.0.1", port, path, headers, setHost: false }, (res) => {
        let body = "";
        res.on("data", (c) => { body += c; });
        res.on("end", () => resolve({ status: res.statusCode, body }));
      });
      req.on("error", reject);
      req.end();
    });
  });
}

try {
  await main();
} catch (error) {
  console.error(error.stack || String(error));
  process.exitCode = 1;
} finally {
  for (const c of cleanups.reverse()) await Promise.resolve().then(c).catch(() => {});
}
