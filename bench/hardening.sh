#!/usr/bin/env bash
# What a hostile local client costs the daemon (issue 12 §1), beside the same daemon's ordinary
# work in the same run: health polled under wrk with a provider configured (and the probes that
# reach it) against health with no provider; a review with scope.filePaths at the caps against
# the same review without a scope, and a 30 KB entry's refusal; a /v1/ws client that never
# reads, with the daemon's memory before, during and after. See bench/hardening.py.
#
# Usage: bench/hardening.sh [FILES] [LINES_PER_FILE]      (defaults: 200 50)
# Environment: RUNS (5), MODELS_DELAY_MS (300), WRK_THREADS (2), WRK_CONNS (50),
#   WRK_SECONDS (10), FLOOD_SECONDS (10), NO_BUILD=1 to skip `cargo build --release`,
#   BIN=path to measure another binary (e.g. target/debug/review-agent-gateway).
# Needs: cargo, git, python3, wrk (apt-get install -y wrk).
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-200}
lines=${2:-50}

for tool in wrk git python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool is not installed (Debian: apt-get install -y $tool)" >&2; exit 2; }
done
if [ -z "${BIN:-}" ] && [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release --quiet -p review-agent-gateway
fi
bin=${BIN:-$PWD/target/release/review-agent-gateway}
[ -x "$bin" ] || { echo "error: $bin is missing (cargo build --release -p review-agent-gateway)" >&2; exit 2; }

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The first `listening on http://127.0.0.1:PORT` line of a process's stdout file.
wait_port() {
  local out=$1 pid=$2 line
  for _ in $(seq 200); do
    if line=$(grep -m1 -o 'listening on http://127\.0\.0\.1:[0-9]*' "$out" 2>/dev/null); then
      echo "${line##*:}"
      return
    fi
    kill -0 "$pid" 2>/dev/null || { echo "error: $out: the process exited" >&2; cat "$out"* >&2; exit 1; }
    sleep 0.05
  done
  echo "error: no listening line in $out within 10 s" >&2
  exit 1
}

echo "building a synthetic repository: $files x $lines ..." >&2
python3 bench/make_repo.py "$work/repo" "$files" "$lines"
base=$(git -C "$work/repo" rev-parse base)
head=$(git -C "$work/repo" rev-parse head)

python3 bench/fake_openai.py --port 0 --models-delay-ms "${MODELS_DELAY_MS:-300}" >"$work/fake.out" 2>&1 &
pids+=($!)
fake_port=$(wait_port "$work/fake.out" "${pids[-1]}")

start_daemon() { # HOME_DIR PROVIDER(0/1) -> "PORT PID"
  local home=$1 provider=$2
  mkdir -p "$home/config"
  cat >"$home/config/config.toml" <<EOF
allowed_origins = ["https://gitlab.example.com"]

[[mappings]]
gitlab_origin = "https://gitlab.example.com"
project_path = "bench/small"
local_path = "$work/repo"
EOF
  if [ "$provider" = 1 ]; then
    cat >>"$home/config/config.toml" <<EOF

[[providers]]
id = "local"
kind = "openai-compatible"
base_url = "http://127.0.0.1:$fake_port/v1"
model = "review-stop"
EOF
  fi
  REVIEW_AGENT_GATEWAY_HOME=$home "$bin" serve --port 0 >"$home/serve.out" 2>"$home/serve.err" &
  local pid=$!
  pids+=("$pid")
  echo "$(wait_port "$home/serve.out" "$pid") $pid"
}
read -r port pid < <(start_daemon "$work/home" 1)
read -r plain_port plain_pid < <(start_daemon "$work/plain" 0)
pids+=("$pid" "$plain_pid")
token=$(REVIEW_AGENT_GATEWAY_HOME=$work/home "$bin" token show)
plain_token=$(REVIEW_AGENT_GATEWAY_HOME=$work/plain "$bin" token show)
echo "daemons on 127.0.0.1:$port (provider) and :$plain_port (none); fake provider :$fake_port" >&2

python3 bench/hardening.py --port "$port" --plain-port "$plain_port" --pid "$pid" \
  --token "$token" --plain-token "$plain_token" \
  --project bench/small --base "$base" --head "$head" \
  --provider-url "http://127.0.0.1:$fake_port" --models-delay-ms "${MODELS_DELAY_MS:-300}" \
  --runs "${RUNS:-5}" --wrk-threads "${WRK_THREADS:-2}" --wrk-conns "${WRK_CONNS:-50}" \
  --wrk-seconds "${WRK_SECONDS:-10}" --flood-seconds "${FLOOD_SECONDS:-10}"
