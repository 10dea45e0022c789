#!/usr/bin/env bash
# The full symbol index of a monorepo (issue 19 §3): wall time, CPU, peak RSS and index size of
# the first index of HEAD (a fuzzy `symbol_search` with a fresh state directory parses and
# stores every file, as in bench/tools.sh; its query matches no name, so the peak is the
# index's, not an answer's), against `ctags -R` over the same files; then a warm exact query.
# Prints a table.
#
# Usage: bench/symbols_monorepo.sh [REPO] [FILES]
#   REPO: a git repository (default /tmp/monorepo); made by bench/make_monorepo.py with FILES
#   files (default 120000) when it does not exist.
# Environment: NO_BUILD=1 to skip `cargo build --release`; BIN, the binary to measure (default
#   target/release/review-agent-gateway); QUERY (default `record_packet`), the name queried warm.
# Needs: cargo, git, python3, GNU time (/usr/bin/time), universal-ctags.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=${1:-/tmp/monorepo}
files=${2:-120000}
query=${QUERY:-record_packet}
[ -x /usr/bin/time ] || { echo "error: GNU time is not installed (sudo apt-get install -y time)" >&2; exit 2; }
ctags --version 2>/dev/null | grep -q 'Universal Ctags' || {
  echo "error: ctags is not universal-ctags (sudo apt-get install -y universal-ctags)" >&2
  exit 2
}
if [ ! -d "$repo/.git" ]; then
  python3 bench/make_monorepo.py "$repo" "$files"
fi
if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release --quiet -p review-agent-gateway
fi
bin=${BIN:-$PWD/target/release/review-agent-gateway}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export REVIEW_AGENT_GATEWAY_HOME=$work/home

# `measure NAME CMD...`: runs CMD under GNU time, leaves "wall user sys maxrss_kb" in $work/NAME.
measure() {
  local name=$1
  shift
  /usr/bin/time -f '%e %U %S %M' -o "$work/$name.time" "$@" >"$work/$name.out"
}

n_files=$(git -C "$repo" ls-files | grep -cE '\.(rs|py|pyi|js|mjs|cjs|jsx|ts|mts|cts|tsx|go|java)$')
mb=$(git -C "$repo" ls-files -z | (cd "$repo" && xargs -0 cat) | wc -c | awk '{printf "%.0f", $1 / 1e6}')

sync
measure ctags ctags -R --languages=Rust,Python,JavaScript,TypeScript,Go,Java -f "$work/tags" "$repo"
ctags_size=$(stat -c %s "$work/tags")
ctags_tags=$(grep -vc '^!_' "$work/tags")

rm -rf "$work/home"
measure index "$bin" tool symbol_search --repo "$repo" --ref HEAD \
  --input '{"query":"zq_no_such_symbol","match":"fuzzy"}'
index_size=$(stat -c %s "$work/home/state/symbols.redb")
index_disk=$(du -k "$work/home/state/symbols.redb" | cut -f1)
parsed=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["parsedFiles"], d["indexedFiles"])' "$work/index.out")

measure warm "$bin" tool symbol_search --repo "$repo" --ref HEAD \
  --input "{\"query\":\"$query\",\"match\":\"exact\"}"
warm_matches=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["matchCount"])' "$work/warm.out")

echo "repository: $repo, $n_files supported files, $mb MB; $(nproc) cores"
printf '%-34s %9s %9s %9s %10s %12s  %s\n' task wall_s user_s sys_s peak_MB output_MB check
row() {
  read -r wall user sys rss <"$work/$1.time"
  printf '%-34s %9s %9s %9s %10.0f %12s  %s\n' "$2" "$wall" "$user" "$sys" "$((rss / 1024))" "$3" "$4"
}
row index "symbol_search full first index" "$(awk -v b="$index_size" 'BEGIN{printf "%.0f", b / 1e6}')" \
  "parsed/indexed files: $parsed; $((index_disk / 1024)) MB allocated on disk"
row ctags "ctags -R (definitions only)" "$(awk -v b="$ctags_size" 'BEGIN{printf "%.0f", b / 1e6}')" \
  "$ctags_tags tags"
row warm "symbol_search warm exact $query" - "$warm_matches matches"
read -r ours _ <"$work/index.time"
read -r peer _ <"$work/ctags.time"
awk -v o="$ours" -v p="$peer" 'BEGIN{printf "full index / ctags wall: %.2fx\n", o / p}'
