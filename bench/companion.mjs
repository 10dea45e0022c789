#!/usr/bin/env node
// The companion userscript's benchmark (issue 17's userscript on a large merge request), run by
// bench/companion.sh:
//
//   node bench/companion.mjs --binary PATH --repo DIR --userscript PATH [--runs N] [--markup rapid]
//        [--profile FILE]   (the first review's CPU profile of the page, a .cpuprofile for DevTools)
//        [--trace FILE]     (the first review's trace, for DevTools' Performance panel)
//
// `--repo`: a repository with tags `base` and `head` (bench/make_repo.py); `--userscript`: the
// built userscript (`node extension-bridge/build.mjs --out DIR` writes DIR/review-locally.user.js).
//
// Real things only, the stand-ins of the companion test imported (not copied) from
// extension-bridge/tests/companion/: the stand-in GitLab (gitlab-standin.mjs) serving the merge
// request page of `git diff base head` in Rapid Diffs markup and GitLab's REST endpoints, the GM
// stand-in (gm.mjs), headless Chromium through playwright-core (bidi.mjs), and the release
// gateway (`serve`, no model provider: the built-in rules) over the WebSocket transport.
//
// Measured, `--runs` times each (median, min–max):
//  1. the engine alone: `review --format json --fail-on never` of base..head (what a user runs
//     without the page), and `git diff --stat` of it for scale;
//  2. "Review" clicked → the panel's `data-state=done`, every finding shown (in-page
//     performance.now from the click, and the wall clock around it). Each run starts a daemon
//     in a fresh home, so every review is a real one (a second review of the same commits would
//     be replayed from the gateway's review cache);
//  3. the page reloaded → the run restored (state done, every finding shown again), from the
//     navigation's start;
//  4. the page's own cost while (2) runs: main-thread task time (Chrome DevTools Protocol
//     `Performance.getMetrics` TaskDuration / ScriptDuration / Layout+RecalcStyle), long tasks
//     (PerformanceObserver `longtask`: count, total, longest), and the DOM nodes added.
// Every run checks the page: as many `.rag-finding`s as the engine reported, none left in the
// panel's "unplaced" list (every line is on the page), none shown twice.
// Prints a Markdown table; exits 1 with a message when a check fails.
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

import { launchChromium } from "../extension-bridge/tests/companion/bidi.mjs";
import { startStandin } from "../extension-bridge/tests/companion/gitlab-standin.mjs";
import { asManagerRunsIt, gmStandinSource } from "../extension-bridge/tests/companion/gm.mjs";
import { freePort } from "../extension-bridge/tests/fixture.mjs";

const MR_PATH = "/group/project/-/merge_requests/1";

function args() {
  const out = { runs: "5", markup: "rapid" };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) out[argv[i].replace(/^--/, "")] = argv[i + 1];
  for (const k of ["binary", "repo", "userscript"]) {
    if (!out[k]) throw new Error(`missing --${k}; usage: companion.mjs --binary PATH --repo DIR --userscript PATH [--runs N]`);
  }
  return { ...out, runs: Math.max(1, Number(out.runs) || 5) };
}

