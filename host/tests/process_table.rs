//! Issue 14 §3, the engine side of `process_run` / `process_output` / `process_kill`: real
//! commands in the real sandbox (the gateway's binary as the helper, Landlock), in a real git
//! repository, with the policy built by `Places::policy` as `run_check` builds it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use review_agent_gateway::error::codes;
use review_agent_gateway::process::{ProcessLimits, ProcessSnapshot, ProcessSpec, ProcessTable};
use review_agent_gateway::sandbox::{Places, Sandbox, SandboxMode, Scratch};
use review_agent_gateway::security::redact::Redactor;

const WORKSPACE: &str = "ws_0123456789abcdef0123456789abcdef";

/// A repository with one commit, and a state dir for the calls' scratch dirs.
struct Fixture {
    repo: tempfile::TempDir,
    state: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let repo = tempfile::tempdir().expect("repo");
        let git = |args: &[&str]| {
            let status = Command::new("git")
                .args(args)
                .current_dir(repo.path())
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.com")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.com")
                .status()
                .expect("git runs");
            assert!(status.success(), "git {args:?}");
        };
        git(&["init", "-q", "-b", "main"]);
        std::fs::write(repo.path().join("README"), "hello\n").expect("write");
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "first"]);
        Fixture {
            repo,
            state: tempfile::tempdir().expect("state"),
        }
    }

    /// `sh -c script` in the repository, as `run_check` would prepare it: a scratch `HOME` and
    /// `TMPDIR` (held until the process ends), a scrubbed environment, the policy of
    /// `Places::policy` with the state dir private.
    fn spec(&self, script: &str, timeout: Duration, max_output: usize) -> ProcessSpec {
        self.spec_with(
            Sandbox::new(helper(), SandboxMode::Landlock),
            script,
            timeout,
            max_output,
        )
    }

    fn spec_with(
        &self,
        sandbox: Sandbox,
        script: &str,
        timeout: Duration,
        max_output: usize,
    ) -> ProcessSpec {
        let root = std::fs::canonicalize(self.repo.path()).expect("canonical");
        let scratch = Scratch::new(&self.state.path().join("sandbox/calls")).expect("scratch");
        let program = PathBuf::from("/bin/sh");
        let env = vec![
            ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ("HOME".to_owned(), scratch.home().display().to_string()),
            ("TMPDIR".to_owned(), scratch.tmp().display().to_string()),
        ];
        let private = vec![self.state.path().to_owned()];
        let policy = Places {
            root: &root,
            root_writable: false,
            writable: &[],
            scratch: scratch.path(),
            program: &program,
            env: &env,
            home: None,
            extra_read: &[],
            private: &private,
            network: false,
        }
        .policy()
        .expect("policy");
        ProcessSpec {
            sandbox,
            policy,
            program,
            args: vec!["-c".to_owned(), script.to_owned()],
            cwd: root,
            env,
            timeout,
            cpu_seconds: 60,
            memory_bytes: 1 << 32,
            max_output,
            workspace: Some(WORKSPACE.to_owned()),
            redactor: None,
            hold: vec![Box::new(scratch)],
            on_end: None,
        }
    }
}

fn helper() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_review-agent-gateway"))
}

const SECOND: Duration = Duration::from_secs(1);

/// The first answer with some stdout, polled from the start while the command runs (it must
/// still run then).
fn first_output(table: &ProcessTable, id: &str) -> ProcessSnapshot {
    let until = Instant::now() + 10 * SECOND;
    loop {
        let snapshot = table
            .output(id, 0, 0, Duration::from_millis(100))
            .expect("known");
        assert!(snapshot.running, "{snapshot:?}");
        if !snapshot.stdout.is_empty() {
            return snapshot;
        }
        assert!(Instant::now() < until, "no output: {snapshot:?}");
    }
}

fn finished(snapshot: &ProcessSnapshot) {
    assert!(!snapshot.running, "{snapshot:?}");
}

