// The Agents and MCP step of the settings-page test (issue 18 §2): a REAL delegated OpenCode
// task with a real pending permission request, answered on the page.
//
// prepare: a writable MCP root holding a git repository, the scripted agent model
//   (agent-model.mjs) as `[[providers]] agent-model`, and `[delegation]` on with the
//   `opencode` of node_modules (opencode-linux-x64), `allow_always` left off.
// run: an MCP client (raw JSON-RPC over /mcp with the bearer token) opens the repository as a
//   workspace and writes a file (an audit line); `POST /v1/agents/agent_start_task` starts
//   `TASK:edit` — the gateway starts `opencode serve` in its sandbox, the model reads the file
//   and asks to edit it. The page shows the root, the workspace, the audit line, the client
//   snippets (no token in any), and — once the page has read itself again — the pending
//   request. `Always` is disabled; forced anyway, the engine refuses it
//   (`delegation.always_not_allowed`, an error flash) and the request stays. `Once` answers it:
//   the edit is made, the run completes, the request disappears, and the run's
//   `permission.replied` says `by: settings`.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { startAgentModel } from "./agent-model.mjs";
import { flash, run as runCommand, text, waitIn } from "./harness.mjs";

const bridge = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
const OPENCODE = join(bridge, "node_modules/opencode-linux-x64/bin/opencode");
const TEXT = "hello from the fixture\nsecond line\n";

let fixture;

/** Clicks the first button named `name` and waits for the page its form leads to. */
async function press(page, name) {
  await Promise.all([
    page.waitForNavigation({ waitUntil: "load" }),
    page.getByRole("button", { name, exact: true }).first().click(),
  ]);
}

export async function prepare(shared) {
  if (!existsSync(OPENCODE)) throw new Error(`${OPENCODE} is missing: run \`npm ci\` in extension-bridge (as .ci/run does)`);
  const root = join(shared.home, "agents-root");
  const repo = join(root, "work");
  mkdirSync(repo, { recursive: true });
  const git = (...a) => runCommand("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", ...a], { cwd: repo });
  git("init", "-q", "-b", "main");
  writeFileSync(join(repo, "edit.txt"), TEXT);
  git("add", "-A");
  git("commit", "-q", "-m", "first");
  const model = await startAgentModel();
  fixture = { root, repo, model };
  const config = `${model.toml("agent-model")}
[mcp]
roots = [{ path = "${root}", writable = true }]

[delegation]
enabled = true
provider = "agent-model"
opencode_binary = "${OPENCODE}"
`;
  return { config, cleanup: () => model.close() };
}

/** A minimal MCP client of the daemon (2025-11-25 session flow), enough for two tool calls. */
async function mcpClient(gw) {
  const url = `${gw.base}/mcp`;
  let session = null;
  let id = 0;
  const post = async (message) => {
    const headers = { authorization: `Bearer ${gw.token()}`, "content-type": "application/json", accept: "application/json, text/event-stream" };
    if (session) Object.assign(headers, { "mcp-session-id": session, "mcp-protocol-version": "2025-11-25" });
    const r = await fetch(url, { method: "POST", headers, body: JSON.stringify(message) });
    session ??= r.headers.get("mcp-session-id");
    const body = await r.text();
    if (message.id === undefined) return null;
    const texts = (r.headers.get("content-type") ?? "").includes("event-stream")
      ? body.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).filter(Boolean)
      : [body];
    for (const t of texts) {
      const m = JSON.parse(t);
      if (m.id === message.id) return m;
    }
    throw new Error(`MCP ${message.method}: no answer in ${r.status} ${body.slice(0, 300)}`);
  };
  const init = await post({ jsonrpc: "2.0", id: ++id, method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "settings-e2e", version: "1" } } });
  if (!init.result) throw new Error(`MCP initialize: ${JSON.stringify(init)}`);
  await post({ jsonrpc: "2.0", method: "notifications/initialized" });
  return {
    call: async (name, args) => {
      const m = await post({ jsonrpc: "2.0", id: ++id, method: "tools/call", params: { name, arguments: args } });
      if (!m.result || m.result.isError) throw new Error(`MCP ${name}: ${JSON.stringify(m)}`);
      return m.result.structuredContent;
    },
  };
}

