#!/usr/bin/env python3
"""Review quality benchmark (issue 16): run the built-in review and its peers over the
hand-labelled development set of bench/quality/ and score them. Usage: see bench/quality.sh.

The set: bench/quality/apps.toml names public, deliberately vulnerable applications pinned at a
commit, with the paths that form the reviewed snapshot; bench/quality/labels/<app>.tsv lists the
real problems (path, start, end, kind, note), labelled by hand (README.md there says how).

For each app the script builds a *snapshot repository*: an empty `base` commit and a `head`
commit holding exactly `git archive <commit> -- <paths>`, so `base..head` adds every line of the
snapshot. Our review runs on `base..head`; semgrep, bandit and detect-secrets scan the head's
work tree, so every tool sees the same files.

Scoring: a tool's findings are deduplicated by (path, start line); a finding is a true positive
when its line range overlaps a label's range in the same file (for apps with `match = "kind"`
the finding's kind, mapped from the tool's rule id / CWE by `kind_of`, must also equal the
label's kind); recall = labels hit by at least one finding / labels; precision = true-positive
findings / findings. Time is the wall clock of the tool's runs (semgrep's from the run that
filled the cache when the cache answered; the table says "cached").

Standard library only (Python 3.11+); the peers come from the venv bench/quality.sh installs.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUALITY = ROOT / "bench" / "quality"
# The semgrep-rules commit the numbers are measured with (the newest one the mirror holds).
SEMGREP_RULES_REPO = "semgrep/semgrep-rules"
SEMGREP_RULES_COMMIT = "157ae4706d7f54aa33647332f234dd68f30da195"

KINDS = (
    "sqli nosqli cmdi code-injection xss ssti path-traversal ssrf xxe deserialization secret "
    "weak-hash weak-crypto weak-random tls-verify open-redirect ldapi xpathi csrf cookie jwt "
    "cors debug-config redos mass-assignment other"
).split()

# Semgrep rule directories per app language (rules whose metadata.category is security, in
# these top-level directories of semgrep-rules); the LANG_COMMON ones are added for every app.
LANG_DIRS = {
    "python": ["python"],
    "javascript": ["javascript", "typescript"],
    "typescript": ["typescript", "javascript"],
    "java": ["java"],
    "php": ["php"],
    "ruby": ["ruby"],
    "go": ["go"],
    "csharp": ["csharp"],
    "kotlin": ["kotlin"],
    "scala": ["scala"],
}
LANG_COMMON = ["generic", "html", "problem-based-packs"]

TOOLS = ["ours", "semgrep", "bandit", "detect-secrets"]
ROWS = [
    ("ours", "review-agent-gateway security-default"),
    ("semgrep", "semgrep (all security rules)"),
    ("semgrep-no-audit", "semgrep (without audit)"),
    ("bandit", "bandit (Python apps only)"),
    ("detect-secrets", "detect-secrets"),
]

# === kinds ===

# CWE number -> kind. Where a CWE covers two kinds (327: hashes and ciphers) the rule id decides
# (see kind_of).
CWE_KIND = {
    89: "sqli", 564: "sqli", 943: "nosqli", 78: "cmdi", 77: "cmdi", 88: "cmdi",
    94: "code-injection", 95: "code-injection", 96: "code-injection", 470: "code-injection",
    79: "xss", 80: "xss", 83: "xss", 116: "xss", 1336: "ssti",
    22: "path-traversal", 23: "path-traversal", 73: "path-traversal", 98: "path-traversal",
    918: "ssrf", 611: "xxe", 776: "xxe", 502: "deserialization",
    798: "secret", 259: "secret", 321: "secret", 522: "secret", 200: "other",
    328: "weak-hash", 916: "weak-hash", 759: "weak-hash", 760: "weak-hash",
    326: "weak-crypto", 327: "weak-crypto", 696: "weak-crypto", 780: "weak-crypto",
    330: "weak-random", 338: "weak-random", 331: "weak-random",
    295: "tls-verify", 297: "tls-verify", 319: "tls-verify", 5: "tls-verify",
    601: "open-redirect", 90: "ldapi", 643: "xpathi", 352: "csrf",
    614: "cookie", 1004: "cookie", 1275: "cookie", 315: "cookie", 539: "cookie",
    347: "jwt", 942: "cors", 346: "cors",
    489: "debug-config", 215: "debug-config", 11: "debug-config", 209: "debug-config",
    1333: "redos", 185: "redos", 915: "mass-assignment", 501: "other",
}

# Rule-id keywords -> kind, tried in order before the CWE (they are more specific).
ID_KEYWORDS = [
    (r"nosql|mongo", "nosqli"),
    (r"sql|sequelize|knex", "sqli"),
    (r"xpath", "xpathi"),
    (r"ldap", "ldapi"),
    (r"xxe|xml-?entit|external-entit|libxml|doctype", "xxe"),
    (r"autoescape", "xss"),
    (r"ssti|template-inject|render-template-string", "ssti"),
    (r"deserial|pickle|marshal|yaml-load|yaml-unsafe|unsafe-load|objectinputstream|unserialize|"
     r"node-serialize", "deserialization"),
    (r"command|shell|subprocess|exec-|child-process|os-system|popen|spawn|cmdi|processbuilder|"
     r"runtime-exec", "cmdi"),
    (r"eval|code-inject|code-exec|vm-|new-function|function-constructor|dynamic-dispatch",
     "code-injection"),
    (r"path-trav|directory-trav|path-inject|file-inclusion|tainted-path|tainted-filename|"
     r"arbitrary-file|zip-slip|sendfile|res-sendfile", "path-traversal"),
    (r"ssrf|request-forgery|tainted-url", "ssrf"),
    (r"open-redirect|redirect", "open-redirect"),
    (r"xss|cross-site-script|html-inject|innerhtml|unescaped|raw-html|mark-safe|safe-string|"
     r"direct-response-write|dangerously", "xss"),
    (r"csrf", "csrf"),
    (r"cookie", "cookie"),
    (r"jwt", "jwt"),
    (r"cors", "cors"),
    (r"debug", "debug-config"),
    (r"redos|regex-dos|regexp-dos|non-literal-regexp", "redos"),
    (r"mass-assign", "mass-assignment"),
    (r"md5|sha1|sha-1|weak-hash|hash|digest|password-hash|bcrypt", "weak-hash"),
    (r"random", "weak-random"),
    (r"tls|ssl|cert|verify|insecure-transport|reject-unauthorized|http-not-https|plaintext",
     "tls-verify"),
    (r"crypto|cipher|ecb|initialization-vector|key-?size|"
     r"(^|[-._])(des|3des|desede|rc2|rc4|blowfish|rsa|aes|iv|padding)([-._]|$)", "weak-crypto"),
    (r"secret|password|credential|token|api-key|apikey|private-key|hardcoded|hard-coded|"
     r"aws|slack|github|stripe|google|openai|anthropic|gitleaks|dotenv", "secret"),
    (r"trust-?bound|session", "other"),
]


def kind_of(rule_id, cwes=(), category=""):
    """The kind (one of KINDS, or None) of a finding of rule `rule_id` with the CWE strings
    `cwes` ("CWE-89: ..."); keywords of the rule id first, then the first CWE that maps."""
    rid = rule_id.lower().replace("_", "-")
    for pattern, kind in ID_KEYWORDS:
        if re.search(pattern, rid):
            return kind
    for c in cwes:
        m = re.search(r"(\d+)", str(c))
        if m and int(m.group(1)) in CWE_KIND:
            return CWE_KIND[int(m.group(1))]
    return None


# === setup ===


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def git_dir_for(repo, corpus):
    """A git directory holding `repo` ("owner/name"): BENCH_MIRROR's bare copy when there is
    one, else a clone under corpus/src (made on first use)."""
    owner, name = repo.split("/")
    mirror = os.environ.get("BENCH_MIRROR")
    if mirror:
        d = Path(mirror) / f"{owner}+{name}" / "repo"
        if d.is_dir():
            return d
    d = corpus / "src" / f"{owner}+{name}.git"
    if not d.is_dir():
        d.parent.mkdir(parents=True, exist_ok=True)
        run(["git", "init", "--quiet", "--bare", str(d)])
        run(["git", "--git-dir", str(d), "remote", "add", "origin",
             f"https://github.com/{repo}"])
    return d


def ensure_commit(gitdir, repo, commit):
    """Makes sure `commit` is in `gitdir`, fetching it from GitHub when it is not."""
    have = subprocess.run(["git", "--git-dir", str(gitdir), "cat-file", "-e",
                           commit + "^{commit}"], capture_output=True)
    if have.returncode != 0:
        print(f"fetching {repo}@{commit[:12]}", file=sys.stderr)
        run(["git", "--git-dir", str(gitdir), "fetch", "--quiet", "--depth", "1",
             f"https://github.com/{repo}", commit])


def rules_checkout(corpus):
    """(directory, commit) of the semgrep-rules checkout: SEMGREP_RULES, or the pinned commit
    extracted under corpus/semgrep-rules-<commit>."""
    env = os.environ.get("SEMGREP_RULES")
    if env:
        commit = subprocess.run(["git", "-C", env, "rev-parse", "HEAD"], capture_output=True,
                                text=True).stdout.strip() or "local"
        return Path(env), commit
    out = corpus / f"semgrep-rules-{SEMGREP_RULES_COMMIT[:12]}"
    if not (out / ".complete").exists():
        gitdir = git_dir_for(SEMGREP_RULES_REPO, corpus)
        ensure_commit(gitdir, SEMGREP_RULES_REPO, SEMGREP_RULES_COMMIT)
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        archive = subprocess.Popen(["git", "--git-dir", str(gitdir), "archive",
                                    SEMGREP_RULES_COMMIT], stdout=subprocess.PIPE)
        run(["tar", "-x", "-C", str(out)], stdin=archive.stdout)
        if archive.wait() != 0:
            sys.exit(f"error: git archive of {SEMGREP_RULES_REPO} failed")
        (out / ".complete").write_text(SEMGREP_RULES_COMMIT)
    return out, SEMGREP_RULES_COMMIT


def semgrep_rules_dir(checkout, commit, language, corpus):
    """A directory of the rule files of `checkout` for `language`: every .yaml/.yml under the
    language's LANG_DIRS and LANG_COMMON that declares `category: security` (test targets and
    fixtures left out). Returns (path, number of files)."""
    dirs = LANG_DIRS.get(language, [language]) + LANG_COMMON
    out = corpus / "rules" / f"{commit[:12]}-{language}"
    if (out / ".complete").exists():
        return out, int((out / ".complete").read_text())
    shutil.rmtree(out, ignore_errors=True)
    n = 0
    for d in dirs:
        for f in sorted((checkout / d).rglob("*")):
            if f.suffix not in (".yaml", ".yml") or ".test." in f.name or ".fixed." in f.name:
                continue
            text = f.read_text(errors="replace")
            if not re.search(r"^\s*category:\s*['\"]?security['\"]?\s*$", text, re.M):
                continue
            if not re.search(r"^rules:", text, re.M):
                continue
            dest = out / f.relative_to(checkout)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dest)
            n += 1
    (out / ".complete").write_text(str(n))
    return out, n


def snapshot(app, corpus):
    """The snapshot repository of `app` (see the module doc), rebuilt when its pin or paths
    change. Returns its path."""
    stamp = json.dumps([app["repo"], app["commit"], app["paths"]])
    snap = corpus / "snap" / app["name"]
    stamp_file = corpus / "snap" / f"{app['name']}.stamp"
    if snap.is_dir() and stamp_file.exists() and stamp_file.read_text() == stamp:
        return snap
    gitdir = git_dir_for(app["repo"], corpus)
    ensure_commit(gitdir, app["repo"], app["commit"])
    shutil.rmtree(snap, ignore_errors=True)
    snap.mkdir(parents=True)
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@localhost",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost",
               GIT_AUTHOR_DATE="2000-01-01T00:00:00Z", GIT_COMMITTER_DATE="2000-01-01T00:00:00Z")
    # No signing, no hooks of the user's git config in a throwaway repository.
    g = ["git", "-C", str(snap), "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null"]
    run(g + ["init", "--quiet", "-b", "head"], env=env)
    run(g + ["commit", "--quiet", "--allow-empty", "-m", "base (empty)"], env=env)
    run(g + ["branch", "base"], env=env)
    archive = subprocess.Popen(["git", "--git-dir", str(gitdir), "archive", app["commit"], "--"]
                               + app["paths"], stdout=subprocess.PIPE)
    run(["tar", "-x", "-C", str(snap)], stdin=archive.stdout)
    if archive.wait() != 0:
        sys.exit(f"error: git archive of {app['name']} failed (are its paths right?)")
    run(g + ["add", "-A", "-f", "."], env=env)
    run(g + ["commit", "--quiet", "-m",
             f"head: {app['repo']}@{app['commit']}, {len(app['paths'])} paths"], env=env)
    stamp_file.write_text(stamp)
    return snap


def tree_id(snap):
    return subprocess.run(["git", "-C", str(snap), "rev-parse", "head^{tree}"],
                          capture_output=True, text=True, check=True).stdout.strip()


# === tools ===
# Each returns a list of findings: dict(path, start, end, rule, kind).


def run_ours(bin_path, snap):
    out = subprocess.run([bin_path, "review", "--repo", str(snap), "--base", "base",
                          "--head", "head", "--rules", "security-default",
                          "--no-repository-rules", "--format", "json", "--fail-on", "never"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"error: our review failed ({out.returncode}): {out.stderr.strip()[:2000]}")
    findings = []
    for line in out.stdout.splitlines():
        if not line.startswith("{"):
            continue
        ev = json.loads(line)
        if ev.get("type") != "finding.created":
            continue
        f = ev.get("finding", ev)
        rule = f.get("ruleId", "")
        cwes = f.get("cwe") or f.get("cwes") or []
        if isinstance(cwes, (str, int)):
            cwes = [cwes]
        start = int(f.get("startLine") or 0)
        end = int(f.get("endLine") or start)
        findings.append(dict(path=f["path"], start=start, end=end, rule=rule,
                             kind=f.get("kind") if f.get("kind") in KINDS
                             else kind_of(rule, cwes)))
    return findings


def semgrep_raw(venv, snap, rules_dir, jobs):
    """semgrep's JSON results over `snap` with `rules_dir`, offline (--metrics=off, local
    rules only)."""
    out = subprocess.run([str(venv / "bin" / "semgrep"), "scan", "--config", str(rules_dir),
                          "--json", "--metrics=off", "--disable-version-check", "--quiet",
                          "-j", str(jobs), "--timeout", "30", "--max-memory", "3000", "."],
                         cwd=snap, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"error: semgrep failed ({out.returncode}): {out.stderr.strip()[-3000:]}")
    return json.loads(out.stdout)


def semgrep_findings(raw, audit):
    """Findings of semgrep's JSON `raw`; only rules whose metadata.category is security; with
    audit=False also without rules under an audit/ directory (".audit." in the id) or whose
    metadata.subcategory mentions audit."""
    findings = []
    for r in raw.get("results", []):
        md = r.get("extra", {}).get("metadata", {}) or {}
        if md.get("category") != "security":
            continue
        sub = md.get("subcategory") or []
        if isinstance(sub, str):
            sub = [sub]
        is_audit = ".audit." in r["check_id"] or any("audit" in s for s in sub)
        if is_audit and not audit:
            continue
        cwes = md.get("cwe") or []
        if isinstance(cwes, str):
            cwes = [cwes]
        # The id semgrep gives is the rule file's path made dotted; keep the part from the
        # language directory on (python.lang.security.audit.formatted-sql-query).
        rule = re.sub(r"^.*?\.[0-9a-f]{12}-[a-z]+\.", "", r["check_id"])
        findings.append(dict(path=r["path"], start=r["start"]["line"], end=r["end"]["line"],
                             rule=rule, kind=kind_of(rule, cwes)))
    return findings


def run_bandit(venv, snap):
    out = subprocess.run([str(venv / "bin" / "bandit"), "-r", ".", "-f", "json", "-q"],
                         cwd=snap, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"error: bandit failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    findings = []
    for r in json.loads(out.stdout).get("results", []):
        rng = r.get("line_range") or [r["line_number"]]
        cwe = (r.get("issue_cwe") or {}).get("id")
        rule = f"{r['test_id']}:{r['test_name']}"
        findings.append(dict(path=os.path.normpath(r["filename"]), start=r["line_number"],
                             end=max(rng), rule=rule,
                             kind=kind_of(r["test_name"], [cwe] if cwe else [])))
    return findings


def run_detect_secrets(venv, snap):
    out = subprocess.run([str(venv / "bin" / "detect-secrets"), "scan"],
                         cwd=snap, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"error: detect-secrets failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    findings = []
    for path, items in json.loads(out.stdout).get("results", {}).items():
        for it in items:
            findings.append(dict(path=path, start=it["line_number"], end=it["line_number"],
                                 rule=it["type"], kind="secret"))
    return findings


# === scoring ===


def load_labels(name):
    """Labels of app `name`: list of dict(path, start, end, kind, note)."""
    f = QUALITY / "labels" / f"{name}.tsv"
    labels = []
    if not f.exists():
        return labels
    for n, line in enumerate(f.read_text().splitlines(), 1):
        if n == 1 or not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 4:
            sys.exit(f"error: {f}:{n}: want path, start, end, kind, note (tab-separated)")
        path, start, end, kind = cols[:4]
        if kind not in KINDS:
            sys.exit(f"error: {f}:{n}: kind {kind!r} is not one of {' '.join(KINDS)}")
        labels.append(dict(path=path, start=int(start), end=int(end), kind=kind,
                           note=cols[4] if len(cols) > 4 else ""))
    return labels


def score(findings, labels, match_kind):
    """Deduplicates `findings` by (path, start) and scores them against `labels`. Returns
    dict(findings, tp, hit, labels, missed: [label], fps: [finding])."""
    groups = {}
    for f in findings:
        groups.setdefault((f["path"], f["start"]), []).append(f)
    by_path = {}
    for lab in labels:
        by_path.setdefault(lab["path"], []).append(lab)
    hit = set()
    tp = 0
    fps = []
    for (path, _), group in sorted(groups.items()):
        matched = False
        for f in group:
            for i, lab in enumerate(by_path.get(path, [])):
                if f["start"] <= lab["end"] and lab["start"] <= max(f["end"], f["start"]) and \
                        (not match_kind or f["kind"] == lab["kind"]):
                    matched = True
                    hit.add(id(lab))
        if matched:
            tp += 1
        else:
            fps.append(group[0])
    missed = [lab for lab in labels if id(lab) not in hit]
    return dict(findings=len(groups), tp=tp, hit=len(labels) - len(missed), labels=len(labels),
                missed=missed, fps=fps)


def pct(a, b):
    return f"{100 * a / b:.0f} %" if b else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--venv", required=True)
    ap.add_argument("--apps", help="comma-separated app names (default: all of apps.toml)")
    ap.add_argument("--tools", default=",".join(TOOLS),
                    help="comma-separated: " + ",".join(TOOLS))
    ap.add_argument("--list-misses", metavar="TOOL",
                    help="print the labels TOOL missed and its false positives "
                         "(ours, semgrep, semgrep-no-audit, bandit, detect-secrets)")
    ap.add_argument("--no-cache", action="store_true", help="rerun semgrep even when cached")
    ap.add_argument("--corpus", default=str(ROOT / "target" / "bench-corpus"))
    ap.add_argument("--json", help="also write the per-app findings and scores to this file")
    args = ap.parse_args()

    # Offline: no version check, no metrics (both would wait on the network).
    os.environ.update(SEMGREP_ENABLE_VERSION_CHECK="0", SEMGREP_SEND_METRICS="off")
    corpus = Path(args.corpus)
    corpus.mkdir(parents=True, exist_ok=True)
    venv = Path(args.venv).resolve()
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    for t in tools:
        if t not in TOOLS:
            sys.exit(f"error: unknown tool {t!r} (want {', '.join(TOOLS)})")
    apps = tomllib.loads((QUALITY / "apps.toml").read_text())["apps"]
    if args.apps:
        want = args.apps.split(",")
        unknown = set(want) - {a["name"] for a in apps}
        if unknown:
            sys.exit(f"error: no app named {', '.join(sorted(unknown))} in apps.toml")
        apps = [a for a in apps if a["name"] in want]

    semgrep_version = ""
    if "semgrep" in tools:
        semgrep_version = subprocess.run([str(venv / "bin" / "semgrep"), "--version",
                                          "--disable-version-check"],
                                         capture_output=True, text=True,
                                         check=True).stdout.strip()
        checkout, rules_commit = rules_checkout(corpus)
    jobs = os.environ.get("SEMGREP_JOBS", "2")

    # results[row][app] = dict(score..., time, cached)
    results = {row: {} for row, _ in ROWS}
    dump = {}
    for app in apps:
        snap = snapshot(app, corpus)
        labels = load_labels(app["name"])
        match_kind = app.get("match") == "kind"
        per_tool = {}
        if "ours" in tools:
            t0 = time.perf_counter()
            per_tool["ours"] = (run_ours(args.bin, snap), time.perf_counter() - t0, False)
        if "semgrep" in tools:
            rules_dir, nrules = semgrep_rules_dir(checkout, rules_commit, app["language"],
                                                  corpus)
            key = f"{app['name']}-{semgrep_version}-{rules_commit[:12]}-{tree_id(snap)[:12]}"
            cache = corpus / "cache" / f"semgrep-{key}.json"
            if cache.exists() and not args.no_cache:
                cached = json.loads(cache.read_text())
                raw, secs, was_cached = cached["raw"], cached["seconds"], True
            else:
                print(f"semgrep {semgrep_version} on {app['name']} ({nrules} rule files, "
                      f"-j {jobs}) ...", file=sys.stderr)
                t0 = time.perf_counter()
                raw = semgrep_raw(venv, snap, rules_dir, jobs)
                secs, was_cached = time.perf_counter() - t0, False
                cache.parent.mkdir(parents=True, exist_ok=True)
                cache.write_text(json.dumps({"raw": raw, "seconds": secs}))
            per_tool["semgrep"] = (semgrep_findings(raw, True), secs, was_cached)
            per_tool["semgrep-no-audit"] = (semgrep_findings(raw, False), secs, was_cached)
        if "bandit" in tools and app["language"] == "python":
            t0 = time.perf_counter()
            per_tool["bandit"] = (run_bandit(venv, snap), time.perf_counter() - t0, False)
        if "detect-secrets" in tools:
            t0 = time.perf_counter()
            per_tool["detect-secrets"] = (run_detect_secrets(venv, snap),
                                          time.perf_counter() - t0, False)
        dump[app["name"]] = {}
        for row, (findings, secs, was_cached) in per_tool.items():
            s = score(findings, labels, match_kind)
            s.update(time=secs, cached=was_cached)
            results[row][app["name"]] = s
            dump[app["name"]][row] = dict(findings=findings, tp=s["tp"], hit=s["hit"],
                                          labels=s["labels"], seconds=secs, cached=was_cached)

    # === the table ===
    head = f"{'app':<22}{'tool':<40}{'recall':>8}{'precision':>11}{'TP/findings':>13}" \
           f"{'hit/labels':>12}{'time':>14}"
    print(head)
    print("-" * len(head))
    for app_name in [a["name"] for a in apps] + ["TOTAL"]:
        for row, title in ROWS:
            if app_name == "TOTAL":
                parts = list(results[row].values())
                if not parts:
                    continue
                s = dict(tp=sum(p["tp"] for p in parts), findings=sum(p["findings"] for p in parts),
                         hit=sum(p["hit"] for p in parts), labels=sum(p["labels"] for p in parts),
                         time=sum(p["time"] for p in parts), cached=any(p["cached"] for p in parts))
            else:
                s = results[row].get(app_name)
                if s is None:
                    continue
            t = (f"{s['time']:.2f} s" if s["time"] < 10 else f"{s['time']:.1f} s") + \
                (" cached" if s["cached"] else "")
            print(f"{app_name:<22}{title:<40}{pct(s['hit'], s['labels']):>8}"
                  f"{pct(s['tp'], s['findings']):>11}{s['tp']:>7}/{s['findings']:<5}"
                  f"{s['hit']:>6}/{s['labels']:<5}{t:>14}")
        print()
    print(f"semgrep {semgrep_version or '-'}, rules {SEMGREP_RULES_REPO}@"
          f"{(rules_commit if 'semgrep' in tools else '-')[:12]}; semgrep time is one run giving "
          "both semgrep rows; bandit rows count Python apps only.")

    if args.list_misses:
        row = args.list_misses
        if row not in results:
            sys.exit(f"error: --list-misses wants one of {', '.join(results)}")
        for app_name, s in results[row].items():
            print(f"\n== {row} on {app_name}: {len(s['missed'])} missed labels, "
                  f"{len(s['fps'])} false positives")
            for lab in s["missed"]:
                print(f"MISS {lab['path']}:{lab['start']}-{lab['end']}\t{lab['kind']}\t"
                      f"{lab['note']}")
            for f in s["fps"]:
                print(f"FP   {f['path']}:{f['start']}\t{f['rule']}\t{f['kind']}")
        missed_kinds, fp_kinds = {}, {}
        for s in results[row].values():
            for lab in s["missed"]:
                missed_kinds[lab["kind"]] = missed_kinds.get(lab["kind"], 0) + 1
            for f in s["fps"]:
                fp_kinds[f["kind"]] = fp_kinds.get(f["kind"], 0) + 1
        print(f"\n{row}: missed labels by kind: " + ", ".join(
            f"{k} {n}" for k, n in sorted(missed_kinds.items(), key=lambda x: -x[1])))
        print(f"{row}: false positives by kind: " + ", ".join(
            f"{k} {n}" for k, n in sorted(fp_kinds.items(), key=lambda x: (-x[1], str(x[0])))))
    if args.json:
        Path(args.json).write_text(json.dumps(dump, indent=1))


if __name__ == "__main__":
    main()