#[test]
fn a_quick_command_is_answered_whole_within_the_wait() {
    let fx = Fixture::new();
    let table = ProcessTable::new();
    let id = table
        .start(fx.spec("cat README; echo oops >&2; exit 3", 10 * SECOND, 1 << 20))
        .expect("starts");
    assert!(id.as_str().starts_with("proc_"), "{id}");
    let started = Instant::now();
    let snapshot = table.wait(id.as_str(), 60 * SECOND).expect("known");
    assert!(started.elapsed() < 30 * SECOND, "answered when it ended");
    finished(&snapshot);
    assert_eq!(snapshot.exit_code, Some(3));
    assert_eq!(snapshot.stdout, "hello\n");
    assert_eq!(snapshot.stderr, "oops\n");
    assert_eq!((snapshot.stdout_cursor, snapshot.stderr_cursor), (6, 5));
    assert!(!snapshot.truncated && !snapshot.more_output && !snapshot.timed_out);
    assert_eq!(snapshot.workspace.as_deref(), Some(WORKSPACE));
    let wire = serde_json::to_value(&snapshot).expect("serializes");
    assert_eq!(wire["exitCode"], 3);
    assert_eq!(wire["stdoutCursor"], 6);
    assert_eq!(wire["workspace"], WORKSPACE);
    // Polled again from its cursors: nothing new, still known.
    let again = table.output(id.as_str(), 6, 5, SECOND).expect("kept");
    assert_eq!((again.stdout.as_str(), again.stderr.as_str()), ("", ""));
    assert_eq!(again.exit_code, Some(3));
}

#[test]
fn a_long_command_answers_running_then_the_rest_from_the_cursor() {
    let fx = Fixture::new();
    let table = ProcessTable::new();
    let id = table
        .start(fx.spec("echo a; sleep 3; echo b", 30 * SECOND, 1 << 20))
        .expect("starts");
    let asked = Instant::now();
    let first = table.wait(id.as_str(), SECOND / 2).expect("known");
    let waited = asked.elapsed();
    assert!(
        waited >= SECOND / 2 && waited < 2 * SECOND,
        "waited {waited:?}"
    );
    assert!(first.running, "{first:?}");
    assert_eq!(first.exit_code, None);
    // Under load the sandbox may take a while to start `sh`.
    let first = first_output(&table, id.as_str());
    assert_eq!(first.stdout, "a\n");
    assert_eq!(first.stdout_cursor, 2);
    let rest = table
        .output(
            id.as_str(),
            first.stdout_cursor,
            first.stderr_cursor,
            60 * SECOND,
        )
        .expect("known");
    finished(&rest);
    assert!(asked.elapsed() < 30 * SECOND, "answered when it ended");
    assert_eq!(rest.stdout, "b\n");
    assert_eq!(rest.stdout_cursor, 4);
    assert_eq!(rest.exit_code, Some(0));
    assert!(rest.duration_ms >= 3000, "{rest:?}");
}

