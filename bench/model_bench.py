#!/usr/bin/env python3
"""Measure what the gateway adds on top of a model server (started by bench/model.sh, which
passes every argument) and print a markdown table. The model server is bench/fake_openai.py;
the peer of every row is what a user would otherwise do: talk to the model server directly.

1. Streaming a chat answer of N deltas: `curl -sN` straight to the fake's
   `/v1/chat/completions` (wall time to the last byte) vs `review-agent-gateway chat` (the
   command line, process start included, to its exit) vs the daemon's `POST /v1/chat` read by
   `curl -sN` (to the `run.completed` event; the first `text.delta` is shown too).
2. Time to the first token, p50/p99 of R runs, for a one-token answer (the bare path) and for
   an answer streamed at 100 tokens/s (what a reader of a real model sees).
3. The model stage of `review --provider` on a synthetic repository, the fake answering at once
   (with a stop, or with one `report_finding` call per part), against the rules-only `review`
   of the same range: the extra milliseconds and how many model requests / diff parts it sent.

Every client is a child process timed from just before it starts, so both sides of a ratio pay
the same process start (curl's, or the gateway's own for the command line). Every loop is
bounded; each child has a timeout. All traffic goes to 127.0.0.1.
"""
import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

QUESTION = "Explain this change."
TIMEOUT = 120.0


def run_timed(cmd, markers=(), env=None, timeout=TIMEOUT):
    """Run `cmd`, reading its stdout as it comes. Returns a dict: `first` (seconds to the first
    stdout byte), `at` (seconds to the first occurrence of each marker), `end` (seconds to end of
    stdout), `out` (all of it), `rc`. Times are from just before the process starts."""
    at = {}
    buf = bytearray()
    first = None
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env)
        fd = p.stdout.fileno()
        deadline = t0 + timeout
        try:
            while True:
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise SystemExit(f"timeout after {timeout:.0f} s: {' '.join(cmd[:4])} ...")
                ready, _, _ = select.select([fd], [], [], left)
                if not ready:
                    continue
                data = os.read(fd, 1 << 16)
                now = time.perf_counter()
                if not data:
                    break
                if first is None:
                    first = now - t0
                start = max(0, len(buf) - 64)
                buf += data
                for m in markers:
                    if m not in at and buf.find(m, start) >= 0:
                        at[m] = now - t0
            end = time.perf_counter() - t0
            rc = p.wait(timeout=max(1.0, deadline - time.perf_counter()))
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
        if rc != 0:
            err.seek(0)
            raise SystemExit(f"exit {rc}: {' '.join(cmd[:6])} ...\n{err.read()[-2000:].decode(errors='replace')}")
    return {"first": first, "at": at, "end": end, "out": bytes(buf), "rc": rc}


def sse_events(body):
    out = []
    for block in body.split(b"\n\n"):
        kind = data = None
        for line in block.split(b"\n"):
            if line.startswith(b"event:"):
                kind = line[6:].strip().decode()
            elif line.startswith(b"data:"):
                data = line[5:].strip()
        if kind:
            out.append((kind, data))
    return out


