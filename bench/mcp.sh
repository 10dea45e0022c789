#!/usr/bin/env bash
# MCP benchmark (issue 14's "Done means"): `file_read`, `file_find` and `code_search` through the
# gateway's `/mcp` (Streamable HTTP) and its stdio relay (`review-agent-gateway mcp`) against the
# reference server `@modelcontextprotocol/server-filesystem` (stdio; `read_text_file`,
# `search_files`) and, for content search, `rg` — one client (the Python MCP SDK), one process,
# one run. Prints one table: median / p95 ms per side and the ratio ours / peer (< 1: we are
# faster), with a check that both sides answered the same thing (see bench/mcp_bench.py for the rows).
# The daemon runs on its own loopback port in a temporary home whose `[mcp] roots` is CORPUS.
#
# Usage: bench/mcp.sh [CORPUS] [-- extra mcp_bench.py options, e.g. --mid-file P --large-file P
#                      --glob G --literal S --regex R]
#   CORPUS: a source tree (default /work/corpus/tokio). It is not committed; get the one the
#   defaults name with
#     git clone https://github.com/tokio-rs/tokio /work/corpus/tokio
#   (for another corpus pass --mid-file and --large-file: the large one under file_read's
#   256 KiB output cap, so the whole text compares).
# Environment: RUNS (50 warm calls per side), WARMUP (3), NO_BUILD=1 to skip `cargo build`,
#   PEER_VERSION (the server-filesystem version installed into target/bench-node; default the
#   pinned one below), PYTHON (default target/test-venv/bin/python, which .ci/run creates with
#   the `mcp` SDK; any python with `pip install mcp==2.3.0 httpx2==2.16.2` works).
# Needs: cargo, git, python3 with the mcp SDK (above), node + npm, ripgrep:
#   sudo apt-get install -y ripgrep nodejs npm
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=${1:-/work/corpus/tokio}
shift || true
[ "${1:-}" = "--" ] && shift
peer_version=${PEER_VERSION:-2026.8.31}
python=${PYTHON:-$PWD/target/test-venv/bin/python}

for tool in git node npm rg; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "error: $tool is not installed (sudo apt-get install -y ripgrep nodejs npm)" >&2
    exit 2
  }
done
"$python" -c 'import mcp.client, mcp.client.stdio, httpx2' 2>/dev/null || {
  echo "error: $python has no MCP SDK: run .ci/run once (it makes target/test-venv), or" \
    "python3 -m venv target/test-venv && target/test-venv/bin/pip install mcp==2.3.0 httpx2==2.16.2" >&2
  exit 2
}
[ -d "$corpus" ] || {
  echo "error: $corpus is not a directory; clone one, e.g. git clone https://github.com/tokio-rs/tokio $corpus" >&2
  exit 2
}

# The peer, pinned, in a bench-local directory (not committed: target/ is ignored).
node_dir=$PWD/target/bench-node
peer=$node_dir/node_modules/@modelcontextprotocol/server-filesystem
installed=$(node -p "require('$peer/package.json').version" 2>/dev/null || true)
if [ "$installed" != "$peer_version" ]; then
  echo "installing @modelcontextprotocol/server-filesystem@$peer_version into $node_dir ..." >&2
  mkdir -p "$node_dir"
  npm install --prefix "$node_dir" --no-audit --no-fund --silent \
    "@modelcontextprotocol/server-filesystem@$peer_version" >&2
fi

if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release --quiet -p review-agent-gateway
fi
bin=$PWD/target/release/review-agent-gateway
[ -x "$bin" ] || { echo "error: $bin is missing (cargo build --release -p review-agent-gateway)" >&2; exit 2; }

exec "$python" bench/mcp_bench.py --bin "$bin" --corpus "$corpus" --peer "$peer/dist/index.js" \
  --peer-version "$peer_version" --runs "${RUNS:-50}" --warmup "${WARMUP:-3}" "$@"
