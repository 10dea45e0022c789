#!/usr/bin/env bash
# Benchmark: `review-agent-gateway review` on a synthetic diff of ~10,000 changed lines in 200
# files, against `git diff --stat` of the same range, in the same run. Prints a table.
#
# Usage: bench/review.sh [FILES] [LINES_PER_FILE]     (defaults: 200 50)
# Needs: cargo, git, python3; uses hyperfine when installed (apt-get install hyperfine),
# otherwise times repeated runs itself.
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-200}
lines=${2:-50}

cargo build --release --quiet -p review-agent-gateway
bin=$PWD/target/release/review-agent-gateway
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repo=$work/repo
python3 bench/make_repo.py "$repo" "$files" "$lines"

review=("$bin" review --repo "$repo" --base base --head head --format json --fail-on never)
gitdiff=(git -C "$repo" diff --stat base head)
# Warm the page cache and check both commands work.
"${review[@]}" >"$work/events.jsonl"
"${gitdiff[@]}" >/dev/null
findings=$(grep -c '"type":"finding.created"' "$work/events.jsonl" || true)
changed=$(git -C "$repo" diff --shortstat base head)

if command -v hyperfine >/dev/null 2>&1; then
  hyperfine --style none --warmup 3 --runs 20 --export-json "$work/h.json" \
    -n review "$(printf '%q ' "${review[@]}") >/dev/null" \
    -n "git diff --stat" "$(printf '%q ' "${gitdiff[@]}") >/dev/null" >/dev/null
  python3 - "$work/h.json" "$findings" "$changed" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
rv, gd = r["review"], r["git diff --stat"]
print(f"range: {sys.argv[3].strip()}; findings: {sys.argv[2]}")
print(f"{'command':<18}{'mean ms':>10}{'stddev':>10}{'min ms':>10}{'max ms':>10}")
for name, x in (("review", rv), ("git diff --stat", gd)):
    print(f"{name:<18}{x['mean']*1e3:>10.1f}{x['stddev']*1e3:>10.1f}{x['min']*1e3:>10.1f}{x['max']*1e3:>10.1f}")
print(f"ratio review / git diff --stat: {rv['mean']/gd['mean']:.2f}x (target < 5x); review under 1 s: {rv['mean'] < 1.0}")
PY
else
  python3 - "$findings" "$changed" "${#review[@]}" "${review[@]}" "${gitdiff[@]}" <<'PY'
import subprocess, sys, time, statistics
findings, changed, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
review, gitdiff = sys.argv[4:4+n], sys.argv[4+n:]
def bench(cmd, runs=20):
    for _ in range(3): subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
    t = []
    for _ in range(runs):
        s = time.perf_counter(); subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True); t.append(time.perf_counter() - s)
    return t
rv, gd = bench(review), bench(gitdiff)
print(f"range: {changed.strip()}; findings: {findings}")
print(f"{'command':<18}{'mean ms':>10}{'stddev':>10}{'min ms':>10}{'max ms':>10}")
for name, x in (("review", rv), ("git diff --stat", gd)):
    print(f"{name:<18}{statistics.mean(x)*1e3:>10.1f}{statistics.stdev(x)*1e3:>10.1f}{min(x)*1e3:>10.1f}{max(x)*1e3:>10.1f}")
print(f"ratio review / git diff --stat: {statistics.mean(rv)/statistics.mean(gd):.2f}x (target < 5x); review under 1 s: {statistics.mean(rv) < 1.0}")
PY
fi
