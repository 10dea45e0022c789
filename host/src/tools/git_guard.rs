//! What a command run in a writable workspace may not change in a repository's `.git`: the
//! files through which git itself runs code later, outside any sandbox (issue 14, found by
//! the fresh-user trial): `config` and `config.worktree` (`core.hooksPath`, `core.fsmonitor`,
//! `core.sshCommand`, filter and diff drivers, `include.path`), `hooks/`, `info/` — and the
//! same under `modules/` (submodules' git dirs).
//!
//! Landlock grants access to whole hierarchies and cannot take `.git` back out of a writable
//! workspace, and a command may legitimately commit (objects, refs, index). So the guard works
//! around the command instead: [`GitGuard::capture`] records the protected files of every
//! repository in the workspace (its `.git` and those up to [`MAX_DEPTH`] directories down,
//! at most [`MAX_REPOSITORIES`]) before it starts, and [`GitGuard::restore`] puts them back when
//! it has ended — the sandbox's supervisor has killed everything it started by then, so nothing
//! of the command changes them afterwards. Files the command added there are removed, changed
//! or removed ones written back with their mode, a link replaced by the file. Each restoration
//! is told to the caller (the command's stderr) and logged.
//!
//! Limits (documented in the README): while the command runs, git run by the user in that
//! repository sees what the command wrote; repositories deeper than [`MAX_DEPTH`], or beyond
//! [`MAX_REPOSITORIES`], are not guarded (the capture says so); protected files over
//! [`MAX_BYTES`] in total are not restored.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// How many directories below the workspace a repository's `.git` is looked for.
pub const MAX_DEPTH: usize = 3;
/// The most repositories one workspace's guard records.
pub const MAX_REPOSITORIES: usize = 64;
/// The most bytes of protected files one guard keeps.
pub const MAX_BYTES: usize = 16 * 1024 * 1024;
/// Directories never searched for repositories (large, and never a repository's top).
const SKIP: [&str; 5] = ["node_modules", "target", ".venv", "venv", "__pycache__"];

/// A protected file as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Kept {
    bytes: Vec<u8>,
    mode: u32,
}

/// The protected files of the repositories in a workspace, as they were before a command.
#[derive(Debug, Default)]
pub struct GitGuard {
    // Each repository's git dir and its protected files by path relative to it.
    repos: Vec<(PathBuf, BTreeMap<PathBuf, Kept>)>,
    /// What the capture could not cover, for the caller.
    pub notes: Vec<String>,
}

impl GitGuard {
    /// Record the protected files of every repository in `workspace` (canonical directory).
    pub fn capture(workspace: &Path) -> GitGuard {
        let mut guard = GitGuard::default();
        let mut budget = MAX_BYTES;
        for git_dir in git_dirs(workspace, &mut guard.notes) {
            let files = protected(&git_dir)
                .into_iter()
                .filter_map(|rel| {
                    let path = git_dir.join(&rel);
                    let meta = std::fs::symlink_metadata(&path).ok()?;
                    if !meta.is_file() {
                        return None;
                    }
                    let bytes = std::fs::read(&path).ok()?;
                    if bytes.len() > budget {
                        return None;
                    }
                    budget -= bytes.len();
                    Some((
                        rel,
                        Kept {
                            bytes,
                            mode: meta.permissions().mode(),
                        },
                    ))
                })
                .collect();
            guard.repos.push((git_dir, files));
        }
        guard
    }

    /// Put the protected files back as captured; answers one line per file restored.
    pub fn restore(&self) -> Vec<String> {
        let mut restored = Vec::new();
        for (git_dir, before) in &self.repos {
            let now = protected(git_dir);
            for rel in &now {
                if !before.contains_key(rel) {
                    let path = git_dir.join(rel);
                    if std::fs::remove_file(&path).is_ok() {
                        restored.push(format!("removed {} (added by the command)", path.display()));
                    }
                }
            }
            for (rel, kept) in before {
                let path = git_dir.join(rel);
                let same = std::fs::symlink_metadata(&path)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() == kept.mode)
                    && std::fs::read(&path).is_ok_and(|b| b == kept.bytes);
                if same {
                    continue;
                }
                if put_back(&path, kept).is_ok() {
                    restored.push(format!(
                        "restored {} (changed by the command)",
                        path.display()
                    ));
                }
            }
        }
        for line in &restored {
            tracing::warn!(what = %line, "a command changed a repository's protected git files");
        }
        restored
    }
}

/// Write `kept` at `path`, replacing whatever is there (a link is removed, never followed).
fn put_back(path: &Path, kept: &Kept) -> std::io::Result<()> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file()) {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(_) => std::fs::remove_dir_all(path)?,
        }
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let name = path.file_name().unwrap_or_default();
    let dir = path.parent().unwrap_or(Path::new("."));
    super::write::atomic_write(dir, name, &kept.bytes)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(kept.mode))
}