class Bench:
    def __init__(self, a):
        self.a = a
        self.env = dict(os.environ, REVIEW_AGENT_GATEWAY_HOME=a.home)
        self.fake = f"http://127.0.0.1:{a.fake_port}"
        self.daemon = f"http://127.0.0.1:{a.port}"

    # --- the three clients of a chat answer

    def direct(self, model):
        body = {"model": model, "stream": True, "stream_options": {"include_usage": True},
                "max_tokens": 4096, "messages": [
                    {"role": "system", "content": "You are a senior engineer."},
                    {"role": "user", "content": QUESTION}]}
        r = run_timed(["curl", "-sN", "--fail", "-H", "Content-Type: application/json",
                       "-d", json.dumps(body), f"{self.fake}/v1/chat/completions"],
                      markers=(b'"content":"tok', b"data: [DONE]"))
        r["deltas"] = r["out"].count(b'"content":"tok')
        r["token"] = r["at"].get(b'"content":"tok')
        r["last"] = r["end"]
        return r

    def daemon_chat(self, model):
        body = {"requestId": f"bench-{uuid.uuid4()}", "providerId": self.a.provider,
                "model": model, "messages": [{"role": "user", "content": QUESTION}]}
        r = run_timed(["curl", "-sN", "--fail", "-H", f"Authorization: Bearer {self.a.token}",
                       "-H", "Content-Type: application/json", "-d", json.dumps(body),
                       f"{self.daemon}/v1/chat"],
                      markers=(b"event: text.delta", b"event: run.completed"))
        events = sse_events(r["out"])
        kinds = [k for k, _ in events]
        if not kinds or kinds[-1] != "run.completed":
            raise SystemExit(f"POST /v1/chat did not end with run.completed: {kinds[-3:]}")
        text = "".join(json.loads(d)["text"] for k, d in events if k == "text.delta")
        r["deltas"] = text.count("tok")
        r["events"] = kinds.count("text.delta")
        r["token"] = r["at"].get(b"event: text.delta")
        r["last"] = r["at"][b"event: run.completed"]
        return r

    def cli_chat(self, model):
        r = run_timed([self.a.bin, "chat", "--provider", self.a.provider, "--model", model,
                       QUESTION], env=self.env)
        r["deltas"] = r["out"].count(b"tok")
        r["token"] = r["first"]
        r["last"] = r["end"]
        return r

    # --- the fake's counters

    def stats(self, reset=False):
        req = urllib.request.Request(self.fake + ("/stats/reset" if reset else "/stats"),
                                     data=b"" if reset else None)
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.load(resp)


