#!/usr/bin/env bash
# Benchmark of the daemon (`review-agent-gateway serve`), issue 3's "Done means": starts its
# own daemon on a free loopback port in a temporary home, with two synthetic repositories from
# bench/make_repo.py mapped in its config, and prints a table of
#   - requests/s and latency p50/p99 on GET /v1/health under wrk,
#   - time from POST /v1/reviews to the first SSE event and to run.completed (median of N),
#     beside the same review run by the command line,
#   - events/s through one SSE stream (replay of a completed run),
#   - the daemon's resident memory right after start and, idle, after the reviews.
# All traffic goes to 127.0.0.1; every measurement is bounded (wrk: WRK_SECONDS).
#
# Usage: bench/daemon.sh [FILES] [LINES_PER_FILE] [LARGE_FILES]     (defaults: 200 50 2000)
#   FILES x LINES: the review timed over HTTP and by the CLI (~FILES*LINES changed lines);
#   LARGE_FILES x LINES: a bigger review whose run is replayed for events/s.
# Environment: RUNS (10), REPLAYS (5), WRK_THREADS (2), WRK_CONNS (50), WRK_SECONDS (5),
#   MIN_CONFIDENCE (low), NO_BUILD=1 to skip `cargo build`.
# Needs: cargo, git, python3, wrk (apt-get install -y wrk).
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-200}
lines=${2:-50}
large_files=${3:-2000}

if ! command -v wrk >/dev/null 2>&1; then
  echo "error: wrk (the HTTP load generator) is not installed." >&2
  echo "  Debian/Ubuntu: sudo apt-get install -y wrk    macOS: brew install wrk" >&2
  exit 2
fi
for tool in git python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool is not installed" >&2; exit 2; }
done

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

echo "building synthetic repositories: $files x $lines and $large_files x $lines ..." >&2
python3 bench/make_repo.py "$work/repo" "$files" "$lines"
python3 bench/make_repo.py "$work/large" "$large_files" "$lines"
rev() { git -C "$1" rev-parse "$2"; }
changed=$(git -C "$work/repo" diff --shortstat base head | sed 's/^ *//')
large_changed=$(git -C "$work/large" diff --shortstat base head | sed 's/^ *//')

home=$work/home
mkdir -p "$home/config"
cat >"$home/config/config.toml" <<EOF
allowed_origins = ["https://gitlab.example.com"]

[[mappings]]
gitlab_origin = "https://gitlab.example.com"
project_path = "bench/small"
local_path = "$work/repo"

[[mappings]]
gitlab_origin = "https://gitlab.example.com"
project_path = "bench/large"
local_path = "$work/large"
EOF

# Start the daemon on a free port and wait for its first stdout line.
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

python3 bench/daemon_bench.py \
  --port "$port" --token "$token" --pid "$daemon_pid" --bin "$bin" --home "$home" \
  --repo "$work/repo" --project bench/small --base "$(rev "$work/repo" base)" --head "$(rev "$work/repo" head)" \
  --big-project bench/large --big-base "$(rev "$work/large" base)" --big-head "$(rev "$work/large" head)" \
  --changed "$changed" --big-changed "$large_changed" \
  --runs "${RUNS:-10}" --replays "${REPLAYS:-5}" --min-confidence "${MIN_CONFIDENCE:-low}" \
  --wrk-threads "${WRK_THREADS:-2}" --wrk-conns "${WRK_CONNS:-50}" --wrk-seconds "${WRK_SECONDS:-5}"
