#!/usr/bin/env python3
"""Compare the daemon's transports (started by bench/transports.sh) and print a table:

1. round-trip latency p50/p99 of `GET /v1/health`, sequential, one connection per transport:
   HTTP/1.1 keep-alive, and a `request` frame -> `response` frame over `/v1/ws`;
2. events/s of one long replayed stream (`GET /v1/runs/:id/events?after=0` of a large completed
   review): SSE over HTTP, and `event` frames until `end` over `/v1/ws`.

Each transport is driven by a Python client of the same weight (http.client; websockets' sync
client), so the numbers compare the transports, client costs included. The native-messaging
relay (`review-agent-gateway native-host`) gets the same two rows when --native-host-args is
given: NativeHostClient below speaks its framing (32-bit native-endian length + UTF-8 JSON,
DESIGN §4) over the pipes of the spawned process.

All traffic goes to 127.0.0.1. Usage: see bench/transports.sh, which passes every argument.
"""
import argparse
import contextlib
import http.client
import json
import os
import shlex
import statistics
import struct
import subprocess
import sys
import time
import uuid

from websockets.sync.client import connect

ORIGIN = "https://gitlab.example.com"


class HttpClient:
    """HTTP/1.1 with one keep-alive connection."""

    name = "HTTP + SSE"

    def __init__(self, port, token):
        self.port, self.token = port, token
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {"Authorization": f"Bearer {token}", "Host": f"127.0.0.1:{port}"}

    def call(self, method, path, body=None):
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        self.conn.request(method, path, body=data, headers=headers)
        resp = self.conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")

    def stream(self, method, path, body=None):
        """All events of an SSE answer (parsed after the stream ends), on a fresh connection."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        if resp.status != 200:
            raise SystemExit(f"{method} {path}: HTTP {resp.status}: {resp.read()[:300]!r}")
        parts = []
        while True:
            chunk = resp.read1(1 << 20)
            if not chunk:
                break
            parts.append(chunk)
        conn.close()
        events = []
        for block in b"".join(parts).split(b"\n\n"):
            for line in block.split(b"\n"):
                if line.startswith(b"data:"):
                    events.append(line[5:].strip())
        return events

    def close(self):
        self.conn.close()


class FrameClient:
    """Frames of DESIGN §4 over some byte transport; subclasses give send() and recv()."""

    def __init__(self):
        self.next_id = 0

    def hello(self):
        self.send({"type": "hello", "protocolVersions": ["1.0"]})
        answer = self.recv()
        if answer.get("type") != "hello" or answer.get("protocolVersion") != "1.0":
            raise SystemExit(f"{self.name}: unexpected hello answer {answer}")

    def request(self, method, path, body=None):
        self.next_id += 1
        frame = {"type": "request", "id": self.next_id, "method": method, "path": path}
        if body is not None:
            frame["body"] = body
        self.send(frame)
        return self.next_id

    def call(self, method, path, body=None):
        rid = self.request(method, path, body)
        frame = self.recv()
        if frame.get("type") != "response" or frame.get("id") != rid:
            raise SystemExit(f"{self.name}: expected the response of {rid}, got {frame}")
        return frame["status"], frame["body"]

    def stream(self, method, path, body=None):
        """All `event` payloads of a streaming request, until its `end`; raw text messages are
        kept and parsed after the stream ends (like the SSE client's)."""
        rid = self.request(method, path, body)
        texts = []
        while True:
            text = self.recv_text()
            if text.startswith('{"type":"end"'):
                break
            if not text.startswith('{"type":"event"'):
                raise SystemExit(f"{self.name}: not an event: {text[:300]}")
            texts.append(text)
        events = []
        for text in texts:
            frame = json.loads(text)
            if frame.get("id") != rid or frame.get("type") != "event":
                raise SystemExit(f"{self.name}: unexpected frame in a stream: {text[:300]}")
            events.append(frame["event"])
        return events

    def recv(self):
        return json.loads(self.recv_text())


class WsClient(FrameClient):
    """`/v1/ws` with the token in `Authorization`."""

    name = "/v1/ws"

    def __init__(self, port, token):
        super().__init__()
        self.stack = contextlib.ExitStack()
        self.ws = self.stack.enter_context(connect(
            f"ws://127.0.0.1:{port}/v1/ws",
            additional_headers={"Authorization": f"Bearer {token}"},
            max_size=None, compression=None, open_timeout=10))
        self.hello()

    def send(self, frame):
        self.ws.send(json.dumps(frame))

    def recv_text(self):
        return self.ws.recv(timeout=600)

    def close(self):
        self.stack.close()


class NativeHostClient(FrameClient):
    """Hook for the native-messaging relay: `BIN native-host ARGS...` with piped stdio, frames
    as a 32-bit native-endian length + UTF-8 JSON (DESIGN §4). Frames over 1 MiB arrive as
    `chunk` pieces, reassembled here. Enabled by --native-host-args (NATIVE_HOST_ARGS)."""

    name = "native-host"

    def __init__(self, bin_path, args):
        super().__init__()
        self.proc = subprocess.Popen([bin_path, "native-host", *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)
        self.hello()

    def send(self, frame):
        data = json.dumps(frame).encode()
        self.proc.stdin.write(struct.pack("=I", len(data)) + data)
        self.proc.stdin.flush()

    def recv_text(self):
        pieces = []
        while True:
            head = self.proc.stdout.read(4)
            if len(head) < 4:
                raise SystemExit("native-host: stdout closed")
            (n,) = struct.unpack("=I", head)
            text = self.proc.stdout.read(n).decode()
            if not text.startswith('{"type":"chunk"'):
                return text
            chunk = json.loads(text)
            pieces.append(chunk["data"])
            if chunk["final"]:
                return "".join(pieces)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def review_body(project, base, head):
    return {
        "requestId": f"bench-{uuid.uuid4()}",
        "mode": "merge-request",
        "target": {
            "gitlabOrigin": ORIGIN,
            "projectPath": project,
            "mergeRequestIid": 1,
            "diffRefs": {"baseSha": base, "startSha": base, "headSha": head},
        },
        "scope": {"filePaths": None, "selection": None},
        "policy": {"minConfidence": "low"},
    }


def latency(client, samples):
    """Sequential GET /v1/health round trips: (p50 s, p99 s), after a warm-up of 200."""
    for _ in range(200):
        client.call("GET", "/v1/health")
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        status, body = client.call("GET", "/v1/health")
        times.append(time.perf_counter() - t0)
        if status != 200 or not body.get("ok"):
            raise SystemExit(f"{client.name}: health failed: {status} {body}")
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.99))]