/// The git dirs of the repositories in `workspace`: `<dir>/.git` directories (not `.git`
/// files, whose git dir lies elsewhere) up to [`MAX_DEPTH`] below it.
fn git_dirs(workspace: &Path, notes: &mut Vec<String>) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut level = vec![workspace.to_owned()];
    for depth in 0..=MAX_DEPTH {
        let mut next = Vec::new();
        for dir in level {
            let git = dir.join(".git");
            if std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_dir()) {
                if found.len() == MAX_REPOSITORIES {
                    notes.push(format!(
                        "more than {MAX_REPOSITORIES} repositories in the workspace: the git \
                         files of the others are not guarded"
                    ));
                    return found;
                }
                found.push(git);
            }
            if depth == MAX_DEPTH {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let skip = name == ".git" || SKIP.iter().any(|s| name == *s);
                if !skip && entry.file_type().is_ok_and(|t| t.is_dir()) {
                    next.push(entry.path());
                }
            }
        }
        level = next;
    }
    found
}

/// The protected files present now under `git_dir`, relative to it: `config`,
/// `config.worktree`, everything under `hooks/` and `info/`, and the same for each git dir
/// under `modules/` (any depth).
fn protected(git_dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    collect(git_dir, Path::new(""), &mut out, 0);
    out.sort();
    out
}

fn collect(git_dir: &Path, rel: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 8 {
        return;
    }
    let base = git_dir.join(rel);
    for name in ["config", "config.worktree"] {
        if std::fs::symlink_metadata(base.join(name)).is_ok() {
            out.push(rel.join(name));
        }
    }
    for dir in ["hooks", "info"] {
        walk(&base.join(dir), &rel.join(dir), out, 0);
    }
    let modules = base.join("modules");
    if let Ok(entries) = std::fs::read_dir(&modules) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                collect(
                    git_dir,
                    &rel.join("modules").join(entry.file_name()),
                    out,
                    depth + 1,
                );
            }
        }
    }
}

/// Every non-directory entry under `dir` (links included, never followed).
fn walk(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 8 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let (path, rel) = (entry.path(), rel.join(entry.file_name()));
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(&path, &rel, out, depth + 1),
            Ok(_) => out.push(rel),
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_cannot_keep_a_change_to_config_or_hooks() {
        let tmp = tempfile::tempdir().expect("temp");
        let ws = tmp.path();
        let git = ws.join(".git");
        std::fs::create_dir_all(git.join("hooks")).expect("mkdir");
        std::fs::create_dir_all(ws.join("sub/lib/.git/hooks")).expect("mkdir");
        std::fs::write(git.join("config"), "[core]\n\tbare = false\n").expect("write");
        std::fs::write(git.join("hooks/pre-commit.sample"), "#!/bin/sh\n").expect("write");
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").expect("write");
        std::fs::write(ws.join("sub/lib/.git/config"), "[core]\n").expect("write");
        let guard = GitGuard::capture(ws);
        assert!(guard.notes.is_empty(), "{:?}", guard.notes);

        // What a hostile command does, and what a committing one does.
        std::fs::write(git.join("config"), "[core]\n\tfsmonitor = evil\n").expect("write");
        std::fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\nevil\n").expect("write");
        std::fs::remove_file(git.join("hooks/pre-commit.sample")).expect("rm");
        std::fs::write(ws.join("sub/lib/.git/hooks/post-checkout"), "evil").expect("write");
        std::fs::write(git.join("HEAD"), "ref: refs/heads/other\n").expect("write");

        let restored = guard.restore();
        assert_eq!(restored.len(), 4, "{restored:?}");
        assert_eq!(
            std::fs::read_to_string(git.join("config")).expect("read"),
            "[core]\n\tbare = false\n"
        );
        assert!(!git.join("hooks/pre-commit").exists());
        assert!(git.join("hooks/pre-commit.sample").exists());
        assert!(!ws.join("sub/lib/.git/hooks/post-checkout").exists());
        // A commit's own files are the command's to change.
        assert_eq!(
            std::fs::read_to_string(git.join("HEAD")).expect("read"),
            "ref: refs/heads/other\n"
        );
        // Nothing changed: nothing to restore.
        assert!(GitGuard::capture(ws).restore().is_empty());
    }

    #[test]
    fn a_link_put_in_place_of_config_is_replaced_not_followed() {
        let tmp = tempfile::tempdir().expect("temp");
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join(".git")).expect("mkdir");
        std::fs::write(ws.join(".git/config"), "[core]\n").expect("write");
        let outside = tmp.path().join("outside");
        std::fs::write(&outside, "keep me\n").expect("write");
        let guard = GitGuard::capture(&ws);
        std::fs::remove_file(ws.join(".git/config")).expect("rm");
        std::os::unix::fs::symlink(&outside, ws.join(".git/config")).expect("link");
        assert_eq!(guard.restore().len(), 1);
        assert!(std::fs::symlink_metadata(ws.join(".git/config")).is_ok_and(|m| m.is_file()));
        assert_eq!(
            std::fs::read_to_string(&outside).expect("read"),
            "keep me\n"
        );
    }
}
