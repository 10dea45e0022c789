//! The sandbox (DESIGN §13, issue 13): the one way the gateway runs a command on the user's
//! behalf — `run_check` today, later the MCP `process_run`, analyzers and the delegated agent's
//! server — confined by the kernel.
//!
//! A [`Policy`] says what the command may touch; it is plain data, rendered for each kernel:
//! Landlock and seccomp on Linux, applied by a re-executed helper mode of our own binary
//! ([`linux`]), and a Seatbelt profile on macOS ([`seatbelt::render`]). [`Sandbox::run`] starts
//! a command under a policy and supervises it: wall-clock timeout, cancel, output caps, and no
//! process outliving the call. A [`LiveOutput`] given in the [`Job`] lets other threads read
//! the output while the command runs ([`crate::process`] answers long commands with it).
//!
//! # What a confined command may do (Linux, Landlock ABI 3 or later)
//!
//! Built by [`Places::policy`]:
//!
//! - **Read and execute** ([`Policy::read`]): the system's toolchain locations ([`SYSTEM_READ`]:
//!   `/usr`, `/bin`, `/sbin`, `/lib*`, `/opt`, `/nix/store`), a short list of files under `/etc`
//!   ([`ETC_READ`]: the dynamic loader's cache, time zone, name service switch, TLS
//!   certificates, `alternatives`, Python's site config — not `passwd`, `shadow` or anything
//!   else), `/proc`, the CPU and cgroup files under `/sys` that runtimes read to size their
//!   thread pools, `/dev/{zero,random,urandom,full}`, the entries of the command's `PATH` (and
//!   the folder above an entry named `bin`, where a toolchain keeps its libraries — never the
//!   home directory itself), rustup's home, cargo's `bin`, `registry`, `git` and config files
//!   (not its `credentials.toml`), what `[sandbox] read` adds, the program (the file a link
//!   resolves to: `node_modules/.bin/eslint` is `eslint/bin/eslint.js`) and, for a Python
//!   virtual environment's script named by its path (`…/venv/bin/pytest`), that environment,
//!   and the directory the command runs in (the repository or its scratch checkout), `.git`
//!   included. No rule covers, whole or in part, the gateway's config and state dirs or the
//!   home's [`HOME_SECRETS`] (`~/.ssh`, `~/.config`, `~/.local/share`, …), whatever `PATH` or
//!   `[sandbox] read` say.
//! - **Write** ([`Policy::write`]): the call's own scratch directory (its `HOME` and `TMPDIR`,
//!   removed after the call), `/dev/null`, and either the whole scratch checkout (a call with a
//!   commit `ref`) or, in the user's work tree, only the directories the command's entry names
//!   (`writable = ["target"]`), each resolved to its real path and refused when that leaves the
//!   work tree or enters `.git`.
//! - **Nothing else**: not the user's home (`~/.ssh`, `~/.aws`, `~/.config`, browser profiles,
//!   `~/.npmrc`, cargo's credentials), not `/tmp`, not the gateway's config and state
//!   directories (its token), not other processes' files. A symlink does not help: the kernel
//!   checks the file a path resolves to.
//! - **Network**: none unless the command's entry says `network = true`: Landlock refuses TCP
//!   `connect` and `bind`, and a seccomp filter refuses creating any socket but a Unix one and
//!   `connect`, `bind`, `listen`, `accept` on any socket (so no UDP, no Docker or SSH-agent
//!   socket either); Unix socket pairs keep working.
//! - **Signals and abstract Unix sockets** only within its own sandbox (Landlock ABI 6, Linux
//!   6.12; on older kernels a command can still signal the user's other processes).
//! - **Processes**: none outlives the call (see [`linux`]: the helper is a child subreaper and
//!   kills everything beneath it), resource limits as configured.
//!
//! Where the kernel cannot confine (no Landlock, ABI below 3, not Linux), commands are refused
//! with `sandbox.unavailable`, naming what is missing, unless the config opts into
//! `[sandbox] mode = "unconfined"`; `doctor` reports the mode in force ([`Sandbox::status`]).

#[cfg(target_os = "linux")]
pub mod linux;
pub mod seatbelt;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{GatewayError, codes};

/// What a confined command may touch. Every path is absolute and canonical (no symlink in it:
/// the kernel resolves a rule's path once, so a link would widen the rule to wherever it
/// points). Anything not listed is neither readable nor writable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Policy {
    /// Files and directories readable and executable, with everything beneath them.
    pub read: Vec<PathBuf>,
    /// Files and directories writable (and readable and executable), with everything beneath
    /// them: create, remove, rename, truncate.
    pub write: Vec<PathBuf>,
    /// Whether the command may use the network (sockets other than a Unix socket pair).
    pub network: bool,
}

/// `[sandbox] mode`: whether commands must be confined by the kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Commands run only confined by the kernel (Landlock); refused where it cannot confine.
    #[default]
    Landlock,
    /// Commands run without kernel confinement (the user's explicit choice): environment,
    /// resource limits, timeout and killing every descendant still apply.
    Unconfined,
}

