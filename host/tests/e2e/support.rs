//! Test support: real git repositories in temporary folders, and the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use review_agent_gateway::protocol::AgentEvent;

/// A git repository in its own temporary folder, driven with the real `git` command.
pub struct TestRepo {
    dir: tempfile::TempDir,
    /// Isolated config home, so the user's own rule sets never leak into a test.
    config_home: tempfile::TempDir,
    clock: u32,
}

impl TestRepo {
    /// `git init` on branch `main`.
    pub fn new() -> TestRepo {
        let repo = TestRepo {
            dir: tempfile::tempdir().expect("temp dir"),
            config_home: tempfile::tempdir().expect("temp dir"),
            clock: 0,
        };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.git(&["config", "core.autocrlf", "false"]);
        repo
    }

    /// The work tree root.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The isolated `XDG_CONFIG_HOME` the binary runs with.
    pub fn config_home(&self) -> &Path {
        self.config_home.path()
    }

    /// Write (creating folders) a file in the work tree.
    pub fn write(&self, path: &str, content: impl AsRef<[u8]>) -> &Self {
        let full = self.path().join(path);
        std::fs::create_dir_all(full.parent().expect("has parent")).expect("mkdir");
        std::fs::write(full, content).expect("write");
        self
    }

    /// Remove a file from the work tree.
    pub fn remove(&self, path: &str) -> &Self {
        std::fs::remove_file(self.path().join(path)).expect("remove");
        self
    }

    /// Run git in the repository with a fixed identity and clock; panics on failure.
    pub fn git(&self, args: &[&str]) -> String {
        let out = self.git_output(args);
        assert!(out.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
    }

    /// Run git and return its raw output, whatever the status.
    pub fn git_output(&self, args: &[&str]) -> Output {
        let date = format!("2026-01-01T00:{:02}:00Z", self.clock % 60);
        Command::new("git")
            .args(args)
            .current_dir(self.path())
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_DATE", &date)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", self.config_home())
            .output()
            .expect("git runs")
    }

    /// `git add -A && git commit`; returns the new commit's SHA.
    pub fn commit(&mut self, message: &str) -> String {
        self.clock += 1;
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }

    /// Run `review-agent-gateway review --repo <repo> <args>`.
    pub fn review(&self, args: &[&str]) -> Run {
        let mut all = vec!["review", "--repo"];
        let repo = self.path().to_str().expect("utf-8 temp path").to_owned();
        all.push(&repo);
        all.extend_from_slice(args);
        run_binary(&all, self.config_home())
    }
}

/// The output of one run of the binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Parse stdout as the JSON-lines AgentEvent stream (`--format json`).
    pub fn events(&self) -> Vec<AgentEvent> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad event line {l}: {e}")))
            .collect()
    }

    /// Parse stdout as one JSON document.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }
}

/// Run the real binary with `args`, `XDG_CONFIG_HOME` set to `config_home`.
pub fn run_binary(args: &[&str], config_home: &Path) -> Run {
    let out = Command::new(binary())
        .args(args)
        .env("XDG_CONFIG_HOME", config_home)
        .env("HOME", config_home)
        .env_remove("NO_COLOR")
        .output()
        .expect("binary runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Path of the binary under test.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_review-agent-gateway"))
}