function run(cmd, argv, opts = {}) {
  const r = spawnSync(cmd, argv, { encoding: "utf8", maxBuffer: 256 << 20, ...opts });
  if (r.status !== 0) throw new Error(`${cmd} ${argv.join(" ")} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const fmt = (v, digits = 0) => v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
/** "median (min–max)" of `xs`. */
const stat = (xs, digits = 0) => `${fmt(median(xs), digits)} (${fmt(Math.min(...xs), digits)}–${fmt(Math.max(...xs), digits)})`;

/** Times `cmd argv` `runs` times after one warm-up: milliseconds each. */
function timeCommand(cmd, argv, runs, opts) {
  run(cmd, argv, opts);
  const out = [];
  for (let i = 0; i < runs; i++) {
    const t = process.hrtime.bigint();
    run(cmd, argv, opts);
    out.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return out;
}

/** Instrumentation run in every document before the userscript: long tasks, and the moments
 * the panel's `data-state` changes (a MutationObserver from document start), as `window.__bench`. */
const INSTRUMENT = `(() => {
  const b = window.__bench = { longtasks: [], states: [] };
  try {
    new PerformanceObserver((list) => { for (const e of list.getEntries()) b.longtasks.push([e.startTime, e.duration]); })
      .observe({ type: "longtask", buffered: true });
  } catch { b.noLongtask = true; }
  new MutationObserver((records) => {
    for (const r of records) {
      if (r.target.id === "review-agent-gateway") b.states.push([r.target.dataset.state, performance.now()]);
    }
  }).observe(document, { subtree: true, attributes: true, attributeFilter: ["data-state"] });
})();`;

/** Starts `serve` in a fresh home whose config maps the stand-in's project to `repo`; resolves
 * to `{ port, token, stop() }`. */
async function startDaemon(binary, repo, origin) {
  const home = mkdtempSync(join(tmpdir(), "bench-companion-home-"));
  const port = await freePort();
  mkdirSync(join(home, "config"), { recursive: true });
  writeFileSync(join(home, "config/config.toml"),
    `port = ${port}\nallowed_origins = ["${origin}"]\n\n[[mappings]]\ngitlab_origin = "${origin}"\nproject_path = "group/project"\nlocal_path = ${JSON.stringify(repo)}\n`);
  const env = { ...process.env, HOME: home, REVIEW_AGENT_GATEWAY_HOME: home, OPENAI_API_KEY: "", ANTHROPIC_API_KEY: "" };
  delete env.XDG_CONFIG_HOME;
  delete env.REVIEW_AGENT_GATEWAY_PORT;
  const daemon = spawn(binary, ["serve"], { env, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  daemon.stderr.on("data", (d) => { if (stderr.length < 20000) stderr += d; });
  const listening = await new Promise((resolve) => {
    createInterface({ input: daemon.stdout }).once("line", resolve);
    daemon.once("exit", (code) => resolve(`exited ${code}`));
  });
  if (!String(listening).startsWith("listening on")) throw new Error(`serve: ${listening}; its stderr: ${stderr}`);
  const token = run(binary, ["token", "show"], { env }).trim();
  return {
    port, token,
    async stop() {
      if (daemon.exitCode === null) {
        daemon.kill("SIGTERM");
        await new Promise((r) => { daemon.once("exit", r); setTimeout(r, 5000); });
      }
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/** In the page: the state of the findings shown (checked after each measurement). */
function findingsShown() {
  const panel = document.getElementById("review-agent-gateway");
  const all = [...document.querySelectorAll(".rag-finding")];
  const fps = all.map((e) => e.dataset.fingerprint);
  return {
    state: panel?.dataset.state, findings: all.length, distinct: new Set(fps).size,
    unplaced: panel?.querySelectorAll('[data-rag="unplaced"] .rag-finding').length ?? -1,
    inRows: all.filter((e) => e.closest(".rag-row")).length,
    pointers: document.querySelectorAll(".rag-row .rag-ref").length,
    progress: Number(panel?.querySelector('[data-rag="progress"]')?.dataset.findings),
    nodes: document.getElementsByTagName("*").length,
  };
}

async function main() {
  const { binary, repo, userscript, runs, markup, profile, trace } = args();
  const rev = (r) => run("git", ["-C", repo, "rev-parse", r]).trim();
  const base = rev("base");
  const head = rev("head");
  const shortstat = run("git", ["-C", repo, "diff", "--shortstat", base, head]).trim();

  // --- 1. the engine alone ---
  const reviewArgs = ["review", "--repo", repo, "--base", base, "--head", head, "--format", "json", "--fail-on", "never"];
  const engineOut = run(binary, reviewArgs);
  const expected = engineOut.split("\n").filter((l) => l.includes('"type":"finding.created"')).length;
  const engine = timeCommand(binary, reviewArgs, runs);
  const gitStat = timeCommand("git", ["-C", repo, "diff", "--stat", base, head], runs);

  // --- the stand-in GitLab and the browser ---
  const standin = await startStandin({ repo, base, head });
  const source = readFileSync(userscript, "utf8");
  const page = await launchChromium({ initScripts: [gmStandinSource(), INSTRUMENT, asManagerRunsIt(source)] });
  const cdp = await page.cdp();
  await cdp.send("Performance.enable");
  const metrics = async () => Object.fromEntries((await cdp.send("Performance.getMetrics")).metrics.map((m) => [m.name, m.value]));
  const url = standin.url(`${MR_PATH}/diffs?markup=${markup}`);
  const check = (ok, what) => { if (!ok) throw new Error(what); };
  const rows = { click: [], clickWall: [], firstFinding: [], reload: [], reloadWall: [], task: [], script: [], layout: [],
    longCount: [], longSum: [], longMax: [], nodes: [], pageLoad: [] };
  let pageNodes = 0;
  let files = 0;
  let shown = null;
  try {
    for (let i = 0; i < runs; i++) {
      const daemon = await startDaemon(binary, repo, standin.origin);
      try {
        standin.gm.clear();
        standin.gm.set("settings", { token: daemon.token, port: daemon.port });
        const loadStart = Date.now();
        await page.goto(url);
        await page.evaluate(async () => { while (!document.getElementById("review-agent-gateway")) await new Promise((r) => setTimeout(r, 10)); });
        rows.pageLoad.push(Date.now() - loadStart);
        const before = await page.evaluate(() => ({ nodes: document.getElementsByTagName("*").length,
          files: document.querySelectorAll("diff-file, .diff-file").length }));
        pageNodes = before.nodes;
        files = before.files;
        const m0 = await metrics();
        if (profile && i === 0) { await cdp.send("Profiler.enable"); await cdp.send("Profiler.start"); }
        const traceEvents = [];
        if (trace && i === 0) {
          cdp.on("Tracing.dataCollected", ({ value }) => traceEvents.push(...value));
          await cdp.send("Tracing.start", { categories: "devtools.timeline,disabled-by-default-devtools.timeline,v8.execute", transferMode: "ReportEvents" });
        }
        const wall0 = Date.now();
        const timing = await page.evaluate(async (n) => {
          const panel = document.getElementById("review-agent-gateway");
          const count = () => document.querySelectorAll(".rag-finding").length;
          const t0 = performance.now();
          let first = null;
          new MutationObserver((_, o) => { if (first === null && document.querySelector(".rag-finding")) { first = performance.now(); o.disconnect(); } })
            .observe(document.body, { subtree: true, childList: true });
          panel.querySelector('button[data-rag-action="review"]').click();
          for (;;) {
            const st = panel.dataset.state;
            if (st === "done" && count() >= n) break;
            if (["failed", "error", "cancelled", "interrupted"].includes(st)) throw new Error(`the review ended ${st}: ${panel.textContent.slice(0, 500)}`);
            await new Promise((r) => setTimeout(r, 20));
          }
          const done = window.__bench.states.filter(([s, at]) => s === "done" && at >= t0).at(-1)[1];
          const long = window.__bench.longtasks.filter(([s, d]) => s + d >= t0 && s <= done);
          return { click: done - t0, first: first - t0, longCount: long.length, longSum: long.reduce((a, [, d]) => a + d, 0),
            longMax: Math.max(0, ...long.map(([, d]) => d)) };
        }, expected);
        const wall = Date.now() - wall0;
        const m1 = await metrics();
        if (profile && i === 0) writeFileSync(profile, JSON.stringify((await cdp.send("Profiler.stop")).profile));
        if (trace && i === 0) {
          const complete = new Promise((r) => cdp.once("Tracing.tracingComplete", r));
          await cdp.send("Tracing.end");
          await complete;
          writeFileSync(trace, JSON.stringify({ traceEvents }));
        }
        shown = await page.evaluate(findingsShown);
        check(shown.findings === expected && shown.distinct === expected && shown.unplaced === 0 && shown.progress === expected,
          `run ${i + 1}: the page shows ${JSON.stringify(shown)}; the engine reported ${expected} findings`);
        rows.click.push(timing.click);
        rows.clickWall.push(wall);
        rows.firstFinding.push(timing.first);
        rows.longCount.push(timing.longCount);
        rows.longSum.push(timing.longSum);
        rows.longMax.push(timing.longMax);
        rows.task.push((m1.TaskDuration - m0.TaskDuration) * 1e3);
        rows.script.push((m1.ScriptDuration - m0.ScriptDuration) * 1e3);
        rows.layout.push((m1.LayoutDuration - m0.LayoutDuration + m1.RecalcStyleDuration - m0.RecalcStyleDuration) * 1e3);
        rows.nodes.push(shown.nodes - before.nodes);

        // --- 3. reload: the run restored ---
        const r0 = Date.now();
        await page.reload();
        const restored = await page.evaluate(async (n) => {
          for (;;) {
            const panel = document.getElementById("review-agent-gateway");
            if (panel?.dataset.state === "done" && document.querySelectorAll(".rag-finding").length >= n) break;
            await new Promise((r) => setTimeout(r, 20));
          }
          // From the navigation's start (performance.timeOrigin): the page's own load included.
          return { done: window.__bench.states.filter(([s]) => s === "done").at(-1)[1],
            load: performance.getEntriesByType("navigation")[0]?.loadEventEnd ?? 0 };
        }, expected);
        rows.reloadWall.push(Date.now() - r0);
        rows.reload.push(restored.done);
        const again = await page.evaluate(findingsShown);
        check(again.findings === expected && again.distinct === expected && again.unplaced === 0,
          `run ${i + 1}, after the reload: the page shows ${JSON.stringify(again)}`);
        process.stderr.write(`run ${i + 1}/${runs}: review ${fmt(timing.click)} ms, restore ${fmt(restored.done)} ms (page load ${fmt(restored.load)} ms)\n`);
      } finally {
        await daemon.stop();
      }
    }
  } finally {
    await page.close();
    await standin.close();
  }

  const e = median(engine);
  const ratio = (xs) => `${fmt(median(xs) / e, 1)}×`;
  console.log(`merge request: ${shortstat}; ${files} files on the page (${markup} markup, ${fmt(pageNodes)} elements); ${expected} findings; ${runs} runs each, median (min–max), ms`);
  console.log("");
  console.log("| measure | ms | / engine alone |");
  console.log("|---|---|---|");
  console.log(`| engine alone: \`review --format json\` | ${stat(engine, 1)} | 1.0× |`);
  console.log(`| \`git diff --stat\` (scale) | ${stat(gitStat, 1)} | ${ratio(gitStat)} |`);
  console.log(`| page: "Review" clicked → first finding shown | ${stat(rows.firstFinding)} | ${ratio(rows.firstFinding)} |`);
  console.log(`| page: "Review" clicked → done, ${expected} findings shown (in-page) | ${stat(rows.click)} | ${ratio(rows.click)} |`);
  console.log(`| the same, wall clock | ${stat(rows.clickWall)} | ${ratio(rows.clickWall)} |`);
  console.log(`| page reloaded → run restored, all findings shown (from navigation start) | ${stat(rows.reload)} | ${ratio(rows.reload)} |`);
  console.log(`| the same, wall clock | ${stat(rows.reloadWall)} | ${ratio(rows.reloadWall)} |`);
  console.log(`| (for scale: the page's load alone, no review) | ${stat(rows.pageLoad)} | ${ratio(rows.pageLoad)} |`);
  console.log(`| page's main thread during the review: all tasks | ${stat(rows.task)} | ${ratio(rows.task)} |`);
  console.log(`| … of which script (CDP ScriptDuration) | ${stat(rows.script)} | |`);
  console.log(`| … of which layout + style | ${stat(rows.layout)} | |`);
  console.log(`| long tasks (> 50 ms) during the review: total | ${stat(rows.longSum)} | |`);
  console.log(`| … count | ${stat(rows.longCount)} | |`);
  console.log(`| … longest | ${stat(rows.longMax)} | |`);
  console.log(`| DOM elements added by the findings (count, not ms) | ${stat(rows.nodes)} | |`);
}

main().catch((e) => {
  console.error(`bench/companion.mjs: ${e.stack ?? e}`);
  process.exit(1);
});