/// What the kernel enforced for a sandboxed process (from the probe mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Confinement {
    /// The Landlock ABI in force (0: none).
    pub landlock_abi: u8,
    /// Whether the rules were enforced.
    pub enforced: bool,
    /// Why the kernel cannot confine, when it cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Confinement {
    /// What is missing for the sandbox's policy, `None` when the kernel enforces all of it.
    pub fn missing(&self) -> Option<String> {
        if let Some(reason) = &self.reason {
            return Some(reason.clone());
        }
        #[cfg(target_os = "linux")]
        let min = linux::MIN_ABI as u8;
        #[cfg(not(target_os = "linux"))]
        let min = 3u8;
        if self.landlock_abi < min {
            return Some(format!(
                "the kernel's Landlock ABI is {}; the sandbox needs {min} or later (Linux 6.2), \
                 the first that also controls truncating files",
                self.landlock_abi
            ));
        }
        if !self.enforced {
            return Some("the kernel did not enforce the Landlock rules".into());
        }
        None
    }
}

/// What the helper process is given (JSON, its first argument).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct HelperSpec {
    pub(crate) policy: Policy,
    /// Apply Landlock and seccomp (false in the unconfined mode).
    pub(crate) confine: bool,
    /// `RLIMIT_CPU` in seconds.
    pub(crate) cpu_seconds: u64,
    /// `RLIMIT_AS` in bytes.
    pub(crate) memory_bytes: u64,
}

/// The Linux system locations a command may read and execute (those that exist).
pub const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/nix/store",
    "/proc",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
    "/dev/full",
];

/// The files and folders under `/etc` a command may read: the dynamic loader, time zone, name
/// service and TLS configuration, Debian's `alternatives` links, Python's and git's system
/// configuration. Not `passwd`, `group`, `shadow`, `ssh`, or anything else.
pub const ETC_READ: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ld.so.preload",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/alternatives",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/debian_version",
    "/etc/gitconfig",
    "/etc/inputrc",
    "/etc/terminfo",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/python3.12",
    "/etc/python3.13",
    "/etc/python3.14",
];

/// What in the user's home no rule may cover, whole or in part, whatever `PATH` or
/// `[sandbox] read` say (`~/.local/bin` on `PATH` makes `~/.local` a toolchain folder, but
/// `~/.local/share` holds keyrings and browser data).
pub const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config",
    ".local/share",
    ".local/state",
    ".docker",
    ".kube",
    ".mozilla",
    ".pki",
    ".password-store",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
];

/// Where a command runs and what it may use: the inputs of [`Places::policy`].
#[derive(Debug, Clone)]
pub struct Places<'a> {
    /// The canonical directory the command runs in (a work tree or a scratch checkout).
    pub root: &'a Path,
    /// Whether all of `root` is writable (a scratch checkout) or only `writable` (a work tree).
    pub root_writable: bool,
    /// Directories under `root` the command may write (relative paths, from its entry).
    pub writable: &'a [String],
    /// The call's scratch directory (its `HOME` and `TMPDIR` live there).
    pub scratch: &'a Path,
    /// The program, resolved (readable even when outside the usual locations).
    pub program: &'a Path,
    /// The command's environment (its `PATH`, `CARGO_HOME`, `RUSTUP_HOME` are read).
    pub env: &'a [(String, String)],
    /// The user's home directory, never readable as a whole.
    pub home: Option<&'a Path>,
    /// More read-only paths (`[sandbox] read`).
    pub extra_read: &'a [PathBuf],
    /// Directories that must stay unreadable even if another rule would cover them (the
    /// gateway's config and state dirs): a read rule on one of them, on a folder above one or
    /// on anything inside one is dropped (the call's own scratch dir and checkout, inside the
    /// state dir, are granted separately).
    pub private: &'a [PathBuf],
    /// Whether the network is allowed.
    pub network: bool,
}

