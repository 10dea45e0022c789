//! Safe repository-relative paths for tools (DESIGN §7).
//!
//! A tool path is normalized lexically ([`normalize`]): `.` and empty components are dropped,
//! `..` pops a component and is refused when it would climb above the root; absolute paths, NUL
//! bytes, backslashes and `.git` are refused. Then, at a commit ([`lookup_at`]), the tree is
//! walked one component at a time and a symbolic link is never followed: a link whose target
//! leaves the repository is refused, any other link is reported. In the work tree
//! ([`resolve_in_worktree`]) the path is canonicalized and must stay under the canonical root,
//! compared component by component, so a sibling `repo-evil/` is not "inside" `repo/`.
//!
//! The same rules serve paths inside an MCP workspace (DESIGN §12, [`crate::workspace`]):
//! [`normalize_in`] and [`resolve_in`] take a [`Base`], which changes the words of the errors
//! and the `.git` rule (a workspace may hold repositories, so `.git` is refused at any depth).

use std::path::{Component, Path, PathBuf};

use gix::ObjectId;

use crate::error::{GatewayError, codes};
use crate::repo::RepoError;

/// What is stored at a path in a commit's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryAt {
    /// A regular or executable file.
    File {
        /// The blob id.
        id: ObjectId,
    },
    /// A symbolic link whose target stays inside the repository; never followed.
    Symlink {
        /// The link's target as stored.
        target: String,
    },
    /// A submodule pinned to a commit of another repository.
    Submodule {
        /// The pinned commit.
        commit: ObjectId,
    },
    /// A directory.
    Directory {
        /// The tree id.
        id: ObjectId,
    },
}

/// What tool paths are relative to: the words of their errors and where `.git` is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// A repository, at a commit or in its work tree: `.git` is refused as the first component
    /// (git's own data; a nested repository's files are the repository's content).
    Repository,
    /// An MCP workspace (DESIGN §12): a directory that may hold repositories or lie inside one,
    /// so a `.git` component is refused at any depth (writing `.git/hooks` runs code; `.git/config`
    /// may hold credentials).
    Workspace,
}

impl Base {
    /// `repository` or `workspace`, for messages.
    fn noun(self) -> &'static str {
        match self {
            Base::Repository => "repository",
            Base::Workspace => "workspace",
        }
    }

    /// Whether `components` (from the base) go into `.git` under this base's rule.
    fn into_git<'a>(self, mut components: impl Iterator<Item = &'a std::ffi::OsStr>) -> bool {
        let is_git = |c: &std::ffi::OsStr| c.eq_ignore_ascii_case(".git");
        match self {
            Base::Repository => components.next().is_some_and(is_git),
            Base::Workspace => components.any(is_git),
        }
    }
}

fn outside(path: &str, why: &str) -> GatewayError {
    outside_in(Base::Repository, path, why)
}

fn outside_in(base: Base, path: &str, why: &str) -> GatewayError {
    let noun = base.noun();
    GatewayError::new(
        codes::TOOL_PATH_OUTSIDE_REPOSITORY,
        format!("`{}` is refused: {why}", printable(path)),
        format!(
            "Give a path relative to the {noun} root, using '/', without '..' that leaves the \
             root; files reached through a symbolic link that points outside the {noun} cannot \
             be read."
        ),
    )
}

fn printable(path: &str) -> String {
    path.escape_debug().to_string()
}

/// Normalize a repository tool path lexically: [`normalize_in`] with [`Base::Repository`].
///
/// # Errors
/// As [`normalize_in`].
pub fn normalize(path: &str) -> Result<String, GatewayError> {
    normalize_in(Base::Repository, path)
}

/// Normalize a tool path lexically: drop `.` and empty components, apply `..`.
///
/// Returns the `/`-joined components; an empty string names the root (of the repository or
/// workspace).
///
/// # Errors
/// `tool.path_outside_repository` for an absolute path, a `..` that climbs above the root, a
/// NUL byte, a backslash, or a path into `.git` (see [`Base`]).
pub fn normalize_in(base: Base, path: &str) -> Result<String, GatewayError> {
    let outside = |why: &str| outside_in(base, path, why);
    if path.contains('\0') {
        return Err(outside("it contains a NUL byte"));
    }
    if path.contains('\\') {
        return Err(outside(
            "it contains a backslash (separate components with '/')",
        ));
    }
    if path.starts_with('/') || has_drive_prefix(path) {
        return Err(outside("it is absolute"));
    }
    let mut components: Vec<&str> = Vec::new();
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                if components.pop().is_none() {
                    return Err(outside(&format!(
                        "its '..' climbs out of the {}",
                        base.noun()
                    )));
                }
            }
            name => components.push(name),
        }
    }
    if base.into_git(components.iter().map(|c| c.as_ref())) {
        return Err(outside(&format!(
            "`.git` holds git's own data, not {} files",
            base.noun()
        )));
    }
    Ok(components.join("/"))
}

