// A fake OpenAI-compatible model provider for the companion test: a real HTTP server on
// 127.0.0.1 speaking OpenAI's Chat Completions streaming wire format, as the gateway's
// `openai-compatible` provider reads it (the same format as host/tests/common/fake_provider.rs
// `OpenAiStream` and bench/fake_openai.py): `data: <chat.completion.chunk JSON>\n\n` events —
// a role chunk, content or `tool_calls` deltas, a chunk with `finish_reason`, a usage chunk
// (`choices: []`) — then `data: [DONE]\n\n`.
//
// What it answers is chosen by the request, so one server serves the whole test:
// - a **review** (the `report_finding` tool is offered): on the first turn of a conversation
//   whose diff text names `finding.path` (`### <path> (` header), one `report_finding` call on
//   `finding` (a context line of the diff: the gateway accepts new-side lines inside a hunk);
//   otherwise, and after the tool result, a one-line summary and "stop";
// - a **chat** with tools (any other tool offered) and no tool result yet: one `file_read` call
//   on `chatReadPath`, finish "tool_calls";
// - a chat after the tool result (or without tools): `answerDeltas` text pieces, one every
//   `deltaMs` ms, each its own write (slow enough to press "stop"), then "stop".
// `GET /v1/models` lists the model (the gateway's health probe).
//
// Every completion is recorded in `requests`: `{ kind: "review" | "review-done" | "chat-tool" |
// "chat-answer", lastRole, deltasSent, closedEarly, files, text }` (`closedEarly`: the client hung
// up before the stream ended — what "stop" must do; `files`: the `### <path> (` headers of a
// review chunk; `text`: the messages' text, at most 20 000 characters).
import { createServer } from "node:http";

/** The model name the fake serves and lists (`[[providers]] model`). */
export const FAKE_MODEL = "fake-model";

/**
 * Starts the fake provider. `finding`: `{ path, line, title, content, existingCode?,
 * suggestionCode? }` the review reports; `chatReadPath`: the file the chat reads; `answer`: the
 * chat's answer text, split into `answerDeltas` pieces sent `deltaMs` apart; `requireKey`: when
 * set, every request (`/v1/models` and `/v1/chat/completions`) without `Authorization: Bearer
 * <requireKey>` is answered 401, as a hosted API does.
 * Returns `{ baseUrl, requests, toml(id), close() }`; `toml(id)` is the `[[providers]]` entry of
 * the gateway's config.toml (as host/tests/common/fake_provider.rs `toml` writes it).
 */
export async function startFakeModel({ finding, chatReadPath, answer, answerDeltas = 20, deltaMs = 150, requireKey = null }) {
  const requests = [];
  let callNo = 0;
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, "http://x");
    // With `requireKey`, what OpenAI answers a missing or wrong key: 401 with its error shape.
    if (requireKey !== null && req.headers.authorization !== `Bearer ${requireKey}`) {
      req.resume();
      return res.writeHead(401, { "content-type": "application/json" }).end(JSON.stringify({
        error: { message: "Incorrect API key provided.", type: "invalid_request_error", param: null, code: "invalid_api_key" } }));
    }
    if (req.method === "GET" && url.pathname === "/v1/models") {
      return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ object: "list", data: [{ id: FAKE_MODEL, object: "model", owned_by: "test" }] }));
    }
    if (req.method !== "POST" || url.pathname !== "/v1/chat/completions") return res.writeHead(404).end();
    const chunks = [];
    for await (const c of req) chunks.push(c);
    let body;
    try { body = JSON.parse(Buffer.concat(chunks).toString("utf8")); } catch { return res.writeHead(400).end("bad json"); }
    const tools = (body.tools ?? []).map((t) => t.function?.name);
    const messages = body.messages ?? [];
    const lastRole = messages.at(-1)?.role;
    const sawTool = messages.some((m) => m.role === "tool");
    const text = messages.map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? ""))).join("\n");
    const record = { kind: "", lastRole, deltasSent: 0, closedEarly: false, files: [...text.matchAll(/^### (\S+) \(/gm)].map((m) => m[1]),
      text: text.slice(0, 20000) };
    requests.push(record);

    let ended = false;
    res.on("close", () => { if (!ended) record.closedEarly = true; });
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const base = { id: `chatcmpl-fake-${++callNo}`, object: "chat.completion.chunk", created: 1_700_000_000, model: FAKE_MODEL, system_fingerprint: "fp_fake" };
    const send = (choice, usage = null) => res.write(`data: ${JSON.stringify({ ...base, choices: choice ? [{ index: 0, logprobs: null, finish_reason: null, ...choice }] : [], usage })}\n\n`);
    const finish = (reason) => {
      send({ delta: {}, finish_reason: reason });
      send(null, { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 });
      res.write("data: [DONE]\n\n");
      ended = true;
      res.end();
    };
    const toolCall = (id, name, args) => {
      send({ delta: { tool_calls: [{ index: 0, id, type: "function", function: { name, arguments: "" } }] } });
      send({ delta: { tool_calls: [{ index: 0, function: { arguments: JSON.stringify(args) } }] } });
      finish("tool_calls");
    };
    send({ delta: { role: "assistant", content: "" } });

    if (tools.includes("report_finding")) {
      if (!sawTool && text.includes(`### ${finding.path} (`)) {
        record.kind = "review";
        const { path, line, title, content, existingCode, suggestionCode } = finding;
        return toolCall("call_finding", "report_finding", {
          path, startLine: line, endLine: line, category: "maintainability", severity: "low", confidence: "medium", title, content,
          ...(existingCode ? { existingCode } : {}), ...(suggestionCode ? { suggestionCode } : {}) });
      }
      record.kind = "review-done";
      send({ delta: { content: "Reviewed; nothing more." } });
      return finish("stop");
    }
    if (tools.includes("file_read") && !sawTool) {
      record.kind = "chat-tool";
      return toolCall("call_read", "file_read", { path: chatReadPath });
    }
    record.kind = "chat-answer";
    const words = answer.split(/(?<= )/);
    const per = Math.ceil(words.length / answerDeltas);
    for (let i = 0; i < words.length && !record.closedEarly; i += per) {
      send({ delta: { content: words.slice(i, i + per).join("") } });
      record.deltasSent++;
      await new Promise((r) => setTimeout(r, deltaMs));
    }
    if (!record.closedEarly) finish("stop");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const baseUrl = `http://127.0.0.1:${server.address().port}/v1`;
  return {
    baseUrl,
    requests,
    toml: (id) => `[[providers]]\nid = "${id}"\nkind = "openai-compatible"\nbase_url = "${baseUrl}"\nmodel = "${FAKE_MODEL}"\n` +
      "context_window = 32768\nrequest_timeout_secs = 30\n",
    close: () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(() => resolve()); }),
  };
}