impl Places<'_> {
    /// The policy of a command run in these places (see the module docs).
    ///
    /// # Errors
    /// `sandbox.path_invalid` when a `writable` entry is absolute, climbs out with `..`,
    /// resolves (through a symlink) outside `root`, to `root` itself, or into `.git`.
    pub fn policy(&self) -> Result<Policy, GatewayError> {
        let mut read: Vec<PathBuf> = Vec::new();
        let env = |name: &str| {
            self.env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| PathBuf::from(v))
        };
        for path in SYSTEM_READ.iter().chain(ETC_READ) {
            read.push(PathBuf::from(path));
        }
        if let Some(path) = env("PATH") {
            for entry in std::env::split_paths(&path) {
                if !entry.is_absolute() {
                    continue;
                }
                read.push(entry.clone());
                if entry.file_name().is_some_and(|n| n == "bin")
                    && let Some(parent) = entry.parent()
                {
                    read.push(parent.to_owned());
                }
            }
        }
        let home = self.home;
        let cargo_home = env("CARGO_HOME").or_else(|| home.map(|h| h.join(".cargo")));
        if let Some(cargo) = &cargo_home {
            for part in ["bin", "registry", "git", "config.toml", "config"] {
                read.push(cargo.join(part));
            }
        }
        if let Some(rustup) = env("RUSTUP_HOME").or_else(|| home.map(|h| h.join(".rustup"))) {
            read.push(rustup);
        }
        read.extend(self.extra_read.iter().cloned());
        read.push(self.program.to_owned());
        if let Some(venv) = python_venv_of(self.program) {
            read.push(venv);
        }

        // Real paths only; never the home directory, a folder above it, cargo's home as a
        // whole, or anything covering or inside the gateway's private dirs or [`HOME_SECRETS`].
        let canonical_home = home.and_then(|h| std::fs::canonicalize(h).ok());
        let canonical_cargo = cargo_home.and_then(|c| std::fs::canonicalize(c).ok());
        let mut private: Vec<PathBuf> = self
            .private
            .iter()
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
            .collect();
        if let Some(home) = &canonical_home {
            private.extend(HOME_SECRETS.iter().map(|s| home.join(s)));
        }
        let mut read: Vec<PathBuf> = read
            .into_iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .filter(|p| {
                p != Path::new("/")
                    && !canonical_home.as_ref().is_some_and(|h| h.starts_with(p))
                    && canonical_cargo.as_ref() != Some(p)
                    && !private.iter().any(|d| d.starts_with(p) || p.starts_with(d))
            })
            .collect();
        read.push(self.root.to_owned());

        let mut write = vec![self.scratch.to_owned(), PathBuf::from("/dev/null")];
        if self.root_writable {
            write.push(self.root.to_owned());
        } else {
            for entry in self.writable {
                write.push(self.writable_dir(entry)?);
            }
        }
        read.sort();
        read.dedup();
        write.sort();
        write.dedup();
        Ok(Policy {
            read,
            write,
            network: self.network,
        })
    }

    /// `entry` (from `writable`) resolved under `root`, created when absent.
    fn writable_dir(&self, entry: &str) -> Result<PathBuf, GatewayError> {
        let invalid = |why: &str| {
            GatewayError::new(
                codes::SANDBOX_PATH_INVALID,
                format!("the writable directory `{entry}` {why}"),
                "Name a directory inside the repository, relative to its root, outside `.git` \
                 (e.g. `target`), in the command's `writable` list; remove a symlink that \
                 points elsewhere.",
            )
        };
        let relative = Path::new(entry);
        if entry.is_empty()
            || relative.is_absolute()
            || relative
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(invalid("must be a relative path without `.` or `..`"));
        }
        // Walk down one component at a time: a link is resolved and checked before anything
        // beneath it is created, so a missing directory is never made through a link that
        // leaves the work tree.
        let inside = |real: &Path| -> Result<(), GatewayError> {
            if real == self.root || !real.starts_with(self.root) {
                return Err(invalid(&format!(
                    "resolves to {}, outside the repository",
                    real.display()
                )));
            }
            // Any `.git`: the repository's, or a submodule's or nested repository's.
            if real.strip_prefix(self.root).is_ok_and(|r| {
                r.components()
                    .any(|c| c.as_os_str().eq_ignore_ascii_case(".git"))
            }) {
                return Err(invalid("is inside `.git`"));
            }
            Ok(())
        };
        let mut current = self.root.to_owned();
        for component in relative.components() {
            current.push(component);
            match std::fs::symlink_metadata(&current) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    current = std::fs::canonicalize(&current)
                        .map_err(|e| invalid(&format!("cannot be resolved: {e}")))?;
                    inside(&current)?;
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    inside(&current)?;
                    std::fs::create_dir(&current)
                        .map_err(|e| invalid(&format!("cannot be created: {e}")))?;
                }
                Err(e) => return Err(invalid(&format!("cannot be read: {e}"))),
            }
        }
        let real = std::fs::canonicalize(&current)
            .map_err(|e| invalid(&format!("cannot be resolved: {e}")))?;
        inside(&real)?;
        if !real.is_dir() {
            return Err(invalid("is not a directory"));
        }
        Ok(real)
    }
}

/// The Python virtual environment `program` (as named, before resolving links) is a script of,
/// when it lies in a `bin` folder next to a `pyvenv.cfg`: a venv's console script (`pytest`)
/// starts the system's interpreter through the venv's `bin/python3` link, which must read
/// `pyvenv.cfg` and the venv's `lib/…/site-packages` — unreadable, Python stops with a fatal
/// error before running anything.
fn python_venv_of(program: &Path) -> Option<PathBuf> {
    let bin = program.parent()?;
    let venv = bin.parent()?;
    (bin.file_name()? == "bin" && venv.join("pyvenv.cfg").is_file()).then(|| venv.to_owned())
}

/// How the gateway runs commands: its own binary as the helper, and the configured mode.
#[derive(Debug, Clone)]
pub struct Sandbox {
    helper: PathBuf,
    mode: SandboxMode,
}

/// The sandbox status `doctor` and each run report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxStatus {
    /// `landlock` (commands are confined), `unconfined` (the user's choice) or `unavailable`
    /// (commands are refused).
    pub mode: &'static str,
    /// The Landlock ABI in force, when confined.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub landlock_abi: Option<u8>,
    /// What the kernel lacks, when it cannot confine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
}

impl Sandbox {
    /// A sandbox whose helper is `helper` (the gateway's own binary: [`Sandbox::current`]).
    pub fn new(helper: PathBuf, mode: SandboxMode) -> Sandbox {
        Sandbox { helper, mode }
    }

