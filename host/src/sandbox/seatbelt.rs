//! The macOS rendering of a [`Policy`]: a Seatbelt profile (SBPL) given to
//! `sandbox-exec -p` (DESIGN §11: plain data, unit-tested on Linux).
//!
//! **Untested on a real Mac.** Only Linux builds and runs here; every rule below is written from
//! the published profiles of OpenAI's Codex CLI and Anthropic's sandbox-runtime and from Apple's
//! own `/System/Library/Sandbox/Profiles`, and the tests check the text (its s-expressions, its
//! string literals), not what the macOS kernel does with it. Run the profile on a Mac before
//! relying on it.
//!
//! The profile is rendered from the same [`Policy`] as the Linux rules (Landlock and seccomp), so
//! both kernels are told the same thing. It is closed by default and allows, in this order:
//!
//! - **What any process needs to run**: forking, signals to and process information about its own
//!   sandbox (never to other processes), a few `sysctl`s that C libraries and language runtimes
//!   read at start (CPU count, page size, OS version), the user and group look-ups of libc
//!   (`getpwuid`: shells, git, cargo find the home directory through it), the per-user temporary
//!   directory look-up (`confstr`, used by `xcrun`/`clang`), POSIX semaphores (Python
//!   `multiprocessing`), creating Unix sockets (for `socketpair`: pipes between a tool and its
//!   children; a named socket still needs `bind`/`connect`, which only the network allows), and
//!   the device files `/dev/null` (read and write), `/dev/zero`, `/dev/random`, `/dev/urandom`
//!   and `/dev/fd/*` (re-opening a descriptor the process already holds).
//! - **Reads** of every [`Policy::read`] path and everything beneath it, including executing and
//!   mapping as code (`process-exec`, `file-map-executable`: a program or library must be
//!   readable to run, and only then).
//! - **Writes** (with the reads) of every [`Policy::write`] path and everything beneath it.
//! - **Metadata** (`stat`, `readlink`; never a directory's listing or a file's contents) of every
//!   directory above those paths, so `realpath` and `getcwd`-style walks through `/Users/me` to a
//!   readable `/Users/me/repo` work.
//! - **The network** only when [`Policy::network`] is set.
//!
//! Everything else — other files, mach services (the keychain, launchd's job control, the window
//! server), other processes, the network — stays denied. There is no `(import "system.sb")`:
//! Apple's base profile allows much more than a command needs.
//!
//! The profile reads no paths of its own: the toolchain a command may run is data
//! ([`macos_system_read_roots`]) that the code building the [`Policy`] for macOS adds to
//! [`Policy::read`], like the Linux builder adds `/usr` and `/lib`. A profile from a policy
//! without those roots cannot start any program (the loader cannot read the system libraries).
//!
//! macOS reaches `/tmp`, `/var` and `/etc` through symbolic links into `/private`, and Seatbelt
//! matches the resolved path, so every rule is written for both spellings ([`private_aliases`]).
//! Paths go into the profile as string literals, escaped ([`sbpl_string`]); a path with a NUL or
//! one that is not UTF-8 is refused ([`RenderError`]), since SBPL strings cannot hold it.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use super::Policy;
use crate::error::{GatewayError, codes};

/// The one `sandbox-exec` the gateway runs: the system's, never one found on `PATH` (a
/// replaced `/usr/bin/sandbox-exec` needs root, and then the sandbox is moot anyway).
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// Why a [`Policy`] cannot be rendered as a Seatbelt profile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A path is not valid UTF-8: an SBPL string literal holds text only, and a lossy
    /// conversion would give a rule for another path. The path is shown lossily.
    #[error("the sandbox path {path:?} is not valid UTF-8")]
    NotUtf8 {
        /// The path, lossily converted for display.
        path: String,
    },
    /// A path contains a NUL byte, which no file path can (the kernel would cut it there).
    #[error("the sandbox path {path:?} contains a NUL byte")]
    ContainsNul {
        /// The path as given.
        path: String,
    },
    /// A path is relative: Seatbelt rules match absolute paths only.
    #[error("the sandbox path {path:?} is not absolute")]
    NotAbsolute {
        /// The path as given.
        path: String,
    },
    /// A path has a `..` component: Seatbelt matches resolved paths, so the rule would never
    /// match what it seems to name.
    #[error("the sandbox path {path:?} has a `..` component")]
    NotCanonical {
        /// The path as given.
        path: String,
    },
}

