#!/usr/bin/env bash
# Checks the artifacts release/build.sh made (issue 19 §4) as a user would meet them, on this
# machine: their checksums; the tarball's binary runs; the .deb installs (`dpkg -i`, as root or
# through sudo), the installed /usr/bin/review-agent-gateway answers --version and --help,
# runs the main job — `review` of a real temporary git repository, once over a harmless change
# (exit 0, no finding) and once over a shell injection (exit 1, the finding named with its file
# and line, in text and JSON) — and registers the native-messaging host for Chromium in a
# temporary HOME with its own path in the launcher; the package is removed again (`dpkg -r`,
# also when a check fails) and the binary is gone. Then the companion's zips and xpi: intact,
# a manifest at the root with the release's version, every file the manifest names inside,
# `key` only in the unpacked Chrome zip, the Firefox add-on id only in the xpi (linted by
# web-ext when extension-bridge/node_modules has it); and the userscript's metadata block.
#
# Refuses to run when the package is already installed (it would replace and then remove
# someone's install). CI runs it after release/build.sh.
# Usage: release/check.sh [DIR]   (DIR: the artifacts, target/release-artifacts by default)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

fail() { echo "release/check.sh: FAILED: $*" >&2; exit 1; }
ok() { echo "release/check.sh: ok: $*"; }

pkgid=$(cargo pkgid -p review-agent-gateway)
version=${pkgid##*@}
dir=${1:-$(cargo metadata --format-version 1 --no-deps --locked \
  | node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s).target_directory))')/release-artifacts}
[ -d "$dir" ] || fail "$dir does not exist: run release/build.sh first"
dir=$(cd "$dir" && pwd)
triple=x86_64-unknown-linux-gnu
tarball=$dir/review-agent-gateway-$version-$triple.tar.gz
deb=$dir/review-agent-gateway_${version}_amd64.deb
chrome=$dir/review-agent-gateway-$version-companion-chrome.zip
store=$dir/review-agent-gateway-$version-companion-chrome-web-store.zip
xpi=$dir/review-agent-gateway-$version-companion-firefox.xpi
userscript=$dir/review-agent-gateway-$version-review-locally.user.js
for f in "$tarball" "$deb" "$chrome" "$store" "$xpi" "$userscript" "$dir/SHA256SUMS"; do
  [ -f "$f" ] || fail "$f is missing"
done

