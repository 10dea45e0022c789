#!/usr/bin/env bash
# What running an external analyzer through the review costs, against running it by hand
# (issue 16 part 4): on bench/make_repo.py's synthetic change (FILES files, LINES changed lines
# each, a sixth of them Python), in the same run,
#   (a) ruff by hand: `ruff check --output-format sarif` on the changed Python files;
#   (b) `review-agent-gateway review --no-analyzers` (the rules alone);
#   (c) `review-agent-gateway review` with ruff as an `[[analyzers]]` entry (sandboxed, in the
#       scratch checkout of the head commit, which the warm-up run creates and later runs reuse).
# Prints a table of means, and what the analyzer adds to the review, (c) − (b), against (a).
#
# Usage: bench/analyzers.sh [FILES] [LINES]     (defaults: 200 50)
# Environment: RUFF (default: target/test-venv/bin/ruff, which .ci/run installs), BIN (default:
#   a release build), RUNS (20).
# Needs: cargo, git, python3, hyperfine (apt-get install -y hyperfine); Linux with Landlock.
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-200}
lines=${2:-50}
runs=${RUNS:-20}
ruff=${RUFF:-$PWD/target/test-venv/bin/ruff}

for tool in hyperfine git python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool is not installed (Debian: apt-get install -y $tool)" >&2; exit 2; }
done
[ -x "$ruff" ] || { echo "error: $ruff is missing (bash .ci/run installs it, or set RUFF)" >&2; exit 2; }
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet -p review-agent-gateway
fi
bin=${BIN:-$PWD/target/release/review-agent-gateway}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repo=$work/repo
python3 bench/make_repo.py "$repo" "$files" "$lines"
# A gateway home of its own: its state dir holds the scratch checkout.
export REVIEW_AGENT_GATEWAY_HOME=$work/home
mkdir -p "$REVIEW_AGENT_GATEWAY_HOME/config"
cat >"$work/config.toml" <<EOF
[[analyzers]]
name = "ruff"
command = ["$ruff", "check", "--no-cache", "--exit-zero", "--select", "S", "--output-format", "sarif", "{files}"]
paths = ["*.py"]
EOF
mapfile -t py < <(git -C "$repo" diff --name-only base head -- '*.py')

by_hand=(bash -c 'cd "$1" && shift && "$@" >/dev/null' _ "$repo" "$ruff" check --no-cache --exit-zero --select S --output-format sarif "${py[@]}")
rules=("$bin" review --repo "$repo" --base base --head head --format json --fail-on never --config "$work/config.toml" --no-analyzers)
with=("$bin" review --repo "$repo" --base base --head head --format json --fail-on never --config "$work/config.toml")

# Check the analyzer runs and finds something, and warm the checkout.
"${with[@]}" >"$work/events.jsonl"
ran=$(grep -c '"tool":"analyzer","ok":true' "$work/events.jsonl" || true)
[ "$ran" = 1 ] || { echo "error: the analyzer did not run:" >&2; grep '"analyzer' "$work/events.jsonl" >&2; exit 1; }
found=$(grep -c '"source":"analyzer"' "$work/events.jsonl" || true)
dups=$(grep -c 'finding.duplicate' "$work/events.jsonl" || true)

hyperfine --style none --warmup 2 --runs "$runs" --export-json "$work/h.json" \
  -n "ruff by hand" "$(printf '%q ' "${by_hand[@]}")" \
  -n "review, rules only" "$(printf '%q ' "${rules[@]}") >/dev/null" \
  -n "review + ruff" "$(printf '%q ' "${with[@]}") >/dev/null" >/dev/null
python3 - "$work/h.json" "${#py[@]}" "$found" "$dups" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
py, found, dups = sys.argv[2:5]
print(f"changed Python files: {py}; ruff findings kept: {found}; dropped as duplicates of rules: {dups}")
print(f"{'command':<22}{'mean ms':>10}{'stddev':>10}")
for name in ("ruff by hand", "review, rules only", "review + ruff"):
    x = r[name]
    print(f"{name:<22}{x['mean']*1e3:>10.1f}{x['stddev']*1e3:>10.1f}")
added = r["review + ruff"]["mean"] - r["review, rules only"]["mean"]
hand = r["ruff by hand"]["mean"]
print(f"the analyzer adds {added*1e3:.1f} ms to the review; by hand it takes {hand*1e3:.1f} ms ({added/hand:.2f}x)")
PY
