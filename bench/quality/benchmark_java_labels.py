#!/usr/bin/env python3
"""Labels of the OWASP Benchmark for Java subset of the review quality set (issue 16).

The Benchmark ships its truth: expectedresults-1.2.csv says, per test case, its category, whether
the vulnerability is real, and its CWE. This script takes a fixed subset of the test cases,
finds the sink line(s) in each real one, and writes

  bench/quality/labels/owasp-benchmark-java.tsv   one label per real test case in the subset
  (stdout)                                        the `paths` list for apps.toml

Subset: in each category, the test cases in number order, k = max(8, round(n / 20)) of its n,
evenly spaced (the i-th taken is index floor(i * n / k), i = 0..k-1): about every 20th, and at
least 8 in the small categories (ldapi, xpathi, securecookie, trustbound). Real and fake cases are
taken alike, so the subset keeps the Benchmark's mix; the fake cases' files are in the snapshot
with no label, so any finding in them is a false positive.

Sink lines: the lines of the test case, from its `doPost` on (the `doGet` above it is the same
boilerplate in every case), that match the category's sink pattern below (the API call that
makes the case vulnerable and the line building its tainted argument, e.g. `String sql = ...`
and `statement.executeQuery(sql)`); the label spans the first to the last such line (for xss:
the last write to the response of something other than string literals, to the end of its
statement; the other writes print fixed text). Comment lines are skipped; string literals are
blanked before matching, so a message naming an API is not a sink. When no line matches, the
label is the whole rest of the file from `doPost` (the script says how many; none at the pin).

Usage: python3 bench/quality/benchmark_java_labels.py GIT_DIR [COMMIT] > paths.txt
  GIT_DIR: a git directory holding OWASP-Benchmark/BenchmarkJava (e.g. the bare mirror
  /work/.mirror/OWASP-Benchmark+BenchmarkJava/repo, or a clone's .git); COMMIT: default the
  commit pinned in apps.toml. Standard library only.
"""
import re
import subprocess
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
APP = "owasp-benchmark-java"
TESTCODE = "src/main/java/org/owasp/benchmark/testcode"

KIND = {
    "cmdi": "cmdi", "crypto": "weak-crypto", "hash": "weak-hash", "ldapi": "ldapi",
    "pathtraver": "path-traversal", "securecookie": "cookie", "sqli": "sqli",
    "trustbound": "other", "weakrand": "weak-random", "xpathi": "xpathi", "xss": "xss",
}

SINK = {
    "cmdi": r"\.exec\(|new ProcessBuilder|\.command\(|\.start\(\)",
    "crypto": r"Cipher\.getInstance\(|KeyGenerator\.getInstance\(",
    "hash": r"MessageDigest\.getInstance\(",
    "ldapi": r"\.search\(|String filter\b|\bfilter\s*=",
    "pathtraver": r"new (java\.io\.)?File\(|File(Input|Output)Stream\(|File(Reader|Writer)\(|"
                  r"Paths\.get\(|java\.nio\.file\.Files\.|RandomAccessFile\(",
    "securecookie": r"setSecure\(|new javax\.servlet\.http\.Cookie\(|\baddCookie\(",
    "sqli": r"String sql\b|\bsql\s*=|\.execute(Query|Update|Batch|LargeUpdate)?\(|"
            r"prepare(Statement|Call)\(|addBatch\(|\.query(ForObject|ForList|ForMap|ForRowSet|"
            r"ForLong|ForInt)?\(|\.batchUpdate\(|\.update\(",
    "trustbound": r"\.setAttribute\(|\.putValue\(",
    "weakrand": r"new java\.util\.Random\(|Math\.random\(|SecureRandom|"
                r"\.next(Int|Long|Double|Float|Bytes|Gaussian|Boolean)\(",
    "xpathi": r"String expression\b|\.compile\(|\.evaluate\(",
    "xss": r"getWriter\(\)|\.(print|println|printf|format|write)\(",
}