    /// A sandbox whose helper is the running binary (`std::env::current_exe`).
    pub fn current(mode: SandboxMode) -> Sandbox {
        let helper = std::env::current_exe().unwrap_or_else(|_| PathBuf::from(crate_binary()));
        Sandbox { helper, mode }
    }

    /// What the kernel can enforce, probed once per helper binary (a throw-away process of the
    /// helper confines itself and says what was enforced).
    pub fn confinement(&self) -> Confinement {
        static PROBES: OnceLock<Mutex<Vec<(PathBuf, Confinement)>>> = OnceLock::new();
        let probes = PROBES.get_or_init(Default::default);
        let mut probes = probes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, c)) = probes.iter().find(|(p, _)| *p == self.helper) {
            return c.clone();
        }
        let confinement = probe(&self.helper);
        probes.push((self.helper.clone(), confinement.clone()));
        confinement
    }

    /// The mode in force: `landlock` with its ABI, `unconfined` by configuration, or
    /// `unavailable` with what is missing.
    pub fn status(&self) -> SandboxStatus {
        let confinement = self.confinement();
        match (self.mode, confinement.missing()) {
            (SandboxMode::Unconfined, missing) => SandboxStatus {
                mode: "unconfined",
                landlock_abi: None,
                missing,
            },
            (SandboxMode::Landlock, None) => SandboxStatus {
                mode: "landlock",
                landlock_abi: Some(confinement.landlock_abi),
                missing: None,
            },
            (SandboxMode::Landlock, Some(missing)) => SandboxStatus {
                mode: "unavailable",
                landlock_abi: None,
                missing: Some(missing),
            },
        }
    }

    /// Run `job` under `policy` (see [`Job`] and [`Outcome`]).
    ///
    /// # Errors
    /// `sandbox.unavailable` when the mode is `landlock` and the kernel cannot confine;
    /// `sandbox.denied` when the sandbox forbids executing the program; `sandbox.failed` when
    /// the helper cannot set up the sandbox; `tool.command_failed` when the program cannot be
    /// started.
    pub fn run(&self, job: &Job<'_>, policy: &Policy) -> Result<Outcome, GatewayError> {
        let status = self.status();
        if status.mode == "unavailable" {
            return Err(GatewayError::new(
                codes::SANDBOX_UNAVAILABLE,
                format!(
                    "commands are not run: this system cannot confine them ({})",
                    status.missing.unwrap_or_default()
                ),
                "Run the gateway on Linux 6.2 or later with Landlock enabled (`cat \
                 /sys/kernel/security/lsm` lists it), or accept running commands without \
                 kernel confinement with `[sandbox] mode = \"unconfined\"` in the config file.",
            ));
        }
        run(
            &self.helper,
            self.mode == SandboxMode::Landlock,
            job,
            policy,
        )
    }
}

fn crate_binary() -> &'static str {
    "review-agent-gateway"
}

#[cfg(target_os = "linux")]
fn probe(helper: &Path) -> Confinement {
    let unavailable = |reason: String| Confinement {
        landlock_abi: 0,
        enforced: false,
        reason: Some(reason),
    };
    match Command::new(helper)
        .arg(linux::PROBE_ARG)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
    {
        Ok(output) => serde_json::from_slice::<Confinement>(&output.stdout).unwrap_or_else(|_| {
            unavailable(format!(
                "the sandbox helper {} did not answer its probe",
                helper.display()
            ))
        }),
        Err(e) => unavailable(format!(
            "the sandbox helper {} cannot run: {e}",
            helper.display()
        )),
    }
}

#[cfg(not(target_os = "linux"))]
fn probe(_: &Path) -> Confinement {
    Confinement {
        landlock_abi: 0,
        enforced: false,
        reason: Some(
            "this system has no Landlock (the macOS Seatbelt profile is rendered but not yet \
             used)"
                .into(),
        ),
    }
}

/// One command to run.
#[derive(Debug)]
pub struct Job<'a> {
    /// The program (resolved) and its arguments (`argv[0]` is the name as given).
    pub program: &'a Path,
    /// The arguments after the program.
    pub args: &'a [String],
    /// The working directory.
    pub cwd: &'a Path,
    /// The whole environment of the command.
    pub env: &'a [(String, String)],
    /// Wall-clock limit.
    pub timeout: Duration,
    /// `RLIMIT_CPU` per process, seconds.
    pub cpu_seconds: u64,
    /// `RLIMIT_AS` per process, bytes.
    pub memory_bytes: u64,
    /// Bytes kept of stdout and of stderr, each.
    pub max_output: usize,
    /// Once `true`, the command is killed (`cancelled: true`).
    pub cancel: Option<&'a AtomicBool>,
    /// Where the output also goes as it arrives, readable while the command runs (the MCP
    /// `process_output`, issue 14 §3); `None` collects it only for the [`Outcome`].
    pub live: Option<Arc<LiveOutput>>,
}

// === impl LiveOutput ===

/// One of a command's two output streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// A command's output as it arrives: both streams, each keeping its first `cap` bytes (the
/// rest is counted and dropped, so memory stays bounded however much a command writes),
/// readable at any time from a byte offset (a cursor). Thread-safe: the sandbox's reader
/// threads append, any thread reads.
#[derive(Debug)]
pub struct LiveOutput {
    // Invariant: `kept.len() <= cap` for both streams; `total >= kept.len()`.
    streams: Mutex<[Captured; 2]>,
    cap: usize,
}

