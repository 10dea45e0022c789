#!/usr/bin/env bash
# What the sandbox costs a command's start-up (DESIGN §13): a few short commands run (a) bare,
# (b) through the helper `review-agent-gateway __sandbox-exec` unconfined (`"confine": false`:
# rlimits, child subreaper, spawn and reap only), (c) through the helper confined (Landlock +
# seccomp + capabilities dropped), and (d) end to end as `review-agent-gateway tool run_check`
# (CLI start, config load, the sandbox probe, policy, per-call scratch dir, audit log line).
# Prints a table of means ± stddev in ms, the confined overhead (c − a) and the ratio c/a.
#
# The policy of (b) and (c) is built here the way `Places::policy` (host/src/sandbox.rs) builds
# it: `SYSTEM_READ` and `ETC_READ` (read from that file), the `PATH` entries (and the folder
# above one named `bin`), cargo's `bin`/`registry`/`git`/config and rustup's home, the program,
# the repository (read); a scratch dir and /dev/null (write); no network. Every command runs
# in the repository with the environment run_check gives it (PATH, LANG, TERM, HOME and TMPDIR
# in a scratch dir, USER, LOGNAME, CARGO_HOME, RUSTUP_HOME).
#
# Usage: bench/sandbox.sh
# Environment: RUNS (30), WARMUP (3), NO_BUILD=1 to skip `cargo build --release`, BIN=path to
#   measure another binary; GIT, PYTHON, NODE: the programs to run (default: the first in PATH
#   that is not a script; a row is skipped when its program is absent).
# Needs: cargo, git, python3, hyperfine (apt-get install -y hyperfine); Linux with Landlock
#   (ABI 3+) for column (c) and (d).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD/host/src/sandbox.rs

