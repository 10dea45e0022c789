//! Test support: real git repositories in temporary folders, and the real binary.

#![allow(dead_code)] // Not every test module uses every helper.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use review_agent_gateway::protocol::{
    AgentEvent, ContextItem, EventPayload, ReviewFinding, RunCompleted, RunFailed, Warning,
};

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

    /// A repository whose first commit on `main` holds `files`; returns it and the commit.
    pub fn with_commit(files: &[(&str, &str)]) -> (TestRepo, String) {
        let mut repo = TestRepo::new();
        repo.write_all(files);
        let sha = repo.commit("base");
        (repo, sha)
    }

    /// The work tree root.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The work tree root as a `&str` (temporary paths are UTF-8 here).
    pub fn path_str(&self) -> &str {
        self.path().to_str().expect("utf-8 temp path")
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

    /// Write several files.
    pub fn write_all(&self, files: &[(&str, &str)]) -> &Self {
        for (path, content) in files {
            self.write(path, content);
        }
        self
    }

    /// Remove a file from the work tree.
    pub fn remove(&self, path: &str) -> &Self {
        std::fs::remove_file(self.path().join(path)).expect("remove");
        self
    }

    /// Make a work-tree file executable (`chmod +x`).
    pub fn make_executable(&self, path: &str) -> &Self {
        use std::os::unix::fs::PermissionsExt;
        let full = self.path().join(path);
        let mut perms = std::fs::metadata(&full).expect("stat").permissions();
        perms.set_mode(perms.mode() | 0o111);
        std::fs::set_permissions(&full, perms).expect("chmod");
        self
    }

    /// Create a symbolic link at `path` (creating folders) pointing at `target`, as given.
    pub fn symlink(&self, path: &str, target: &str) -> &Self {
        let full = self.path().join(path);
        std::fs::create_dir_all(full.parent().expect("has parent")).expect("mkdir");
        std::os::unix::fs::symlink(target, &full)
            .unwrap_or_else(|e| panic!("symlink {path} -> {target}: {e}"));
        self
    }

    /// Stage a submodule entry (gitlink) at `path` pinned to `sha`, without a work-tree folder.
    /// Commit it with [`TestRepo::commit_staged`] (`commit` would stage its removal).
    pub fn stage_gitlink(&self, path: &str, sha: &str) -> &Self {
        let info = format!("160000,{sha},{path}");
        self.git(&["update-index", "--add", "--cacheinfo", &info]);
        self
    }

    /// A bare clone of the repository at `dir/bare.git` (no work tree); its path.
    pub fn bare_clone(&self, dir: &Path) -> PathBuf {
        let bare = dir.join("bare.git");
        self.git(&[
            "clone",
            "-q",
            "--bare",
            self.path_str(),
            bare.to_str().expect("utf-8 temp path"),
        ]);
        bare
    }

    /// Run git in the repository with a fixed identity and clock; panics on failure.
    pub fn git(&self, args: &[&str]) -> String {
        let out = self.git_output(args);
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
    }

    /// Run git and return its raw output, whatever the status.
    pub fn git_output(&self, args: &[&str]) -> Output {
        git_in(self.path(), self.config_home(), self.clock, args)
    }

    /// `git add -A && git commit`; returns the new commit's SHA.
    pub fn commit(&mut self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.commit_staged(message)
    }

    /// `git commit` of what is staged (no `add`); returns the new commit's SHA.
    pub fn commit_staged(&mut self, message: &str) -> String {
        self.clock += 1;
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.rev_parse("HEAD")
    }

    /// `git rev-parse <rev>`.
    pub fn rev_parse(&self, rev: &str) -> String {
        self.git(&["rev-parse", "--verify", "-q", &format!("{rev}^{{commit}}")])
    }

    /// `git checkout -q <args>`.
    pub fn checkout(&self, args: &[&str]) {
        let mut all = vec!["checkout", "-q"];
        all.extend_from_slice(args);
        self.git(&all);
    }

    /// `git merge-base a b`.
    pub fn merge_base(&self, a: &str, b: &str) -> String {
        self.git(&["merge-base", a, b])
    }

    /// `(files, insertions, deletions)` of `git diff --shortstat -M from to`.
    pub fn shortstat(&self, from: &str, to: &str) -> (u32, u32, u32) {
        let out = self.git(&["diff", "--shortstat", "-M", from, to]);
        parse_shortstat(&out)
    }

    /// `git diff --name-only -M from to`, sorted (new paths for renames).
    pub fn changed_paths(&self, from: &str, to: &str) -> Vec<String> {
        let out = self.git(&["diff", "--name-only", "-M", from, to]);
        let mut paths: Vec<String> = out.lines().map(str::to_owned).collect();
        paths.sort();
        paths
    }

    /// Line `line` (1-based) of `path` at `rev`, without its terminator (`\r\n` or `\n`).
    pub fn line_at(&self, rev: &str, path: &str, line: u32) -> String {
        let out = self.git_output(&["show", &format!("{rev}:{path}")]);
        assert!(out.status.success(), "git show {rev}:{path} failed");
        let text = String::from_utf8(out.stdout).expect("utf-8 file");
        let found = text
            .split('\n')
            .nth(line as usize - 1)
            .unwrap_or_else(|| panic!("{path} at {rev} has no line {line}"));
        found.strip_suffix('\r').unwrap_or(found).to_owned()
    }

    /// Run `review-agent-gateway review --repo <repo> <args>`.
    pub fn review(&self, args: &[&str]) -> Run {
        self.review_at(self.path(), args)
    }

    /// Run `review-agent-gateway review --repo <repo_path> <args>` with this repository's
    /// isolated config home.
    pub fn review_at(&self, repo_path: &Path, args: &[&str]) -> Run {
        let mut all = vec!["review", "--repo"];
        let repo = repo_path.to_str().expect("utf-8 temp path").to_owned();
        all.push(&repo);
        all.extend_from_slice(args);
        run_binary(&all, self.config_home())
    }
}