def cpu_seconds(pid):
    """User + system CPU time the process has used, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def replay(client, run_id, expected, replays, pid):
    """Median (events/s, seconds, daemon CPU seconds) of replaying the run through `client`."""
    results = []
    for _ in range(replays):
        cpu0 = cpu_seconds(pid)
        t0 = time.perf_counter()
        events = client.stream("GET", f"/v1/runs/{run_id}/events?after=0")
        elapsed = time.perf_counter() - t0
        cpu = cpu_seconds(pid) - cpu0
        if len(events) != expected:
            raise SystemExit(f"{client.name}: {len(events)} events, expected {expected}")
        results.append((len(events) / elapsed, elapsed, cpu))
    return statistics.median_low(results)


def us(seconds):
    return f"{seconds * 1e6:,.0f} µs"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--pid", type=int, required=True, help="the daemon's pid (for its CPU time)")
    ap.add_argument("--project", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--head", required=True)
    ap.add_argument("--changed", default="")
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--replays", type=int, default=5)
    ap.add_argument("--native-host-args", default="",
                    help="argv after `native-host` (e.g. 'chrome-extension://ID/'); adds its rows")
    a = ap.parse_args()

    http_client = HttpClient(a.port, a.token)
    print(f"reviewing {a.changed or a.project} once to get a long run ...", file=sys.stderr)
    events = http_client.stream("POST", "/v1/reviews", review_body(a.project, a.base, a.head))
    run_id = json.loads(events[0])["runId"]
    if json.loads(events[-1])["type"] != "run.completed":
        raise SystemExit("the review did not complete")

    clients = [http_client, WsClient(a.port, a.token)]
    if a.native_host_args:
        clients.append(NativeHostClient(a.bin, shlex.split(a.native_host_args)))
    rows = []
    for client in clients:
        print(f"measuring {client.name} ...", file=sys.stderr)
        p50, p99 = latency(client, a.samples)
        rate, elapsed, cpu = replay(client, run_id, len(events), a.replays, a.pid)
        rows.append((client.name, us(p50), us(p99), f"{rate:,.0f}", f"{elapsed * 1e3:,.0f} ms",
                     f"{cpu * 1e3:,.0f} ms"))
        client.close()
    if not a.native_host_args:
        rows.append(("native-host", "n/a", "n/a", "n/a", "n/a", "set NATIVE_HOST_ARGS"))

    print(f"run {run_id}: {len(events)} events; {a.samples} sequential GET /v1/health per "
          f"transport; replay = median of {a.replays} (the daemon's CPU time during it: the "
          f"rest is the client's)")
    header = ("transport", "health p50", "health p99", "replay events/s", "replay time",
              "daemon CPU/replay")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


if __name__ == "__main__":
    main()
