#!/usr/bin/env python3
"""Delegation benchmark (issue 15): the same scripted task handed to OpenCode through the gateway
(MCP `agent_start_task` + `agent_status` polls, the server started, sandboxed and supervised by
the gateway) and straight to `opencode serve` over its HTTP API (what a user scripts without the
gateway, unconfined), with one fake model (bench/fake_openai.py, model `agent-read`: read a file,
then stop) and one client process. Prints one table: median / p95 ms per side and the ratio
ours / peer (< 1: we are faster).

Rows:
  start     the first task until its session id is known: starting the server (and, ours, the
            sandbox) included; for the peer, `opencode serve` until healthy + POST /session.
  prompt    a new session with its prompt accepted (ours `agent_start_task`; the peer's POST
            /session + POST /session/:id/prompt_async), on a running server.
  task      a read-only task from its prompt until the agent is done (idle, last answer
            `stop`), polling every 100 ms, after a warm-up task on each side.
  status    one status read: ours `agent_status` over /mcp; the peer's GET /session/status plus
            GET /session/:id/message (what `completed` needs).
"""
import argparse
import asyncio
import base64
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

PERMISSIONS = {"edit": "ask", "bash": "ask", "webfetch": "ask", "websearch": "ask",
               "codesearch": "ask", "external_directory": "ask", "doom_loop": "ask",
               "task": "deny"}


def stats(samples):
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, max(0, int(round(len(ordered) * 0.95)) - 1))]
    return statistics.median(ordered) * 1e3, p95 * 1e3


def start_fake(script):
    proc = subprocess.Popen(["python3", script, "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if "listening on" not in line:
        raise SystemExit(f"error: the fake model did not start: {line!r}")
    return proc, line.split("listening on", 1)[1].strip()


def make_repo(root):
    repo = os.path.join(root, "repo")
    os.makedirs(repo)
    with open(os.path.join(repo, "README.txt"), "w") as f:
        f.write("hello from the benchmark\n" * 20)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "one"]):
        subprocess.run(["git", "-C", repo, *args], check=True)
    return os.path.realpath(repo)


# === the peer: opencode serve over HTTP ===