/// Refuses a path glob (a tool's `paths` or `glob` filter) that could only match outside the
/// root: globs are matched against root-relative, `/`-separated paths, so one that is absolute
/// (`/etc/*`, `C:*`), holds a NUL byte, has a `..` component or a `.git` component (any depth,
/// any case: walks skip `.git`, and git itself refuses such paths) names nothing a tool may
/// reach. Answering "no match" would hide the caller's mistake (issue 14, hostile-path table);
/// a backslash stays allowed (it escapes a glob metacharacter).
///
/// # Errors
/// `tool.path_outside_repository` naming the glob and the rule it breaks.
pub fn check_glob(glob: &str) -> Result<(), GatewayError> {
    let refuse = |why: &str| {
        Err(GatewayError::new(
            codes::TOOL_PATH_OUTSIDE_REPOSITORY,
            format!("the glob `{}` is refused: {why}", printable(glob)),
            "Globs match paths relative to the repository or workspace root, with '/': \
             `src/**/*.rs`, `*.toml`; they cannot reach outside it or into `.git`.",
        ))
    };
    if glob.contains('\0') {
        return refuse("it contains a NUL byte");
    }
    if glob.starts_with('/') || has_drive_prefix(glob) {
        return refuse("it is absolute");
    }
    for component in glob.split('/') {
        if component == ".." {
            return refuse("it has a '..' component");
        }
        if component.eq_ignore_ascii_case(".git") {
            return refuse("`.git` holds git's own data");
        }
    }
    Ok(())
}

fn has_drive_prefix(path: &str) -> bool {
    let bytes = path.as_bytes();
    bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':'
}

/// Whether a symlink stored in directory `parent` (components from the root) with `target`
/// stays inside the repository, resolving lexically (other links on the way are not followed,
/// so they cannot be used to leave either: every link is checked where it is used).
pub fn link_stays_inside(parent: &[&str], target: &str) -> bool {
    if target.is_empty() || target.starts_with('/') || target.contains('\0') {
        return false;
    }
    if target.contains('\\') || has_drive_prefix(target) {
        return false;
    }
    let mut depth = parent.len();
    for component in target.split('/') {
        match component {
            "" | "." => {}
            ".." => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            _ => depth += 1,
        }
    }
    true
}

fn read_error(what: String, err: impl std::fmt::Display) -> GatewayError {
    RepoError::Read {
        what,
        message: err.to_string(),
    }
    .into()
}

