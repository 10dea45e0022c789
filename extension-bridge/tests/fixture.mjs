// What both browser end-to-end tests (e2e.mjs: Chromium, firefox-e2e.mjs: Firefox) build the
// same way: the fixture git repository and a free loopback port.
import { mkdirSync, writeFileSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";

/** A free TCP port on 127.0.0.1 (bound, read, released). */
export function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

/** A build log with what JSON escapes heavily (quotes, backslashes, tabs, ESC colour codes) and
 * non-ASCII text: about 0.6 MB of text whose file_read_diff answer is over 1.1 MiB of JSON (so
 * the native host sends it as chunk frames), within the tool's 1 MiB text cap. */
export function buildLog() {
  const esc = "\x1b";
  let text = "";
  for (let i = 1; i <= 8000; i++) {
    text += `${i}\t${esc}[32m"ok"${esc}[0m C:\\temp\\build café 日本語 🚀 ${esc}[1m${esc}[31mFAIL${esc}[0m\n`;
  }
  return text;
}

/**
 * The fixture repository under `home/repo`: a base commit with `app.py` = `baseApp`, the head
 * (the reviewed commit, on `main`) adding five `eval` lines at 2–6, and a branch `big` adding
 * [`buildLog`]'s `build.log`. `run(cmd, argv, opts)` runs a command and returns its trimmed
 * stdout (failing the test otherwise).
 * @returns {{repo: string, base: string, head: string, log: string}}
 */
export function fixtureRepo(home, run, baseApp) {
  const repo = join(home, "repo");
  mkdirSync(repo, { recursive: true });
  const git = (...a) => run("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", ...a], { cwd: repo });
  git("init", "-q", "-b", "main");
  writeFileSync(join(repo, "app.py"), baseApp);
  git("add", "-A"); git("commit", "-q", "-m", "base");
  const base = git("rev-parse", "HEAD");
  writeFileSync(join(repo, "app.py"), "import os\n" + [0, 1, 2, 3, 4].map((i) => `v${i} = eval(x${i})\n`).join(""));
  git("add", "-A"); git("commit", "-q", "-m", "five findings");
  const head = git("rev-parse", "HEAD");
  const log = buildLog();
  git("checkout", "-q", "-b", "big");
  writeFileSync(join(repo, "build.log"), log);
  git("add", "-A"); git("commit", "-q", "-m", "a big build log");
  git("checkout", "-q", "main");
  return { repo, base, head, log };
}
