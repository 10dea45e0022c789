#!/usr/bin/env bash
# Transport benchmark (issue 5's "Done means"): starts its own daemon on a free loopback port in a
# temporary home, with one synthetic repository from bench/make_repo.py mapped in its config, and
# prints a table comparing, in the same run and against the same daemon,
#   - round-trip latency p50/p99 of GET /v1/health over HTTP (keep-alive) and over /v1/ws
#     (request -> response frame), sequential, one connection each;
#   - events/s of one long replayed stream (GET /v1/runs/:id/events?after=0) over SSE and over
#     /v1/ws (event frames until end);
#   - the same two through `review-agent-gateway native-host` (the relay of DESIGN §3, started
#     with NATIVE_HOST_ARGS as its argv after `native-host`; default: Firefox's form with the
#     companion add-on id, which needs no config; NATIVE_HOST_ARGS= (empty) skips the row). The
#     relay finds the daemon's port through REVIEW_AGENT_GATEWAY_PORT (the config sets none).
# All traffic goes to 127.0.0.1.
#
# Usage: bench/transports.sh [FILES] [LINES_PER_FILE]     (defaults: 2000 50: ~10k events)
# Environment: SAMPLES (2000 round trips per transport), REPLAYS (5), NO_BUILD=1 to skip
#   `cargo build`, NATIVE_HOST_ARGS (see above).
# Needs: cargo, git, python3 with `websockets` >= 13 (pip install websockets).
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-2000}
lines=${2:-50}

for tool in git python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool is not installed" >&2; exit 2; }
done
if ! python3 -c 'import websockets.sync.client' 2>/dev/null; then
  echo "error: the Python package 'websockets' (>= 13) is not installed: pip install websockets" >&2
  exit 2
fi

if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release --quiet -p review-agent-gateway
fi
bin=$PWD/target/release/review-agent-gateway
[ -x "$bin" ] || { echo "error: $bin is missing (cargo build --release -p review-agent-gateway)" >&2; exit 2; }

work=$(mktemp -d)
daemon_pid=
cleanup() {
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "building a synthetic repository: $files x $lines ..." >&2
python3 bench/make_repo.py "$work/repo" "$files" "$lines"
changed=$(git -C "$work/repo" diff --shortstat base head | sed 's/^ *//')

home=$work/home
mkdir -p "$home/config"
cat >"$home/config/config.toml" <<EOF
allowed_origins = ["https://gitlab.example.com"]

[[mappings]]
gitlab_origin = "https://gitlab.example.com"
project_path = "bench/large"
local_path = "$work/repo"
EOF

REVIEW_AGENT_GATEWAY_HOME=$home "$bin" serve --port 0 >"$work/serve.out" 2>"$work/serve.err" &
daemon_pid=$!
port=
for _ in $(seq 200); do
  if line=$(grep -m1 -o 'listening on http://127\.0\.0\.1:[0-9]*' "$work/serve.out" 2>/dev/null); then
    port=${line##*:}
    break
  fi
  if ! kill -0 "$daemon_pid" 2>/dev/null; then
    echo "error: the daemon exited before listening; its stderr:" >&2
    cat "$work/serve.err" >&2
    exit 1
  fi
  sleep 0.05
done
if [ -z "$port" ]; then
  echo "error: no 'listening on http://127.0.0.1:PORT' line within 10 s; stdout/stderr:" >&2
  cat "$work/serve.out" "$work/serve.err" >&2
  exit 1
fi
token=$(REVIEW_AGENT_GATEWAY_HOME=$home "$bin" token show)
echo "daemon pid $daemon_pid listening on 127.0.0.1:$port" >&2

native_args=${NATIVE_HOST_ARGS-"$work/com.review_agent.gateway.json companion@review-agent-gateway"}
REVIEW_AGENT_GATEWAY_HOME=$home REVIEW_AGENT_GATEWAY_PORT=$port python3 bench/transports.py \
  --port "$port" --token "$token" --bin "$bin" --pid "$daemon_pid" \
  --project bench/large --base "$(git -C "$work/repo" rev-parse base)" \
  --head "$(git -C "$work/repo" rev-parse head)" --changed "$changed" \
  --samples "${SAMPLES:-2000}" --replays "${REPLAYS:-5}" \
  ${native_args:+--native-host-args "$native_args"}