tmp=$(mktemp -d)
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
installed=0
cleanup() {
  if [ "$installed" -eq 1 ]; then
    "${sudo[@]}" dpkg -r review-agent-gateway >/dev/null 2>&1 || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# === checksums ===
(cd "$dir" && sha256sum --quiet -c SHA256SUMS) || fail "SHA256SUMS does not match the files"
listed=$(awk '{print $2}' "$dir/SHA256SUMS" | LC_ALL=C sort | tr '\n' ' ')
present=$(cd "$dir" && ls -1 | grep -vx SHA256SUMS | LC_ALL=C sort | tr '\n' ' ')
[ "$listed" = "$present" ] || fail "SHA256SUMS lists '$listed', the folder has '$present'"
ok "SHA256SUMS matches the $(wc -l < "$dir/SHA256SUMS") artifacts"

# === the tarball ===
mkdir "$tmp/tar"
tar -xzf "$tarball" -C "$tmp/tar"
unpacked=$tmp/tar/review-agent-gateway-$version-$triple
[ -f "$unpacked/README.md" ] || fail "the tarball has no README.md"
[ "$("$unpacked/review-agent-gateway" --version)" = "review-agent-gateway $version" ] \
  || fail "the tarball's binary --version: $("$unpacked/review-agent-gateway" --version)"
file_info=$(readelf -S "$unpacked/review-agent-gateway" | grep -c -E '\.symtab|\.debug_' || true)
[ "$file_info" -eq 0 ] || fail "the tarball's binary has a symbol table or debug info"
ok "tarball: review-agent-gateway $version runs, stripped"

# === the .deb: install, use, remove ===
if dpkg-query -W -f '${Status}' review-agent-gateway 2>/dev/null | grep -q 'installed'; then
  fail "review-agent-gateway is already installed here ($(dpkg-query -W -f '${Version}' review-agent-gateway)); remove it first: sudo dpkg -r review-agent-gateway"
fi
dpkg-deb --info "$deb" > "$tmp/deb-info"
grep -q "^ Version: $version$" "$tmp/deb-info" || fail "the .deb's control has no Version: $version"
grep -q '^ Depends: .*libc6' "$tmp/deb-info" || fail "the .deb's Depends does not name libc6"
echo "release/check.sh: $(grep '^ Depends:' "$tmp/deb-info" | sed 's/^ //')"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" > "$tmp/dpkg-i.log" 2>&1 \
  || { cat "$tmp/dpkg-i.log" >&2; fail "dpkg -i $deb"; }
installed=1
dpkg-query -W -f '${Status} ${Version}\n' review-agent-gateway | grep -qx "install ok installed $version" \
  || fail "dpkg says: $(dpkg-query -W -f '${Status} ${Version}' review-agent-gateway)"
dpkg -L review-agent-gateway | grep -qx /usr/bin/review-agent-gateway || fail "the package has no /usr/bin/review-agent-gateway"
ok "dpkg -i: review-agent-gateway $version installed"

# The installed binary by its path: ~/.cargo/bin may come first on PATH with a build from source.
bin=/usr/bin/review-agent-gateway
[ "$("$bin" --version)" = "review-agent-gateway $version" ] || fail "$bin --version: $("$bin" --version)"
"$bin" --help > "$tmp/help"
for word in review serve install; do
  grep -qE "^  $word( |$)" "$tmp/help" || fail "$bin --help lists no '$word' command: $(cat "$tmp/help")"
done
ok "$bin --version and --help"

# A home of its own, so nothing of this machine's user is read or written.
export HOME=$tmp/home REVIEW_AGENT_GATEWAY_HOME=$tmp/gateway-home
mkdir -p "$HOME"
repo=$tmp/repo
git init -q -b main "$repo"
git -C "$repo" config user.name release-check
git -C "$repo" config user.email release-check@example.invalid
printf 'import subprocess\n\n\ndef version():\n    return subprocess.run(["git", "--version"], check=True)\n' > "$repo/app.py"
git -C "$repo" add app.py
git -C "$repo" commit -q -m base
base=$(git -C "$repo" rev-parse HEAD)
printf '\n\ndef greet(name):\n    return "hello " + name\n' >> "$repo/app.py"
git -C "$repo" commit -q -am harmless
harmless=$(git -C "$repo" rev-parse HEAD)
printf '\n\ndef ping(host):\n    subprocess.run("ping -c 1 " + host, shell=True)\n' >> "$repo/app.py"
git -C "$repo" commit -q -am ping
injection_line=$(grep -n 'shell=True' "$repo/app.py" | cut -d: -f1)

status=0
"$bin" review --repo "$repo" --base "$base" --head "$harmless" --color never > "$tmp/clean.txt" 2>&1 || status=$?
[ "$status" -eq 0 ] || fail "review of a harmless change exited $status: $(cat "$tmp/clean.txt")"
grep -q 'python.shell-injection' "$tmp/clean.txt" && fail "review of a harmless change reported a finding: $(cat "$tmp/clean.txt")"
ok "review --base <base> --head <harmless change>: exit 0, no finding"

status=0
"$bin" review --repo "$repo" --base "$base" --color never > "$tmp/review.txt" 2>&1 || status=$?
echo "--- review --repo <temporary repository> --base <base> (exit $status)"
cat "$tmp/review.txt"
echo "---"
[ "$status" -eq 1 ] || fail "review of a shell injection exited $status, not 1 (findings at or above --fail-on)"
grep -q 'python.shell-injection' "$tmp/review.txt" || fail "review did not report python.shell-injection"
grep -q "app.py:$injection_line" "$tmp/review.txt" || fail "review did not place the finding at app.py:$injection_line"
status=0
"$bin" review --repo "$repo" --base "$base" --format json > "$tmp/review.json" 2>"$tmp/review.err" || status=$?
[ "$status" -eq 1 ] || fail "review --format json exited $status: $(cat "$tmp/review.err")"
node -e '
  const lines = require("fs").readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
  const findings = lines.filter((e) => e.type === "finding.created");
  const ids = findings.map((e) => JSON.stringify(e)).filter((s) => s.includes("python.shell-injection"));
  if (ids.length !== 1) throw new Error(`expected one python.shell-injection finding, got ${findings.length} findings: ${JSON.stringify(findings)}`);
  const last = lines[lines.length - 1];
  if (last.type !== "run.completed") throw new Error(`the last event is ${last.type}, not run.completed`);
' "$tmp/review.json" || fail "review --format json"
ok "review --base <base>: exit 1, python.shell-injection at app.py:$injection_line (text and JSON)"

"$bin" install --browser chromium > "$tmp/install.txt" 2>&1 || { cat "$tmp/install.txt" >&2; fail "$bin install --browser chromium"; }
host_manifest=$HOME/.config/chromium/NativeMessagingHosts/com.review_agent.gateway.json
[ -f "$host_manifest" ] || fail "install wrote no $host_manifest: $(cat "$tmp/install.txt")"
launcher=$(node -p 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).path' "$host_manifest")
grep -q "exec '$bin' native-host" "$launcher" || fail "the launcher $launcher does not start $bin: $(cat "$launcher")"
"$bin" uninstall > /dev/null 2>&1 || fail "$bin uninstall"
[ ! -e "$host_manifest" ] || fail "uninstall left $host_manifest"
ok "install --browser chromium: the launcher starts $bin; uninstall removed it"

"${sudo[@]}" dpkg -r review-agent-gateway > "$tmp/dpkg-r.log" 2>&1 || { cat "$tmp/dpkg-r.log" >&2; fail "dpkg -r review-agent-gateway"; }
installed=0
[ ! -e "$bin" ] || fail "$bin is still there after dpkg -r"
dpkg-query -W -f '${Status}' review-agent-gateway 2>/dev/null | grep -q 'ok installed' && fail "dpkg still lists the package as installed"
ok "dpkg -r: removed, $bin gone"

# === the companion extension ===
# check_extension ARCHIVE FAMILY: intact, a manifest at the root with this version and the
# family's fields, and every file the manifest names inside.
check_extension() {
  local archive=$1 family=$2 name
  name=$(basename "$archive")
  unzip -tq "$archive" > /dev/null || fail "$name is not an intact zip"
  unzip -Z1 "$archive" > "$tmp/$name.files"
  unzip -p "$archive" manifest.json > "$tmp/$name.manifest.json" 2>/dev/null || fail "$name has no manifest.json at its root"
  node -e '
    const fs = require("fs");
    const [manifestPath, filesPath, family, version] = process.argv.slice(1);
    const m = JSON.parse(fs.readFileSync(manifestPath, "utf8"));
    const files = new Set(fs.readFileSync(filesPath, "utf8").split("\n").filter(Boolean));
    const problems = [];
    const expect = (cond, what) => { if (!cond) problems.push(what); };
    expect(m.manifest_version === 3, `manifest_version ${m.manifest_version}, not 3`);
    expect(m.version === version, `version ${m.version}, not ${version}`);
    expect(typeof m.name === "string" && m.name.length > 0 && m.name.length <= 75, "a name of 1 to 75 characters");
    expect(typeof m.description === "string" && m.description.length <= 132, "a description of at most 132 characters");
    expect((m.permissions || []).includes("nativeMessaging"), "the nativeMessaging permission");
    const named = [
      m.background?.service_worker, ...(m.background?.scripts || []), m.options_ui?.page,
      ...(m.content_scripts || []).flatMap((cs) => cs.js || []),
    ].filter(Boolean);
    for (const f of named) expect(files.has(f), `${f} (named by the manifest) inside`);
    const gecko = m.browser_specific_settings?.gecko?.id;
    if (family === "chrome") {
      expect(m.background?.service_worker && !m.background.scripts, "a service worker background only");
      expect(typeof m.key === "string", "the key (the id install allows by default)");
      expect(!gecko, "no Firefox add-on id");
    } else if (family === "chrome-web-store") {
      expect(m.background?.service_worker && !m.background.scripts, "a service worker background only");
      expect(!("key" in m), "no key (the store refuses one)");
      expect(!gecko, "no Firefox add-on id");
    } else {
      expect(Array.isArray(m.background?.scripts) && !m.background.service_worker, "background scripts only");
      expect(!("key" in m), "no key");
      expect(gecko === "companion@review-agent-gateway", `the add-on id companion@review-agent-gateway, not ${gecko}`);
    }
    if (problems.length) { console.error(problems.map((p) => `  want: ${p}`).join("\n")); process.exit(1); }
  ' "$tmp/$name.manifest.json" "$tmp/$name.files" "$family" "$version" || fail "$name: its manifest"
  ok "$name: manifest.json ($family), $(wc -l < "$tmp/$name.files") files"
}
check_extension "$chrome" chrome
check_extension "$store" chrome-web-store
check_extension "$xpi" firefox
web_ext=$root/extension-bridge/node_modules/web-ext/bin/web-ext.js
if [ -f "$web_ext" ]; then
  mkdir "$tmp/xpi"
  unzip -q "$xpi" -d "$tmp/xpi"
  # Errors fail (as in host/tests/extension_lint.rs); warnings and notices are shown.
  node "$web_ext" lint --source-dir "$tmp/xpi" --no-config-discovery --output json > "$tmp/lint.json" 2>&1 || true
  node -e '
    const text = require("fs").readFileSync(process.argv[1], "utf8");
    const report = JSON.parse(text.slice(text.indexOf("{")));
    for (const kind of ["warnings", "notices"]) {
      for (const m of report[kind] || []) console.log(`release/check.sh: web-ext lint ${kind}: ${m.code}: ${m.message} (${m.file ?? ""})`);
    }
    if (report.errors.length) {
      console.error(report.errors.map((m) => `  ${m.code}: ${m.message} (${m.file ?? ""})`).join("\n"));
      process.exit(1);
    }
  ' "$tmp/lint.json" || fail "web-ext lint of the xpi: errors (above)"
  ok "web-ext lint: the xpi has no error"
else
  echo "release/check.sh: note: $web_ext is missing (npm ci in extension-bridge/); the xpi is not linted"
fi

# === the userscript ===
node -e '
  const source = require("fs").readFileSync(process.argv[1], "utf8");
  const block = source.match(/^\/\/ ==UserScript==\n((?:\/\/.*\n)*?)\/\/ ==\/UserScript==\n/);
  if (!block) throw new Error("no // ==UserScript== … // ==/UserScript== block at the top");
  const keys = block[1].split("\n").filter(Boolean).map((l) => l.match(/^\/\/ @(\S+)/)?.[1]);
  for (const k of ["name", "namespace", "version", "description", "match", "grant", "run-at"]) {
    if (!keys.includes(k)) throw new Error(`the metadata block has no @${k}`);
  }
  if (source.includes("/* @inline")) throw new Error("an /* @inline */ marker was left in");
  new Function(source); // parses as a script, as a userscript manager runs it
' "$userscript" || fail "$(basename "$userscript")"
ok "$(basename "$userscript"): metadata block ($(sed -n 's|^// @version *||p' "$userscript" | head -1)), parses"

echo "release/check.sh: all checks passed for review-agent-gateway $version"
