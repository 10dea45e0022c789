// The scripted coding-agent model of the Agents and MCP step (tests/settings/agents.mjs): the
// JavaScript twin of host/tests/common/agent_model.rs, an OpenAI-compatible streaming server on
// 127.0.0.1 that the REAL `opencode serve` (started by the gateway, `[delegation] provider`)
// talks to. It acts by the task marker of the LATEST user message and how many tool results
// came after it; the prompt names its file as `FILE:<absolute path>`:
//
// - `TASK:edit`: `read` the file, then `edit` it (`hello` → `goodbye`: OpenCode asks the
//   gateway's permission first, a request a human answers), then "All done." and stop;
// - anything else: `read` the file, then stop.
// OpenCode's own requests without tools (a session title) get a title at any time.
// `GET …/models` lists the model. Every completion is recorded in `requests` as
// `{ task, toolResults, answer }` (`answer`: `read`, `edit`, `stop`, `title`).
import { createServer } from "node:http";

/** The model name the server serves and lists. */
export const AGENT_MODEL = "agent-model";

/** Starts the server; `{ baseUrl, requests, toml(id), close() }`. */
export async function startAgentModel() {
  const requests = [];
  let callNo = 0;
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, "http://x");
    if (req.method === "GET" && url.pathname.endsWith("/models")) {
      return res.writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ object: "list", data: [{ id: AGENT_MODEL, object: "model", owned_by: "test" }] }));
    }
    if (req.method !== "POST" || !url.pathname.endsWith("/chat/completions")) return res.writeHead(404).end();
    const chunks = [];
    for await (const c of req) chunks.push(c);
    let body;
    try { body = JSON.parse(Buffer.concat(chunks).toString("utf8")); } catch { return res.writeHead(400).end("bad json"); }
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
    const base = { id: `chatcmpl-agent-${++callNo}`, object: "chat.completion.chunk", created: 1_700_000_000, model: AGENT_MODEL,
      system_fingerprint: "fp_agent" };
    const send = (delta, finish = null) =>
      res.write(`data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], usage: null })}\n\n`);
    const end = (reason) => {
      send({}, reason);
      res.write(`data: ${JSON.stringify({ ...base, choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } })}\n\n`);
      res.end("data: [DONE]\n\n");
    };
    send({ role: "assistant", content: "" });
    const hasTools = Array.isArray(body.tools) && body.tools.length > 0;
    const record = { task: "", toolResults: 0, answer: "" };
    requests.push(record);
    if (!hasTools) {
      record.answer = "title";
      send({ content: "Fixture task" });
      return end("stop");
    }
    const messages = body.messages ?? [];
    let lastUser = 0;
    messages.forEach((m, i) => { if (m.role === "user") lastUser = i; });
    const prompt = JSON.stringify(messages[lastUser] ?? "");
    const toolResults = messages.slice(lastUser).filter((m) => m.role === "tool").length;
    const file = (prompt.split("FILE:")[1] ?? "").split(/[ "\\]/)[0];
    const edit = prompt.includes("TASK:edit");
    record.task = edit ? "edit" : "read";
    record.toolResults = toolResults;
    const call = (id, name, args) => {
      send({ tool_calls: [{ index: 0, id, type: "function", function: { name, arguments: "" } }] });
      send({ tool_calls: [{ index: 0, function: { arguments: JSON.stringify(args) } }] });
      end("tool_calls");
    };
    if (toolResults === 0) {
      record.answer = "read";
      return call("call_read", "read", { filePath: file });
    }
    if (edit && toolResults === 1) {
      record.answer = "edit";
      return call("call_edit", "edit", { filePath: file, oldString: "hello", newString: "goodbye" });
    }
    record.answer = "stop";
    send({ content: "All done." });
    return end("stop");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const baseUrl = `http://127.0.0.1:${server.address().port}/v1`;
  return {
    baseUrl,
    requests,
    toml: (id) => `[[providers]]\nid = "${id}"\nkind = "openai-compatible"\nbase_url = "${baseUrl}"\nmodel = "${AGENT_MODEL}"\n` +
      "request_timeout_secs = 30\n",
    close: () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(() => resolve()); }),
  };
}