/// What is stored at normalized `path` (from [`normalize`]) in `commit`'s tree, `None` when
/// nothing is. The empty path is the root directory.
///
/// # Errors
/// `tool.path_outside_repository` when a symlink on the path points outside the repository;
/// `request.invalid` when a directory component is a symlink inside it (not followed: the
/// message names its target); `repository.read_failed` for unreadable objects.
pub fn lookup_at(
    git: &gix::Repository,
    commit: ObjectId,
    path: &str,
) -> Result<Option<EntryAt>, GatewayError> {
    let mut tree = git
        .find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(|e| read_error(format!("the tree of commit {commit}"), e))?;
    if path.is_empty() {
        return Ok(Some(EntryAt::Directory { id: tree.id }));
    }
    let components: Vec<&str> = path.split('/').collect();
    for (i, name) in components.iter().enumerate() {
        let (mode, id) = {
            let decoded = tree
                .decode()
                .map_err(|e| read_error(format!("a tree of `{path}`"), e))?;
            let exact = decoded
                .entries
                .iter()
                .find(|e| e.filename == name.as_bytes());
            let entry = match exact {
                Some(entry) => entry,
                None if name.contains(char::REPLACEMENT_CHARACTER) => {
                    let names = decoded.entries.iter().map(|e| e.filename.as_ref());
                    match lossy_match(names, name, path)? {
                        Some(at) => &decoded.entries[at],
                        None => return Ok(None),
                    }
                }
                None => return Ok(None),
            };
            (entry.mode, entry.oid.to_owned())
        };
        let last = i + 1 == components.len();
        if mode.is_link() {
            let data = git
                .find_blob(id)
                .map_err(|e| read_error(format!("the link `{path}`"), e))?
                .detach()
                .data;
            let target = String::from_utf8_lossy(&data).into_owned();
            if !link_stays_inside(&components[..i], &target) {
                return Err(outside(
                    path,
                    &format!(
                        "`{}` is a symbolic link that points outside the repository",
                        components[..=i].join("/")
                    ),
                ));
            }
            if last {
                return Ok(Some(EntryAt::Symlink { target }));
            }
            return Err(GatewayError::new(
                codes::REQUEST_INVALID,
                format!(
                    "`{path}` goes through the symbolic link `{}` (→ `{target}`), which tools do \
                     not follow",
                    components[..=i].join("/")
                ),
                "Give the path through the link's target instead.",
            ));
        }
        if last {
            return Ok(Some(if mode.is_tree() {
                EntryAt::Directory { id }
            } else if mode.is_commit() {
                EntryAt::Submodule { commit: id }
            } else {
                EntryAt::File { id }
            }));
        }
        if !mode.is_tree() {
            return Ok(None);
        }
        tree = git
            .find_tree(id)
            .map_err(|e| read_error(format!("a tree of `{path}`"), e))?;
    }
    Ok(None)
}

/// The canonical location of normalized `path` under the canonical work tree `root`:
/// [`resolve_in`] with [`Base::Repository`].
///
/// # Errors
/// As [`resolve_in`].
pub fn resolve_in_worktree(root: &Path, path: &str) -> Result<PathBuf, GatewayError> {
    resolve_in(Base::Repository, root, path)
}

/// The canonical location of normalized `path` (from [`normalize_in`]) under the canonical
/// directory `root` (a work tree, or a workspace's directory).
///
/// # Errors
/// `tool.path_outside_repository` when the path (or, for a missing path, its nearest existing
/// ancestor) resolves outside `root` or into `.git` (see [`Base`]); `tool.path_not_found`
/// when nothing is there.
pub fn resolve_in(base: Base, root: &Path, path: &str) -> Result<PathBuf, GatewayError> {
    let joined = join_lossy(root, path)?;
    let check = |canonical: &Path| -> Result<(), GatewayError> {
        // `Path::strip_prefix` compares whole components: `/x/repo-evil` is not under `/x/repo`.
        let Ok(rest) = canonical.strip_prefix(root) else {
            return Err(outside_in(
                base,
                path,
                &format!(
                    "it resolves outside the {} through a symbolic link",
                    base.noun()
                ),
            ));
        };
        let components = rest.components().filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        });
        if base.into_git(components) {
            return Err(outside_in(base, path, "it resolves into `.git`"));
        }
        Ok(())
    };
    match std::fs::canonicalize(&joined) {
        Ok(canonical) => {
            check(&canonical)?;
            Ok(canonical)
        }
        Err(_) => {
            // Missing, or through a dangling link: check every existing prefix, and every
            // dangling link's target lexically, so an escape is reported as one.
            let components: Vec<&str> = path.split('/').collect();
            let mut prefix = root.to_path_buf();
            for (i, name) in components.iter().enumerate() {
                prefix.push(name);
                let Ok(meta) = std::fs::symlink_metadata(&prefix) else {
                    break;
                };
                match std::fs::canonicalize(&prefix) {
                    Ok(canonical) => check(&canonical)?,
                    Err(_) if meta.file_type().is_symlink() => {
                        let target = std::fs::read_link(&prefix)
                            .map(|t| t.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        if !link_stays_inside(&components[..i], &target) {
                            return Err(outside_in(
                                base,
                                path,
                                &format!(
                                    "`{}` is a symbolic link that points outside the {}",
                                    components[..=i].join("/"),
                                    base.noun()
                                ),
                            ));
                        }
                        break;
                    }
                    Err(_) => break,
                }
            }
            Err(match base {
                Base::Repository => not_found(path, "in the work tree"),
                Base::Workspace => GatewayError::new(
                    codes::TOOL_PATH_NOT_FOUND,
                    format!("nothing is at `{}` in the workspace", printable(path)),
                    "Check the path (relative to the workspace's directory, with '/').",
                ),
            })
        }
    }
}