export async function run(ctx) {
  const { gw, page, go, shot, check, say, binary } = ctx;
  const { root, repo, model } = fixture;
  const started = Date.now();
  const file = join(repo, "edit.txt");

  // An MCP client opens the repository and writes a file: a workspace and an audit line.
  const mcp = await mcpClient(gw);
  const opened = await mcp.call("workspace_open", { path: repo });
  check(opened.writable === true && opened.workspace.startsWith("ws_"), `workspace_open: ${JSON.stringify(opened)}`);
  const ws = opened.workspace;
  await mcp.call("file_write", { workspace: ws, path: "notes.txt", content: "from the MCP client\n" });

  // A delegated task that asks to edit edit.txt.
  const task = await gw.api("POST", "/v1/agents/agent_start_task",
    { executor: "opencode", task: `TASK:edit FILE:${file} please`, workspace: ws });
  check(task.status === 200 && task.body?.data?.sessionId, `agent_start_task: ${task.status} ${task.text}`);
  const { sessionId, runId } = task.body.data;

  // The page: roots, the workspace, the audit line, the snippets; the request once pending
  // (the page reads itself again when the session changes: no reload by the test).
  await go("/settings/agents");
  await page.evaluate(() => { window.__agentsMarker = true; });
  const listedAtOnce = await page.locator(`.card.permission[data-session="${sessionId}"]`).count() > 0;
  const rootRow = page.locator(`#roots tr[data-root="${root}"]`);
  check(await rootRow.count() === 1 && await rootRow.getAttribute("data-writable") === "true", `the root is not listed writable: ${await text(page, "#roots").catch(() => "no #roots")}`);
  const wsRow = page.locator(`#workspaces tr[data-workspace="${repo}"]`);
  check(await wsRow.count() === 1 && await wsRow.getAttribute("data-usable") === "true", "the workspace is not listed usable");
  const wsText = await wsRow.innerText();
  check(!wsText.includes(ws) && wsText.includes(ws.slice(0, 9)), `the handle is not shortened: ${wsText}`);
  check(await page.locator('#audit tr[data-tool="file_write"][data-outcome="ok"]').count() >= 1, "no audit line of file_write");
  const snippet = await page.locator('.card.snippet[data-client="claude-code"] pre').first().innerText();
  check(snippet.includes(binary) && snippet.includes('"mcp"'), `the Claude Code snippet: ${snippet}`);
  const token = gw.token();
  check(!(await page.content()).includes(token), "the bearer token is on the page");
  const cursorHttp = await page.locator('.card.snippet[data-client="cursor"] details pre').textContent();
  check(cursorHttp.includes("the token from the Token page"), `Cursor's HTTP entry: ${cursorHttp}`);

  const card = page.locator(`.card.permission[data-session="${sessionId}"]`);
  await waitIn(page, "the permission request listed", (s) => !!document.querySelector(`.card.permission[data-session="${s}"]`), sessionId, 90000);
  const askedAfter = Date.now() - started;
  check(listedAtOnce || await page.evaluate(() => window.__agentsMarker !== true), "the page did not read itself again");
  const requestId = await card.first().getAttribute("data-request");
  const cardText = await card.first().innerText();
  check(cardText.includes("edit") && cardText.includes("edit.txt"), `the request: ${cardText}`);
  check(readFileSync(file, "utf8") === TEXT, "the file changed before the answer");
  check(await page.getByRole("button", { name: "Always", exact: true }).first().isDisabled(), "Always is offered with allow_always off");
  await shot("agents");

  // Always, forced anyway: the engine's refusal, the request still pending.
  await page.evaluate(() => document.querySelector('.card.permission button[value="always"]').removeAttribute("disabled"));
  await press(page, "Always");
  let f = await flash(page);
  check(f && !f.ok && f.text.includes("delegation.always_not_allowed") && f.text.includes("allow_always"), `Always: ${JSON.stringify(f)}`);
  check(await page.locator(`.card.permission[data-request="${requestId}"]`).count() === 1, "the request went away after a refused Always");

  // Once: the edit is made, the task completes, the request disappears.
  const answered = Date.now();
  await press(page, "Once");
  f = await flash(page);
  check(f?.ok && f.text.includes(requestId), `Once: ${JSON.stringify(f)}`);
  await waitIn(page, "the task completed on the page",
    (s) => document.querySelector(`#sessions tr[data-session="${s}"]`)?.dataset.state === "completed", sessionId, 60000);
  const completedAfter = Date.now() - answered;
  check(await page.locator(`.card.permission[data-request="${requestId}"]`).count() === 0, "the answered request is still listed");
  check(readFileSync(file, "utf8") === TEXT.replace("hello", "goodbye"), `the edit: ${readFileSync(file, "utf8")}`);
  const shown = runCommand(binary, ["runs", "show", runId, "--events", "--format", "json"], { env: gw.env })
    .split("\n").map((l) => JSON.parse(l));
  const replied = shown.find((e) => e.type === "permission.replied");
  check(replied?.requestId === requestId && replied.reply === "once" && replied.by === "settings", `permission.replied: ${JSON.stringify(replied)}`);
  check(shown.at(-1)?.type === "run.completed", `the run's last event: ${JSON.stringify(shown.at(-1))}`);
  check(model.requests.some((r) => r.answer === "stop" && r.task === "edit"), "the model was not asked again after the edit");
  await shot("agents-answered");
  const seconds = (ms) => (ms / 1000).toFixed(1);
  say(`agents: a delegated OpenCode edit's permission request answered Once on the page (Always refused by the engine), the edit made, the request gone, by settings; roots, workspace, audit line and snippets shown (asked after ${seconds(askedAfter)} s, done ${seconds(completedAfter)} s after the answer, step ${seconds(Date.now() - started)} s)`);
}
