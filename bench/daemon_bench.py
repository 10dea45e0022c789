#!/usr/bin/env python3
"""Measure a running `review-agent-gateway serve` (started by bench/daemon.sh) and print a table:

1. `GET /v1/health` with wrk: requests/s and latency p50/p99;
2. `POST /v1/reviews` (a fresh requestId each time): time to the first SSE event
   (`run.created`) and to the last (`run.completed`), median of N runs, beside the same review
   run by the command line (`review --format json`);
3. events/s through one SSE stream: replaying a completed run (`GET /v1/runs/:id/events?after=0`);
4. the daemon's resident memory (VmRSS, and the peak VmHWM) right after start and, idle, after
   all of the above.

All traffic goes to 127.0.0.1. Usage: see bench/daemon.sh, which passes every argument.
"""
import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import time
import uuid

ORIGIN = "https://gitlab.example.com"


def rss(pid):
    """(VmRSS, VmHWM) of `pid` in MiB."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


class Client:
    def __init__(self, port, token):
        self.port, self.token = port, token

    def request(self, method, path, body=None):
        """Send a request; return (connection, response) with the body still unread."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        headers = {"Authorization": f"Bearer {self.token}", "Host": f"127.0.0.1:{self.port}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        return conn, conn.getresponse()

    def json(self, method, path, body=None):
        conn, resp = self.request(method, path, body)
        try:
            return resp.status, json.loads(resp.read() or b"null")
        finally:
            conn.close()

    def sse(self, method, path, body=None):
        """Read an SSE response incrementally. Returns (t0, [(t, id, type, data)], t_end):
        every event with the perf_counter time at which its block was complete; t0 is taken
        just before the request is sent (connect included), t_end at end of stream."""
        t0 = time.perf_counter()
        conn, resp = self.request(method, path, body)
        if resp.status != 200:
            raise SystemExit(f"{method} {path}: HTTP {resp.status}: {resp.read()[:500]!r}")
        events, buf = [], b""
        try:
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                now = time.perf_counter()
                buf += chunk
                while b"\n\n" in buf:
                    block, buf = buf.split(b"\n\n", 1)
                    ev = parse_block(block)
                    if ev is not None:
                        events.append((now, *ev))
            return t0, events, time.perf_counter()
        finally:
            conn.close()

    def drain(self, path):
        """Replay an SSE stream as fast as the client can take it; parse after the clock stops.
        Returns (seconds, bytes, events)."""
        t0 = time.perf_counter()
        conn, resp = self.request("GET", path)
        if resp.status != 200:
            raise SystemExit(f"GET {path}: HTTP {resp.status}")
        parts = []
        try:
            while True:
                chunk = resp.read1(1 << 20)
                if not chunk:
                    break
                parts.append(chunk)
        finally:
            conn.close()
        elapsed = time.perf_counter() - t0
        body = b"".join(parts)
        events = [e for e in map(parse_block, body.split(b"\n\n")) if e is not None]
        return elapsed, len(body), events


def parse_block(block):
    """One SSE block -> (id, type, data) or None (a keep-alive comment, an empty block)."""
    eid = kind = data = None
    for line in block.split(b"\n"):
        if line.startswith(b"id:"):
            eid = int(line[3:].strip())
        elif line.startswith(b"event:"):
            kind = line[6:].strip().decode()
        elif line.startswith(b"data:"):
            data = line[5:].strip()
    if eid is None or kind is None:
        return None
    return eid, kind, data


def review_body(request_id, project, base, head, min_conf, iid):
    return {
        "requestId": request_id,
        "mode": "merge-request",
        "target": {
            "gitlabOrigin": ORIGIN,
            "projectPath": project,
            "mergeRequestIid": iid,
            "diffRefs": {"baseSha": base, "startSha": base, "headSha": head},
        },
        "scope": {"filePaths": None, "selection": None},
        "policy": {"minConfidence": min_conf},
    }


def run_review(client, project, base, head, min_conf, iid):
    """One review over HTTP with a fresh requestId: (seconds to first event, seconds to last
    event, events, run id, fromCache). The review cache keys on the payload without requestId,
    so a new `iid` (mergeRequestIid) is a cache miss and a repeated one a hit."""
    t0, events, _ = client.sse("POST", "/v1/reviews", review_body(
        f"bench-{uuid.uuid4()}", project, base, head, min_conf, iid))
    if not events or events[0][2] != "run.created" or events[-1][2] != "run.completed":
        kinds = [e[2] for e in events]
        raise SystemExit(f"unexpected event sequence: {kinds[:3]} ... {kinds[-3:]}")
    ids = [e[1] for e in events]
    if ids != list(range(1, len(ids) + 1)):
        raise SystemExit("SSE ids are not the gap-free seq 1..n")
    created = json.loads(events[0][3])
    return events[0][0] - t0, events[-1][0] - t0, events, created["runId"], bool(
        created.get("fromCache"))