/// Run git in `dir` with a fixed identity, clock and an isolated `HOME`.
pub fn git_in(dir: &Path, home: &Path, clock: u32, args: &[&str]) -> Output {
    let date = format!("2026-01-01T{:02}:{:02}:00Z", clock / 60 % 24, clock % 60);
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_DATE", &date)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", home)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .expect("git runs")
}

/// `(files, insertions, deletions)` from a `git diff --shortstat` line; absent parts are 0.
pub fn parse_shortstat(line: &str) -> (u32, u32, u32) {
    let mut stat = (0, 0, 0);
    for part in line.split(',') {
        let mut words = part.split_whitespace();
        let n: u32 = match words.next() {
            Some(n) => n.parse().expect("shortstat count"),
            None => continue,
        };
        match words.next() {
            Some(w) if w.starts_with("file") => stat.0 = n,
            Some(w) if w.starts_with("insertion") => stat.1 = n,
            Some(w) if w.starts_with("deletion") => stat.2 = n,
            other => panic!("unexpected shortstat part {other:?} in {line:?}"),
        }
    }
    stat
}

/// The output of one run of the binary.
pub struct Run {
    /// The arguments, for assertion messages.
    pub args: Vec<String>,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// A finding reduced to what tests compare: `(ruleId, path, startLine)`.
pub type Found = (String, String, u32);

/// An expected finding written as a literal: `(ruleId, path, startLine)`.
pub type Loc = (&'static str, &'static str, u32);

impl Run {
    /// Parse stdout as the JSON-lines AgentEvent stream (`--format json`).
    pub fn events(&self) -> Vec<AgentEvent> {
        self.stdout
            .lines()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("bad event line {l}: {e}\n{}", self.describe()))
            })
            .collect()
    }

    /// Parse stdout as one JSON document.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.describe()))
    }

    /// Arguments, exit code and both streams, for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "args: {:?}\nexit code: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.args, self.code, self.stdout, self.stderr
        )
    }

    /// Assert the exit code, showing the whole run when it differs.
    pub fn assert_code(&self, expected: i32) -> &Self {
        assert_eq!(
            self.code,
            expected,
            "unexpected exit code\n{}",
            self.describe()
        );
        self
    }

    /// The findings of a `--format json` run, in emission order.
    pub fn findings(&self) -> Vec<ReviewFinding> {
        self.events()
            .into_iter()
            .filter_map(|e| match e.payload {
                EventPayload::FindingCreated(f) => Some(f.finding),
                _ => None,
            })
            .collect()
    }

    /// `(ruleId, path, startLine)` of every finding of a `--format json` run, sorted.
    pub fn found(&self) -> Vec<Found> {
        let mut found: Vec<Found> = self
            .findings()
            .iter()
            .map(|f| {
                (
                    f.rule_id.clone().unwrap_or_default(),
                    f.path.clone(),
                    f.start_line,
                )
            })
            .collect();
        found.sort();
        found
    }

    /// The `warning` events of a `--format json` run.
    pub fn warnings(&self) -> Vec<Warning> {
        self.events()
            .into_iter()
            .filter_map(|e| match e.payload {
                EventPayload::Warning(w) => Some(w),
                _ => None,
            })
            .collect()
    }

    /// The `run.completed` payload of a `--format json` run (panics when there is none).
    pub fn completed(&self) -> RunCompleted {
        self.events()
            .into_iter()
            .find_map(|e| match e.payload {
                EventPayload::RunCompleted(c) => Some(c),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no run.completed\n{}", self.describe()))
    }

    /// The `run.failed` payload of a `--format json` run (panics when there is none).
    pub fn failed(&self) -> RunFailed {
        self.events()
            .into_iter()
            .find_map(|e| match e.payload {
                EventPayload::RunFailed(f) => Some(f),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no run.failed\n{}", self.describe()))
    }

    /// The `context.added` items of a `--format json` run, in order.
    pub fn contexts(&self) -> Vec<ContextItem> {
        self.events()
            .into_iter()
            .filter_map(|e| match e.payload {
                EventPayload::ContextAdded(c) => Some(c.context),
                _ => None,
            })
            .collect()
    }

    /// The `ruleSetVersion` of the `ruleSets` context of a `--format json` run.
    pub fn rule_set_version(&self) -> String {
        self.contexts()
            .into_iter()
            .find_map(|c| match c {
                ContextItem::RuleSets(r) => Some(r.rule_set_version),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no ruleSets context\n{}", self.describe()))
    }

    /// `reviewedFiles` of `run.completed`, sorted.
    pub fn reviewed(&self) -> Vec<String> {
        let mut reviewed = self.completed().reviewed_files.unwrap_or_default();
        reviewed.sort();
        reviewed
    }

    /// `(path, reason)` of `run.completed.skippedFiles`, sorted.
    pub fn skipped(&self) -> Vec<(String, String)> {
        let mut skipped: Vec<(String, String)> = self
            .completed()
            .skipped_files
            .unwrap_or_default()
            .into_iter()
            .map(|s| (s.path, s.reason))
            .collect();
        skipped.sort();
        skipped
    }

    /// Assert an `error[<code>]` failure: exit 2, the code and a remediation on stderr.
    pub fn assert_error(&self, code: &str) -> &Self {
        self.assert_code(2);
        assert!(
            self.stderr.contains(&format!("error[{code}]")),
            "stderr lacks error[{code}]\n{}",
            self.describe()
        );
        assert!(
            self.stderr.contains("remediation"),
            "stderr lacks a remediation\n{}",
            self.describe()
        );
        self
    }
}

/// Expected findings from `(ruleId, path, line)` literals, sorted.
pub fn found(expect: &[(&str, &str, u32)]) -> Vec<Found> {
    let mut v: Vec<Found> = expect
        .iter()
        .map(|(r, p, l)| (r.to_string(), p.to_string(), *l))
        .collect();
    v.sort();
    v
}

/// Whether `fp` is `sha256:` followed by 64 lower-case hex digits.
pub fn is_fingerprint(fp: &str) -> bool {
    fp.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Run the real binary with `args`, `XDG_CONFIG_HOME` set to `config_home`.
pub fn run_binary(args: &[&str], config_home: &Path) -> Run {
    let out = Command::new(binary())
        .args(args)
        .env("XDG_CONFIG_HOME", config_home)
        .env("HOME", config_home)
        // A developer's own gateway home would replace the isolated config dir.
        .env_remove("REVIEW_AGENT_GATEWAY_HOME")
        .env_remove("NO_COLOR")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .expect("binary runs");
    Run {
        args: args.iter().map(|a| a.to_string()).collect(),
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Path of the binary under test.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_review-agent-gateway"))
}