/// What [`LiveOutput::read`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveChunk {
    /// The kept bytes from the cursor on (at most the `max` asked for).
    pub bytes: Vec<u8>,
    /// The cursor of the next read: the given cursor (clamped to the kept length) plus
    /// `bytes.len()`.
    pub next: u64,
    /// Whether the stream has gone past the cap: bytes after the kept ones were dropped.
    pub truncated: bool,
    /// Everything the stream has written so far, in bytes (kept or not).
    pub total: u64,
}

impl LiveOutput {
    /// An empty buffer keeping at most `cap` bytes of each stream (give the [`Job`]'s
    /// `max_output`).
    pub fn new(cap: usize) -> LiveOutput {
        LiveOutput {
            streams: Mutex::new([Captured::default(), Captured::default()]),
            cap,
        }
    }

    /// The kept bytes of `stream` from byte offset `from` on (all of them; see
    /// [`LiveOutput::read_at_most`]). A cursor past the kept bytes reads nothing.
    pub fn read(&self, stream: Stream, from: u64) -> LiveChunk {
        self.read_at_most(stream, from, usize::MAX)
    }

    /// At most `max` kept bytes of `stream` from byte offset `from` on; `next` continues.
    pub fn read_at_most(&self, stream: Stream, from: u64, max: usize) -> LiveChunk {
        let streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        let captured = &streams[stream as usize];
        let start = usize::try_from(from)
            .unwrap_or(usize::MAX)
            .min(captured.kept.len());
        let end = start.saturating_add(max).min(captured.kept.len());
        LiveChunk {
            bytes: captured.kept[start..end].to_vec(),
            next: end as u64,
            truncated: captured.total > captured.kept.len() as u64,
            total: captured.total,
        }
    }

    /// Append `bytes` that `stream` wrote, keeping what fits under the cap.
    pub(crate) fn append(&self, stream: Stream, bytes: &[u8]) {
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        let captured = &mut streams[stream as usize];
        let room = self
            .cap
            .saturating_sub(captured.kept.len())
            .min(bytes.len());
        captured.kept.extend_from_slice(&bytes[..room]);
        captured.total += bytes.len() as u64;
    }
}

/// What a command did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Its exit code, `None` when a signal ended it.
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// Killed at the wall-clock limit.
    pub timed_out: bool,
    /// Killed by a cancel.
    pub cancelled: bool,
    /// From start to end.
    pub duration: Duration,
    /// The kept start of stdout.
    pub stdout: Vec<u8>,
    /// The kept start of stderr.
    pub stderr: Vec<u8>,
    /// Everything written to stdout, in bytes.
    pub stdout_bytes: u64,
    /// Everything written to stderr, in bytes.
    pub stderr_bytes: u64,
    /// Whether either stream was cut, or not read to its end.
    pub truncated: bool,
}

/// How long to wait, after the control pipe closed, for the helper to kill everything and exit
/// before it is killed itself; and for stdout and stderr to close after that.
const GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, Default)]
struct Captured {
    kept: Vec<u8>,
    total: u64,
}