class Peer:
    def __init__(self, opencode, fake_url, root):
        self.password = "bench-" + os.urandom(16).hex()
        self.port = free_port()
        state = os.path.join(root, "peer")
        env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}
        for name, var in [("home", "HOME"), ("data", "XDG_DATA_HOME"), ("config", "XDG_CONFIG_HOME"),
                          ("cache", "XDG_CACHE_HOME"), ("state", "XDG_STATE_HOME")]:
            os.makedirs(os.path.join(state, name), exist_ok=True)
            env[var] = os.path.join(state, name)
        env.update({
            "OPENCODE_SERVER_PASSWORD": self.password,
            "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            "OPENCODE_CONFIG_CONTENT": json.dumps({
                "model": "gateway/agent-read", "small_model": "gateway/agent-read",
                "autoupdate": False, "share": "disabled", "lsp": False, "formatter": False,
                "permission": PERMISSIONS,
                "provider": {"gateway": {
                    "npm": "@ai-sdk/openai-compatible", "name": "fake",
                    "options": {"baseURL": fake_url + "/v1"},
                    "models": {"agent-read": {"name": "agent-read", "tool_call": True}}}}}),
        })
        self.proc = subprocess.Popen(
            [opencode, "serve", "--hostname", "127.0.0.1", "--port", str(self.port)], env=env,
            cwd=state, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.auth = "Basic " + base64.b64encode(f"opencode:{self.password}".encode()).decode()
        try:
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise

    def wait_healthy(self):
        deadline = time.time() + 60
        while True:
            try:
                # A short timeout: a connection accepted while the server starts may never be
                # answered.
                if self.call("GET", "/global/health", timeout=2).get("healthy"):
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise SystemExit("error: opencode serve did not become healthy in 60 s")
            time.sleep(0.05)

    def call(self, method, path, body=None, timeout=60):
        data = json.dumps(body).encode() if body is not None else None
        # Content-Type only with a body: OpenCode's server waits for a body that never comes
        # when a GET says it has JSON.
        headers = {"Authorization": self.auth}
        if data is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                     method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
        return json.loads(raw) if raw else None

    def get(self, path):
        return self.call("GET", path)

    def session(self, repo):
        q = urllib.parse.quote(repo)
        return self.call("POST", f"/session?directory={q}", {})["id"]

    def prompt(self, repo, sid, text):
        q = urllib.parse.quote(repo)
        self.call("POST", f"/session/{sid}/prompt_async?directory={q}",
                  {"parts": [{"type": "text", "text": text}]})

    def done(self, repo, sid):
        q = urllib.parse.quote(repo)
        status = self.get(f"/session/status?directory={q}").get(sid, {}).get("type", "idle")
        messages = self.get(f"/session/{sid}/message?directory={q}&limit=20")
        last = messages[-1]["info"] if messages else {}
        return (status == "idle" and last.get("role") == "assistant"
                and last.get("finish") == "stop" and "completed" in last.get("time", {}))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peer_task(peer, repo, text, prompts=None):
    start = time.perf_counter()
    sid = peer.session(repo)
    peer.prompt(repo, sid, text)
    if prompts is not None:
        prompts.append(time.perf_counter() - start)
    deadline = time.time() + 120
    while not peer.done(repo, sid):
        if time.time() > deadline:
            raise SystemExit("error: the peer's task did not finish in 120 s")
        time.sleep(0.1)
    return time.perf_counter() - start, sid


# === ours: the gateway over MCP ===

def start_daemon(binary, home):
    env = dict(os.environ, REVIEW_AGENT_GATEWAY_HOME=home)
    proc = subprocess.Popen([binary, "serve", "--port", "0"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        if "listening on http://127.0.0.1:" in line:
            port = int(line.rsplit(":", 1)[1].split()[0].strip("/"))
            token = subprocess.run([binary, "token", "show"], env=env, check=True,
                                   capture_output=True, text=True).stdout.strip()
            return proc, port, token
    raise SystemExit("error: the daemon exited before listening")


def structured(result, what):
    if result.is_error or result.structured_content is None:
        text = result.content[0].text if result.content else ""
        raise SystemExit(f"error: {what} failed: {text[:500]}")
    return result.structured_content


async def ours(a, port, token, repo, text):
    rows = {}
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    async with http, Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp",
                                                   http_client=http), mode="legacy") as c:
        ws = structured(await c.call_tool("workspace_open", {"path": repo}), "workspace_open")
        ws = ws["workspace"]

        async def task():
            start = time.perf_counter()
            started = structured(await c.call_tool("agent_start_task", {
                "executor": "opencode", "task": text, "workspace": ws}), "agent_start_task")
            first = time.perf_counter() - start
            deadline = time.time() + 120
            while True:
                status = structured(await c.call_tool(
                    "agent_status", {"session_id": started["sessionId"]}), "agent_status")
                if status["completed"]:
                    break
                if time.time() > deadline:
                    raise SystemExit(f"error: our task did not finish in 120 s: {status}")
                await asyncio.sleep(0.1)
            return first, time.perf_counter() - start, started["sessionId"]

        first, _, _ = await task()
        rows["start"] = [first]
        rows["prompt"], rows["task"] = [], []
        for _ in range(a.runs):
            prompt, whole, _ = await task()
            rows["prompt"].append(prompt)
            rows["task"].append(whole)
        _, _, sid = await task()
        samples = []
        for _ in range(a.polls):
            t = time.perf_counter()
            structured(await c.call_tool("agent_status", {"session_id": sid}), "agent_status")
            samples.append(time.perf_counter() - t)
        rows["status"] = samples
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--opencode", required=True)
    p.add_argument("--fake", required=True, help="bench/fake_openai.py")
    p.add_argument("--runs", type=int, default=5, help="warm tasks per side")
    p.add_argument("--polls", type=int, default=30, help="status reads per side")
    a = p.parse_args()
    a.opencode, a.bin = os.path.realpath(a.opencode), os.path.realpath(a.bin)
    root = tempfile.mkdtemp(prefix="rag-bench-delegation-")
    fake = daemon = peer = None
    try:
        fake, fake_url = start_fake(a.fake)
        repo = make_repo(root)
        text = f"Read the file. FILE:{repo}/README.txt please"
        # The peer.
        t0 = time.perf_counter()
        peer = Peer(a.opencode, fake_url, root)
        sid = peer.session(repo)
        peer_rows = {"start": [time.perf_counter() - t0]}
        peer.prompt(repo, sid, text)
        while not peer.done(repo, sid):
            time.sleep(0.1)
        peer_rows["prompt"] = []
        peer_rows["task"] = [peer_task(peer, repo, text, peer_rows["prompt"])[0]
                             for _ in range(a.runs)]
        samples = []
        for _ in range(a.polls):
            t = time.perf_counter()
            peer.done(repo, sid)
            samples.append(time.perf_counter() - t)
        peer_rows["status"] = samples
        peer.stop()
        peer = None
        # Ours.
        home = os.path.join(root, "home")
        os.makedirs(os.path.join(home, "config"))
        with open(os.path.join(home, "config", "config.toml"), "w") as f:
            f.write(f"[mcp]\nroots = [{{ path = {json.dumps(os.path.dirname(repo))}, "
                    f"writable = true }}]\n\n[[providers]]\nid = \"fake\"\n"
                    f"kind = \"openai-compatible\"\nbase_url = {json.dumps(fake_url + '/v1')}\n"
                    f"model = \"agent-read\"\n\n[delegation]\nenabled = true\n"
                    f"provider = \"fake\"\nopencode_binary = {json.dumps(a.opencode)}\n")
        daemon, port, token = start_daemon(a.bin, home)
        our_rows = asyncio.run(ours(a, port, token, repo, text))
        version = subprocess.run([a.opencode, "--version"], capture_output=True,
                                 text=True).stdout.strip()
        print(f"OpenCode {version}; fake model bench/fake_openai.py (agent-read); {os.cpu_count()} "
              f"cores; {a.runs} warm tasks and {a.polls} status reads per side; ms median / p95")
        print("ours: MCP (Python SDK) -> gateway -> sandboxed opencode serve it started; "
              "peer: HTTP -> opencode serve started by hand, unconfined")
        print(f"{'row':<8} {'ours':>17} {'peer':>17} {'ours/peer':>10}")
        for row in ["start", "prompt", "task", "status"]:
            o, q = stats(our_rows[row]), stats(peer_rows[row])
            print(f"{row:<8} {o[0]:>8.1f} / {o[1]:<6.1f} {q[0]:>8.1f} / {q[1]:<6.1f} "
                  f"{o[0] / q[0]:>9.2f}x")
    finally:
        for proc in (daemon, fake):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        if peer is not None:
            peer.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
