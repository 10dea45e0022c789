//! Secrets at rest (issue 12 §3): the state dir holds request bodies and finding evidence
//! (`gateway.redb`), tags quoting the code (`symbols.redb`), the token and logs. Whichever
//! command creates it first, the real binary must leave the state dir 0700 and every file in
//! it 0600 (every directory 0700); a store file or state dir others may read is repaired, and
//! the daemon says so on stderr.
#![cfg(unix)]

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{bin, git};

/// The usual umask: without the fix, files the store library creates are 0644 and
/// directories 0755.
fn usual_umask() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o7777
}

/// Every path under `dir` (itself included) with its mode.
fn walk(dir: &Path) -> Vec<(PathBuf, u32)> {
    let mut out = vec![(dir.to_owned(), mode(dir))];
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            let m = mode(&path);
            out.push((path, m));
        }
    }
    out
}

/// Asserts the state dir exists, holds at least `expected` (names relative to it), and that
/// every directory in it is 0700 and every file 0600.
fn assert_private(state: &Path, expected: &[&str], what: &str) {
    assert!(
        state.is_dir(),
        "{what}: no state dir at {}",
        state.display()
    );
    for name in expected {
        assert!(
            state.join(name).exists(),
            "{what}: {name} was not created; state dir holds {:?}",
            walk(state)
        );
    }
    for (path, m) in walk(state) {
        let want = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(
            m,
            want,
            "{what}: {} has mode {m:04o}, expected {want:04o}",
            path.display()
        );
    }
}

fn gateway(home: &Path) -> Command {
    let mut command = Command::new(bin());
    command
        .env("REVIEW_AGENT_GATEWAY_HOME", home)
        .env("HOME", home)
        .env_remove("REVIEW_AGENT_GATEWAY_PORT")
        .env_remove("REVIEW_AGENT_GATEWAY_LOG")
        .env_remove("XDG_CONFIG_HOME");
    command
}

/// A repository with one commit that defines a function (for `symbol_search`).
fn repository() -> tempfile::TempDir {
    let repo = tempfile::tempdir().expect("temp dir");
    git(repo.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(repo.path().join("lib.rs"), "pub fn hello() {}\n").expect("write");
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-q", "-m", "one"]);
    repo
}

/// Starts `serve --port 0` in `home`, waits for its listening line, then stops it with
/// SIGTERM; returns its stderr.
fn serve_once(home: &Path) -> String {
    let mut child = gateway(home)
        .args(["serve", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("serve starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("listening line");
    let pid =
        rustix::process::Pid::from_raw(i32::try_from(child.id()).expect("pid")).expect("a pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let out = child.wait_with_output().expect("serve exits");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(line.starts_with("listening on"), "{line}\n{stderr}");
    stderr
}

#[test]
fn serve_first_leaves_a_private_state_dir() {
    usual_umask();
    let home = tempfile::tempdir().expect("temp dir");
    serve_once(home.path());
    assert_private(
        &home.path().join("state"),
        &["gateway.redb", "token"],
        "serve",
    );
}

#[test]
fn token_first_then_serve_leaves_a_private_state_dir() {
    usual_umask();
    let home = tempfile::tempdir().expect("temp dir");
    common::token(home.path());
    assert_private(&home.path().join("state"), &["token"], "token show");
    serve_once(home.path());
    assert_private(
        &home.path().join("state"),
        &["gateway.redb", "token"],
        "token show, then serve",
    );
}

#[test]
fn native_host_first_leaves_a_private_state_dir() {
    usual_umask();
    let home = tempfile::tempdir().expect("temp dir");
    // A caller outside the allowlist: refused at once, after the log is opened.
    let out = gateway(home.path())
        .args([
            "native-host",
            "chrome-extension://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("native-host runs");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_private(
        &home.path().join("state"),
        &["logs/native-host.log"],
        "native-host",
    );
}

#[test]
fn tool_first_leaves_a_private_symbol_index() {
    usual_umask();
    let home = tempfile::tempdir().expect("temp dir");
    let repo = repository();
    let out = gateway(home.path())
        .args(["tool", "symbol_search", "--repo"])
        .arg(repo.path())
        .args(["--input", r#"{"query":"hello"}"#])
        .output()
        .expect("tool runs");
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("hello"),
        "{out:?}"
    );
    assert_private(
        &home.path().join("state"),
        &["symbols.redb"],
        "tool symbol_search",
    );
}

#[test]
fn read_only_commands_first_leave_nothing_readable() {
    usual_umask();
    let home = tempfile::tempdir().expect("temp dir");
    for args in [&["runs", "list"][..], &["mappings", "list"][..]] {
        let out = gateway(home.path()).args(args).output().expect("runs");
        let state = home.path().join("state");
        if state.exists() {
            assert_private(&state, &[], &args.join(" "));
        }
        assert!(
            out.status.code().is_some(),
            "{args:?} was killed by a signal: {out:?}"
        );
    }
}

/// A store and state dir left world-readable (by an earlier version, or a copy) are repaired
/// when `serve` opens them, and the daemon says so.
#[test]
fn a_world_readable_store_is_repaired_and_reported() {
    usual_umask();
    let home = tempfile::tempdir().expect("temp dir");
    serve_once(home.path());
    let state = home.path().join("state");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for file in ["gateway.redb", "symbols.redb"] {
        let path = state.join(file);
        if !path.exists() {
            std::fs::write(&path, b"").expect("create");
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let stderr = serve_once(home.path());
    assert!(
        stderr.contains("gateway.redb") && stderr.contains("made it private"),
        "the repair of gateway.redb is not reported:\n{stderr}"
    );
    assert!(
        stderr.contains("0644") && stderr.contains("0755"),
        "the old modes are not reported:\n{stderr}"
    );
    // symbols.redb is opened on the first symbol search, not at start; the rest is private.
    std::fs::remove_file(state.join("symbols.redb")).expect("remove");
    assert_private(&state, &["gateway.redb", "token"], "repaired by serve");
}

/// The issue-12 trial: a native-host log and logs directory that others could read were made
/// private silently (the warning was logged before the log existed), and the directory stayed
/// 0777. Both are repaired and the repair is said, on stderr and in the log.
#[test]
fn a_world_readable_log_is_repaired_and_reported() {
    usual_umask();
    let home = tempfile::tempdir().expect("temp dir");
    let run_host = || {
        gateway(home.path())
            .args([
                "native-host",
                "chrome-extension://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/",
            ])
            .stdin(Stdio::null())
            .output()
            .expect("native-host runs")
    };
    run_host();
    let logs = home.path().join("state/logs");
    let log = logs.join("native-host.log");
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    std::fs::set_permissions(&logs, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let out = run_host();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Paths are logged with the home shortened (`~/state/logs`).
    for (shown, old) in [
        ("state/logs/native-host.log ", "0644"),
        ("state/logs ", "0777"),
    ] {
        assert!(
            stderr
                .lines()
                .any(|l| l.contains(shown) && l.contains(old) && l.contains("made it private")),
            "the repair of {shown}({old}) is not reported:\n{stderr}"
        );
    }
    let written = std::fs::read_to_string(&log).expect("log");
    assert!(written.contains("made it private"), "{written}");
    assert_private(
        &home.path().join("state"),
        &["logs/native-host.log"],
        "repaired by native-host",
    );
}
