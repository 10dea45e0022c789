#!/usr/bin/env python3
"""Benchmark of the repository tools (issue 4) against the tools a user would otherwise run, on
a real source tree, in the same run. Prints one table with the ratio ours / peer per task.

Rows (each a `hyperfine` comparison of two commands, page cache warm):
- code_search (three queries) against `rg` over the corpus's checkout, at WORKTREE (both read
  the files on disk), at HEAD (ours takes the clean work-tree files that are the commit's
  blobs, checked against their ids) and at HEAD of a bare clone (ours inflates every blob);
- file_search (a glob) against `rg --files -g` and `fd`;
- git_history log (whole history page, and one path following renames) against `git log`,
  blame of a line range against `git blame -L`, show against `git show --numstat`;
- symbol_search: the first index of the whole tree (fresh state directory each run) against
  `ctags -R` (universal-ctags), and a warm query by the command line (persistent index) against
  `readtags` on the tags file ctags wrote.
Then the in-process warm symbol query: the daemon (`serve`) answers `POST /v1/tools/symbol_search`
on a mapping of the corpus; median and p95 of QUERY_RUNS queries (target < 10 ms).

Every row also checks that both sides found the same thing (match or file counts), so a fast
wrong answer shows up. Usage: see bench/tools.sh.
"""
import argparse
import http.client
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def q(args):
    return " ".join(shlex.quote(a) for a in args)


