//! Long-running commands behind a handle (issue 14 §3, the engine side of the MCP tools
//! `process_run`, `process_output` and `process_kill`).
//!
//! MCP clients cut a call at 60 seconds, but tests and builds take longer. So a command is
//! started on its own thread ([`ProcessTable::start`]) and answered with a handle,
//! `proc_<32 hex digits>` (128 bits from the OS's random source, like the `ws_` workspace
//! handles); the caller then polls [`ProcessTable::output`] (or [`ProcessTable::wait`]) with
//! byte cursors, and may [`ProcessTable::kill`] it.
//!
//! - **Every command goes through [`Sandbox::run`]** — the same confinement, environment,
//!   timeout, resource limits and killing of the whole process tree as `run_check`; the caller
//!   prepares the [`ProcessSpec`] (policy from [`crate::sandbox::Places::policy`], scrubbed
//!   environment, scratch directory) the way `run_check` does.
//! - **Limits** ([`ProcessLimits`], defaults from issue 14 §3): at most 8 running at once
//!   (`process.too_many`, retryable); at most 64 KiB per stream per answer (cursors continue);
//!   each stream keeps its first `max_output` bytes (`truncated` beyond); a finished process is
//!   kept 15 minutes or until 32 later ones have finished, whichever comes first, then forgotten
//!   (`process.not_found`).
//! - **Waiting never spins**: a waiter sleeps on a condition variable the process's thread
//!   signals when the command ends.
//! - **Invariant:** this module does no serialization beyond the [`ProcessSnapshot`] value and
//!   knows nothing of MCP; the tool wiring maps it to the wire and checks the caller's
//!   workspace against [`ProcessSnapshot::workspace`].

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{GatewayError, codes};
use crate::sandbox::{Job, LiveOutput, Outcome, Policy, Sandbox, Stream};
use crate::security::redact::Redactor;

/// Prefix of a process handle.
pub const HANDLE_PREFIX: &str = "proc_";
/// Length of a handle's random part in bytes (128 bits).
const HANDLE_BYTES: usize = 16;
/// How long [`ProcessTable::kill`] waits for the process to end after asking it to (the
/// sandbox notices a cancel within 20 ms and gives the helper 2 s to kill the tree).
pub const KILL_WAIT: Duration = Duration::from_secs(5);

/// The table's limits (issue 14 §3); [`ProcessLimits::default`] holds the values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessLimits {
    /// Processes running at once (8); one more is refused with `process.too_many`.
    pub max_running: usize,
    /// Finished processes remembered (32); the oldest-finished is forgotten beyond.
    pub keep_finished: usize,
    /// How long a finished process is remembered (15 minutes).
    pub keep_for: Duration,
    /// Bytes of each stream in one answer (64 KiB); the cursors continue.
    pub answer_bytes: usize,
}

impl Default for ProcessLimits {
    fn default() -> Self {
        ProcessLimits {
            max_running: 8,
            keep_finished: 32,
            keep_for: Duration::from_secs(15 * 60),
            answer_bytes: 64 * 1024,
        }
    }
}

/// Called on the process's thread with the command's result when it ends, before waiters are
/// woken (for the audit log).
pub type OnEnd = Box<dyn FnOnce(&Result<Outcome, GatewayError>) -> Vec<String> + Send>;

/// Everything a process needs, owned (a [`Job`] borrows the same values).
pub struct ProcessSpec {
    /// The sandbox it runs in (its helper binary and mode).
    pub sandbox: Sandbox,
    /// What it may touch (built with [`crate::sandbox::Places::policy`]).
    pub policy: Policy,
    /// The program, resolved to an absolute path.
    pub program: PathBuf,
    /// The arguments after the program.
    pub args: Vec<String>,
    /// The working directory (canonical).
    pub cwd: PathBuf,
    /// The whole (scrubbed) environment.
    pub env: Vec<(String, String)>,
    /// Wall-clock limit; the command is killed at it (`timedOut`).
    pub timeout: Duration,
    /// `RLIMIT_CPU` per process, seconds.
    pub cpu_seconds: u64,
    /// `RLIMIT_AS` per process, bytes.
    pub memory_bytes: u64,
    /// Bytes kept of stdout and of stderr, each (the rest is counted and dropped).
    pub max_output: usize,
    /// The MCP workspace (`ws_…`) the process was started in, if any; shown in every
    /// snapshot so a later call can check it names the same workspace.
    pub workspace: Option<String>,
    /// What every answer's stdout and stderr pass through (tokens, secret environment values,
    /// the home directory and repository root, as `run_check` redacts); `None` answers the
    /// output as written. With a redactor, an answer while the command runs ends at a line end
    /// (`\n` or `\r`) — a partial line waits for its end, or for the command's — so a secret
    /// is never split across two answers (one longer than an answer is cut anyway).
    pub redactor: Option<Redactor>,
    /// Values dropped when the command has ended (not before): its
    /// [`Scratch`](crate::sandbox::Scratch) directory, a scratch checkout's lock.
    pub hold: Vec<Box<dyn Any + Send>>,
    /// Called with the result when the command ends (after everything it started is gone);
    /// each line it answers is appended to the command's stderr as
    /// `review-agent-gateway: <line>` (what the gateway did about it, e.g. git files restored).
    pub on_end: Option<OnEnd>,
}