for tool in hyperfine git python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool is not installed (Debian: apt-get install -y $tool)" >&2; exit 2; }
done
if [ -z "${BIN:-}" ] && [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release --quiet -p review-agent-gateway
fi
bin=${BIN:-$PWD/target/release/review-agent-gateway}
[ -x "$bin" ] || { echo "error: $bin is missing (cargo build --release -p review-agent-gateway)" >&2; exit 2; }
hyperfine_bin=$(command -v hyperfine)
runs=${RUNS:-30}
warmup=${WARMUP:-3}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
work=$(cd "$work" && pwd -P)

# A small repository (40 files, 2 commits) for `git status` and as every command's cwd.
repo=$work/repo
mkdir -p "$repo/src"
git -C "$repo" init -q
for i in $(seq 40); do
  printf 'fn f%d() -> u32 {\n    %d\n}\n' "$i" "$i" >"$repo/src/f$i.rs"
done
git -C "$repo" add -A
git -C "$repo" -c user.name=bench -c user.email=bench@example.com commit -qm one
echo '// changed' >>"$repo/src/f1.rs"
git -C "$repo" -c user.name=bench -c user.email=bench@example.com commit -qam two

# The call's scratch dir, as run_check makes one (its HOME and TMPDIR), and the gateway's home.
scratch=$work/scratch
mkdir -p "$scratch/home" "$scratch/tmp" "$work/gateway"
chmod 700 "$scratch"

# The gateway's PATH as run_check passes it: the absolute entries of ours.
gw_path=$(printf '%s' "$PATH" | tr ':' '\n' | grep '^/' | paste -sd: -)
[ -n "$gw_path" ] || gw_path=/usr/local/bin:/usr/bin:/bin
cmd_env=(PATH="$gw_path" LANG=C.UTF-8 TERM=dumb HOME="$scratch/home" TMPDIR="$scratch/tmp")
for name in USER LOGNAME; do
  if [ -n "${!name:-}" ]; then cmd_env+=("$name=${!name}"); fi
done
cargo_home=${CARGO_HOME:-${HOME:-/nonexistent}/.cargo}
rustup_home=${RUSTUP_HOME:-${HOME:-/nonexistent}/.rustup}
if [ -d "$cargo_home" ]; then cmd_env+=(CARGO_HOME="$cargo_home"); fi
if [ -d "$rustup_home" ]; then cmd_env+=(RUSTUP_HOME="$rustup_home"); fi

# The program of a row: the first executable of that name in the gateway's PATH, as run_check
# resolves it, but skipping scripts (a version manager's shim, such as pyenv's, would add its
# own start-up to every column); empty when there is none.
resolve() {
  local dir
  local -a dirs
  IFS=: read -ra dirs <<<"$gw_path"
  for dir in "${dirs[@]}"; do
    if [ -f "$dir/$1" ] && [ -x "$dir/$1" ] && [ "$(head -c2 "$dir/$1")" != '#!' ]; then
      echo "$dir/$1"
      return
    fi
  done
}
git_bin=${GIT:-$(resolve git)}
python_bin=${PYTHON:-$(resolve python3)}
node_bin=${NODE:-$(resolve node)}

# Rows: label, then argv (program absolute).
rows=()
add_row() { # LABEL PROGRAM ARGS...
  local label=$1 program=$2
  shift 2
  if [ -z "$program" ] || [ ! -x "$program" ]; then
    echo "skipped: $label (not installed)" >&2
    return
  fi
  rows+=("$label"$'\t'"$program"$'\t'"$*")
}
add_row "/bin/true" /bin/true
add_row "git --version" "$git_bin" --version
add_row "git status (40 files)" "$git_bin" status --porcelain
add_row "python3 -c pass" "$python_bin" -c pass
add_row "node -e 0" "$node_bin" -e 0

# spec.json for PROGRAM: the HelperSpec of run_check's defaults (cpu 600 s, 4 GiB), the
# policy built like Places::policy. Prints the confined spec; the unconfined one differs only
# in `confine`.
spec_of() { # PROGRAM CONFINE(true|false)
  python3 - "$src" "$1" "$2" "$repo" "$scratch" "$gw_path" "$cargo_home" "$rustup_home" "${HOME:-}" <<'PY'
import json, os, re, sys
src, program, confine, root, scratch, path, cargo, rustup, home = sys.argv[1:]
text = open(src).read()
def const(name):
    m = re.search(r"pub const %s: &\[&str\] = &\[(.*?)\];" % name, text, re.S)
    if not m:
        sys.exit(f"error: {name} not found in {src}")
    return re.findall(r'"([^"]+)"', m.group(1))
read = const("SYSTEM_READ") + const("ETC_READ")
for entry in path.split(":"):
    if entry.startswith("/"):
        read.append(entry)
        if os.path.basename(entry) == "bin":
            read.append(os.path.dirname(entry))
for part in ("bin", "registry", "git", "config.toml", "config"):
    read.append(os.path.join(cargo, part))
read += [rustup, program]
def real(p):
    return os.path.realpath(p) if os.path.exists(p) else None
home_r = real(home) if home else None
cargo_r = real(cargo)
kept = set()
for p in map(real, read):
    if p is None or p == "/" or p == cargo_r:
        continue
    if home_r and (home_r == p or home_r.startswith(p.rstrip("/") + "/")):
        continue
    kept.add(p)
kept.add(root)
spec = {
    "policy": {"read": sorted(kept), "write": sorted({scratch, "/dev/null"}), "network": False},
    "confine": confine == "true",
    "cpuSeconds": 600,
    "memoryBytes": 4096 * 1024 * 1024,
}
print(json.dumps(spec, separators=(",", ":")))
PY
}

# The config of (d): run_check enabled, every row's argv allowlisted exactly.
config=$work/config.toml
{
  echo '[tools.run_check]'
  echo 'enabled = true'
  for row in "${rows[@]}"; do
    IFS=$'\t' read -r _ program args <<<"$row"
    python3 -c 'import json, sys; print("\n[[tools.run_check.commands]]\nargv = " + json.dumps([sys.argv[1]] + sys.argv[2].split()))' "$program" "$args"
  done
} >"$config"

# The machine.
probe=$("$bin" __sandbox-probe)
echo "machine: $(nproc) cores, $(uname -sr), Landlock probe $probe"
echo "binary: $bin ($(du -h "$bin" | cut -f1)), hyperfine $("$hyperfine_bin" --version | cut -d' ' -f2), $runs runs after $warmup warm-up"
echo

# Run ARGV once in the repository with the command's environment; stop with its stderr if it fails.
check_runs() { # WHAT ARGV...
  local what=$1
  shift
  (cd "$repo" && env -i "${cmd_env[@]}" "$@" >/dev/null 2>"$work/err") || {
    echo "error: $label: $what failed:" >&2
    cat "$work/err" >&2
    exit 1
  }
}

results=$work/results.jsonl
: >"$results"
for row in "${rows[@]}"; do
  IFS=$'\t' read -r label program args <<<"$row"
  read -ra argv <<<"$args"
  confined=$(spec_of "$program" true)
  unconfined=${confined/\"confine\":true/\"confine\":false}
  input=$(python3 -c 'import json, sys; print(json.dumps({"argv": [sys.argv[1]] + sys.argv[2].split()}, separators=(",", ":")))' "$program" "$args")
  bare=("$program" "${argv[@]}")
  helper_unconfined=("$bin" __sandbox-exec "$unconfined" -- "${bare[@]}")
  helper_confined=("$bin" __sandbox-exec "$confined" -- "${bare[@]}")
  cli=("$bin" tool run_check --repo "$repo" --ref WORKTREE --config "$config" --input "$input")
  # The peer: bubblewrap as Anthropic's sandbox-runtime uses it on Linux (a read-only view of /,
  # the scratch dir writable, new network and pid namespaces), when installed.
  peer=()
  if command -v bwrap >/dev/null 2>&1; then
    peer=(bwrap --ro-bind / / --dev /dev --proc /proc --bind "$scratch" "$scratch"
      --unshare-net --unshare-pid --die-with-parent -- "${bare[@]}")
  fi

  # Each must succeed once, in the environment it is measured in (and run_check must say
  # exit code 0: the tool answers a failed command with exit status 0 too).
  check_runs bare "${bare[@]}"
  check_runs "helper unconfined" "${helper_unconfined[@]}"
  check_runs "helper confined" "${helper_confined[@]}"
  peer_args=()
  if [ ${#peer[@]} -gt 0 ] && (cd "$repo" && env -i "${cmd_env[@]}" "${peer[@]}" >/dev/null 2>&1); then
    peer_args=(-n bwrap "$(printf '%q ' "${peer[@]}")")
  fi
  answer=$(cd "$repo" && env -i "${cmd_env[@]}" REVIEW_AGENT_GATEWAY_HOME="$work/gateway" "${cli[@]}")
  grep -q '"exitCode": 0' <<<"$answer" || { echo "error: $label: run_check answered $answer" >&2; exit 1; }
  grep -q '"mode": "landlock"' <<<"$answer" || echo "warning: $label: run_check ran unconfined: $answer" >&2

  echo "measuring $label ..." >&2
  (cd "$repo" && env -i "${cmd_env[@]}" REVIEW_AGENT_GATEWAY_HOME="$work/gateway" \
    "$hyperfine_bin" -N --style none --warmup "$warmup" --runs "$runs" \
    --export-json "$work/row.json" \
    -n bare "$(printf '%q ' "${bare[@]}")" \
    -n unconfined "$(printf '%q ' "${helper_unconfined[@]}")" \
    -n confined "$(printf '%q ' "${helper_confined[@]}")" \
    -n cli "$(printf '%q ' "${cli[@]}")" "${peer_args[@]}" >/dev/null 2>"$work/hyperfine.err") || {
    cat "$work/hyperfine.err" >&2
    exit 1
  }
  python3 -c 'import json, sys; print(json.dumps({"label": sys.argv[1], "program": sys.argv[2], "results": json.load(open(sys.argv[3]))["results"]}))' \
    "$label" "$program" "$work/row.json" >>"$results"
done

python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
def cell(r):
    return f"{r['mean'] * 1e3:.2f} ± {r['stddev'] * 1e3:.2f}"
head = ["command", "bare", "helper unconfined", "helper confined", "run_check CLI",
        "confined overhead (c − a, ms)", "ratio c/a", "bwrap (peer)", "ratio c/bwrap"]
print("| " + " | ".join(head) + " |")
print("|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|")
for row in rows:
    r = {x["command"]: x for x in row["results"]}
    a, b, c, d = r["bare"], r["unconfined"], r["confined"], r["cli"]
    e = r.get("bwrap")
    peer = f"{cell(e)} | {c['mean'] / e['mean']:.2f}×" if e else "– | –"
    print(f"| `{row['label']}` | {cell(a)} | {cell(b)} | {cell(c)} | {cell(d)} | "
          f"{(c['mean'] - a['mean']) * 1e3:+.2f} | {c['mean'] / a['mean']:.2f}× | {peer} |")
print()
print("means ± stddev in ms; programs: " + ", ".join(sorted({r["program"] for r in rows})))
PY