def hyperfine(ours, peer, runs, prepare=None, warmup=2):
    """Mean seconds of (ours, peer) measured by one hyperfine run."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = ["hyperfine", "--style", "none", "--warmup", str(warmup), "--runs", str(runs),
               "--export-json", out.name]
        if prepare:
            cmd += ["--prepare", prepare]
        cmd += ["-n", "ours", ours + " >/dev/null", "-n", "peer", peer + " >/dev/null"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        results = {r["command"]: r for r in json.load(open(out.name))["results"]}
    return results["ours"]["mean"], results["peer"]["mean"]


def run_json(args, env=None):
    out = subprocess.run(args, check=True, capture_output=True, env=env).stdout
    return json.loads(out)


def count_lines(args):
    out = subprocess.run(args, check=True, capture_output=True).stdout
    return len(out.splitlines())


class Table:
    def __init__(self):
        self.rows = []

    def add(self, task, ours_s, peer_name, peer_s, check):
        # hyperfine can report a mean of 0 for a peer faster than its shell-spawn correction
        # (readtags on a warm tags file).
        ratio = ours_s / peer_s if peer_s > 0 else float("inf")
        self.rows.append((task, ours_s * 1e3, peer_name, peer_s * 1e3, ratio, check))
        print(f"  {task}: {ours_s*1e3:.1f} ms vs {peer_name} {peer_s*1e3:.1f} ms "
              f"({ratio:.2f}x) {check}", file=sys.stderr)

    def print(self):
        if not self.rows:
            return
        w = max(len(r[0]) for r in self.rows) + 2
        pw = max(len(r[2]) for r in self.rows) + 2
        print(f"{'task':<{w}}{'ours ms':>10}  {'peer':<{pw}}{'peer ms':>10}{'ratio':>8}  check")
        for task, ours, peer, peer_ms, ratio, check in self.rows:
            print(f"{task:<{w}}{ours:>10.1f}  {peer:<{pw}}{peer_ms:>10.1f}{ratio:>7.2f}x  {check}")


def tool_cmd(binary, repo, name, rev, payload):
    args = [binary, "tool", name, "--repo", repo]
    if rev:
        args += ["--ref", rev]
    return args + ["--input", json.dumps(payload)]


CODE_QUERIES = [
    ("literal spawn_blocking", {"query": "spawn_blocking", "maxMatches": 2000},
     ["rg", "--hidden", "-n", "--no-heading", "-S", "-F", "spawn_blocking"]),
    ("regex fn\\s+\\w+_mut\\(", {"query": r"fn\s+\w+_mut\(", "regex": True, "maxMatches": 2000},
     ["rg", "--hidden", "-n", "--no-heading", r"fn\s+\w+_mut\("]),
    ("smart-case mutex", {"query": "mutex", "maxMatches": 2000},
     ["rg", "--hidden", "-n", "--no-heading", "-S", "-F", "mutex"]),
]


def code_search(t, a, env):
    queries = CODE_QUERIES
    # @HEAD in the corpus: the clean work tree stands in for the blobs it holds (verified by
    # their ids, see host/src/tools/blobs.rs); @HEAD in a bare clone of it: every blob is
    # inflated from the pack. rg reads the checkout of that same commit in both rows.
    sides = [("WORKTREE", a.corpus, "WORKTREE"), ("HEAD", a.corpus, "HEAD"),
             ("HEAD", a.bare, "HEAD, bare clone")]
    for label, payload, rg in queries:
        for rev, repo, where in sides:
            ours = tool_cmd(a.bin, repo, "code_search", rev, payload)
            found = run_json(ours, env)
            matches = len(found.get("matches", []))
            peer_count = count_lines(rg + [a.corpus])
            check = f"matches {matches}/{peer_count}" + ("" if not found.get("truncated") else " TRUNCATED")
            o, p = hyperfine(q(ours), q(rg + [a.corpus]), a.runs)
            t.add(f"code_search {label} @{where}", o, "rg", p, check)


def file_search(t, a, env):
    payload = {"glob": "*.rs", "limit": 2000}
    fd = shutil.which("fd") or shutil.which("fdfind")
    for rev in ("WORKTREE", "HEAD"):
        ours = tool_cmd(a.bin, a.corpus, "file_search", rev, payload)
        found = run_json(ours, env)
        n = found.get("total", len(found.get("files", [])))
        rg = ["rg", "--hidden", "--files", "-g", "*.rs", a.corpus]
        o, p = hyperfine(q(ours), q(rg), a.runs)
        t.add(f"file_search *.rs @{rev}", o, "rg --files", p, f"files {n}/{count_lines(rg)}")
        if fd:
            fdc = [fd, "-H", "-t", "f", "-e", "rs", ".", a.corpus]
            o, p = hyperfine(q(ours), q(fdc), a.runs)
            t.add(f"file_search *.rs @{rev}", o, "fd", p, f"files {n}/{count_lines(fdc)}")


def git_history(t, a, env):
    git = ["git", "-C", a.corpus]
    rows = [
        ("log -n 1000", {"action": "log", "maxCount": 1000},
         git + ["log", "-n", "1000", "--format=%H %an %ae %at %s"], "commits"),
        (f"log --follow {a.follow_path}", {"action": "log", "path": a.follow_path, "maxCount": 1000},
         git + ["log", "--follow", "-n", "1000", "--format=%H %an %ae %at %s", "--", a.follow_path],
         "commits"),
        (f"blame -L {a.blame_range} {a.blame_path}",
         {"action": "blame", "path": a.blame_path,
          "startLine": int(a.blame_range.split(",")[0]), "endLine": int(a.blame_range.split(",")[1])},
         git + ["blame", "--porcelain", "-L", a.blame_range, a.blame_path], None),
        ("show HEAD~5", {"action": "show", "commit": "HEAD~5"},
         git + ["show", "--numstat", "--format=%H%n%an%n%B", "HEAD~5"], None),
    ]
    for label, payload, peer, key in rows:
        ours = tool_cmd(a.bin, a.corpus, "git_history", "HEAD", payload)
        found = run_json(ours, env)
        if key == "commits":
            peer_n = count_lines(peer)
            check = f"commits {len(found.get('commits', []))}/{peer_n}"
        elif payload["action"] == "blame":
            hunks = found.get("hunks", [])
            lines = sum(h["endLine"] - h["startLine"] + 1 for h in hunks)
            check = f"lines {lines}, hunks {len(hunks)}"
        else:
            check = f"files {len(found.get('files', []))}"
        o, p = hyperfine(q(ours), q(peer), a.runs)
        t.add(f"git_history {label}", o, "git " + peer[3], p, check)


def symbol_search(t, a, env, home):
    tags = os.path.join(home, "tags")
    ctags = ["ctags", "-R", "--languages=Rust", "-f", tags, a.corpus]
    subprocess.run(ctags, check=True)
    readtags = ["readtags", "-t", tags, "-e", a.symbol]
    ctags_defs = count_lines(readtags)
    state = os.path.join(home, "state")
    fresh = f"rm -rf {shlex.quote(state)}"
    # Cold: a fresh state directory before every run. An exact query parses only the files
    # that contain the name, a fuzzy one those holding its characters in order within a name;
    # a fuzzy `e` parses (and stores) nearly every file: the full first index.
    exact = tool_cmd(a.bin, a.corpus, "symbol_search", "HEAD",
                     {"query": a.symbol, "match": "exact", "role": "definition"})
    fuzzy = tool_cmd(a.bin, a.corpus, "symbol_search", "HEAD",
                     {"query": a.symbol, "match": "fuzzy"})
    full = tool_cmd(a.bin, a.corpus, "symbol_search", "HEAD", {"query": "e", "match": "fuzzy"})
    for label, cmd in ((f"cold exact {a.symbol}", exact), (f"cold fuzzy {a.symbol}", fuzzy),
                       ("full first index (cold fuzzy e)", full)):
        o, p = hyperfine(q(cmd), q(ctags), max(3, a.runs // 2), prepare=fresh, warmup=1)
        subprocess.run(["rm", "-rf", state], check=True)
        found = run_json(cmd, env)
        if cmd is exact:
            check = (f"defs {len(found['symbols'])}/{ctags_defs} (ctags), "
                     f"parsed {found.get('parsedFiles')}")
        else:
            check = (f"parsed {found.get('parsedFiles')} of "
                     f"{found.get('indexedFiles', 0) + found.get('unindexedFiles', 0)} files")
        t.add(f"symbol_search {label}", o, "ctags -R", p, check)
    # Warm: complete the persistent index (a non-ASCII fuzzy query is not prefiltered, so it
    # parses every file the runs above left unindexed).
    run_json(tool_cmd(a.bin, a.corpus, "symbol_search", "HEAD", {"query": "ß", "match": "fuzzy"}), env)
    o, p = hyperfine(q(exact), q(readtags), a.runs)
    t.add(f"symbol_search warm CLI query {a.symbol}", o, "readtags", p,
          f"parsed {run_json(exact, env).get('parsedFiles')} files")


def daemon_queries(a, home):
    """Median and p95 ms of warm in-process symbol queries through the daemon."""
    cfg = os.path.join(home, "config")
    os.makedirs(cfg, exist_ok=True)
    with open(os.path.join(cfg, "config.toml"), "w") as f:
        f.write('allowed_origins = ["https://gitlab.example.com"]\n\n[[mappings]]\n'
                'gitlab_origin = "https://gitlab.example.com"\nproject_path = "bench/corpus"\n'
                f'local_path = "{a.corpus}"\ndefault_ref = "HEAD"\n')
    env = dict(os.environ, REVIEW_AGENT_GATEWAY_HOME=home)
    proc = subprocess.Popen([a.bin, "serve", "--port", "0"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        port = None
        for line in proc.stdout:
            if "listening on http://127.0.0.1:" in line:
                port = int(line.rsplit(":", 1)[1].split()[0].strip("/"))
                break
        if port is None:
            raise SystemExit("error: the daemon did not start")
        token = subprocess.run([a.bin, "token", "show"], env=env, check=True, capture_output=True,
                               text=True).stdout.strip()

        def call(query, tool="symbol_search", payload=None):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            body = json.dumps({"gitlabOrigin": "https://gitlab.example.com",
                               "projectPath": "bench/corpus",
                               "input": payload or {"query": query, "match": "prefix"}})
            start = time.perf_counter()
            conn.request("POST", f"/v1/tools/{tool}", body=body,
                         headers={"Authorization": f"Bearer {token}",
                                  "Host": f"127.0.0.1:{port}",
                                  "Content-Type": "application/json"})
            resp = conn.getresponse()
            data = json.loads(resp.read())
            elapsed = time.perf_counter() - start
            conn.close()
            if resp.status != 200:
                raise SystemExit(f"error: {tool} answered {resp.status}: {data}")
            return elapsed, data

        # code_search as a chat agent or the userscript calls it: in the daemon, no process
        # start, a new context (so no blob cache) per call; against rg's whole process.
        searches = []
        for label, payload, rg in CODE_QUERIES:
            for rev in ("WORKTREE", "HEAD"):
                times = []
                for _ in range(a.runs * 2):
                    elapsed, data = call(None, "code_search", dict(payload, ref=rev))
                    times.append(elapsed * 1e3)
                n = len(data["data"]["output"]["matches"])
                peer, _ = hyperfine(q(rg + [a.corpus]), q(["true"]), a.runs)
                searches.append((f"{label} @{rev}", statistics.median(times), peer * 1e3,
                                 f"matches {n}/{count_lines(rg + [a.corpus])}"))

        first, _ = call(a.symbol)
        # The daemon completes the index in the background after a prefiltered first query.
        deadline = time.time() + 120
        while time.time() < deadline:
            _, data = call("zz_absent_name")
            if data["data"]["output"].get("unindexedFiles", 0) == 0:
                break
            time.sleep(0.2)
        names = [a.symbol, "spawn", "Runtime", "poll_", "JoinHandle", "new", "Semaphore", "read_buf"]
        times = []
        for i in range(a.query_runs):
            elapsed, _ = call(names[i % len(names)])
            times.append(elapsed * 1e3)
        times.sort()
        return (first * 1e3, statistics.median(times), times[int(len(times) * 0.95) - 1],
                searches)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--corpus", required=True)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--query-runs", type=int, default=100)
    p.add_argument("--follow-path", default="tokio/src/runtime/mod.rs")
    p.add_argument("--blame-path", default="tokio/src/sync/mpsc/chan.rs")
    p.add_argument("--blame-range", default="1,200")
    p.add_argument("--symbol", default="spawn_blocking")
    p.add_argument("--only", default="code_search,file_search,git_history,symbol_search,daemon")
    a = p.parse_args()
    only = set(a.only.split(","))
    a.corpus = os.path.abspath(a.corpus)
    lines = subprocess.run(f"git -C {shlex.quote(a.corpus)} ls-files -z | (cd {shlex.quote(a.corpus)} && xargs -0 cat 2>/dev/null) | wc -l",
                           shell=True, check=True, capture_output=True, text=True).stdout.strip()
    commits = subprocess.run(["git", "-C", a.corpus, "rev-list", "--count", "HEAD"], check=True,
                             capture_output=True, text=True).stdout.strip()
    print(f"corpus: {a.corpus} ({lines} lines, {commits} commits)", file=sys.stderr)
    home = tempfile.mkdtemp(prefix="rag-bench-")
    a.bare = os.path.join(home, "bare.git")
    subprocess.run(["git", "clone", "-q", "--bare", a.corpus, a.bare], check=True)
    env = dict(os.environ, REVIEW_AGENT_GATEWAY_HOME=home)
    os.environ["REVIEW_AGENT_GATEWAY_HOME"] = home  # hyperfine's children too
    t = Table()
    try:
        if "code_search" in only:
            code_search(t, a, env)
        if "file_search" in only:
            file_search(t, a, env)
        if "git_history" in only:
            git_history(t, a, env)
        if "symbol_search" in only:
            symbol_search(t, a, env, home)
        daemon = None
        if "daemon" in only:
            daemon = daemon_queries(a, tempfile.mkdtemp(prefix="rag-bench-daemon-"))
        print(f"corpus: {os.path.basename(a.corpus)}, {lines} lines, {commits} commits; "
              f"mean of hyperfine runs, page cache warm")
        t.print()
        if daemon:
            first, median, p95, searches = daemon
            print("daemon code_search (median of in-process calls over HTTP, "
                  "against the mean of rg's whole process):")
            for label, ours, peer, check in searches:
                print(f"  {label:<45} {ours:7.1f} ms  rg {peer:6.1f} ms  "
                      f"{ours / peer:5.2f}x  {check}")
            print(f"daemon symbol_search (prefix queries, in-process index): first {first:.1f} ms "
                  f"(builds the index), warm median {median:.2f} ms, p95 {p95:.2f} ms "
                  f"(target < 10 ms)")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
