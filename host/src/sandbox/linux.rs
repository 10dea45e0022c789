//! The Linux side of the sandbox: the helper mode of our own binary that confines itself with
//! Landlock and seccomp, then starts the command and supervises it (DESIGN §13).
//!
//! Why a helper process: Landlock and seccomp apply to the thread that asks for them and to what
//! it later starts, never to the daemon's other threads; asking for them between `fork` and
//! `exec` needs `unsafe` code (`pre_exec`), which the workspace forbids. So the daemon starts
//! `review-agent-gateway __sandbox-exec <spec> -- <program> <args…>`, in two stages:
//!
//! 1. **The supervisor** ([`HELPER_ARG`]) becomes a *child subreaper*
//!    (`PR_SET_CHILD_SUBREAPER`): every orphaned descendant, including one that called `setsid`
//!    or double-forked, is re-parented to it rather than to init, so it can always find them.
//!    It starts the second stage in a process group of its own, with stdin closed and stdout and
//!    stderr inherited (the daemon's pipes), and waits for it.
//! 2. **The confining stage** ([`CONFINE_ARG`]) sets the resource limits on itself
//!    (`setrlimit`: CPU, no core files), confines itself — Landlock (filesystem, TCP and scope
//!    rules), a seccomp filter when the policy has no network, every capability dropped — sets
//!    the address-space limit last (this large binary's own mappings may not fit a small one),
//!    and `exec`s the command: every limit and rule is in force from the command's first
//!    instruction, and inherited by all it starts.
//! 3. When the command ends — or when the supervisor's own stdin (the daemon's *control pipe*)
//!    reaches end of file because the daemon gave up (timeout, cancel, client gone) or died —
//!    the supervisor kills every process left beneath it with `SIGKILL`, reaps them, and exits
//!    with the command's status: the same exit code, or the same fatal signal.
//!
//! Errors before the command starts are reported on stderr as one line starting with
//! [`ERROR_PREFIX`] followed by JSON `{"code", "message"}`, with exit status [`SETUP_FAILED`].

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use rustix::process::{
    Pid, Resource, Rlimit, Signal, WaitOptions, getpid, kill_process, kill_process_group,
    set_child_subreaper, setrlimit,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::{Confinement, HelperSpec, Policy};

/// The first argument that selects the helper mode.
pub const HELPER_ARG: &str = "__sandbox-exec";
/// The first argument that selects the confining stage, which the helper starts (not the
/// daemon): confine, then `exec` the command.
pub const CONFINE_ARG: &str = "__sandbox-confine";
/// The first argument that selects the probe mode: confine a throw-away process and print what
/// the kernel enforced as JSON ([`Confinement`]).
pub const PROBE_ARG: &str = "__sandbox-probe";
/// The exit status of a helper that could not set up the sandbox or start the command.
pub const SETUP_FAILED: i32 = 125;
/// The start of the helper's one error line on stderr.
pub const ERROR_PREFIX: &str = "review-agent-gateway-sandbox-error: ";

/// The oldest Landlock ABI the sandbox accepts: 3 (Linux 6.2), the first that also controls
/// truncating a file. ABI 1 and 2 would let a command truncate any file it can open.
pub const MIN_ABI: ABI = ABI::V3;
/// The newest Landlock ABI whose rights the rules ask for (6: filesystem, TCP, scopes).
const RULES_ABI: ABI = ABI::V6;

/// How long the helper keeps killing and reaping what is left before it gives up waiting.
const CLEANUP_LIMIT: Duration = Duration::from_secs(5);

/// Run the helper mode: `args` are the arguments after [`HELPER_ARG`]: `<spec JSON> --
/// <program> <args…>`. Returns the exit status (never returns when the command died of a
/// signal: the helper sends itself the same signal).
pub fn helper_main(args: &[std::ffi::OsString]) -> ExitCode {
    match helper(args) {
        Ok(code) => code,
        Err((code, message)) => {
            let line = serde_json::json!({ "code": code, "message": message });
            let _ = writeln!(std::io::stderr(), "{ERROR_PREFIX}{line}");
            ExitCode::from(SETUP_FAILED as u8)
        }
    }
}

type Failure = (&'static str, String);

/// The arguments of both stages: `<spec JSON> -- <program> <args…>`.
fn parse(args: &[std::ffi::OsString]) -> Result<(HelperSpec, &std::ffi::OsString), Failure> {
    let usage = || {
        (
            "sandbox.failed",
            format!("usage: {HELPER_ARG} <spec> -- <program> [args…]"),
        )
    };
    let spec = args.first().and_then(|s| s.to_str()).ok_or_else(usage)?;
    if args.get(1).and_then(|s| s.to_str()) != Some("--") {
        return Err(usage());
    }
    let program = args.get(2).ok_or_else(usage)?;
    let spec: HelperSpec = serde_json::from_str(spec).map_err(|e| {
        (
            "sandbox.failed",
            format!("the sandbox spec is not valid: {e}"),
        )
    })?;
    Ok((spec, program))
}

/// The supervisor stage ([`HELPER_ARG`]): a child subreaper that starts the confining stage
/// ([`CONFINE_ARG`], which becomes the command), waits for it, kills and reaps everything left
/// beneath it, and exits with the command's status.
fn helper(args: &[std::ffi::OsString]) -> Result<ExitCode, Failure> {
    parse(args)?;
    set_child_subreaper(Some(getpid())).map_err(|e| {
        (
            "sandbox.failed",
            format!("cannot become a child subreaper: {e}"),
        )
    })?;
    let me = std::env::current_exe().map_err(|e| {
        (
            "sandbox.failed",
            format!("cannot find the sandbox helper's own binary: {e}"),
        )
    })?;
    let mut command = Command::new(me);
    command
        .arg(CONFINE_ARG)
        .args(args)
        .stdin(Stdio::null())
        .process_group(0);
    let mut child = command.spawn().map_err(|e| {
        (
            "sandbox.failed",
            format!("cannot start the sandbox's confining stage: {e}"),
        )
    })?;
    let leader = child.id();

    // The control pipe: when the daemon closes it (or dies), everything is killed. Only when
    // stdin is a pipe: run by hand from a terminal or with stdin from /dev/null, the helper
    // just waits.
    if stdin_is_pipe() {
        std::thread::spawn(move || {
            let mut sink = [0u8; 64];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            kill_descendants(leader);
        });
    }

    let status = child.wait().map_err(|e| {
        (
            "tool.command_failed",
            format!("cannot wait for the command: {e}"),
        )
    })?;
    // What is left beneath the helper: background children of a command that exited, processes
    // that left the group with setsid, or the whole tree after the control pipe closed.
    reap_all(leader);
    if let Some(signal) = status.signal() {
        if let Some(signal) = Signal::from_named_raw(signal) {
            let _ = kill_process(getpid(), signal);
        }
        // Still alive (a signal the helper ignores, such as SIGPIPE): 128 + signal, as shells do.
        return Ok(ExitCode::from(
            128u8.wrapping_add(u8::try_from(signal).unwrap_or(0)),
        ));
    }
    Ok(ExitCode::from(
        u8::try_from(status.code().unwrap_or(1)).unwrap_or(1),
    ))
}

/// The confining stage ([`CONFINE_ARG`]), started by the supervisor: sets the resource limits,
/// confines itself (Landlock, the network filter, no capabilities) and becomes the command
/// (`exec`), so every limit and rule is in force from the command's first instruction. The
/// address-space limit comes last, right before `exec`: this large binary's own mappings may
/// not fit a small one, the command's will.
fn confine(args: &[std::ffi::OsString]) -> Failure {
    let (spec, program) = match parse(args) {
        Ok(parsed) => parsed,
        Err(failure) => return failure,
    };
    if let Err(e) = set_limits(&spec) {
        return ("sandbox.failed", format!("cannot set resource limits: {e}"));
    }
    if spec.confine {
        if let Err(failure) = restrict(&spec.policy) {
            return failure;
        }
        if !spec.policy.network
            && let Err(e) = network_filter()
        {
            return (
                "sandbox.failed",
                format!("cannot install the network filter: {e}"),
            );
        }
        if let Err(e) = drop_capabilities() {
            return ("sandbox.failed", format!("cannot drop capabilities: {e}"));
        }
    }
    let mut command = Command::new(program);
    command.args(&args[3..]);
    let limit = Rlimit {
        current: Some(spec.memory_bytes),
        maximum: Some(spec.memory_bytes),
    };
    if let Err(e) = setrlimit(Resource::As, limit) {
        return (
            "sandbox.failed",
            format!("cannot set the memory limit: {e}"),
        );
    }
    // Only returns on failure.
    let e = command.exec();
    let code = if e.kind() == std::io::ErrorKind::PermissionDenied {
        "sandbox.denied"
    } else {
        "tool.command_failed"
    };
    (
        code,
        format!("cannot start `{}`: {e}", program.to_string_lossy()),
    )
}

/// Run the confining stage: `args` are the arguments after [`CONFINE_ARG`]. Returns only when
/// it could not become the command (the error line is on stderr, the status
/// [`SETUP_FAILED`]).
pub fn confine_main(args: &[std::ffi::OsString]) -> ExitCode {
    let (code, message) = confine(args);
    let line = serde_json::json!({ "code": code, "message": message });
    let _ = writeln!(std::io::stderr(), "{ERROR_PREFIX}{line}");
    ExitCode::from(SETUP_FAILED as u8)
}

fn stdin_is_pipe() -> bool {
    rustix::fs::fstat(std::io::stdin())
        .is_ok_and(|s| rustix::fs::FileType::from_raw_mode(s.st_mode) == rustix::fs::FileType::Fifo)
}

/// `RLIMIT_CPU` (soft `cpu_seconds`: `SIGXCPU`, hard one more: `SIGKILL`) and
/// `RLIMIT_CORE = 0` on this process, inherited by the command and its children from their
/// first instruction (the helper itself uses almost no CPU).
fn set_limits(spec: &HelperSpec) -> rustix::io::Result<()> {
    let limit = |current: u64, maximum: u64| Rlimit {
        current: Some(current),
        maximum: Some(maximum),
    };
    setrlimit(
        Resource::Cpu,
        limit(spec.cpu_seconds, spec.cpu_seconds.saturating_add(1)),
    )?;
    setrlimit(Resource::Core, limit(0, 0))
}

/// Confine this thread (and what it starts) with Landlock: every filesystem right is handled,
/// so only `policy.read` (read, execute, list) and `policy.write` (all rights) are granted;
/// TCP bind and connect are handled with no port allowed unless `policy.network`; signals and
/// abstract Unix sockets are scoped to the sandbox (ABI 6). Paths that do not exist are skipped.
///
/// # Errors
/// `sandbox.unavailable` when the kernel has no Landlock or one older than [`MIN_ABI`];
/// `sandbox.failed` when a rule cannot be added.
pub(super) fn restrict(policy: &Policy) -> Result<Confinement, Failure> {
    let failed = |e: landlock::RulesetError| ("sandbox.failed", format!("Landlock: {e}"));
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(RULES_ABI))
        .map_err(failed)?;
    if !policy.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(RULES_ABI))
            .map_err(failed)?;
    }
    let ruleset = ruleset.scope(Scope::from_all(RULES_ABI)).map_err(failed)?;
    let existing = |paths: &[PathBuf]| -> Vec<PathBuf> {
        paths.iter().filter(|p| p.exists()).cloned().collect()
    };
    let status = ruleset
        .create()
        .map_err(failed)?
        .add_rules(path_beneath_rules(
            existing(&policy.read),
            AccessFs::from_read(RULES_ABI),
        ))
        .map_err(failed)?
        .add_rules(path_beneath_rules(
            existing(&policy.write),
            AccessFs::from_all(RULES_ABI),
        ))
        .map_err(failed)?
        .restrict_self()
        .map_err(failed)?;
    let confinement = confinement_of(status.landlock, status.ruleset);
    match confinement.missing() {
        None => Ok(confinement),
        Some(missing) => Err(("sandbox.unavailable", missing)),
    }
}