def wrk(port, threads, conns, seconds):
    url = f"http://127.0.0.1:{port}/v1/health"
    # Warm up (connection set-up, allocator), then measure.
    subprocess.run(["wrk", "-t", str(threads), "-c", str(conns), "-d", "1s", url],
                   check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run(["wrk", "-t", str(threads), "-c", str(conns), "-d", f"{seconds}s",
                          "--latency", url], check=True, capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))

    def pct(p):
        m = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        value, unit = float(m.group(1)), m.group(2)
        return value * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]

    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:.*", out)
    return {"rps": rps, "total": total, "p50": pct(50), "p99": pct(99),
            "non2xx": int(bad.group(1)) if bad else 0,
            "errors": errors.group(0) if errors else "none", "raw": out}


def cli_review(bin_path, home, repo, min_conf, runs):
    cmd = [bin_path, "review", "--repo", repo, "--base", "base", "--head", "head",
           "--format", "json", "--fail-on", "never", "--min-confidence", min_conf]
    env = {"REVIEW_AGENT_GATEWAY_HOME": home, "PATH": "/usr/bin:/bin"}
    out = subprocess.run(cmd, check=True, capture_output=True, env=env).stdout
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        times.append(time.perf_counter() - t)
    kinds = [json.loads(line)["type"] for line in out.splitlines() if line.strip()]
    return times, kinds


