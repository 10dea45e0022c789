#!/usr/bin/env bash
# Review quality (issue 16): the built-in `security-default` review against semgrep (its public
# security rules, with and without the "audit" rules), bandit and detect-secrets, on the
# hand-labelled development set of bench/quality/ (apps.toml + labels/). One run prints one
# table: recall, precision, TP/findings, labels hit/labels and wall-clock time per tool, per
# app and in total. See bench/quality/README.md for the set, the labels and the scoring.
#
# Usage: bench/quality.sh [--apps a,b] [--tools ours,semgrep,bandit,detect-secrets]
#                         [--list-misses TOOL] [--no-cache]
#   TOOL for --list-misses: ours | semgrep | semgrep-no-audit | bandit | detect-secrets
# Environment:
#   BIN            our binary (default: target/release/review-agent-gateway, built here by
#                  `cargo build --release -p review-agent-gateway` when BIN is unset)
#   BENCH_MIRROR   a directory of bare repositories named like the search tool's fetch does
#                  (<dir>/<owner>+<name>/repo), used instead of cloning from GitHub
#   SEMGREP_RULES  a checkout of semgrep/semgrep-rules to use instead of the pinned one (its git
#                  HEAD keys the cache; a directory without git is "local": use --no-cache)
#   SEMGREP_JOBS   semgrep -j (default 2)
# Everything it makes lives under target/: the tools in target/bench-venv (pinned versions,
# installed from PyPI when missing), the repositories, snapshots and the semgrep result cache in
# target/bench-corpus. Needs git, python3 (3.11+) and network access to PyPI and GitHub unless
# the venv and BENCH_MIRROR/SEMGREP_RULES are already there.
set -euo pipefail
cd "$(dirname "$0")/.."

SEMGREP_VERSION=1.185.0
BANDIT_VERSION=1.9.4
DETECT_SECRETS_VERSION=1.5.0

venv=target/bench-venv
want="semgrep==$SEMGREP_VERSION bandit==$BANDIT_VERSION detect-secrets==$DETECT_SECRETS_VERSION"
if [ ! -f "$venv/.installed" ] || [ "$(cat "$venv/.installed")" != "$want" ]; then
  echo "installing $want into $venv" >&2
  python3 -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet $want
  echo "$want" >"$venv/.installed"
fi

if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet -p review-agent-gateway
  BIN=$PWD/target/release/review-agent-gateway
fi
[ -x "$BIN" ] || { echo "error: BIN=$BIN is not an executable file" >&2; exit 2; }

exec python3 bench/quality.py --bin "$BIN" --venv "$venv" "$@"