#[test]
fn kill_ends_the_command_and_its_children() {
    let fx = Fixture::new();
    let table = ProcessTable::new();
    let id = table
        .start(fx.spec("sleep 60 & echo $!; wait", 120 * SECOND, 1 << 20))
        .expect("starts");
    // The child's pid, once printed.
    let until = Instant::now() + 10 * SECOND;
    let pid = loop {
        let snapshot = table.output(id.as_str(), 0, 0, Duration::from_millis(100));
        let snapshot = snapshot.expect("known");
        assert!(snapshot.running, "{snapshot:?}");
        if let Some(line) = snapshot.stdout.strip_suffix('\n') {
            break line.parse::<u32>().expect("a pid");
        }
        assert!(Instant::now() < until, "no pid printed");
    };
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    assert!(is_sleep(&proc_dir), "the child runs");
    assert_eq!(table.running(), 1);
    let asked = Instant::now();
    let killed = table.kill(id.as_str()).expect("known");
    finished(&killed);
    assert!(asked.elapsed() < 5 * SECOND);
    assert!(killed.cancelled && !killed.timed_out, "{killed:?}");
    assert_eq!(killed.exit_code, None);
    assert_eq!(table.running(), 0);
    let until = Instant::now() + 5 * SECOND;
    while is_sleep(&proc_dir) {
        assert!(Instant::now() < until, "the child {pid} outlived the kill");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Killing it again answers the same end.
    let again = table.kill(id.as_str()).expect("still known");
    assert!(again.cancelled && !again.running);
}

/// Whether `/proc/<pid>` is a live (not zombie) `sleep`.
fn is_sleep(proc_dir: &Path) -> bool {
    let status = std::fs::read_to_string(proc_dir.join("status")).unwrap_or_default();
    status.lines().any(|l| l == "Name:\tsleep") && !status.contains("State:\tZ")
}

#[test]
fn the_timeout_is_reported() {
    let fx = Fixture::new();
    let table = ProcessTable::new();
    let id = table
        .start(fx.spec("echo started; sleep 60", SECOND, 1 << 20))
        .expect("starts");
    let snapshot = table.wait(id.as_str(), 10 * SECOND).expect("known");
    finished(&snapshot);
    assert!(snapshot.timed_out && !snapshot.cancelled, "{snapshot:?}");
    assert_eq!(snapshot.stdout, "started\n");
    assert!(
        (1000..10_000).contains(&snapshot.duration_ms),
        "{snapshot:?}"
    );
}

#[test]
fn output_past_the_cap_is_truncated_and_answers_come_in_pieces() {
    let fx = Fixture::new();
    let table = ProcessTable::new();
    let cap = 100_000;
    let id = table
        .start(fx.spec("head -c 200000 /dev/zero | tr '\\0' x", 10 * SECOND, cap))
        .expect("starts");
    let mut snapshot = table.wait(id.as_str(), 10 * SECOND).expect("known");
    finished(&snapshot);
    assert_eq!(snapshot.exit_code, Some(0), "{}", snapshot.stderr);
    assert!(snapshot.truncated);
    assert_eq!(snapshot.stdout_bytes, 200_000);
    let answer = table.limits().answer_bytes;
    let mut all = String::new();
    let mut answers = 0;
    loop {
        answers += 1;
        assert!(snapshot.stdout.len() <= answer);
        all.push_str(&snapshot.stdout);
        assert_eq!(snapshot.stdout_cursor, all.len() as u64);
        if !snapshot.more_output {
            break;
        }
        snapshot = table
            .output(id.as_str(), snapshot.stdout_cursor, 0, SECOND)
            .expect("known");
    }
    assert_eq!(answers, cap.div_ceil(answer));
    assert_eq!(all.len(), cap);
    assert!(all.bytes().all(|b| b == b'x'));
}

#[test]
fn unknown_handles_are_not_found() {
    let table = ProcessTable::new();
    for id in [
        "proc_00000000000000000000000000000000",
        "ws_0123",
        "",
        "../../etc/passwd",
    ] {
        let error = table.wait(id, SECOND).expect_err(id);
        assert_eq!(error.code, codes::PROCESS_NOT_FOUND, "{error:?}");
        assert!(error.remediation.contains("process_run"), "{error:?}");
        let error = table.kill(id).expect_err(id);
        assert_eq!(error.code, codes::PROCESS_NOT_FOUND);
    }
}

#[test]
fn at_most_eight_run_at_once() {
    let fx = Fixture::new();
    let table = ProcessTable::new();
    let ids: Vec<_> = (0..8)
        .map(|_| {
            table
                .start(fx.spec("sleep 60", 120 * SECOND, 1024))
                .expect("starts")
        })
        .collect();
    let error = table
        .start(fx.spec("sleep 60", 120 * SECOND, 1024))
        .expect_err("a ninth");
    assert_eq!(error.code, codes::PROCESS_TOO_MANY);
    assert!(error.retryable);
    assert!(error.remediation.contains("process_kill"), "{error:?}");
    // Killing one makes room.
    assert!(table.kill(ids[0].as_str()).expect("known").cancelled);
    let ninth = table
        .start(fx.spec("sleep 60", 120 * SECOND, 1024))
        .expect("room now");
    // Shutting down stops the other eight.
    assert_eq!(table.kill_all(), 8);
    for id in ids.iter().skip(1).chain([&ninth]) {
        let snapshot = table.wait(id.as_str(), 10 * SECOND).expect("known");
        assert!(snapshot.cancelled && !snapshot.running, "{snapshot:?}");
    }
    assert_eq!(table.running(), 0);
}

#[test]
fn finished_processes_beyond_the_kept_number_are_forgotten() {
    let fx = Fixture::new();
    let table = ProcessTable::with_limits(ProcessLimits {
        keep_finished: 2,
        ..ProcessLimits::default()
    });
    let ids: Vec<_> = (0..3)
        .map(|i| {
            let id = table
                .start(fx.spec(&format!("echo {i}"), 10 * SECOND, 1024))
                .expect("starts");
            finished(&table.wait(id.as_str(), 10 * SECOND).expect("known"));
            id
        })
        .collect();
    let error = table.wait(ids[0].as_str(), SECOND).expect_err("forgotten");
    assert_eq!(error.code, codes::PROCESS_NOT_FOUND);
    assert_eq!(
        table.wait(ids[2].as_str(), SECOND).expect("kept").stdout,
        "2\n"
    );
    assert_eq!(
        table.wait(ids[1].as_str(), SECOND).expect("kept").stdout,
        "1\n"
    );
}

#[test]
fn a_sandbox_that_cannot_run_answers_its_error_on_every_poll() {
    let fx = Fixture::new();
    let table = ProcessTable::new();
    let broken = Sandbox::new(PathBuf::from("/nonexistent/helper"), SandboxMode::Landlock);
    let id = table
        .start(fx.spec_with(broken, "echo never", 10 * SECOND, 1024))
        .expect("accepted");
    for _ in 0..2 {
        let error = table.wait(id.as_str(), 10 * SECOND).expect_err("refused");
        assert_eq!(error.code, codes::SANDBOX_UNAVAILABLE, "{error:?}");
    }
    assert_eq!(table.running(), 0);
}

#[test]
fn the_command_is_confined_like_run_check() {
    let fx = Fixture::new();
    let secret = fx.state.path().join("token");
    std::fs::write(&secret, "s3cret").expect("write");
    let table = ProcessTable::new();
    let script = format!("cat README; cat '{}'; echo x > written", secret.display());
    let id = table
        .start(fx.spec(&script, 10 * SECOND, 1 << 20))
        .expect("starts");
    let snapshot = table.wait(id.as_str(), 10 * SECOND).expect("known");
    finished(&snapshot);
    assert_eq!(snapshot.stdout, "hello\n", "the repository is readable");
    assert_ne!(snapshot.exit_code, Some(0), "{snapshot:?}");
    assert!(
        snapshot.stderr.contains("Permission denied") && !snapshot.stdout.contains("s3cret"),
        "{snapshot:?}"
    );
    assert!(
        !fx.repo.path().join("written").exists(),
        "the work tree is read-only"
    );
}

#[test]
fn redacted_output_never_splits_a_secret_across_answers() {
    let fx = Fixture::new();
    let table = ProcessTable::new();
    let secret = "Zq8vN3kLw5Tr2Yp7Hx4M";
    let (head, tail) = secret.split_at(10);
    let mut spec = fx.spec(
        &format!("echo one {secret}; printf 'two {head}'; sleep 2; echo '{tail}'"),
        10 * SECOND,
        1 << 20,
    );
    spec.redactor = Some(Redactor::new().with_secret(secret));
    let id = table.start(spec).expect("starts");
    let first = first_output(&table, id.as_str());
    assert_eq!(
        first.stdout, "one [REDACTED:secret]\n",
        "the partial line waits"
    );
    assert_eq!(first.stdout_cursor, format!("one {secret}\n").len() as u64);
    let rest = table
        .output(id.as_str(), first.stdout_cursor, 0, 10 * SECOND)
        .expect("known");
    finished(&rest);
    assert_eq!(rest.stdout, "two [REDACTED:secret]\n");
}