impl From<RenderError> for GatewayError {
    fn from(err: RenderError) -> Self {
        GatewayError::new(
            codes::SANDBOX_POLICY_INVALID,
            err.to_string(),
            "Give the sandbox absolute, canonical UTF-8 paths (this is a bug in the gateway if \
             the paths came from its own configuration; please report it).",
        )
    }
}

/// Where macOS keeps the programs and libraries a command may run: the paths the code building a
/// [`Policy`] for macOS adds to [`Policy::read`]. Each is read as a whole (`subpath`).
///
/// - `/bin`, `/sbin`, `/usr` — the base system's programs and libraries, and `/usr/local`
///   (Homebrew on Intel Macs and hand-installed tools).
/// - `/System/Library` — the system frameworks, `SystemVersion.plist`, and (macOS 11–12) the
///   dyld shared cache. Not all of `/System`: `/System/Volumes/Data` is the data volume, with
///   every user's home beneath it.
/// - `/System/Cryptexes`, `/System/Volumes/Preboot/Cryptexes` — the OS cryptex (macOS 13 and
///   later), which holds the dyld shared cache that every program is loaded from.
/// - `/Library/Apple`, `/Library/Developer`, `/Library/Frameworks`, `/Library/Java` — the
///   system-wide toolchain parts of `/Library`: Apple's relocated system libraries, the Command
///   Line Tools (`/Library/Developer/CommandLineTools`: `clang`, `git`, `make`), framework
///   installs (python.org's Python) and JDKs. Not all of `/Library`: it also holds other
///   programs' system-wide settings, keychains and application support data.
/// - `/Applications/Xcode.app` — Xcode's toolchain when `xcode-select` points at it. An Xcode
///   with another name (`Xcode-beta.app`) must be added by the caller from `xcode-select -p`.
/// - `/opt/homebrew`, `/opt/local` — Homebrew on Apple silicon, MacPorts.
/// - `/etc` — `passwd`, `hosts`, `resolv.conf`, `ssl/cert.pem`, `shells` (no secrets:
///   `master.passwd` is root's only); `/var/db/timezone` — what `/etc/localtime` points to;
///   `/var/db/xcode_select_link` — the developer directory `xcode-select` chose.
///
/// Deliberately absent: the user's home (`~/Library`, `~/.ssh`, `~/.aws`, shell histories),
/// `/Users`, `/Volumes`, `/private/var/folders` (other programs' temporary files), `/var/run`
/// (sockets of system daemons) and the gateway's own state.
pub fn macos_system_read_roots() -> &'static [&'static str] {
    &[
        "/bin",
        "/sbin",
        "/usr",
        "/System/Library",
        "/System/Cryptexes",
        "/System/Volumes/Preboot/Cryptexes",
        "/Library/Apple",
        "/Library/Developer",
        "/Library/Frameworks",
        "/Library/Java",
        "/Applications/Xcode.app",
        "/opt/homebrew",
        "/opt/local",
        "/etc",
        "/var/db/timezone",
        "/var/db/xcode_select_link",
    ]
}

/// The argv that runs `program` with `args` confined by `profile`:
/// `[SANDBOX_EXEC, "-p", profile, "--", program, args…]`. The `--` ends `sandbox-exec`'s own
/// options, so a program whose name starts with `-` is not taken for one.
pub fn command_argv(profile: &str, program: &str, args: &[String]) -> Vec<String> {
    let mut argv = Vec::with_capacity(args.len() + 5);
    argv.extend(
        [SANDBOX_EXEC, "-p", profile, "--", program]
            .into_iter()
            .map(String::from),
    );
    argv.extend(args.iter().cloned());
    argv
}