#[cfg(target_os = "linux")]
fn run(
    helper: &Path,
    confine: bool,
    job: &Job<'_>,
    policy: &Policy,
) -> Result<Outcome, GatewayError> {
    let spec = HelperSpec {
        policy: policy.clone(),
        confine,
        cpu_seconds: job.cpu_seconds,
        memory_bytes: job.memory_bytes,
    };
    let spec = serde_json::to_string(&spec).map_err(|e| {
        GatewayError::new(
            codes::SANDBOX_FAILED,
            format!("cannot encode the sandbox spec: {e}"),
            "Report this as a gateway bug; the command did not run.",
        )
    })?;
    let started = Instant::now();
    let mut command = Command::new(helper);
    command
        .arg(linux::HELPER_ARG)
        .arg(spec)
        .arg("--")
        .arg(job.program)
        .args(job.args)
        .env_clear()
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .current_dir(job.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command.spawn().map_err(|e| {
        GatewayError::new(
            codes::SANDBOX_FAILED,
            format!("cannot start the sandbox helper {}: {e}", helper.display()),
            "Reinstall the gateway; the helper is its own binary.",
        )
    })?;
    let pid = child.id();
    let control = child.stdin.take();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let mut streams = Vec::new();
    for (stream, reader) in [
        (
            Stream::Stdout,
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ),
        (
            Stream::Stderr,
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ),
    ] {
        let captured = Arc::new(Mutex::new(Captured::default()));
        if let Some(reader) = reader {
            let sink = Arc::clone(&captured);
            let done = done_tx.clone();
            let cap = job.max_output;
            let live = job.live.clone();
            std::thread::spawn(move || {
                drain(reader, &sink, cap, live.as_deref().map(|l| (l, stream)));
                let _ = done.send(());
            });
        } else {
            let _ = done_tx.send(());
        }
        streams.push(captured);
    }
    drop(done_tx);

    // Wait for the helper, the deadline or a cancel, without reaping it (while it is a zombie
    // its pid — its group's id — cannot be reused). A thread blocks until the helper exits
    // (without reaping it either), so a short command is noticed at once rather than at the
    // end of the next pause, which only paces the cancel and deadline checks.
    let (exit_tx, exit_rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        process::wait_exit(pid);
        let _ = exit_tx.send(());
    });
    let deadline = started + job.timeout;
    let mut pause = Duration::from_millis(1);
    let (mut timed_out, mut cancelled) = (false, false);
    loop {
        if process::has_exited(pid) {
            break;
        }
        if job.cancel.is_some_and(|c| c.load(Ordering::SeqCst)) {
            cancelled = true;
            break;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            break;
        }
        let wait = pause.min(deadline.saturating_duration_since(Instant::now()));
        if let Err(mpsc::RecvTimeoutError::Disconnected) = exit_rx.recv_timeout(wait) {
            std::thread::sleep(wait);
        }
        pause = (pause * 2).min(Duration::from_millis(20));
    }
    // Closing the control pipe makes the helper kill everything beneath it and exit; a helper
    // that does not within the grace period is killed with its group.
    drop(control);
    if timed_out || cancelled {
        let until = Instant::now() + GRACE;
        while !process::has_exited(pid) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    process::kill_group(pid);
    let status = child.wait().map_err(|e| {
        GatewayError::new(
            codes::TOOL_COMMAND_FAILED,
            format!("cannot wait for the sandbox helper: {e}"),
            "Run the call again; `review-agent-gateway doctor` checks the sandbox.",
        )
    })?;
    let duration = started.elapsed();
    let grace_end = Instant::now() + GRACE;
    let mut drained = true;
    for _ in 0..2 {
        if done_rx
            .recv_timeout(grace_end.saturating_duration_since(Instant::now()))
            .is_err()
        {
            drained = false;
            break;
        }
    }
    let take = |c: &Arc<Mutex<Captured>>| {
        let guard = c.lock().unwrap_or_else(|p| p.into_inner());
        (guard.kept.clone(), guard.total)
    };
    let (stdout, stdout_bytes) = take(&streams[0]);
    let (stderr, stderr_bytes) = take(&streams[1]);
    use std::os::unix::process::ExitStatusExt;
    if status.code() == Some(linux::SETUP_FAILED)
        && let Some(error) = setup_error(&stderr)
    {
        return Err(error);
    }
    let truncated =
        stdout_bytes > stdout.len() as u64 || stderr_bytes > stderr.len() as u64 || !drained;
    Ok(Outcome {
        exit_code: status.code(),
        signal: status.signal(),
        timed_out,
        cancelled,
        duration,
        stdout,
        stderr,
        stdout_bytes,
        stderr_bytes,
        truncated,
    })
}

#[cfg(not(target_os = "linux"))]
fn run(_: &Path, _: bool, _: &Job<'_>, _: &Policy) -> Result<Outcome, GatewayError> {
    Err(GatewayError::new(
        codes::SANDBOX_UNAVAILABLE,
        "commands are run on Linux only for now",
        "Run the gateway on Linux 6.2 or later.",
    ))
}

/// The helper's error line (see [`linux::ERROR_PREFIX`]) as an error.
#[cfg(target_os = "linux")]
fn setup_error(stderr: &[u8]) -> Option<GatewayError> {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(linux::ERROR_PREFIX))?;
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    let message = value.get("message")?.as_str()?.to_owned();
    let (code, remediation) = match value.get("code")?.as_str()? {
        "sandbox.unavailable" => (
            codes::SANDBOX_UNAVAILABLE,
            "Run the gateway on Linux 6.2 or later with Landlock enabled, or set `[sandbox] \
             mode = \"unconfined\"` in the config file.",
        ),
        "sandbox.denied" => (
            codes::SANDBOX_DENIED,
            "The sandbox does not let this program run: install it in a system location \
             (/usr, /opt) or one on PATH, or add its folder to `[sandbox] read`.",
        ),
        "tool.command_failed" => (
            codes::TOOL_COMMAND_FAILED,
            "Check that the program exists and can run in the repository.",
        ),
        _ => (
            codes::SANDBOX_FAILED,
            "Run `review-agent-gateway doctor` to see the sandbox's state.",
        ),
    };
    Some(GatewayError::new(code, message, remediation))
}

