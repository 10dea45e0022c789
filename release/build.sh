#!/usr/bin/env bash
# Builds what a user installs without compiling (issue 19 §4), into target/release-artifacts/
# (the workspace's target directory, CARGO_TARGET_DIR honoured; `--out DIR` for another):
#   review-agent-gateway-<v>-x86_64-unknown-linux-gnu.tar.gz   the stripped binary + README.md
#   review-agent-gateway_<v>_amd64.deb                         the same binary in /usr/bin
#   review-agent-gateway-<v>-companion-chrome.zip              the extension with its `key`
#                                   (unzip, "Load unpacked": the id `install` allows by default)
#   review-agent-gateway-<v>-companion-chrome-web-store.zip    the same without `key`, to upload
#                                   (the store refuses a manifest with a `key` and assigns its id)
#   review-agent-gateway-<v>-companion-firefox.xpi             the Firefox build, manifest at the root
#   review-agent-gateway-<v>-review-locally.user.js           the built userscript
#   SHA256SUMS                                                 `sha256sum -c SHA256SUMS` checks them
# <v> is the crate's version (the workspace's, which host/Cargo.toml inherits); the companion's
# manifest must carry the same one (the userscript keeps its own `@version`). Archive members
# carry the last commit's time and root ownership, so two builds of one commit pack the same
# files the same way.
#
# The .deb is built with `dpkg-deb --build` from a staged tree, not with cargo-deb: cargo-deb
# is not a Debian package here, so CI would compile it from crates.io on every clean run, while
# dpkg-deb is Debian's own tool and already on any Debian machine; its Depends come from
# `dpkg-shlibdeps` (dpkg-dev), computed from what the binary links. No maintainer scripts: the
# package only places files, and `review-agent-gateway install` (per user, or `--system`)
# registers the native-messaging host afterwards, as for a binary built from source.
#
# Only x86_64 Linux (glibc): that is the only Rust target on this machine and no other can be
# fetched here (no musl, aarch64, macOS or Windows standard library), so the script refuses
# another host rather than pretend. The binary links glibc's libc, libm and the loader, and
# libgcc_s for unwinding (panics unwind: the store catches them); `readelf -d` shows it.
#
# Needs cargo, node, zip, dpkg-deb and dpkg-shlibdeps (.ci/run installs the Debian packages).
# Usage: release/build.sh [--out DIR] [--no-build]
#   --no-build  package the release binary already in the target directory (it must say the
#               crate's version) instead of running `cargo build --release` first
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "release/build.sh: $*" >&2; exit 1; }

out=
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    *) die "unknown argument $1 (usage: release/build.sh [--out DIR] [--no-build])" ;;
  esac
done

triple=x86_64-unknown-linux-gnu
host=$(rustc -vV | sed -n 's/^host: //p')
[ "$host" = "$triple" ] || die "this host is $host; only $triple artifacts are built here"
for tool in node zip dpkg-deb dpkg-shlibdeps sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is missing (Debian: apt-get install nodejs zip dpkg-dev)"
done

pkgid=$(cargo pkgid -p review-agent-gateway)
version=${pkgid##*@}
# The target directory, licence and repository, one a line, from cargo's own view of the workspace.
{ read -r target_dir; read -r licence_field; read -r homepage; } < <(cargo metadata --format-version 1 --no-deps --locked \
  | node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
      const m = JSON.parse(s), p = m.packages.find((p) => p.name === "review-agent-gateway");
      console.log([m.target_directory, p.license, p.repository].join("\n"));
    })')
out=${out:-$target_dir/release-artifacts}
manifest_version=$(node -p 'JSON.parse(require("fs").readFileSync("extension-bridge/extension/manifest.json", "utf8")).version')
[ "$manifest_version" = "$version" ] \
  || die "extension-bridge/extension/manifest.json has version $manifest_version, the crate $version: make them one"
# The last commit's time for every archive member (reproducible archives), now outside git.
# A shell variable only: cc-based build scripts rerun when SOURCE_DATE_EPOCH changes, so
# exporting it would rebuild half the dependency graph (8 min here) for the same binary.
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

echo "release/build.sh: review-agent-gateway $version for $triple into $out"
start=$SECONDS
if [ "$build" -eq 1 ]; then
  cargo build --release --locked -p review-agent-gateway
  echo "release/build.sh: cargo build --release took $((SECONDS - start)) s"
