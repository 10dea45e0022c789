#!/usr/bin/env python3
"""Build the benchmark repository: commit `base` with FILES source files in six languages, then
commit `head` changing LINES lines in each (edits, insertions, a few flagged lines), so that
`git diff base head` has about FILES * LINES changed lines, FLAGGED of them (a fraction,
default 0.02) lines the built-in rules flag.

Usage: make_repo.py DIR FILES LINES [FLAGGED]
"""
import os
import random
import subprocess
import sys

LANGS = {
    "py": ("def f{i}(x):\n    return x + {i}\n", 'password = "hunter{i}x9q"\n'),
    "js": ("function f{i}(x) {{ return x + {i}; }}\n", "eval(userInput + {i});\n"),
    "ts": ("export const f{i} = (x: number) => x + {i};\n", "const tls = {{ rejectUnauthorized: false }};\n"),
    "go": ("func F{i}(x int) int {{ return x + {i} }}\n", "cfg := &tls.Config{{InsecureSkipVerify: true}}\n"),
    "java": ("    int f{i}(int x) {{ return x + {i}; }}\n", '    stmt.executeQuery("SELECT * FROM t WHERE id=" + id{i});\n'),
    "rs": ("fn f{i}(x: u32) -> u32 {{ x + {i} }}\n", "let c = reqwest::Client::builder().danger_accept_invalid_certs(true);\n"),
}


def git(repo, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.com",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.com",
               GIT_AUTHOR_DATE="2026-01-01T00:00:00Z", GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, stdout=subprocess.DEVNULL)


def main():
    repo, files, lines = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    flagged_rate = float(sys.argv[4]) if len(sys.argv) > 4 else 0.02
    rng = random.Random(42)
    os.makedirs(repo)
    git(repo, "init", "-q", "-b", "main")
    exts = list(LANGS)
    paths = [f"src/mod{n % 10}/file{n}.{exts[n % len(exts)]}" for n in range(files)]
    bodies = {}
    for p in paths:
        plain, _ = LANGS[p.rsplit(".", 1)[1]]
        bodies[p] = [plain.format(i=i) for i in range(2 * lines)]
        os.makedirs(os.path.join(repo, os.path.dirname(p)), exist_ok=True)
        with open(os.path.join(repo, p), "w") as f:
            f.writelines(bodies[p])
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "tag", "base")
    for p in paths:
        plain, flagged = LANGS[p.rsplit(".", 1)[1]]
        body = bodies[p]
        # Rewrite every other line: `lines` changed lines per file, FLAGGED of them flagged.
        for k in range(lines):
            i = 2 * k
            body[i] = (flagged if rng.random() < flagged_rate else plain).format(i=10_000 + i)
        with open(os.path.join(repo, p), "w") as f:
            f.writelines(body)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "head")
    git(repo, "tag", "head")


if __name__ == "__main__":
    main()