/// The index of the one name in `names` whose lossy UTF-8 decoding is `wanted` (a component
/// holding U+FFFD, as tools print a name that is not UTF-8), `None` when there is none.
///
/// Tools answer paths as JSON strings, so a file name that is not UTF-8 comes out with U+FFFD
/// in place of its bad bytes; this lets such a path be passed back (e.g. from `file_search` to
/// `file_read`).
///
/// # Errors
/// `request.invalid` when two names decode to the same text (the path is ambiguous).
fn lossy_match<'a>(
    names: impl Iterator<Item = &'a [u8]>,
    wanted: &str,
    path: &str,
) -> Result<Option<usize>, GatewayError> {
    let mut found = None;
    for (at, name) in names.enumerate() {
        if String::from_utf8_lossy(name) == wanted {
            if found.is_some() {
                return Err(GatewayError::new(
                    codes::REQUEST_INVALID,
                    format!(
                        "`{}` names more than one file whose name is not valid UTF-8",
                        printable(path)
                    ),
                    "Rename one of the files, or read it with git directly.",
                ));
            }
            found = Some(at);
        }
    }
    Ok(found)
}

/// `root` joined with normalized `path`; a component holding U+FFFD that does not exist as
/// written is matched against the directory's entries by their lossy UTF-8 decoding (see
/// [`lossy_match`]).
///
/// # Errors
/// `request.invalid` for an ambiguous name.
fn join_lossy(root: &Path, path: &str) -> Result<PathBuf, GatewayError> {
    if !path.contains(char::REPLACEMENT_CHARACTER) {
        return Ok(root.join(path));
    }
    let mut joined = root.to_path_buf();
    for name in path.split('/') {
        let direct = joined.join(name);
        if !name.contains(char::REPLACEMENT_CHARACTER) || std::fs::symlink_metadata(&direct).is_ok()
        {
            joined = direct;
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&joined) else {
            joined = direct;
            continue;
        };
        let entries: Vec<std::ffi::OsString> = entries
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        let names = entries.iter().map(|n| n.as_encoded_bytes());
        match lossy_match(names, name, path)? {
            Some(at) => joined.push(&entries[at]),
            None => joined = direct,
        }
    }
    Ok(joined)
}

/// What is under the canonical work tree `root` that git's ignore files (`.gitignore`,
/// `.git/info/exclude`, the global excludes, `.ignore`) do not exclude, as
/// (repository-relative '/'-separated path, entry) pairs in walk order: `.git` is skipped,
/// symbolic links are yielded but never followed, directories are not yielded, and a name
/// that is not UTF-8 is decoded lossily (see [`lossy_match`] for the way back). Unreadable
/// entries are skipped.
pub fn worktree_entries(root: &Path) -> impl Iterator<Item = (String, ignore::DirEntry)> + '_ {
    worktree_walker(root)
        .build()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_some_and(|kind| !kind.is_dir()))
        .filter_map(move |entry| Some((relative(root, entry.path())?, entry)))
}

/// [`worktree_entries`] walked on several threads (the `ignore` crate's parallel walker, as
/// ripgrep walks), sorted by path: for the tools that need every entry before they answer
/// (`code_search`, `file_search`). Threads: the machine's parallelism, at most 8.
pub fn worktree_entries_sorted(root: &Path) -> Vec<(String, ignore::DirEntry)> {
    use std::sync::Mutex;
    /// One walker thread's entries, handed to the shared list in batches and when dropped.
    struct Batch<'a> {
        mine: Vec<(String, ignore::DirEntry)>,
        all: &'a Mutex<Vec<(String, ignore::DirEntry)>>,
    }
    impl Batch<'_> {
        fn flush(&mut self) {
            if let Ok(mut all) = self.all.lock() {
                all.append(&mut self.mine);
            }
        }
    }
    impl Drop for Batch<'_> {
        fn drop(&mut self) {
            self.flush();
        }
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let all = Mutex::new(Vec::new());
    worktree_walker(root)
        .threads(threads)
        .build_parallel()
        .run(|| {
            let mut batch = Batch {
                mine: Vec::new(),
                all: &all,
            };
            Box::new(move |entry| {
                if let Ok(entry) = entry
                    && entry.file_type().is_some_and(|kind| !kind.is_dir())
                    && let Some(rel) = relative(root, entry.path())
                {
                    batch.mine.push((rel, entry));
                    if batch.mine.len() >= 256 {
                        batch.flush();
                    }
                }
                ignore::WalkState::Continue
            })
        });
    let mut all = all.into_inner().unwrap_or_default();
    all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    all
}