impl fmt::Debug for ProcessSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessSpec")
            .field("sandbox", &self.sandbox)
            .field("program", &self.program)
            .field("args", &self.args)
            .field("cwd", &self.cwd)
            .field("timeout", &self.timeout)
            .field("max_output", &self.max_output)
            .field("workspace", &self.workspace)
            .field("redactor", &self.redactor.is_some())
            .field("hold", &self.hold.len())
            .field("on_end", &self.on_end.is_some())
            .finish_non_exhaustive()
    }
}

/// The handle of a started process, `proc_<32 hex digits>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct ProcessId(String);

impl ProcessId {
    /// The handle as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProcessId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A process's state and its output from the cursors asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessSnapshot {
    /// The handle.
    pub id: String,
    /// The workspace the process was started in ([`ProcessSpec::workspace`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// Whether the command is still running (then the fields below describing its end are
    /// `None`/`false`).
    pub running: bool,
    /// Its exit code; `None` while running or when a signal ended it.
    pub exit_code: Option<i32>,
    /// The signal that ended it (9 for `SIGKILL`, 24 for `SIGXCPU`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Killed at its wall-clock limit.
    pub timed_out: bool,
    /// Killed by [`ProcessTable::kill`].
    pub cancelled: bool,
    /// From start to end, or to now while running.
    pub duration_ms: u64,
    /// Stdout from the cursor asked for (lossy UTF-8; at most [`ProcessLimits::answer_bytes`],
    /// never ending inside a character unless the stream ended there).
    pub stdout: String,
    /// Stderr, likewise.
    pub stderr: String,
    /// Where the next read of stdout starts (bytes).
    pub stdout_cursor: u64,
    /// Where the next read of stderr starts (bytes).
    pub stderr_cursor: u64,
    /// Everything written to stdout so far, in bytes (kept or not).
    pub stdout_bytes: u64,
    /// Everything written to stderr so far, in bytes.
    pub stderr_bytes: u64,
    /// Whether kept output remains after the cursors (this answer was cut at
    /// [`ProcessLimits::answer_bytes`]): ask again from the cursors.
    pub more_output: bool,
    /// Whether a stream went past `max_output` (bytes after the kept ones were dropped), or
    /// was not read to its end.
    pub truncated: bool,
}

// === impl ProcessTable ===

/// The processes started through the engine: cheap to clone (shared state inside), safe to
/// use from any thread.
#[derive(Debug, Clone, Default)]
pub struct ProcessTable {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    limits: ProcessLimits,
    state: Mutex<HashMap<String, Entry>>,
    /// Signalled whenever a process ends.
    ended: Condvar,
}

#[derive(Debug)]
struct Entry {
    workspace: Option<String>,
    redactor: Option<Redactor>,
    cancel: Arc<AtomicBool>,
    live: Arc<LiveOutput>,
    started: Instant,
    // Invariant: `None` while the process's thread runs; set once, by that thread (or its
    // drop guard), with the time it was set.
    end: Option<(Instant, Result<Outcome, GatewayError>)>,
}

impl ProcessTable {
    /// An empty table with the limits of issue 14 §3.
    pub fn new() -> ProcessTable {
        ProcessTable::default()
    }