fn confinement_of(landlock: LandlockStatus, ruleset: RulesetStatus) -> Confinement {
    match landlock {
        LandlockStatus::Available { effective_abi, .. } => Confinement {
            landlock_abi: effective_abi as u8,
            enforced: ruleset != RulesetStatus::NotEnforced,
            reason: None,
        },
        LandlockStatus::NotEnabled => Confinement {
            landlock_abi: 0,
            enforced: false,
            reason: Some(
                "the kernel has Landlock but it is not enabled (add `landlock` to the `lsm=` \
                 boot parameter)"
                    .into(),
            ),
        },
        LandlockStatus::NotImplemented => Confinement {
            landlock_abi: 0,
            enforced: false,
            reason: Some("the kernel has no Landlock (it needs Linux 6.2 or later)".into()),
        },
    }
}

/// The probe mode: confine this process with an empty policy and print what was enforced as
/// one JSON line ([`Confinement`]).
pub fn probe_main() -> ExitCode {
    let confinement = match restrict(&Policy::default()) {
        Ok(c) => c,
        Err((_, message)) => Confinement {
            landlock_abi: 0,
            enforced: false,
            reason: Some(message),
        },
    };
    let confinement = if confinement.enforced && network_filter().is_err() {
        Confinement {
            reason: Some("the kernel refused the seccomp network filter".into()),
            enforced: false,
            ..confinement
        }
    } else {
        confinement
    };
    println!(
        "{}",
        serde_json::to_string(&confinement).unwrap_or_default()
    );
    ExitCode::SUCCESS
}

