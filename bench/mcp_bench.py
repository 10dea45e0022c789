#!/usr/bin/env python3
"""MCP benchmark (issue 14's "Done means"): the gateway's `/mcp` tools against the reference
filesystem server, `@modelcontextprotocol/server-filesystem`, and against `rg` for content
search, under one client (the official Python SDK, `mcp` 2.x) in one process and one run.

Sides (each one MCP session, opened once, handshake-era `initialize` flow for all three so the
protocol is the same):
- ours http:  `review-agent-gateway serve` (started by this script on its own loopback port, in a
  temporary REVIEW_AGENT_GATEWAY_HOME whose `[mcp] roots` is the corpus), Streamable HTTP with the
  bearer token; `workspace_open` once;
- ours stdio: `review-agent-gateway mcp` (the stdio relay) launched by the SDK, relaying to that
  same daemon; `workspace_open` once;
- peer stdio: `node <server-filesystem>/dist/index.js CORPUS` launched by the SDK;
- rg: `subprocess.run(["rg", ...])` per call, for code search only (the peer has none).

Rows (N warm calls per side after WARMUP unmeasured ones, the sides interleaved call by call so
drift hits all alike; median and p95 in ms, ratio = ours / peer, < 1 means we are faster):
- file_read of a mid-size and a large file (ours `file_read`, peer `read_text_file`);
- files by glob (ours `file_find` with `glob`, peer `search_files` with `pattern`, `.git`
  excluded);
- code_search, a literal and a regex (ours `code_search`, `maxMatches` 2000; `rg --count`, smart
  case, hidden files, `.git` excluded, as ours searches).
Each row checks that the sides answered the same thing (same text; same set of files; same
files and matching lines) and prints a mismatch instead of "same".

Named mcp_bench.py, not mcp.py: a script named mcp.py would shadow the `mcp` SDK it imports.

Usage: see bench/mcp.sh (it builds the release binary, finds the SDK's venv and installs the
peer). Every address used is 127.0.0.1.
"""

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack

import httpx2
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def structured(result, what):
    """The gateway's structuredContent.output of a call, or exit naming the failed call."""
    if result.is_error or result.structured_content is None:
        text = result.content[0].text if result.content else ""
        raise SystemExit(f"error: {what} failed: {text[:500]}")
    return result.structured_content


def text_of(result, what):
    """The first text block of a peer's answer, or exit naming the failed call."""
    if result.is_error or not result.content:
        text = result.content[0].text if result.content else ""
        raise SystemExit(f"error: {what} failed: {text[:500]}")
    return result.content[0].text


def stats(samples):
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, max(0, int(round(len(ordered) * 0.95)) - 1))]
    return statistics.median(ordered) * 1e3, p95 * 1e3


def start_daemon(binary, home):
    """Start `serve --port 0`; answer (process, port, token)."""
    env = dict(os.environ, REVIEW_AGENT_GATEWAY_HOME=home)
    proc = subprocess.Popen([binary, "serve", "--port", "0"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    port = None
    for line in proc.stdout:
        if "listening on http://127.0.0.1:" in line:
            port = int(line.rsplit(":", 1)[1].split()[0].strip("/"))
            break
    if port is None:
        proc.kill()
        raise SystemExit("error: the daemon exited before printing 'listening on http://127.0.0.1:PORT'")
    token = subprocess.run([binary, "token", "show"], env=env, check=True, capture_output=True,
                           text=True).stdout.strip()
    return proc, port, token


async def open_sides(stack, a, port, token, home):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    await stack.enter_async_context(http)
    ours_http = await stack.enter_async_context(
        Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http),
               mode="legacy"))
    relay = StdioServerParameters(
        command=a.bin, args=["mcp"],
        env={"REVIEW_AGENT_GATEWAY_HOME": home, "REVIEW_AGENT_GATEWAY_PORT": str(port)})
    # The servers' stderr (their logs) goes to a file kept in the temporary home.
    errlog = open(os.path.join(home, "stdio-servers.log"), "w")
    stack.callback(errlog.close)
    ours_stdio = await stack.enter_async_context(
        Client(stdio_client(relay, errlog=errlog), mode="legacy"))
    peer_params = StdioServerParameters(command=a.node, args=[a.peer, a.corpus])
    peer = await stack.enter_async_context(
        Client(stdio_client(peer_params, errlog=errlog), mode="legacy"))
    return ours_http, ours_stdio, peer


def relative(paths, root):
    prefix = root.rstrip("/") + "/"
    return {p[len(prefix):] if p.startswith(prefix) else p for p in paths}


async def timed(call, n, warmup):
    """Run `call` (async, or plain) warmup + n times; answer (seconds list, last answer)."""
    samples, answer = [], None
    for i in range(warmup + n):
        start = time.perf_counter()
        answer = call()
        if asyncio.iscoroutine(answer):
            answer = await answer
        elapsed = time.perf_counter() - start
        if i >= warmup:
            samples.append(elapsed)
    return samples, answer