    /// An empty table with other limits (tests, a config).
    pub fn with_limits(limits: ProcessLimits) -> ProcessTable {
        ProcessTable {
            inner: Arc::new(Inner {
                limits,
                ..Inner::default()
            }),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> ProcessLimits {
        self.inner.limits
    }

    /// Start `spec`'s command on a thread of its own and return its handle at once.
    ///
    /// # Errors
    /// `process.too_many` (retryable) when [`ProcessLimits::max_running`] processes run
    /// already; `internal.error` when the OS gives no random bytes or no thread. Failures of
    /// the sandbox itself (`sandbox.unavailable`, `sandbox.denied`, `tool.command_failed`)
    /// happen on the thread and are answered by the next [`ProcessTable::output`].
    pub fn start(&self, spec: ProcessSpec) -> Result<ProcessId, GatewayError> {
        let id = new_handle()?;
        let cancel = Arc::new(AtomicBool::new(false));
        let live = Arc::new(LiveOutput::new(spec.max_output));
        {
            let mut state = self.lock();
            self.prune(&mut state);
            let running = state.values().filter(|e| e.end.is_none()).count();
            if running >= self.inner.limits.max_running {
                return Err(GatewayError::new(
                    codes::PROCESS_TOO_MANY,
                    format!("{running} processes are running already, the most allowed at once"),
                    "Wait for one to end (poll it with process_output), or stop one with \
                     process_kill, then start this one again.",
                )
                .retryable());
            }
            state.insert(
                id.clone(),
                Entry {
                    workspace: spec.workspace.clone(),
                    redactor: spec.redactor.clone(),
                    cancel: Arc::clone(&cancel),
                    live: Arc::clone(&live),
                    started: Instant::now(),
                    end: None,
                },
            );
        }
        let guard = EndGuard {
            table: self.clone(),
            id: id.clone(),
        };
        let spawned = std::thread::Builder::new()
            .name(format!("process {}", &id[HANDLE_PREFIX.len()..][..8]))
            .spawn(move || supervise(spec, &cancel, live, guard));
        if let Err(e) = spawned {
            // The guard was dropped with the closure and ended the entry; forget it.
            self.lock().remove(&id);
            return Err(GatewayError::new(
                codes::INTERNAL,
                format!("cannot start a thread for the process: {e}"),
                "The system is out of threads or memory; try again when fewer programs run.",
            ));
        }
        Ok(ProcessId(id))
    }

    /// The process `id` with its output from the start, once it has ended or `max_wait` has
    /// passed, whichever is first (see [`ProcessTable::output`]).
    ///
    /// # Errors
    /// As [`ProcessTable::output`].
    pub fn wait(&self, id: &str, max_wait: Duration) -> Result<ProcessSnapshot, GatewayError> {
        self.output(id, 0, 0, max_wait)
    }

    /// The process `id` with its output from the byte cursors `stdout_from` and `stderr_from`
    /// (the previous answer's `stdoutCursor` and `stderrCursor`; 0 for the start), once it has
    /// ended or `max_wait` has passed, whichever is first. At most
    /// [`ProcessLimits::answer_bytes`] of each stream; `moreOutput` says when more is there.
    ///
    /// # Errors
    /// `process.not_found` for a handle this table does not know (or no longer remembers);
    /// the command's own error when the sandbox could not run it (`sandbox.unavailable`,
    /// `sandbox.denied`, `sandbox.failed`, `tool.command_failed`), on every call for it.
    pub fn output(
        &self,
        id: &str,
        stdout_from: u64,
        stderr_from: u64,
        max_wait: Duration,
    ) -> Result<ProcessSnapshot, GatewayError> {
        let deadline = Instant::now() + max_wait;
        let mut state = self.lock();
        self.prune(&mut state);
        loop {
            let entry = state.get(id).ok_or_else(|| not_found(id))?;
            let now = Instant::now();
            if entry.end.is_some() || now >= deadline {
                return self.snapshot(id, entry, stdout_from, stderr_from);
            }
            state = self
                .inner
                .ended
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Stop the process `id` and everything it started (the sandbox kills the whole tree),
    /// then answer as [`ProcessTable::wait`] does after up to [`KILL_WAIT`]. A process that
    /// has ended already is answered as it is.
    ///
    /// # Errors
    /// As [`ProcessTable::output`].
    pub fn kill(&self, id: &str) -> Result<ProcessSnapshot, GatewayError> {
        {
            let state = self.lock();
            let entry = state.get(id).ok_or_else(|| not_found(id))?;
            entry.cancel.store(true, Ordering::SeqCst);
        }
        self.wait(id, KILL_WAIT)
    }

    /// Ask every running process to stop (the gateway is shutting down), without waiting;
    /// returns how many were asked. Each ends as [`ProcessTable::kill`] would end it.
    pub fn kill_all(&self) -> usize {
        let state = self.lock();
        let mut asked = 0;
        for entry in state.values().filter(|e| e.end.is_none()) {
            entry.cancel.store(true, Ordering::SeqCst);
            asked += 1;
        }
        asked
    }

    /// The workspace the process `id` was started in ([`ProcessSpec::workspace`]), without
    /// reading its output or its end: what the tool wiring checks a call's workspace against
    /// before answering anything about the process (or killing it).
    ///
    /// # Errors
    /// `process.not_found` for a handle this table does not know (or no longer remembers).
    pub fn workspace(&self, id: &str) -> Result<Option<String>, GatewayError> {
        let mut state = self.lock();
        self.prune(&mut state);
        state
            .get(id)
            .map(|entry| entry.workspace.clone())
            .ok_or_else(|| not_found(id))
    }

    /// How many processes are running now.
    pub fn running(&self) -> usize {
        self.lock().values().filter(|e| e.end.is_none()).count()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forget finished processes older than `keep_for`, then all but the `keep_finished` that
    /// ended last.
    fn prune(&self, state: &mut HashMap<String, Entry>) {
        let limits = self.inner.limits;
        state.retain(|_, e| {
            e.end
                .as_ref()
                .is_none_or(|(at, _)| at.elapsed() < limits.keep_for)
        });
        let mut finished: Vec<(Instant, String)> = state
            .iter()
            .filter_map(|(id, e)| e.end.as_ref().map(|(at, _)| (*at, id.clone())))
            .collect();
        if finished.len() > limits.keep_finished {
            finished.sort();
            let excess = finished.len() - limits.keep_finished;
            for (_, id) in finished.into_iter().take(excess) {
                state.remove(&id);
            }
        }
    }

    fn snapshot(
        &self,
        id: &str,
        entry: &Entry,
        stdout_from: u64,
        stderr_from: u64,
    ) -> Result<ProcessSnapshot, GatewayError> {
        let running = entry.end.is_none();
        let outcome = match &entry.end {
            Some((_, Err(error))) => return Err(error.clone()),
            Some((_, Ok(outcome))) => Some(outcome),
            None => None,
        };
        let max = self.inner.limits.answer_bytes;
        let read = |stream, from| {
            let chunk = entry.live.read_at_most(stream, from, max);
            let kept_after = entry.live.read_at_most(stream, chunk.next, 1);
            let more = !kept_after.bytes.is_empty();
            let len = answer_len(
                &chunk.bytes,
                !running && !more,
                entry.redactor.is_some(),
                max,
            );
            let next = chunk.next - (chunk.bytes.len() - len) as u64;
            let text = String::from_utf8_lossy(&chunk.bytes[..len]);
            let text = match &entry.redactor {
                Some(redactor) => redactor.redact(&text).into_owned(),
                None => text.into_owned(),
            };
            (text, next, chunk.total, more, chunk.truncated)
        };
        let (stdout, stdout_cursor, stdout_bytes, stdout_more, stdout_cut) =
            read(Stream::Stdout, stdout_from);
        let (stderr, stderr_cursor, stderr_bytes, stderr_more, stderr_cut) =
            read(Stream::Stderr, stderr_from);
        let duration = outcome.map_or_else(|| entry.started.elapsed(), |o| o.duration);
        Ok(ProcessSnapshot {
            id: id.to_owned(),
            workspace: entry.workspace.clone(),
            running,
            exit_code: outcome.and_then(|o| o.exit_code),
            signal: outcome.and_then(|o| o.signal),
            timed_out: outcome.is_some_and(|o| o.timed_out),
            cancelled: outcome.is_some_and(|o| o.cancelled),
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            stdout,
            stderr,
            stdout_cursor,
            stderr_cursor,
            stdout_bytes,
            stderr_bytes,
            more_output: stdout_more || stderr_more,
            truncated: stdout_cut || stderr_cut || outcome.is_some_and(|o| o.truncated),
        })
    }
}

/// The body of a process's thread: run the command, drop what it held, report, wake waiters.
fn supervise(mut spec: ProcessSpec, cancel: &AtomicBool, live: Arc<LiveOutput>, guard: EndGuard) {
    let job = Job {
        program: &spec.program,
        args: &spec.args,
        cwd: &spec.cwd,
        env: &spec.env,
        timeout: spec.timeout,
        cpu_seconds: spec.cpu_seconds,
        memory_bytes: spec.memory_bytes,
        max_output: spec.max_output,
        cancel: Some(cancel),
        live: Some(Arc::clone(&live)),
    };
    let mut result = spec.sandbox.run(&job, &spec.policy);
    spec.hold.clear();
    if let Some(on_end) = spec.on_end.take() {
        for line in on_end(&result) {
            live.append(
                Stream::Stderr,
                format!("review-agent-gateway: {line}\n").as_bytes(),
            );
        }
    }
    // Answers read the output from the live buffer: the outcome's copy would double what a
    // finished process keeps.
    if let Ok(outcome) = &mut result {
        outcome.stdout = Vec::new();
        outcome.stderr = Vec::new();
    }
    guard.finish(result);
}

/// Ends a process's entry when its thread stops: with the command's result, or — should the
/// thread stop without one — with an internal error, so no waiter waits for a process that is
/// gone.
struct EndGuard {
    table: ProcessTable,
    id: String,
}

impl EndGuard {
    fn finish(self, result: Result<Outcome, GatewayError>) {
        self.set(result);
    }

    fn set(&self, result: Result<Outcome, GatewayError>) {
        let mut state = self.table.lock();
        if let Some(entry) = state.get_mut(&self.id)
            && entry.end.is_none()
        {
            entry.end = Some((Instant::now(), result));
        }
        self.table.prune(&mut state);
        drop(state);
        self.table.inner.ended.notify_all();
    }
}

impl Drop for EndGuard {
    fn drop(&mut self) {
        self.set(Err(GatewayError::new(
            codes::INTERNAL,
            "the thread supervising the process stopped before the process ended",
            "Report this bug with the gateway log; start the command again.",
        )));
    }
}

/// How much of `bytes` (read from a cursor, at most `max`) one answer gives: all of the last
/// piece (`last`: the command has ended and nothing is kept after it); otherwise never a UTF-8
/// character cut in two, and — when `by_lines` (redacting) — up to the last line end, a
/// partial line held back unless it fills the whole answer.
fn answer_len(bytes: &[u8], last: bool, by_lines: bool, max: usize) -> usize {
    if last {
        return bytes.len();
    }
    let len = complete_utf8(bytes);
    if !by_lines {
        return len;
    }
    match bytes[..len]
        .iter()
        .rposition(|b| matches!(b, b'\n' | b'\r'))
    {
        Some(end) => end + 1,
        None if bytes.len() < max => 0,
        None => len,
    }
}

/// The length of `bytes` without a UTF-8 character cut at its end (1 to 3 bytes of a
/// sequence the next bytes would complete); everything when it is valid or invalid
/// otherwise.
fn complete_utf8(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        _ => bytes.len(),
    }
}

/// `process.not_found` for the handle `id` (shown cut to 64 characters).
pub(crate) fn not_found(id: &str) -> GatewayError {
    let shown: String = id.chars().take(64).collect();
    GatewayError::new(
        codes::PROCESS_NOT_FOUND,
        format!("no process has the handle `{shown}`"),
        "Use the `proc_` handle process_run answered; a finished process is forgotten 15 \
         minutes after its end or once 32 later ones have finished — run the command again.",
    )
}

/// A new random handle.
fn new_handle() -> Result<String, GatewayError> {
    let hex = crate::security::random_hex(HANDLE_BYTES, "a process handle")?;
    Ok(format!("{HANDLE_PREFIX}{hex}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_character_waits_for_its_last_bytes() {
        let e_acute = "é".as_bytes();
        assert_eq!(complete_utf8(b"abc"), 3);
        assert_eq!(complete_utf8(&[b'a', e_acute[0]]), 1);
        assert_eq!(complete_utf8(&[b'a', e_acute[0], e_acute[1]]), 3);
        // Invalid, not incomplete: kept (shown as U+FFFD), or the cursor would never move.
        assert_eq!(complete_utf8(&[b'a', 0xff, b'b']), 3);
        assert_eq!(complete_utf8(&[]), 0);
    }

    #[test]
    fn a_redacted_answer_ends_at_a_line_end() {
        assert_eq!(answer_len(b"a\nbc", false, true, 10), 2);
        assert_eq!(answer_len(b"a\rbc", false, true, 10), 2);
        assert_eq!(
            answer_len(b"abc", false, true, 10),
            0,
            "a partial line waits"
        );
        assert_eq!(
            answer_len(b"abc", false, true, 3),
            3,
            "unless it fills the answer"
        );
        assert_eq!(
            answer_len(b"abc", true, true, 10),
            3,
            "or nothing more will come"
        );
        assert_eq!(answer_len(b"abc", false, false, 10), 3);
    }

    #[test]
    fn handles_are_random_and_well_formed() {
        let a = new_handle().expect("random");
        let b = new_handle().expect("random");
        assert_ne!(a, b);
        assert!(a.starts_with(HANDLE_PREFIX) && a.len() == HANDLE_PREFIX.len() + 32);
        assert!(
            a[HANDLE_PREFIX.len()..]
                .bytes()
                .all(|c| c.is_ascii_hexdigit())
        );
    }
}
