//! Helpers shared by the test binaries that spawn the real program (`mod common;`).
#![allow(dead_code)] // each test binary uses a different subset

pub mod agent_model;
pub mod fake_provider;
pub mod http;
#[cfg(unix)]
pub mod secret_service;
pub mod settings;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command};

/// Path of the binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_review-agent-gateway")
}

/// A repository on branch `main` whose first commit has `app.py` holding `base` and whose
/// second commit changes it to `head`; returns the directory and the two commit ids.
pub fn app_repository(base: &str, head: &str) -> (tempfile::TempDir, String, String) {
    let repo = tempfile::tempdir().expect("temp dir");
    git(repo.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(repo.path().join("app.py"), base).expect("write");
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-q", "-m", "base"]);
    let base = git(repo.path(), &["rev-parse", "HEAD"]);
    std::fs::write(repo.path().join("app.py"), head).expect("write");
    git(repo.path(), &["commit", "-q", "-am", "head"]);
    let head = git(repo.path(), &["rev-parse", "HEAD"]);
    (repo, base, head)
}

/// Run `git` in `dir` with a fixed identity and no system or user config; panics on failure;
/// returns trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Decode an HTTP/1.1 chunked body.
pub fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].strip_prefix("\r\n").unwrap_or(&tail[n..]);
    }
    out
}

/// The port of a `serve --port 0` child: its first stdout line is
/// `listening on http://127.0.0.1:<port>`. Takes the child's piped stdout.
pub fn read_port(child: &mut Child) -> u16 {
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the listening line");
    line.trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"))
}

/// The local token of the gateway home `home` (`token show`, which creates it once).
pub fn token(home: &Path) -> String {
    let out = Command::new(bin())
        .args(["token", "show"])
        .env("REVIEW_AGENT_GATEWAY_HOME", home)
        .output()
        .expect("token show runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The workspace's `extension-bridge/` folder.
pub fn extension_bridge() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .join("extension-bridge")
}

/// The Python venv `.ci/run` makes for the tests (pytest, the MCP SDK):
/// `<workspace>/target/test-venv`, whatever `CARGO_TARGET_DIR` says.
pub fn test_venv() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .join("target/test-venv")
}

/// Run the browser test `extension-bridge/tests/<script>` with node, this build's binary
/// (`--binary`), a fresh gateway home (`--home`) and `args`, without a developer's
/// `REVIEW_AGENT_GATEWAY_HOME`/`_PORT`; panics with its output (or `hint`, when node does not
/// run) unless it exits 0. Returns its stdout.
pub fn run_browser_test(script: &str, args: &[&std::ffi::OsStr], hint: &str) -> String {
    let home = tempfile::tempdir().expect("temp dir");
    let out = Command::new("node")
        .arg(extension_bridge().join("tests").join(script))
        .arg("--binary")
        .arg(bin())
        .arg("--home")
        .arg(home.path())
        .args(args)
        .env_remove("REVIEW_AGENT_GATEWAY_HOME")
        .env_remove("REVIEW_AGENT_GATEWAY_PORT")
        .output()
        .unwrap_or_else(|e| panic!("node does not run ({e}): {hint}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{script} failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    stdout
}

/// Whether some process's command line (`/proc/<pid>/cmdline`, NUL-separated) ends with `tail`.
pub fn process_running(tail: &[u8]) -> bool {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .any(|c| c.ends_with(tail))
}

/// Wait up to 5 s until [`process_running`]`(tail)` is `want`; whether it became so.
pub fn wait_process_running(tail: &[u8], want: bool) -> bool {
    for _ in 0..100 {
        if process_running(tail) == want {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

/// `POST /v1/tools/run_check` for the project `group/project` of `https://gitlab.example.com`
/// at the request's `rev`, with the daemon's bearer `token`.
pub fn post_run_check(
    port: u16,
    token: &str,
    rev: &str,
    input: serde_json::Value,
) -> http::Response {
    let body = serde_json::json!({
        "gitlabOrigin": "https://gitlab.example.com",
        "projectPath": "group/project",
        "ref": rev,
        "input": input,
    });
    let auth = format!("Bearer {token}");
    http::request(
        port,
        "POST",
        "/v1/tools/run_check",
        &[("Authorization", &auth)],
        Some(&body),
    )
}