async def interleaved(calls, n, warmup):
    """Each of `calls` (name -> callable) warmup times, then n rounds of one call each, in turn."""
    answers = {}
    for name, call in calls.items():
        _, answers[name] = await timed(call, 0, warmup)
    samples = {name: [] for name in calls}
    for _ in range(n):
        for name, call in calls.items():
            start = time.perf_counter()
            answer = call()
            if asyncio.iscoroutine(answer):
                answer = await answer
            samples[name].append(time.perf_counter() - start)
            answers[name] = answer
    return samples, answers


class Table:
    def __init__(self):
        self.rows = []

    def add(self, op, samples, peer_name, check):
        http, stdio, peer = (stats(samples[k]) for k in ("ours_http", "ours_stdio", "peer"))
        row = (op, http, stdio, peer_name, peer, http[0] / peer[0], stdio[0] / peer[0], check)
        self.rows.append(row)
        print(f"  {op}: http {http[0]:.2f} ms, stdio {stdio[0]:.2f} ms, {peer_name} "
              f"{peer[0]:.2f} ms; {check}", file=sys.stderr)

    def print(self):
        def ms(pair):
            return f"{pair[0]:.2f} / {pair[1]:.2f}"

        def ratio(value):
            return f"{value:.2f}x"

        head = ("operation", "ours http med/p95", "ours stdio med/p95", "peer", "peer med/p95",
                "http/peer", "stdio/peer", "check")
        body = [(op, ms(h), ms(s), pn, ms(p), ratio(rh), ratio(rs), c)
                for op, h, s, pn, p, rh, rs, c in self.rows]
        widths = [max(len(str(r[i])) for r in [head] + body) for i in range(len(head))]
        for r in [head] + body:
            print("  ".join(str(v).ljust(w) if i in (0, 3, 7) else str(v).rjust(w)
                            for i, (v, w) in enumerate(zip(r, widths))).rstrip())