/// The Seatbelt profile for `policy` (see the module documentation for what it allows).
///
/// The same policy always gives the same text: paths keep the policy's order, each spelling once.
///
/// # Errors
///
/// [`RenderError`] when a path is not UTF-8, contains a NUL, is relative or has a `..`
/// component.
pub fn render(policy: &Policy) -> Result<String, RenderError> {
    let read = rule_paths(&policy.read)?;
    let write = rule_paths(&policy.write)?;
    let ancestors = ancestors_of(read.iter().chain(&write));
    // A directory already read as a whole needs no metadata rule of its own.
    let ancestors: Vec<String> = ancestors
        .into_iter()
        .filter(|dir| !read.iter().chain(&write).any(|root| is_within(dir, root)))
        .collect();

    let mut profile = String::from(BASE);
    push_rule(
        &mut profile,
        "; Directories above the paths below: stat and readlink only, for realpath and the like.",
        "file-read-metadata",
        "literal",
        &ancestors,
    );
    push_rule(
        &mut profile,
        "; Policy read paths: read, run, and map as code.",
        "file-read* process-exec file-map-executable",
        "subpath",
        &read,
    );
    push_rule(
        &mut profile,
        "; Policy write paths: create, change, remove, and read, run, map as code.",
        "file-read* file-write* process-exec file-map-executable",
        "subpath",
        &write,
    );
    profile.push_str(if policy.network { NETWORK } else { NO_NETWORK });
    Ok(profile)
}

/// Every spelling of `path` that macOS may resolve it through: `/tmp/x`, `/var/x` and `/etc/x`
/// are `/private/tmp/x`, `/private/var/x` and `/private/etc/x` (symbolic links at the root), and
/// the other way round. The path as given comes first; a path outside those three has one
/// spelling. Components are compared whole (`/tmpfoo` is not under `/tmp`).
pub fn private_aliases(path: &str) -> Vec<String> {
    const LINKED: [&str; 3] = ["tmp", "var", "etc"];
    let under = |path: &str, top: &str| {
        path.strip_prefix('/')
            .and_then(|rest| rest.strip_prefix(top))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    let mut spellings = vec![path.to_owned()];
    if let Some(rest) = path.strip_prefix("/private") {
        if LINKED.iter().any(|top| under(rest, top)) {
            spellings.push(rest.to_owned());
        }
    } else if LINKED.iter().any(|top| under(path, top)) {
        spellings.push(format!("/private{path}"));
    }
    spellings
}

/// `text` as an SBPL (TinyScheme) string literal, quotes included: `"` and `\` escaped, and a
/// newline, carriage return or tab as `\n`, `\r`, `\t` so the profile stays one rule a line.
/// Other characters stand for themselves (the reader copies everything up to an unescaped `"`).
pub fn sbpl_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

// === rendering ===

/// Start of every profile: closed by default, then what any process needs to run.
const BASE: &str = r#"(version 1)
(deny default)

; Processes: fork and exec (exec only of readable paths, below); signals and process
; information only within this sandbox, never to or about the user's other processes.
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))

; sysctls that libc and language runtimes read at start: CPU count and features, page and
; memory size (allocators, thread pools), OS name and version (uname), argument size limit.
(allow sysctl-read
  (sysctl-name-prefix "hw.")
  (sysctl-name-prefix "machdep.cpu.")
  (sysctl-name "kern.argmax")
  (sysctl-name "kern.hostname")
  (sysctl-name "kern.maxfilesperproc")
  (sysctl-name "kern.osproductversion")
  (sysctl-name "kern.osrelease")
  (sysctl-name "kern.ostype")
  (sysctl-name "kern.osvariant_status")
  (sysctl-name "kern.osversion")
  (sysctl-name "kern.usrstack64")
  (sysctl-name "kern.version")
  (sysctl-name "sysctl.proc_cputype"))

; Mach services: user and group look-ups (getpwuid: shells, git and cargo find the home
; directory through it) and the per-user temporary directory (confstr: xcrun, clang).
(allow mach-lookup
  (global-name "com.apple.system.opendirectoryd.libinfo")
  (global-name "com.apple.bsd.dirhelper"))

; POSIX semaphores: Python multiprocessing locks.
(allow ipc-posix-sem)