/// The seccomp filter of a policy without network: `socket` for any family but `AF_UNIX`, and
/// `connect`, `bind`, `listen`, `accept`, `accept4` (so not even a Unix socket on the
/// filesystem, such as a Docker or SSH-agent socket, can be reached), and the `io_uring` calls
/// (which would do the same without those system calls) fail with `EPERM`. Unix socket *pairs*
/// (`socketpair`) keep working: tool runners talk to their workers through them.
fn network_filter() -> Result<(), String> {
    let mut rules: std::collections::BTreeMap<i64, Vec<SeccompRule>> = Default::default();
    for call in [
        libc::SYS_connect,
        libc::SYS_bind,
        libc::SYS_listen,
        libc::SYS_accept,
        libc::SYS_accept4,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        rules.insert(call, Vec::new());
    }
    let not_unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        libc::AF_UNIX as u64,
    )
    .map_err(|e| e.to_string())?;
    rules.insert(
        libc::SYS_socket,
        vec![SeccompRule::new(vec![not_unix]).map_err(|e| e.to_string())?],
    );
    let arch = if cfg!(target_arch = "x86_64") {
        TargetArch::x86_64
    } else if cfg!(target_arch = "aarch64") {
        TargetArch::aarch64
    } else {
        return Err("seccomp filters are built for x86-64 and aarch64 only".into());
    };
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    seccompiler::apply_filter(&program).map_err(|e| e.to_string())
}

