#!/usr/bin/env python3
"""A fake OpenAI-compatible model server for bench/model.sh (standard library only).

Listens on 127.0.0.1 (port 0: a free one) and prints `listening on http://127.0.0.1:PORT` as its
first stdout line. It speaks the wire format of OpenAI's Chat Completions streaming:

  POST /v1/chat/completions   an SSE body of `chat.completion.chunk`s, as fast as it can write:
                              a role chunk, N content deltas, a finish chunk, a usage chunk
                              (`choices: []`), then `data: [DONE]`; HTTP/1.1, chunked.
  GET  /v1/models             200, a list with the fake models (after `--models-delay-ms`).
  GET  /stats                 JSON counters since the last reset (see `Stats`).
  POST /stats/reset           zero them.

What each completion answers is chosen by the request's `model`, so one server serves every
row of the benchmark:

  deltas-N          chat: N text deltas (`--delta-text`, numbered), then finish_reason "stop".
  deltas-N@Mms      the same, one delta every M milliseconds (a model generating at 1000/M
                    tokens/s), each its own write.
  review-stop       review: a one-line summary and "stop" at once (no findings).
  review-finding    review: when the last message is not a tool result, one `report_finding`
                    tool call on the first added line of the first file in the prompt (with
                    that line as evidence, so the gateway accepts it), finish "tool_calls";
                    after the tool result, a summary and "stop".
  agent-read        a coding agent's turn (bench/delegation.sh): when the `read` tool is
                    offered and no tool result came back yet, one `read` call on the path
                    after `FILE:` in the conversation, finish "tool_calls"; otherwise (the
                    result came back, or a request without tools such as a title) "Done."
                    and "stop".
  anything else     as deltas-`--deltas`.

`--batch K` writes K deltas per socket write (default 1: each delta its own write and HTTP
chunk, as a model server flushing every token does); the first delta always goes alone, so
the time to the first token is not held up by batching.
"""
import argparse
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Stats:
    """Counters over all requests since the last reset."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.completions = 0  # POST /v1/chat/completions
            self.review_requests = 0  # completions with a report_finding tool offered
            self.first_turns = 0  # review requests whose last message is the user's chunk
            self.tool_results = 0  # review requests that carry a tool result back
            self.chunk_chars = 0  # characters of the diff parts (first turns' user message)
            self.chunk_files = 0  # `### path` file headers in them
            self.system_chars_max = 0  # the longest system prompt
            self.tools_offered_max = 0  # most tools offered in one request
            self.request_bytes = 0  # total JSON body bytes received
            self.request_bytes_max = 0
            self.prompt_chars = 0  # characters of all message contents
            self.max_tokens_min = None  # smallest `max_tokens` asked for
            self.deltas_sent = 0
            self.handle_seconds = 0.0  # time spent answering completions (read to last write)
            self.findings_sent = 0
            self.models = {}
            self.model_listings = 0  # GET /v1/models (the gateway's health probes)

    def snapshot(self):
        with self.lock:
            return {k: v for k, v in vars(self).items() if k != "lock"}


STATS = Stats()
HEADER = re.compile(r"^### (\S+) \(")
DELTAS = re.compile(r"deltas-(\d+)(?:@(\d+(?:\.\d+)?)ms)?")
ADDED = re.compile(r"^\s*(\d+) \+ (.*)$")


def chunk(model, delta=None, finish=None, usage=None):
    body = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1767225600,
            "model": model}
    if usage is not None:
        body["choices"] = []
        body["usage"] = usage
    else:
        body["choices"] = [{"index": 0, "delta": delta or {}, "logprobs": None,
                            "finish_reason": finish}]
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-openai/1"

    def setup(self):
        super().setup()
        # As model servers do (Go's net/http, uvicorn): without it Nagle holds each small
        # chunk written after the headers until the client's delayed ACK, ~40 ms a request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):
        pass

    def send_json(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.rstrip("/") == "/v1/models":
            with STATS.lock:
                STATS.model_listings += 1
            time.sleep(self.server.models_delay_ms / 1000)
            self.send_json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "bench"}
                for m in ("deltas-N", "review-stop", "review-finding")]})
        elif self.path == "/stats":
            self.send_json(200, STATS.snapshot())
        else:
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self):
        t0 = time.perf_counter()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path == "/stats/reset":
            STATS.reset()
            self.send_json(200, {"ok": True})
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            req = json.loads(raw)
        except ValueError as e:
            self.send_json(400, {"error": {"message": f"bad JSON: {e}"}})
            return
        model = str(req.get("model", ""))
        messages = req.get("messages") or []
        tools = [t.get("function", {}).get("name") for t in req.get("tools") or []]
        review = "report_finding" in tools
        last_role = messages[-1].get("role") if messages else None
        with STATS.lock:
            STATS.completions += 1
            STATS.request_bytes += len(raw)
            STATS.request_bytes_max = max(STATS.request_bytes_max, len(raw))
            STATS.prompt_chars += sum(len(m.get("content") or "") for m in messages)
            STATS.tools_offered_max = max(STATS.tools_offered_max, len(tools))
            mt = req.get("max_tokens")
            if isinstance(mt, int):
                STATS.max_tokens_min = mt if STATS.max_tokens_min is None else min(
                    STATS.max_tokens_min, mt)
            STATS.models[model] = STATS.models.get(model, 0) + 1
            if review:
                STATS.review_requests += 1
                if last_role == "tool":
                    STATS.tool_results += 1
                else:
                    STATS.first_turns += 1
                    part = messages[-1].get("content") or ""
                    STATS.chunk_chars += len(part)
                    STATS.chunk_files += sum(1 for line in part.split("\n")
                                             if line.startswith("### "))
                system = [m.get("content") or "" for m in messages if m.get("role") == "system"]
                STATS.system_chars_max = max([STATS.system_chars_max, *map(len, system)])

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        out = self.wfile

        def write(data):
            out.write(b"%x\r\n%s\r\n" % (len(data), data))
            out.flush()

        write(chunk(model, {"role": "assistant", "content": ""}))
        sent = 0
        if model == "review-finding" and last_role != "tool":
            finding = self.finding(messages)
            if finding is None:
                write(chunk(model, {"content": "Nothing to report."}))
                write(chunk(model, finish="stop"))
            else:
                args = json.dumps(finding)
                half = len(args) // 2
                write(chunk(model, {"tool_calls": [{"index": 0, "id": "call_bench", "type": "function",
                                                    "function": {"name": "report_finding",
                                                                 "arguments": args[:half]}}]}))
                write(chunk(model, {"tool_calls": [{"index": 0, "function": {"arguments": args[half:]}}]}))
                write(chunk(model, finish="tool_calls"))
                with STATS.lock:
                    STATS.findings_sent += 1
        elif model == "agent-read":
            text = json.dumps(messages)
            match = re.search(r"FILE:([^\s\"\\]+)", text)
            if "read" in tools and match and not any(m.get("role") == "tool" for m in messages):
                args = json.dumps({"filePath": match.group(1)})
                write(chunk(model, {"tool_calls": [{"index": 0, "id": "call_read", "type": "function",
                                                    "function": {"name": "read", "arguments": args}}]}))
                write(chunk(model, finish="tool_calls"))
            else:
                write(chunk(model, {"content": "Done."}))
                write(chunk(model, finish="stop"))
        elif model.startswith("review-"):
            write(chunk(model, {"content": "No problems found."}))
            write(chunk(model, finish="stop"))
        else:
            n, pace = self.server.default_deltas, None
            paced = DELTAS.fullmatch(model)
            if paced:
                n = int(paced.group(1))
                pace = float(paced.group(2)) / 1000 if paced.group(2) else None
            text = self.server.delta_text
            batch = max(1, self.server.batch)
            # The chunk JSON with a placeholder, split once: a delta is then two joins.
            head, tail = chunk(model, {"content": f"{text}\x00 "}).split(b"\\u0000")
            if n > 0:
                write(head + b"0" + tail)
            i = 1
            while i < n:
                if pace:
                    time.sleep(pace)
                j = min(n, i + (1 if pace else batch))
                write(b"".join(head + str(k).encode() + tail for k in range(i, j)))
                i = j
            sent = n
            write(chunk(model, finish="stop"))
        write(chunk(model, usage={"prompt_tokens": 100, "completion_tokens": max(sent, 1),
                                  "total_tokens": 100 + max(sent, 1)}))
        write(b"data: [DONE]\n\n")
        out.write(b"0\r\n\r\n")
        out.flush()
        with STATS.lock:
            STATS.deltas_sent += sent
            STATS.handle_seconds += time.perf_counter() - t0

    @staticmethod
    def finding(messages):
        """A report_finding call on the first added line of the prompt's diff."""
        for m in messages:
            if m.get("role") != "user":
                continue
            path = None
            for line in (m.get("content") or "").split("\n"):
                header = HEADER.match(line)
                if header:
                    path = header.group(1)
                    continue
                added = ADDED.match(line)
                if path and added and added.group(2).strip():
                    n, text = int(added.group(1)), added.group(2)
                    return {"path": path, "startLine": n, "endLine": n,
                            "category": "maintainability", "severity": "low",
                            "confidence": "high", "title": "Benchmark finding",
                            "content": "Reported by the fake model.",
                            "evidence": [{"path": path, "startLine": n, "endLine": n,
                                          "quote": text.strip()}]}
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--deltas", type=int, default=1000, help="deltas for an unknown model")
    ap.add_argument("--batch", type=int, default=1, help="deltas per socket write")
    ap.add_argument("--delta-text", default="tok", help="each delta is TEXT<i> plus a space")
    ap.add_argument("--models-delay-ms", type=float, default=0,
                    help="how long GET /v1/models takes (a provider's health probe)")
    a = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    server.daemon_threads = True
    server.default_deltas, server.batch, server.delta_text = a.deltas, a.batch, a.delta_text
    server.models_delay_ms = a.models_delay_ms
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
