#!/usr/bin/env python3
"""What a hostile local client costs the daemon (issue 12 §1), measured against the same daemon
doing ordinary work. Started by bench/hardening.sh, which passes every argument. Prints a table:

1. `GET /v1/health` under wrk, with one provider configured whose `GET /v1/models` takes
   `--models-delay-ms` (the probe health makes), beside the same daemon's health with no
   provider (`--plain-port`): requests/s, p50/p99, and how many probes reached the provider.
   Before the single-flight fix every request that found the cached probe stale started its own.
2. `POST /v1/reviews` with `scope.filePaths` at the caps (64 entries of 1024 bytes, in the shapes
   that were quadratic: a plain path, `dir/**`, a `*` suffix), beside the same review without a
   scope; and the time to the 400 for one 30 KB entry (it took 20 CPU-seconds before).
3. `/v1/ws`: a client that sends requests (4 KiB each) for `--flood-seconds` and never reads: how
   many frames the daemon took, and its VmRSS before, at the end of the flood, and after the
   client closed.

All traffic goes to 127.0.0.1. Standard library only (the WebSocket client is minimal: it only
sends masked text frames).
"""
import argparse
import base64
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import uuid

ORIGIN = "https://gitlab.example.com"


def rss(pid):
    """VmRSS of `pid` in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for {pid}")


def request(port, token, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Authorization": f"Bearer {token}", "Host": f"127.0.0.1:{port}"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    resp = conn.getresponse()
    out = resp.status, resp.read()
    conn.close()
    return out


def wrk(port, threads, conns, seconds):
    url = f"http://127.0.0.1:{port}/v1/health"
    out = subprocess.run(["wrk", "-t", str(threads), "-c", str(conns), "-d", f"{seconds}s",
                          "--latency", url], check=True, capture_output=True, text=True).stdout

    def ms(label):
        m = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        value, unit = float(m.group(1)), m.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
            "p50": ms("50"), "p99": ms("99"),
            "non2xx": int(m.group(1)) if (m := re.search(r"Non-2xx.*?(\d+)", out)) else 0}


def provider_stats(url):
    conn = http.client.HTTPConnection(url.split("//")[1].split("/")[0], timeout=10)
    conn.request("GET", "/stats")
    stats = json.loads(conn.getresponse().read())
    conn.close()
    return stats


IID = iter(range(1, 1 << 30))


def review(port, token, project, base, head, file_paths=None):
    """Seconds from POST /v1/reviews to the end of its SSE stream, and the last event type.
    Each review has its own merge request iid, so none is answered from the review cache."""
    body = {"requestId": f"bench-{uuid.uuid4()}", "mode": "merge-request",
            "target": {"gitlabOrigin": ORIGIN, "projectPath": project,
                       "mergeRequestIid": next(IID),
                       "diffRefs": {"baseSha": base, "headSha": head, "startSha": base}},
            "policy": {"minConfidence": "low"}}
    if file_paths is not None:
        body["scope"] = {"filePaths": file_paths}
    t0 = time.perf_counter()
    status, raw = request(port, token, "POST", "/v1/reviews", body)
    took = time.perf_counter() - t0
    types = re.findall(rb"^event: (\S+)$", raw, re.M)
    return took, status, (types[-1].decode() if types else raw[:200].decode(errors="replace"))


def cap_paths():
    """64 entries of 1024 bytes in the shapes that were quadratic, plus the real file set."""
    paths = []
    for i in range(63):
        stem = f"{i:02d}" + "a" * 1022
        paths.append([stem, stem[:1021] + "/**", stem[:1023] + "*"][i % 3])
    paths.append("src/**")
    return paths


def ws_flood(port, token, seconds):
    """Open /v1/ws, send request frames for `seconds` without reading; return (frames sent,
    the open socket). Sends block once the daemon stops reading (TCP buffers full)."""
    s = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(4096)
    if b" 101 " not in head.split(b"\r\n")[0]:
        raise SystemExit(f"/v1/ws upgrade refused: {head[:300]!r}")

    def frame(text):
        payload = text.encode()
        mask = os.urandom(4)
        n = len(payload)
        header = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                  bytes([0x80 | 126]) + n.to_bytes(2, "big") if n < 65536 else
                                  bytes([0x80 | 127]) + n.to_bytes(8, "big"))
        return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))

    s.sendall(frame(json.dumps({"type": "hello", "protocolVersions": ["1.0"]})))
    pad = "p" * 4096
    sent, deadline = 0, time.monotonic() + seconds
    s.settimeout(0.5)
    while time.monotonic() < deadline:
        data = frame(json.dumps({"type": "request", "id": sent, "method": "GET",
                                 "path": "/v1/tools", "body": {"pad": pad}}))
        try:
            s.sendall(data)
            sent += 1
        except socket.timeout:
            break  # the daemon stopped reading this client
    # Hold the connection (unread) until the flood's time is up, as a hostile client would.
    time.sleep(max(0.0, deadline - time.monotonic()))
    return sent, s


def main():
    ap = argparse.ArgumentParser()
    for name in ("port", "plain-port", "pid"):
        ap.add_argument(f"--{name}", type=int, required=True)
    for name in ("token", "plain-token", "project", "base", "head", "provider-url"):
        ap.add_argument(f"--{name}", required=True)
    ap.add_argument("--models-delay-ms", type=int, default=300)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--wrk-threads", type=int, default=2)
    ap.add_argument("--wrk-conns", type=int, default=50)
    ap.add_argument("--wrk-seconds", type=int, default=10)
    ap.add_argument("--flood-seconds", type=int, default=10)
    a = ap.parse_args()
    rows = []

    # 1. Health with and without a provider. One request first: before a provider's first
    # answer callers wait for its probe; what is measured is the steady state, in which the
    # cached answer goes stale every 10 s.
    request(a.port, a.token, "GET", "/v1/health")
    request(a.plain_port, a.plain_token, "GET", "/v1/health")
    before = provider_stats(a.provider_url)["model_listings"]
    with_provider = wrk(a.port, a.wrk_threads, a.wrk_conns, a.wrk_seconds)
    probes = provider_stats(a.provider_url)["model_listings"] - before
    plain = wrk(a.plain_port, a.wrk_threads, a.wrk_conns, a.wrk_seconds)
    label = f"wrk -t{a.wrk_threads} -c{a.wrk_conns} -d{a.wrk_seconds}s"
    rows.append((f"GET /v1/health, one provider ({a.models_delay_ms} ms probe), {label}",
                 f"{with_provider['rps']:,.0f} req/s",
                 f"p50 {with_provider['p50']:.2f} ms, p99 {with_provider['p99']:.2f} ms; "
                 f"{probes} probe(s) reached the provider (cache 10 s)"))
    rows.append((f"GET /v1/health, no provider (peer), {label}", f"{plain['rps']:,.0f} req/s",
                 f"p50 {plain['p50']:.2f} ms, p99 {plain['p99']:.2f} ms; "
                 f"p99 ratio {with_provider['p99'] / plain['p99']:.2f}x"))
    if with_provider["non2xx"] or plain["non2xx"]:
        raise SystemExit("wrk saw non-2xx health answers")

    # 2. Reviews with scope.filePaths at the caps, beside the same review without a scope.
    review(a.port, a.token, a.project, a.base, a.head)  # warm-up
    plain_times, capped_times = [], []
    for _ in range(a.runs):
        took, status, last = review(a.port, a.token, a.project, a.base, a.head)
        assert (status, last) == (200, "run.completed"), (status, last)
        plain_times.append(took)
        took, status, last = review(a.port, a.token, a.project, a.base, a.head, cap_paths())
        assert (status, last) == (200, "run.completed"), (status, last)
        capped_times.append(took)
    p, c = statistics.median(plain_times), statistics.median(capped_times)
    rows.append((f"POST /v1/reviews, scope.filePaths 64 x 1024 B, median of {a.runs}",
                 f"{c * 1000:.0f} ms", f"{c / p:.2f}x the same review without a scope"))
    rows.append((f"POST /v1/reviews, no scope (peer), median of {a.runs}", f"{p * 1000:.0f} ms",
                 ""))
    took, status, _ = review(a.port, a.token, a.project, a.base, a.head, ["a" * 30 * 1024])
    assert status == 400, status
    rows.append(("POST /v1/reviews, one 30 KB scope.filePaths entry", f"{took * 1000:.1f} ms",
                 "400 request.invalid before a run exists (was 20 CPU-seconds)"))

    # 3. A /v1/ws client that never reads.
    start = rss(a.pid)
    sent, sock = ws_flood(a.port, a.token, a.flood_seconds)
    during = rss(a.pid)
    sock.close()
    time.sleep(2)
    after = rss(a.pid)
    rows.append((f"/v1/ws client sending 4 KiB requests for {a.flood_seconds} s, never reading",
                 f"{sent:,} frames taken",
                 f"daemon VmRSS {start:.0f} MiB before, {during:.0f} MiB at the end, "
                 f"{after:.0f} MiB 2 s after it closed"))

    width = max(len(r[0]) for r in rows)
    print(f"{'measurement':<{width}}  {'value':>16}  notes")
    print(f"{'-' * width}  {'-' * 16}  -----")
    for what, value, notes in rows:
        print(f"{what:<{width}}  {value:>16}  {notes}")


if __name__ == "__main__":
    sys.exit(main())