/// Drop every capability, from the bounding set too, so a gateway running as root (CI, a
/// container) does not hand its command root's powers: `CAP_SYS_PTRACE` would let it read other
/// processes' memory and environment through `/proc` despite Landlock, `CAP_SYS_MODULE` load
/// kernel modules. Without capabilities, root is an ordinary user that owns many files: the
/// Landlock rules still decide which of them it may open. A no-op for an ordinary user.
fn drop_capabilities() -> rustix::io::Result<()> {
    use rustix::thread::{
        CapabilitySet, CapabilitySets, capabilities, capability_is_in_bounding_set,
        clear_ambient_capability_set, remove_capability_from_bounding_set, set_capabilities,
    };
    let current = capabilities(None)?;
    if current.permitted.is_empty()
        && current.effective.is_empty()
        && current.inheritable.is_empty()
    {
        return Ok(());
    }
    for capability in CapabilitySet::all().iter() {
        // A capability this kernel does not know is not in its bounding set (EINVAL).
        if capability_is_in_bounding_set(capability).unwrap_or(false) {
            remove_capability_from_bounding_set(capability)?;
        }
    }
    // Ambient capabilities may be unsupported (EINVAL on old kernels): nothing to clear then.
    let _ = clear_ambient_capability_set();
    set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
}

/// The pids of the direct children of `pid` (all its threads'), from
/// `/proc/<pid>/task/<tid>/children`.
fn children_of(pid: u32) -> Vec<u32> {
    let mut children = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return children;
    };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            children.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    children
}

/// Every process beneath this one, parents before children.
fn descendants() -> Vec<u32> {
    let mut found = Vec::new();
    let mut queue = vec![getpid().as_raw_nonzero().get().unsigned_abs()];
    while let Some(pid) = queue.pop() {
        for child in children_of(pid) {
            if !found.contains(&child) {
                found.push(child);
                queue.push(child);
            }
        }
    }
    found
}

fn sigkill(pid: u32) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = kill_process(pid, Signal::KILL);
    }
}

/// `SIGKILL` to the command's process group and to every process beneath the helper, a few
/// rounds (a process may fork while it is being killed). Does not reap: the main thread is
/// waiting for the command.
fn kill_descendants(leader: u32) {
    if let Some(pid) = i32::try_from(leader).ok().and_then(Pid::from_raw) {
        let _ = kill_process_group(pid, Signal::KILL);
    }
    for _ in 0..3 {
        for pid in descendants() {
            sigkill(pid);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// After the command was reaped: kill and reap everything beneath the helper until nothing is
/// left (or [`CLEANUP_LIMIT`] passed).
fn reap_all(leader: u32) {
    if let Some(pid) = i32::try_from(leader).ok().and_then(Pid::from_raw) {
        let _ = kill_process_group(pid, Signal::KILL);
    }
    let started = Instant::now();
    loop {
        for pid in descendants() {
            sigkill(pid);
        }
        loop {
            match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some(_)) => {}
                Ok(None) => break,
                // No child at all: done.
                Err(rustix::io::Errno::CHILD) => return,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return,
            }
        }
        if started.elapsed() > CLEANUP_LIMIT {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