# Matched against the raw line (the patterns above see the line without its string literals,
# so a message like "java.util.Random.nextBytes() executed" is not a sink): the algorithm name
# read from benchmark.properties.
RAW_SINK = {
    "crypto": r'getProperty\("cryptoAlg',
    "hash": r'getProperty\("hashAlg',
}
STRING = re.compile(r'"(?:\\.|[^"\\])*"')


def is_sink(line, category):
    if line.lstrip().startswith(("//", "*", "/*")):
        return False
    if re.search(SINK[category], STRING.sub('""', line)):
        return True
    return category in RAW_SINK and re.search(RAW_SINK[category], line) is not None


def subset(rows):
    """The chosen test cases of `rows` [(name, category, real, cwe)], in number order."""
    by_cat = {}
    for r in rows:
        by_cat.setdefault(r[1], []).append(r)
    chosen = []
    for cat, items in sorted(by_cat.items()):
        items.sort()
        n = len(items)
        k = min(n, max(8, round(n / 20)))
        chosen += [items[i * n // k] for i in range(k)]
    return sorted(chosen)


def sink_range(text, category):
    """(start, end, found): 1-based line range of the sink of a test case's source `text`."""
    lines = text.splitlines()
    post = next((i for i, l in enumerate(lines) if re.search(r"\bvoid doPost\(", l)), 0)
    hits = [i + 1 for i in range(post, len(lines)) if is_sink(lines[i], category)]
    if hits and category == "xss":
        # The sink is the last write of something other than string literals (earlier and
        # later writes print fixed text); the label is that statement, to its `;`.
        def statement(start):
            end = next((i + 1 for i in range(start - 1, len(lines))
                        if lines[i].rstrip().endswith(";")), start)
            return end, STRING.sub('""', " ".join(lines[start - 1:end]))

        def writes_a_value(text):
            m = list(re.finditer(r"\.(print|println|printf|format|write)\(", text))
            return bool(m) and re.search(r"[A-Za-z_]", text[m[-1].end():]) is not None

        for start in reversed(hits):
            end, text = statement(start)
            if writes_a_value(text):
                return start, end, True
        start = hits[-1]
        return start, statement(start)[0], True
    if hits:
        return hits[0], hits[-1], True
    return post + 1, len(lines), False


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    gitdir = sys.argv[1]
    apps = tomllib.loads((HERE / "apps.toml").read_text())["apps"]
    pinned = next((a["commit"] for a in apps if a["name"] == APP), None)
    commit = sys.argv[2] if len(sys.argv) > 2 else pinned
    if not commit:
        sys.exit(f"error: no commit given and no app {APP} in apps.toml")

    def show(path):
        return subprocess.run(["git", "--git-dir", gitdir, "show", f"{commit}:{path}"],
                              check=True, capture_output=True, text=True).stdout

    rows = []
    for line in show("expectedresults-1.2.csv").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, cat, real, cwe = [c.strip() for c in line.split(",")[:4]]
        rows.append((name, cat, real == "true", int(cwe)))
    chosen = subset(rows)
    out = ["path\tstart\tend\tkind\tnote"]
    fallbacks = 0
    for name, cat, real, cwe in chosen:
        if not real:
            continue
        path = f"{TESTCODE}/{name}.java"
        start, end, found = sink_range(show(path), cat)
        fallbacks += not found
        how = "sink lines" if found else "no sink line matched: doPost to end of file"
        out.append(f"{path}\t{start}\t{end}\t{KIND[cat]}\t"
                   f"Benchmark expected result: {cat} real, CWE-{cwe} ({how})")
    (HERE / "labels" / f"{APP}.tsv").write_text("\n".join(out) + "\n")
    reals = sum(1 for c in chosen if c[2])
    cats = {}
    for c in chosen:
        cats.setdefault(c[1], [0, 0])[0 if c[2] else 1] += 1
    print(f"# {len(chosen)} test cases ({reals} real, {len(chosen) - reals} fake), "
          f"{fallbacks} without a matched sink line; per category real/fake: "
          + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(cats.items())), file=sys.stderr)
    print("paths = [")
    for name, *_ in chosen:
        print(f'  "{TESTCODE}/{name}.java",')
    print("]")


if __name__ == "__main__":
    main()
