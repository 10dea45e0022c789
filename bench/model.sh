#!/usr/bin/env bash
# Model-provider benchmark (issue 7): what the gateway adds on top of a model server. There is
# no real model here, so bench/fake_openai.py plays an OpenAI-compatible server on a free
# loopback port, streaming `chat.completion.chunk`s as fast as it can; the script starts it and
# a daemon in a temporary home whose config points `[[providers]]` at it, and prints a markdown
# table (bench/model_bench.py) comparing, in the same run,
#   - a chat answer of N deltas (DELTAS, default 5,000 and 50,000): `curl -sN` straight to the
#     fake (the peer) vs `review-agent-gateway chat` vs the daemon's `POST /v1/chat` SSE read by
#     `curl -sN` (time to the first `text.delta` and to `run.completed`, deltas/s);
#   - the time to the first token, p50/p99 of TTFT_RUNS, direct vs daemon vs command line, for
#     a one-token answer and for one streamed at 100 tokens/s;
#   - `review --provider` on a synthetic repository (bench/make_repo.py FILES LINES) with the
#     fake answering at once, vs the rules-only `review` of the same range: the extra time of
#     the model stage and how many requests / diff parts it sent, for context_window 32768 and
#     8192 (WINDOWS).
# All traffic goes to 127.0.0.1; every loop is bounded and every client has a timeout.
#
# Usage: bench/model.sh [FILES] [LINES_PER_FILE]     (defaults: 200 50: ~10k changed lines)
# Environment: DELTAS (5000,50000), RUNS (5), TTFT_RUNS (30), REVIEW_RUNS (5),
#   WINDOWS (32768,8192), FAKE_BATCH (1: each delta its own write), NO_BUILD=1 to skip
#   `cargo build`.
# Needs: cargo, git, curl, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-200}
lines=${2:-50}

for tool in git curl python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool is not installed" >&2; exit 2; }
done

if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release --quiet -p review-agent-gateway
fi
bin=$PWD/target/release/review-agent-gateway
[ -x "$bin" ] || { echo "error: $bin is missing (cargo build --release -p review-agent-gateway)" >&2; exit 2; }

work=$(mktemp -d)
daemon_pid=
fake_pid=
bench_pid=
stop() { # pid: TERM, wait up to 5 s, then KILL
  if [ -n "$1" ] && kill -0 "$1" 2>/dev/null; then
    kill -TERM "$1" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
  fi
}
cleanup() {
  stop "$bench_pid"
  stop "$daemon_pid"
  stop "$fake_pid"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_for_port NAME PID FILE: the port of the first `listening on http://127.0.0.1:PORT` line
# of FILE, within 10 s.
wait_for_port() {
  local line
  for _ in $(seq 200); do
    if line=$(grep -m1 -o 'listening on http://127\.0\.0\.1:[0-9]*' "$3" 2>/dev/null); then
      echo "${line##*:}"
      return
    fi
    if ! kill -0 "$2" 2>/dev/null; then
      echo "error: $1 exited before listening; its output:" >&2
      cat "$3" "$3.err" >&2 2>/dev/null || true
      exit 1
    fi
    sleep 0.05
  done
  echo "error: no 'listening on http://127.0.0.1:PORT' line from $1 within 10 s" >&2
  cat "$3" "$3.err" >&2 2>/dev/null || true
  exit 1
}

python3 bench/fake_openai.py --port 0 --batch "${FAKE_BATCH:-1}" >"$work/fake.out" 2>"$work/fake.out.err" &
fake_pid=$!
fake_port=$(wait_for_port "the fake model server" "$fake_pid" "$work/fake.out")
echo "fake model server pid $fake_pid on 127.0.0.1:$fake_port" >&2

echo "building a synthetic repository: $files x $lines ..." >&2
python3 bench/make_repo.py "$work/repo" "$files" "$lines"
changed=$(git -C "$work/repo" diff --shortstat base head | sed 's/^ *//')

home=$work/home
mkdir -p "$home/config"
cat >"$home/config/config.toml" <<EOF
allowed_origins = ["https://gitlab.example.com"]

[[providers]]
id = "fake"
kind = "openai-compatible"
base_url = "http://127.0.0.1:$fake_port/v1"
model = "deltas-5000"
context_window = 32768
EOF
review_providers=
IFS=, read -r -a windows <<<"${WINDOWS:-32768,8192}"
for window in "${windows[@]}"; do
  cat >>"$home/config/config.toml" <<EOF

[[providers]]
id = "fake-$window"
kind = "openai-compatible"
base_url = "http://127.0.0.1:$fake_port/v1"
model = "review-stop"
context_window = $window
EOF
  review_providers=${review_providers:+$review_providers,}fake-$window=$window
done

REVIEW_AGENT_GATEWAY_HOME=$home "$bin" serve --port 0 >"$work/serve.out" 2>"$work/serve.out.err" &
daemon_pid=$!
port=$(wait_for_port "the daemon" "$daemon_pid" "$work/serve.out")
token=$(REVIEW_AGENT_GATEWAY_HOME=$home "$bin" token show)
echo "daemon pid $daemon_pid listening on 127.0.0.1:$port" >&2

# In the background and waited for, so that INT/TERM stop it (and the traps run) at once.
python3 bench/model_bench.py \
  --port "$port" --fake-port "$fake_port" --token "$token" --bin "$bin" --home "$home" \
  --repo "$work/repo" --provider fake --changed "$changed" --review-providers "$review_providers" \
  --deltas "${DELTAS:-5000,50000}" --runs "${RUNS:-5}" --ttft-runs "${TTFT_RUNS:-30}" \
  --review-runs "${REVIEW_RUNS:-5}" &
bench_pid=$!
wait "$bench_pid"
