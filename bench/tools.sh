#!/usr/bin/env bash
# Benchmark of the repository tools (issue 4) on a real source tree with real history, against
# ripgrep, fd, git and universal-ctags in the same run; prints a table with ratios (see
# bench/tools.py for the rows).
#
# Usage: bench/tools.sh [CORPUS] [-- extra tools.py options]
#   CORPUS: a git work tree of at least 100k lines (default /work/corpus/tokio). The corpus is
#   not committed; get the one the notes use with
#     git clone https://github.com/tokio-rs/tokio /work/corpus/tokio
#   and, for another corpus, pass --follow-path, --blame-path, --blame-range, --symbol.
# Environment: RUNS (10), QUERY_RUNS (100), NO_BUILD=1 to skip `cargo build`.
# Needs: cargo, git, python3, hyperfine, ripgrep, fd (fd-find), universal-ctags (ctags, readtags):
#   sudo apt-get install -y hyperfine ripgrep fd-find universal-ctags
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=${1:-/work/corpus/tokio}
shift || true
[ "${1:-}" = "--" ] && shift
for tool in git python3 hyperfine rg ctags readtags; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "error: $tool is not installed (sudo apt-get install -y hyperfine ripgrep fd-find universal-ctags)" >&2
    exit 2
  }
done
ctags --version 2>/dev/null | grep -q 'Universal Ctags' || {
  echo "error: ctags is not universal-ctags (sudo apt-get install -y universal-ctags)" >&2
  exit 2
}
[ -d "$corpus/.git" ] || {
  echo "error: $corpus is not a git work tree; clone one, e.g. git clone https://github.com/tokio-rs/tokio $corpus" >&2
  exit 2
}
if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release --quiet -p review-agent-gateway
fi
exec python3 bench/tools.py --bin "$PWD/target/release/review-agent-gateway" --corpus "$corpus" \
  --runs "${RUNS:-10}" --query-runs "${QUERY_RUNS:-100}" "$@"