; Unix sockets may be created, for socketpair (pipes between a tool and its children);
; binding or connecting a named one is network, allowed only with it.
(allow system-socket (socket-domain AF_UNIX))

; Device files: /dev/null is readable and writable, the random sources and /dev/zero readable,
; /dev/fd/N re-opens a descriptor the process already holds (/dev/stdout and the like).
(allow file-read* file-write-data
  (literal "/dev/null"))
(allow file-read*
  (literal "/dev/zero")
  (literal "/dev/random")
  (literal "/dev/urandom"))
(allow file-read-data file-write-data
  (subpath "/dev/fd"))
"#;

/// The network section when the policy allows it: every socket, plus what name resolution and
/// TLS verification ask of the system.
const NETWORK: &str = r#"
; Network (policy.network): every socket; the DNS configuration, certificate trust
; (Security framework: Go, Swift, native-tls) and the interface list (getifaddrs).
(allow network*)
(allow system-socket)
(allow mach-lookup
  (global-name "com.apple.SystemConfiguration.DNSConfiguration")
  (global-name "com.apple.trustd.agent"))
(allow sysctl-read
  (sysctl-name-prefix "net.routetable."))
"#;

/// The network section when the policy does not allow it: nothing (denied by default).
const NO_NETWORK: &str = "\n; No network (policy.network is false): denied by default.\n";

/// Append `(allow <operations> (<filter> "path") …)` with a comment, or nothing when there is no
/// path: an `allow` without a filter would allow the operation everywhere.
fn push_rule(
    profile: &mut String,
    comment: &str,
    operations: &str,
    filter: &str,
    paths: &[String],
) {
    if paths.is_empty() {
        return;
    }
    profile.push('\n');
    profile.push_str(comment);
    profile.push_str("\n(allow ");
    profile.push_str(operations);
    for path in paths {
        profile.push_str("\n  (");
        profile.push_str(filter);
        profile.push(' ');
        profile.push_str(&sbpl_string(path));
        profile.push(')');
    }
    profile.push_str(")\n");
}

/// The checked, normalized paths of one policy list with their `/private` aliases, each
/// spelling once, in the policy's order.
fn rule_paths(paths: &[PathBuf]) -> Result<Vec<String>, RenderError> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for path in paths {
        for spelling in private_aliases(&checked(path)?) {
            if seen.insert(spelling.clone()) {
                out.push(spelling);
            }
        }
    }
    Ok(out)
}

/// `path` as text: UTF-8, no NUL, absolute, no `..`; `.` components, repeated and trailing
/// slashes dropped (Seatbelt compares paths as strings, and `/a/` is not `/a`).
fn checked(path: &Path) -> Result<String, RenderError> {
    let Some(text) = path.to_str() else {
        return Err(RenderError::NotUtf8 {
            path: path.to_string_lossy().into_owned(),
        });
    };
    let given = || text.to_owned();
    if text.contains('\0') {
        return Err(RenderError::ContainsNul { path: given() });
    }
    if !path.is_absolute() {
        return Err(RenderError::NotAbsolute { path: given() });
    }
    let mut out = String::new();
    for component in path.components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(name) => {
                out.push('/');
                // Invariant: a component of a `&str` path is UTF-8.
                out.push_str(name.to_str().expect("a component of a UTF-8 path is UTF-8"));
            }
            Component::ParentDir | Component::Prefix(_) => {
                return Err(RenderError::NotCanonical { path: given() });
            }
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(out)
}

/// Whether `path` is `root` or beneath it, comparing whole components.
fn is_within(path: &str, root: &str) -> bool {
    Path::new(path).starts_with(root)
}

/// Every proper ancestor directory of `paths` (`/a/b/c` → `/`, `/a`, `/a/b`), each once, in
/// order of first appearance.
fn ancestors_of<'a>(paths: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for path in paths {
        let mut parents: Vec<&str> = Path::new(path)
            .ancestors()
            .skip(1)
            .filter_map(Path::to_str)
            .collect();
        parents.reverse();
        for parent in parents {
            if seen.insert(parent.to_owned()) {
                out.push(parent.to_owned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
