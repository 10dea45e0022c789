#!/usr/bin/env bash
# Delegation benchmark (issue 15): one read-only task handed to OpenCode through the gateway's
# MCP tools (the server started, sandboxed and supervised by the gateway) and straight to a
# hand-started `opencode serve` over its HTTP API, with the same fake model
# (bench/fake_openai.py, model `agent-read`). Prints one table: server start + first session,
# a whole task, one status read — median / p95 ms per side and the ratio ours / peer.
#
# Usage: bench/delegation.sh [-- extra delegation_bench.py options: --runs N --polls N]
# Environment: NO_BUILD=1 to skip `cargo build --release`; OPENCODE (default the binary of
#   extension-bridge's optional dependency opencode-linux-x64, which `npm ci` installs);
#   PYTHON (default target/test-venv/bin/python, which .ci/run creates with the `mcp` SDK).
# Needs: cargo, git, python3 with the mcp SDK, ripgrep (OpenCode's search), the npm registry
#   on first use (OpenCode installs @ai-sdk/openai-compatible into its cache).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${1:-}" = "--" ] && shift
python=${PYTHON:-$PWD/target/test-venv/bin/python}
opencode=${OPENCODE:-$PWD/extension-bridge/node_modules/opencode-linux-x64/bin/opencode}
[ -x "$opencode" ] || { echo "error: $opencode is missing: run npm ci in extension-bridge" >&2; exit 2; }
command -v rg >/dev/null || { echo "error: rg is missing (sudo apt-get install -y ripgrep)" >&2; exit 2; }
"$python" -c 'import mcp.client, httpx2' 2>/dev/null || {
  echo "error: $python has no MCP SDK: run .ci/run once (it makes target/test-venv)" >&2; exit 2; }
if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release --quiet -p review-agent-gateway
fi
bin=$PWD/target/release/review-agent-gateway
[ -x "$bin" ] || { echo "error: $bin is missing (cargo build --release -p review-agent-gateway)" >&2; exit 2; }
exec "$python" bench/delegation_bench.py --bin "$bin" --opencode "$opencode" \
  --fake bench/fake_openai.py "$@"