/// Read `reader` to its end, keeping the first `cap` bytes, and passing every read on to
/// `live` as it arrives.
fn drain(
    mut reader: Box<dyn Read + Send>,
    sink: &Mutex<Captured>,
    cap: usize,
    live: Option<(&LiveOutput, Stream)>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                {
                    let mut c = sink.lock().unwrap_or_else(|p| p.into_inner());
                    let room = cap.saturating_sub(c.kept.len()).min(n);
                    c.kept.extend_from_slice(&buf[..room]);
                    c.total += n as u64;
                }
                if let Some((live, stream)) = live {
                    live.append(stream, &buf[..n]);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

/// How old a scratch directory must be to be taken for one a killed gateway left: two days,
/// twice the longest `timeout_seconds` a call may have.
pub const STALE_SCRATCH: Duration = Duration::from_secs(2 * 86_400);

/// A per-call scratch directory (`<parent>/<ULID>/` with `home/` and `tmp/`, mode 0700),
/// removed with everything in it when dropped.
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// Create a fresh scratch directory under `parent`, and remove the ones a gateway that
    /// was killed left there (older than [`STALE_SCRATCH`], more than any call may last).
    ///
    /// # Errors
    /// `sandbox.failed` when it cannot be created.
    pub fn new(parent: &Path) -> Result<Scratch, GatewayError> {
        if let Ok(entries) = std::fs::read_dir(parent) {
            for entry in entries.flatten() {
                let stale = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > STALE_SCRATCH);
                if stale {
                    crate::repo::checkout::remove_tree(&entry.path());
                }
            }
        }
        let path = parent.join(ulid::Ulid::new().to_string());
        let made = crate::security::fs::create_private_dir(&path)
            .and_then(|()| std::fs::create_dir(path.join("home")))
            .and_then(|()| std::fs::create_dir(path.join("tmp")))
            .and_then(|()| std::fs::canonicalize(&path));
        match made {
            Ok(path) => Ok(Scratch { path }),
            Err(e) => Err(GatewayError::new(
                codes::SANDBOX_FAILED,
                format!(
                    "cannot create the scratch directory {}: {e}",
                    path.display()
                ),
                "Check the space and permissions of the gateway's state directory.",
            )),
        }
    }

    /// The scratch directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The command's `HOME`.
    pub fn home(&self) -> PathBuf {
        self.path.join("home")
    }

    /// The command's `TMPDIR`.
    pub fn tmp(&self) -> PathBuf {
        self.path.join("tmp")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        crate::repo::checkout::remove_tree(&self.path);
    }
}