/// The walk of [`worktree_entries`] before it is built (sequential or parallel): git's ignore
/// files honoured, hidden files included, links not followed, `.git` skipped.
pub fn worktree_walker(root: &Path) -> ignore::WalkBuilder {
    let mut walk = ignore::WalkBuilder::new(root);
    walk.hidden(false)
        .follow_links(false)
        .require_git(false)
        .filter_entry(|e| e.depth() == 0 || e.file_name() != ".git");
    walk
}

/// `path` under `root` as a '/'-separated relative path, lossily decoded.
pub fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel: Vec<String> = path
        .strip_prefix(root)
        .ok()?
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    Some(rel.join("/"))
}

/// `tool.path_not_found` for `path`, `where_` saying at which revision.
pub fn not_found(path: &str, where_: &str) -> GatewayError {
    GatewayError::new(
        codes::TOOL_PATH_NOT_FOUND,
        format!("nothing is stored at `{}` {where_}", printable(path)),
        "Check the path (relative to the repository root) and the revision; `file_search` \
         lists the files.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_paths() {
        for (input, expect) in [
            ("a/b.rs", "a/b.rs"),
            ("./a//b", "a/b"),
            ("a/../b", "b"),
            ("-rf", "-rf"),
            ("a..b", "a..b"),
            ("", ""),
        ] {
            assert_eq!(normalize(input).ok().as_deref(), Some(expect), "{input:?}");
        }
        for bad in [
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a\0b",
            "a\\b",
            ".git/config",
            "C:x",
        ] {
            let err = normalize(bad).expect_err(bad);
            assert_eq!(err.code, codes::TOOL_PATH_OUTSIDE_REPOSITORY, "{bad:?}");
        }
    }

    #[test]
    fn workspace_paths() {
        for (input, expect) in [("a/b", "a/b"), ("p/.github/x", "p/.github/x"), ("", "")] {
            let got = normalize_in(Base::Workspace, input);
            assert_eq!(got.ok().as_deref(), Some(expect), "{input:?}");
        }
        // `.git` at any depth in a workspace; only first in a repository.
        for bad in [
            "p/.git/hooks/pre-commit",
            "a/b/.GIT",
            ".git",
            "../x",
            "/etc",
        ] {
            let err = normalize_in(Base::Workspace, bad).expect_err(bad);
            assert_eq!(err.code, codes::TOOL_PATH_OUTSIDE_REPOSITORY, "{bad:?}");
            assert!(err.remediation.contains("workspace"), "{}", err.remediation);
        }
        assert_eq!(
            normalize("p/.git/config").ok().as_deref(),
            Some("p/.git/config")
        );
    }

    #[test]
    fn globs() {
        for ok in [
            "src/**/*.rs",
            "*.toml",
            "./a/b",
            "a..b/*",
            "\\*x",
            ".github/**",
            ".gitignore",
        ] {
            assert!(check_glob(ok).is_ok(), "{ok:?}");
        }
        for bad in [
            "../x",
            "a/../../x",
            "/etc/*",
            "C:\\x",
            "x\0y",
            ".git/config",
            "p/.GIT/*",
            "**/.git/**",
        ] {
            let err = check_glob(bad).expect_err(bad);
            assert_eq!(err.code, codes::TOOL_PATH_OUTSIDE_REPOSITORY, "{bad:?}");
        }
    }

    #[test]
    fn link_targets() {
        assert!(link_stays_inside(&["a"], "../b"));
        assert!(link_stays_inside(&[], "b/c"));
        assert!(!link_stays_inside(&[], "../b"));
        assert!(!link_stays_inside(&["a"], "../../b"));
        assert!(!link_stays_inside(&[], "/tmp"));
    }
}