def ms(seconds):
    return f"{seconds * 1e3:.1f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--home", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--project", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--head", required=True)
    ap.add_argument("--big-project", required=True)
    ap.add_argument("--big-base", required=True)
    ap.add_argument("--big-head", required=True)
    ap.add_argument("--changed", default="")
    ap.add_argument("--big-changed", default="")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--replays", type=int, default=5)
    ap.add_argument("--wrk-threads", type=int, default=2)
    ap.add_argument("--wrk-conns", type=int, default=50)
    ap.add_argument("--wrk-seconds", type=int, default=5)
    ap.add_argument("--min-confidence", default="low")
    a = ap.parse_args()
    client = Client(a.port, a.token)

    load0 = os.getloadavg()[0]
    rss_start = rss(a.pid)
    status, health = client.json("GET", "/v1/health")
    if status != 200 or not health.get("ok"):
        raise SystemExit(f"GET /v1/health: HTTP {status}: {health}")

    # 1. health under load.
    w = wrk(a.port, a.wrk_threads, a.wrk_conns, a.wrk_seconds)
    if w["non2xx"]:
        print(w["raw"], file=sys.stderr)
        raise SystemExit(f"wrk saw {w['non2xx']} non-2xx responses")
    rss_after_wrk = rss(a.pid)

    # 2. reviews over HTTP, then the same review by the CLI.
    # Warm-up (page cache); it also fills the review cache for iid 1.
    run_review(client, a.project, a.base, a.head, a.min_confidence, 1)
    series = {}
    counts = set()
    run_id = None
    for name, iids in (("miss", range(1000, 1000 + a.runs)), ("hit", [1] * a.runs)):
        firsts, lasts, cached = [], [], []
        for iid in iids:
            first, last, events, rid, from_cache = run_review(
                client, a.project, a.base, a.head, a.min_confidence, iid)
            firsts.append(first)
            lasts.append(last)
            cached.append(from_cache)
            counts.add((len(events), sum(e[2] == "finding.created" for e in events)))
            if name == "miss":
                run_id = rid
        series[name] = (firsts, lasts, sum(cached))
    rss_after_reviews = rss(a.pid)
    cli_times, cli_kinds = cli_review(a.bin, a.home, a.repo, a.min_confidence, a.runs)
    cli_counts = (len(cli_kinds), cli_kinds.count("finding.created"))

    # 3. events/s: replay the largest completed run through one SSE stream.
    _, big_last, big_events, big_run, _ = run_review(client, a.big_project, a.big_base,
                                                     a.big_head, a.min_confidence, 1)
    replays = []
    for _ in range(a.replays):
        elapsed, nbytes, events = client.drain(f"/v1/runs/{big_run}/events?after=0")
        if [e[0] for e in events] != list(range(1, len(big_events) + 1)):
            raise SystemExit("replay did not return the run's complete sequence")
        replays.append((elapsed, nbytes, len(events)))
    replay_med = sorted(replays)[len(replays) // 2]
    small_replay = []
    for _ in range(a.replays):
        elapsed, nbytes, events = client.drain(f"/v1/runs/{run_id}/events?after=0")
        small_replay.append((elapsed, nbytes, len(events)))
    small_med = sorted(small_replay)[len(small_replay) // 2]

    # 4. idle memory after it all.
    time.sleep(1.0)
    rss_end = rss(a.pid)

    med = statistics.median
    n_ev, n_find = sorted(counts)[0]
    print()
    print(f"review-agent-gateway daemon benchmark  (127.0.0.1:{a.port}, {nproc()} CPU cores shared "
          f"by the daemon and the load generators; load average before: {load0:.2f}, "
          f"after: {os.getloadavg()[0]:.2f})")
    print(f"small review: {a.changed or a.project}; {n_ev} events, {n_find} findings "
          f"(minConfidence {a.min_confidence})")
    print(f"large review: {a.big_changed or a.big_project}; {len(big_events)} events")
    print()
    rows = [
        ("GET /v1/health, wrk -t%d -c%d -d%ds" % (a.wrk_threads, a.wrk_conns, a.wrk_seconds),
         f"{w['rps']:,.0f} req/s", f"p50 {w['p50']:.2f} ms, p99 {w['p99']:.2f} ms; "
         f"{w['total']:,} requests, socket errors: {w['errors'].replace('Socket errors: ', '')}"),
        *[(f"POST /v1/reviews -> {what}, {label}, median of {a.runs}",
           f"{ms(med(xs))} ms", f"min {ms(min(xs))}, max {ms(max(xs))}; fromCache {n}/{a.runs}")
          for key, label in (("miss", "cache miss"), ("hit", "cache hit"))
          for what, xs, n in (("first event (run.created)", series[key][0], series[key][2]),
                              ("last event (run.completed)", series[key][1], series[key][2]))],
        (f"CLI review --format json (same review), median of {a.runs}",
         f"{ms(med(cli_times))} ms", f"min {ms(min(cli_times))}, max {ms(max(cli_times))}; "
         f"{cli_counts[0]} events, {cli_counts[1]} findings"),
        (f"SSE replay, large run (events?after=0), median of {a.replays}",
         f"{replay_med[2] / replay_med[0]:,.0f} events/s",
         f"{replay_med[2]} events, {replay_med[1] / 1024:.0f} KiB in {ms(replay_med[0])} ms "
         f"({replay_med[1] / replay_med[0] / 2**20:.1f} MiB/s)"),
        (f"SSE replay, small run, median of {a.replays}",
         f"{small_med[2] / small_med[0]:,.0f} events/s",
         f"{small_med[2]} events in {ms(small_med[0])} ms"),
        ("large review over HTTP (POST -> run.completed), 1 run",
         f"{ms(big_last)} ms", f"{len(big_events) / big_last:,.0f} events/s live"),
        ("daemon VmRSS right after start", f"{rss_start[0]:.1f} MiB", f"VmHWM {rss_start[1]:.1f} MiB"),
        ("daemon VmRSS after wrk", f"{rss_after_wrk[0]:.1f} MiB", f"VmHWM {rss_after_wrk[1]:.1f} MiB"),
        (f"daemon VmRSS after the {2 * a.runs + 1} small reviews", f"{rss_after_reviews[0]:.1f} MiB",
         f"VmHWM {rss_after_reviews[1]:.1f} MiB"),
        ("daemon VmRSS idle, after the large review + replays", f"{rss_end[0]:.1f} MiB",
         f"VmHWM (peak) {rss_end[1]:.1f} MiB"),
    ]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    print(f"{'measurement':<{w0}}  {'result':>{w1}}  detail")
    print(f"{'-' * w0}  {'-' * w1}  {'-' * 40}")
    for name, value, detail in rows:
        print(f"{name:<{w0}}  {value:>{w1}}  {detail}")
    print()
    for key, label in (("miss", "cache miss"), ("hit", "cache hit")):
        ratio = med(series[key][1]) / med(cli_times)
        print(f"daemon review ({label}) / CLI review, median wall time: {ratio:.2f}x")
    if (n_ev, n_find) != cli_counts or len(counts) != 1:
        print(f"note: event counts differ: daemon {sorted(counts)}, CLI {cli_counts}")


def nproc():
    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    main()