async def run(a, port, token, home):
    table = Table()
    async with AsyncExitStack() as stack:
        ours_http, ours_stdio, peer = await open_sides(stack, a, port, token, home)
        peer_tools = {t.name for t in (await peer.list_tools()).tools}
        read_tool = "read_text_file" if "read_text_file" in peer_tools else "read_file"
        for needed in (read_tool, "search_files"):
            if needed not in peer_tools:
                raise SystemExit(f"error: the peer lists no `{needed}` tool: {sorted(peer_tools)}")
        ours_tools = {t.name for t in (await ours_http.list_tools()).tools}
        for needed in ("file_read", "file_find", "code_search"):
            if needed not in ours_tools:
                raise SystemExit(f"error: /mcp lists no `{needed}` tool: {sorted(ours_tools)}")
        ws = {}
        for name, client in (("ours_http", ours_http), ("ours_stdio", ours_stdio)):
            opened = structured(await client.call_tool("workspace_open", {"path": a.corpus}),
                                f"{name} workspace_open")
            ws[name] = opened["workspace"]
        if ws["ours_http"] != ws["ours_stdio"]:
            raise SystemExit(f"error: two handles for one directory: {ws}")
        handle = ws["ours_http"]
        print(f"peer tools used: {read_tool}, search_files; ours: file_read, file_find, "
              f"code_search (workspace {handle[:11]}...)", file=sys.stderr)

        def ours(tool, args):
            return {
                "ours_http": lambda: ours_http.call_tool(tool, {"workspace": handle, **args}),
                "ours_stdio": lambda: ours_stdio.call_tool(tool, {"workspace": handle, **args}),
            }

        # file_read: the same bytes on both sides.
        for label, rel in (("mid", a.mid_file), ("large", a.large_file)):
            size = os.path.getsize(os.path.join(a.corpus, rel))
            calls = ours("file_read", {"path": rel})
            calls["peer"] = lambda rel=rel: peer.call_tool(
                read_tool, {"path": os.path.join(a.corpus, rel)})
            samples, answers = await interleaved(calls, a.runs, a.warmup)
            want = text_of(answers["peer"], f"peer {read_tool}")
            checks = []
            for side in ("ours_http", "ours_stdio"):
                out = structured(answers[side], f"{side} file_read")["output"]
                if out.get("truncated"):
                    checks.append(f"{side} TRUNCATED")
                elif out.get("text") != want:
                    checks.append(f"{side} text differs ({len(out.get('text') or '')} vs "
                                  f"{len(want)} chars)")
            check = "same text" if not checks else "MISMATCH: " + ", ".join(checks)
            table.add(f"file_read {label} {rel} ({size // 1024} KiB)", samples, read_tool, check)

        # Files by glob.
        calls = ours("file_find", {"glob": a.glob, "limit": 2000})
        calls["peer"] = lambda: peer.call_tool(
            "search_files", {"path": a.corpus, "pattern": a.glob, "excludePatterns": [".git"]})
        samples, answers = await interleaved(calls, a.runs, a.warmup)
        peer_text = text_of(answers["peer"], "peer search_files")
        peer_set = set() if peer_text == "No matches found" else relative(
            peer_text.splitlines(), a.corpus)
        peer_set = {p for p in peer_set if os.path.isfile(os.path.join(a.corpus, p))}
        checks = []
        for side in ("ours_http", "ours_stdio"):
            out = structured(answers[side], f"{side} file_find")["output"]
            got = {f["path"] for f in out["files"]}
            if out.get("truncated"):
                checks.append(f"{side} TRUNCATED at {len(got)}")
            elif got != peer_set:
                checks.append(f"{side} {len(got - peer_set)} only ours, "
                              f"{len(peer_set - got)} only peer")
        check = (f"same {len(peer_set)} files" if not checks
                 else f"MISMATCH ({len(peer_set)} peer files): " + ", ".join(checks))
        table.add(f"file_find glob {a.glob}", samples, "search_files", check)

        # Code search: ours vs rg (the peer has no content search).
        rg_base = [a.rg, "--hidden", "-g", "!.git", "--count", "--no-messages"]
        for label, args, rg_args in (
                ("literal", {"query": a.literal}, ["-S", "-F", "--", a.literal]),
                ("regex", {"query": a.regex, "regex": True}, ["-S", "--", a.regex])):
            query = args["query"]
            calls = ours("code_search", {**args, "maxMatches": 2000})
            rg_cmd = rg_base + rg_args + [a.corpus]
            calls["peer"] = lambda cmd=rg_cmd: subprocess.run(cmd, capture_output=True, text=True)
            samples, answers = await interleaved(calls, a.runs, a.warmup)
            counts = {}
            for line in answers["peer"].stdout.splitlines():
                path, _, n = line.rpartition(":")
                counts[path] = int(n)
            rg_files = relative(counts, a.corpus)
            rg_lines = sum(counts.values())
            checks = []
            for side in ("ours_http", "ours_stdio"):
                out = structured(answers[side], f"{side} code_search")["output"]
                got = {m["path"] for m in out["matches"]}
                if out.get("truncated"):
                    checks.append(f"{side} TRUNCATED")
                elif got != rg_files or out["matchCount"] != rg_lines:
                    checks.append(f"{side} files {len(got)}/{len(rg_files)}, lines "
                                  f"{out['matchCount']}/{rg_lines}")
            check = (f"same {len(rg_files)} files, {rg_lines} lines" if not checks
                     else "MISMATCH: " + ", ".join(checks))
            # The reference server has no content search: its column says so, rg stands in.
            table.add(f"code_search {label} {query}", samples, "rg --count (server-fs: n/a)",
                      check)
    return table


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--corpus", required=True)
    p.add_argument("--peer", required=True, help="server-filesystem's dist/index.js")
    p.add_argument("--peer-version", default="?")
    p.add_argument("--node", default=shutil.which("node") or "node")
    p.add_argument("--rg", default=shutil.which("rg") or "rg")
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--mid-file", default="tokio/src/sync/mutex.rs")
    p.add_argument("--large-file", default="tokio/CHANGELOG.md")
    p.add_argument("--glob", default="**/*.rs")
    p.add_argument("--literal", default="spawn_blocking")
    p.add_argument("--regex", default=r"fn\s+\w+_mut\(")
    a = p.parse_args()
    a.corpus = os.path.realpath(a.corpus)
    home = tempfile.mkdtemp(prefix="rag-bench-mcp-")
    os.makedirs(os.path.join(home, "config"))
    with open(os.path.join(home, "config", "config.toml"), "w") as f:
        f.write(f"[mcp]\nroots = [{{ path = {json.dumps(a.corpus)} }}]\n")
    daemon = None
    try:
        daemon, port, token = start_daemon(a.bin, home)
        node_version = subprocess.run([a.node, "--version"], capture_output=True,
                                      text=True).stdout.strip()
        rg_version = subprocess.run([a.rg, "--version"], capture_output=True,
                                    text=True).stdout.splitlines()[0]
        table = asyncio.run(run(a, port, token, home))
        files = subprocess.run(["git", "-C", a.corpus, "ls-files"], capture_output=True,
                               text=True).stdout.count("\n")
        print(f"corpus: {a.corpus} ({files} files); {os.cpu_count()} cores; {a.runs} warm calls "
              f"per side after {a.warmup} warm-up; times in ms (median / p95), ratio of medians")
        print(f"peer: @modelcontextprotocol/server-filesystem {a.peer_version} (node "
              f"{node_version}) over stdio; {rg_version}; client: Python mcp SDK, one process")
        table.print()
    finally:
        if daemon is not None:
            daemon.terminate()
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
