#!/usr/bin/env bash
# Benchmark of the companion userscript (issue 17) on a large merge request: a synthetic
# repository (bench/make_repo.py: FILES files, LINES changed lines each, FLAGGED of them lines the
# built-in rules flag; defaults 200 x 50 at 0.1: ~23,000 changed lines, ~1,000 findings), the
# release gateway, the stand-in GitLab of the companion test serving the merge request's Rapid
# Diffs page, and headless Chromium with the built userscript over the WebSocket transport.
# Prints a table (bench/companion.mjs says what each row measures): the engine alone (`review
# --format json`) and `git diff --stat` of the same range, "Review" clicked → every finding
# shown, the page reloaded → the run restored, and the page's main-thread cost and DOM growth.
#
# Usage: bench/companion.sh [FILES] [LINES_PER_FILE] [FLAGGED]
# Environment: RUNS (5: runs of each measure), NO_BUILD=1 to skip `cargo build --release`,
#   PROFILE=FILE to write the first review's CPU profile of the page (.cpuprofile).
# Needs: cargo, git, python3, node >= 20 with extension-bridge's node_modules (`npm ci` there:
#   playwright-core), /usr/bin/chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-200}
lines=${2:-50}
flagged=${3:-0.1}

for tool in git python3 node; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool is not installed" >&2; exit 2; }
done
[ -x /usr/bin/chromium ] || { echo "error: /usr/bin/chromium is missing (apt-get install chromium)" >&2; exit 2; }
[ -d extension-bridge/node_modules/playwright-core ] || { echo "error: playwright-core is missing: (cd extension-bridge && npm ci)" >&2; exit 2; }

if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release --quiet -p review-agent-gateway
fi
bin=$PWD/target/release/review-agent-gateway
[ -x "$bin" ] || { echo "error: $bin is missing (cargo build --release -p review-agent-gateway)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "building a synthetic repository: $files files x $lines lines, $flagged flagged ..." >&2
python3 bench/make_repo.py "$work/repo" "$files" "$lines" "$flagged"
node extension-bridge/build.mjs --out "$work/dist" >/dev/null

node bench/companion.mjs --binary "$bin" --repo "$work/repo" --userscript "$work/dist/review-locally.user.js" \
  --runs "${RUNS:-5}" ${PROFILE:+--profile "$PROFILE"}