/// Process-group control through `rustix` (safe wrappers of the system calls).
#[cfg(target_os = "linux")]
mod process {
    use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process_group, waitid};

    fn pid_of(pid: u32) -> Option<Pid> {
        Pid::from_raw(i32::try_from(pid).ok()?)
    }

    /// Whether `pid` (our child) has exited, without reaping it.
    pub(super) fn has_exited(pid: u32) -> bool {
        let Some(pid) = pid_of(pid) else {
            return true;
        };
        match waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
        ) {
            Ok(status) => status.is_some(),
            Err(rustix::io::Errno::INTR) => false,
            Err(_) => true,
        }
    }

    /// Block until `pid` (our child) has exited, without reaping it.
    pub(super) fn wait_exit(pid: u32) {
        let Some(pid) = pid_of(pid) else {
            return;
        };
        while let Err(rustix::io::Errno::INTR) = waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {}
    }

    /// `SIGKILL` to every process of the group `pid` (no error when none is left).
    pub(super) fn kill_group(pid: u32) {
        if let Some(pid) = pid_of(pid) {
            let _ = kill_process_group(pid, Signal::KILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confinement(abi: u8, enforced: bool) -> Confinement {
        Confinement {
            landlock_abi: abi,
            enforced,
            reason: None,
        }
    }

    #[test]
    fn what_is_missing_names_the_kernel_feature() {
        assert_eq!(confinement(7, true).missing(), None);
        assert_eq!(confinement(3, true).missing(), None);
        let old = confinement(2, true).missing().expect("ABI 2 is not enough");
        assert!(
            old.contains("ABI is 2") && old.contains("Linux 6.2"),
            "{old}"
        );
        assert!(confinement(5, false).missing().is_some());
        let none = Confinement {
            reason: Some("the kernel has no Landlock".into()),
            ..confinement(0, false)
        };
        assert_eq!(
            none.missing().as_deref(),
            Some("the kernel has no Landlock")
        );
    }

    /// Where the helper cannot confine (here: it cannot even start), a command is refused
    /// with `sandbox.unavailable` naming why — unless the user chose the unconfined mode.
    #[test]
    fn commands_are_refused_where_the_kernel_cannot_confine() {
        let sandbox = Sandbox::new(PathBuf::from("/nonexistent/helper"), SandboxMode::Landlock);
        let status = sandbox.status();
        assert_eq!(status.mode, "unavailable");
        assert!(
            status
                .missing
                .as_deref()
                .unwrap_or_default()
                .contains("cannot run")
        );
        let job = Job {
            program: Path::new("/bin/true"),
            args: &[],
            cwd: Path::new("/"),
            env: &[],
            timeout: Duration::from_secs(5),
            cpu_seconds: 5,
            memory_bytes: 1 << 30,
            max_output: 100,
            cancel: None,
            live: None,
        };
        let error = sandbox.run(&job, &Policy::default()).expect_err("refused");
        assert_eq!(error.code, codes::SANDBOX_UNAVAILABLE);
        assert!(error.message.contains("cannot run"), "{error:?}");
        assert!(
            error.remediation.contains("mode = \"unconfined\""),
            "{error:?}"
        );
        let unconfined = Sandbox::new(
            PathBuf::from("/nonexistent/helper"),
            SandboxMode::Unconfined,
        );
        assert_eq!(unconfined.status().mode, "unconfined");
    }

    struct Tree {
        dir: tempfile::TempDir,
    }

    impl Tree {
        fn new() -> Tree {
            let dir = tempfile::tempdir().expect("tempdir");
            for d in [
                "home/.ssh",
                "home/.cargo/bin",
                "home/.cargo/registry",
                "home/tools/bin",
                "home/.local/bin",
                "home/.local/share/keyrings",
                "repo/.git",
                "repo/src",
                "scratch",
                "state",
                "outside",
            ] {
                std::fs::create_dir_all(dir.path().join(d)).expect("mkdir");
            }
            std::fs::write(dir.path().join("home/.cargo/credentials.toml"), "token").expect("w");
            std::os::unix::fs::symlink(dir.path().join("outside"), dir.path().join("repo/out"))
                .expect("symlink");
            std::os::unix::fs::symlink(dir.path().join("repo/.git"), dir.path().join("repo/g"))
                .expect("symlink");
            Tree { dir }
        }

        fn path(&self, p: &str) -> PathBuf {
            std::fs::canonicalize(self.dir.path())
                .expect("canonical")
                .join(p)
        }
    }

    /// Work tree, scratch, home, an outside dir, private dirs.
    type Dirs = (PathBuf, PathBuf, PathBuf, PathBuf, Vec<PathBuf>);

    fn places<'a>(
        env: &'a [(String, String)],
        writable: &'a [String],
        paths: &'a Dirs,
    ) -> Places<'a> {
        Places {
            root: &paths.0,
            root_writable: false,
            writable,
            scratch: &paths.1,
            program: Path::new("/bin/sh"),
            env,
            home: Some(&paths.2),
            extra_read: &[],
            private: &paths.4,
            network: false,
        }
    }

    #[test]
    fn the_policy_reads_toolchains_but_not_the_home_or_private_dirs() {
        let t = Tree::new();
        let env = vec![(
            "PATH".to_owned(),
            format!(
                "{}:{}:{}:{}:/usr/bin",
                t.path("home/.local/bin").display(),
                t.path("home/.cargo/bin").display(),
                t.path("home/tools/bin").display(),
                t.path("home").display()
            ),
        )];
        let paths = (
            t.path("repo"),
            t.path("scratch"),
            t.path("home"),
            t.path("outside"),
            vec![t.path("state"), t.path("home/tools")],
        );
        let policy = places(&env, &[], &paths).policy().expect("policy");
        assert!(
            policy.read.contains(&t.path("home/.cargo/bin")),
            "{policy:?}"
        );
        assert!(
            policy.read.contains(&t.path("home/.cargo/registry")),
            "{policy:?}"
        );
        assert!(policy.read.contains(&t.path("repo")));
        assert!(policy.read.contains(&PathBuf::from("/usr")));
        assert!(
            policy.read.contains(&t.path("home/.local/bin")),
            "{policy:?}"
        );
        for never in [
            "home",
            "home/.cargo",
            "home/.local",
            "home/.local/share",
            "home/.cargo/credentials.toml",
            "home/.ssh",
            "state",
        ] {
            assert!(!policy.read.contains(&t.path(never)), "{never}: {policy:?}");
        }
        // A PATH entry inside a private dir is dropped too.
        assert!(
            !policy.read.contains(&t.path("home/tools/bin")),
            "{policy:?}"
        );
        assert!(
            !policy
                .read
                .iter()
                .any(|p| p == Path::new("/") || p == Path::new("/etc") || p == Path::new("/tmp"))
        );
        assert!(
            policy.read.contains(&PathBuf::from("/etc/ld.so.cache"))
                || !Path::new("/etc/ld.so.cache").exists()
        );
        assert!(!policy.read.contains(&PathBuf::from("/etc/passwd")));
        // The same value renders as the macOS profile (DESIGN §11): every path, with its right.
        let profile = seatbelt::render(&policy).expect("renders");
        for path in policy.read.iter().chain(&policy.write) {
            assert!(
                profile.contains(&format!("\"{}\"", path.display())),
                "{path:?}"
            );
        }
        assert_eq!(
            policy.write,
            vec![PathBuf::from("/dev/null"), t.path("scratch")]
        );
    }

    #[test]
    fn writable_dirs_must_stay_inside_the_work_tree_and_out_of_git() {
        let t = Tree::new();
        let env = Vec::new();
        let paths = (
            t.path("repo"),
            t.path("scratch"),
            t.path("home"),
            t.path("outside"),
            Vec::new(),
        );
        let ok = vec!["target".to_owned(), "src".to_owned()];
        let policy = places(&env, &ok, &paths).policy().expect("policy");
        assert!(
            policy.write.contains(&t.path("repo/target")),
            "created: {policy:?}"
        );
        assert!(t.path("repo/target").is_dir());
        assert!(policy.write.contains(&t.path("repo/src")));
        for bad in [
            "out",
            "out/sub",
            "g",
            ".git",
            ".GIT/hooks",
            "src/.git",
            "src/.Git/x",
            "../outside",
            "/tmp",
            "",
            ".",
            "a/../..",
        ] {
            let writable = vec![bad.to_owned()];
            let error = places(&env, &writable, &paths).policy().expect_err(bad);
            assert_eq!(error.code, codes::SANDBOX_PATH_INVALID, "{bad}: {error:?}");
        }
        assert!(
            !t.path("outside/sub").exists(),
            "nothing created through the link"
        );
    }
}