fi
bin=$target_dir/release/review-agent-gateway
[ -x "$bin" ] || die "$bin does not exist (run without --no-build)"
"$bin" --version | grep -qx "review-agent-gateway $version" \
  || die "$bin --version says $("$bin" --version), not review-agent-gateway $version"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Set every file's time to $epoch and pack a directory's files (sorted) into a zip.
stamp() { find "$1" -exec touch -h -d "@$epoch" {} +; }
pack_zip() {
  stamp "$1"
  (cd "$1" && find . -type f | LC_ALL=C sort | sed 's|^\./||' | zip -q -X -9 "$2" -@)
}

# === the binary: tarball ===
name=review-agent-gateway-$version-$triple
mkdir "$stage/$name"
install -m 0755 "$bin" "$stage/$name/review-agent-gateway"
install -m 0644 README.md "$stage/$name/README.md"
# No licence file in the repository yet (Cargo.toml says MIT OR Apache-2.0); shipped once one exists.
for licence in LICENSE LICENSE-MIT LICENSE-APACHE COPYING; do
  [ -f "$licence" ] && install -m 0644 "$licence" "$stage/$name/$licence"
done
stamp "$stage/$name"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
  -C "$stage" -cf - "$name" | gzip -9n > "$out/$name.tar.gz"

# === the binary: .deb ===
deb=$stage/deb
doc=$deb/usr/share/doc/review-agent-gateway
install -D -m 0755 "$bin" "$deb/usr/bin/review-agent-gateway"
install -d -m 0755 "$doc"
gzip -9n < README.md > "$doc/README.md.gz"
cat > "$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: review-agent-gateway

Files: *
Copyright: the Review Agent Gateway developers
License: $licence_field
EOF
chmod 0644 "$doc/copyright"
# dpkg-shlibdeps reads a debian/control, so it runs in a scratch source tree of its own.
mkdir -p "$stage/shlibs/debian"
printf 'Source: review-agent-gateway\n\nPackage: review-agent-gateway\nArchitecture: amd64\n' \
  > "$stage/shlibs/debian/control"
depends=$(cd "$stage/shlibs" && dpkg-shlibdeps -O "$deb/usr/bin/review-agent-gateway" 2>/dev/null \
  | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || die "dpkg-shlibdeps found no dependencies for the binary"
installed_size=$(du -s -k --apparent-size "$deb" | cut -f1)
mkdir -m 0755 "$deb/DEBIAN"
cat > "$deb/DEBIAN/control" <<EOF
Package: review-agent-gateway
Version: $version
Architecture: amd64
Maintainer: Review Agent Gateway developers <review-agent-gateway@example.invalid>
Installed-Size: $installed_size
Depends: $depends
Recommends: git
Section: devel
Priority: optional
Homepage: $homepage
Description: local bridge between a GitLab reviewer's browser and their machine
 Reviews a merge request's changes in the local checkout with versioned rules
 (and optionally a model), without sending code anywhere: the command-line
 review, the daemon the companion extension and userscript talk to, and the
 native-messaging host (register it with: review-agent-gateway install).
EOF
stamp "$deb"
SOURCE_DATE_EPOCH=$epoch dpkg-deb --root-owner-group -Zxz --build "$deb" "$out/review-agent-gateway_${version}_amd64.deb" >/dev/null

# === the companion extension and the userscript ===
node extension-bridge/build.mjs --out "$stage/ext" >/dev/null
cp -r "$stage/ext/chrome" "$stage/ext/chrome-web-store"
node -e '
  const fs = require("fs");
  const path = process.argv[1];
  const m = JSON.parse(fs.readFileSync(path, "utf8"));
  delete m.key;
  fs.writeFileSync(path, JSON.stringify(m, null, 2) + "\n");
' "$stage/ext/chrome-web-store/manifest.json"
pack_zip "$stage/ext/chrome" "$out/review-agent-gateway-$version-companion-chrome.zip"
pack_zip "$stage/ext/chrome-web-store" "$out/review-agent-gateway-$version-companion-chrome-web-store.zip"
pack_zip "$stage/ext/firefox" "$out/review-agent-gateway-$version-companion-firefox.xpi"
install -m 0644 "$stage/ext/review-locally.user.js" "$out/review-agent-gateway-$version-review-locally.user.js"

# === checksums ===
(cd "$out" && sha256sum -- * > SHA256SUMS)
echo "release/build.sh: built in $((SECONDS - start)) s:"
(cd "$out" && ls -l --block-size=K -- * | awk '{print "  " $5 "\t" $9}')