def pct(xs, p):
    """Nearest-rank percentile."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(-(-p * len(s) // 100)) - 1))]


def ms(seconds):
    return f"{seconds * 1e3:,.1f} ms" if seconds < 10 else f"{seconds:,.2f} s"


def rate(n, seconds):
    return f"{n / seconds / 1e3:,.0f}k deltas/s" if seconds > 0 else "-"


def main():
    ap = argparse.ArgumentParser()
    for name in ("--port", "--fake-port"):
        ap.add_argument(name, type=int, required=True)
    for name in ("--token", "--bin", "--home", "--repo", "--provider", "--changed"):
        ap.add_argument(name, required=True)
    ap.add_argument("--review-providers", required=True,
                    help="comma-separated ID=CONTEXT_WINDOW of the review providers")
    ap.add_argument("--deltas", default="5000,50000")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--ttft-runs", type=int, default=30)
    ap.add_argument("--review-runs", type=int, default=5)
    a = ap.parse_args()
    b = Bench(a)
    load0 = os.getloadavg()[0]
    rows = []  # (measurement, gateway, peer, ratio)

    # 1. Streaming throughput.
    sizes = [int(n) for n in a.deltas.split(",") if n.strip()]
    clients = (("direct", b.direct), ("daemon", b.daemon_chat), ("cli", b.cli_chat))
    for n in sizes:
        model = f"deltas-{n}"
        for _, client in clients:  # warm-up: page cache, first connections
            client(model)
        got = {name: [] for name, _ in clients}
        for _ in range(a.runs):
            for name, client in clients:
                r = client(model)
                if r["deltas"] != n:
                    raise SystemExit(f"{name}: {r['deltas']} of {n} deltas arrived")
                got[name].append(r)
        med = {name: statistics.median(r["last"] for r in rs) for name, rs in got.items()}
        first = statistics.median(r["token"] for r in got["daemon"])
        events = statistics.median(r["events"] for r in got["daemon"])
        peer = f"`curl -sN` to the model server {ms(med['direct'])} · {rate(n, med['direct'])}"
        rows.append((f"chat answer of {n:,} deltas, daemon `POST /v1/chat` read by `curl -sN`, to "
                     f"`run.completed` (first `text.delta` {ms(first)}; {events:.0f} events)",
                     f"{ms(med['daemon'])} · {rate(n, med['daemon'])}", peer,
                     f"{med['daemon'] / med['direct']:.2f}×"))
        rows.append((f"chat answer of {n:,} deltas, `review-agent-gateway chat` (process start "
                     f"included), to exit", f"{ms(med['cli'])} · {rate(n, med['cli'])}", peer,
                     f"{med['cli'] / med['direct']:.2f}×"))

    # 2. Time to the first token.
    for model, what in (("deltas-1", "a 1-token answer"),
                        ("deltas-10@10ms", "an answer streamed at 100 tokens/s")):
        for _, client in clients:
            client(model)
        got = {name: [] for name, _ in clients}
        for _ in range(a.ttft_runs):
            for name, client in clients:
                got[name].append(client(model)["token"])
        d50, d99 = pct(got["direct"], 50), pct(got["direct"], 99)
        for name, label in (("daemon", "daemon `POST /v1/chat`, first `text.delta`"),
                            ("cli", "`review-agent-gateway chat`, first byte of the answer")):
            g50, g99 = pct(got[name], 50), pct(got[name], 99)
            rows.append((f"first token of {what}, {label} (p50 / p99 of {a.ttft_runs})",
                         f"{ms(g50)} / {ms(g99)}", f"`curl -sN` {ms(d50)} / {ms(d99)}",
                         f"{g50 / d50:.2f}× (+{(g50 - d50) * 1e3:.1f} ms)"))

    # 3. Model-review overhead.
    review = [a.bin, "review", "--repo", a.repo, "--base", "base", "--head", "head",
              "--format", "json", "--fail-on", "never"]

    def timed_review(extra, runs):
        run_timed(review + extra, env=b.env)  # warm-up
        b.stats(reset=True)
        times, out = [], None
        for _ in range(runs):
            r = run_timed(review + extra, env=b.env)
            times.append(r["end"])
            out = r["out"]
        s = b.stats()
        events = [json.loads(line) for line in out.splitlines() if line.strip()]
        return statistics.median(times), s, events

    rules_t, _, rules_events = timed_review([], a.review_runs)
    rule_findings = sum(e["type"] == "finding.created" for e in rules_events)
    for spec in a.review_providers.split(","):
        pid, window = spec.split("=")
        for model, what in (("review-stop", "answers at once with a stop"),
                            ("review-finding", "reports 1 finding per part, then stops")):
            t, s, events = timed_review(["--provider", pid, "--model", model], a.review_runs)
            runs = a.review_runs
            parts = s["first_turns"] / runs
            found = [e for e in events if e["type"] == "finding.created"]
            model_findings = sum(e["finding"]["source"] == "model" for e in found)
            warnings = sorted({e["code"] for e in events if e["type"] == "warning"})
            fake_ms = s["handle_seconds"] / runs * 1e3
            rows.append((
                f"`review --provider` (context_window {int(window):,}; the fake {what}): "
                f"{s['completions'] / runs:.0f} model requests, {parts:.0f} diff parts of "
                f"~{s['chunk_files'] / max(1, s['first_turns']):.1f} files / "
                f"{s['chunk_chars'] / max(1, s['first_turns']) / 1e3:.1f}k chars, "
                f"{s['request_bytes'] / runs / 2**20:.1f} MiB sent, "
                f"{s['tools_offered_max']} tools offered; {model_findings} model + "
                f"{len(found) - model_findings} rule findings"
                + (f"; warnings: {', '.join(warnings)}" if warnings else "")
                + f"; the fake's own time {fake_ms:.0f} ms",
                ms(t), f"`review` rules only {ms(rules_t)} ({rule_findings} findings)",
                f"{t / rules_t:.2f}× (+{(t - rules_t) * 1e3:.0f} ms, "
                f"{(t - rules_t) * 1e3 / max(1, s['completions'] / runs):.2f} ms a request)"))

    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print()
    print(f"review-agent-gateway over a model server (bench/fake_openai.py on 127.0.0.1:{a.fake_port},"
          f" daemon on 127.0.0.1:{a.port}); {len(os.sched_getaffinity(0))} CPU cores ({cpu}) shared"
          f" by the fake, the gateway and the clients; load average before {load0:.2f}, after"
          f" {os.getloadavg()[0]:.2f}")
    print(f"streaming: median of {a.runs} runs each; review: {a.changed}, median of "
          f"{a.review_runs} runs each")
    print()
    print("| measurement | gateway | peer | ratio |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        sys.exit(1)
