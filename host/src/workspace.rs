//! MCP workspaces (DESIGN §12): the directories MCP clients may reach, and the opaque handles
//! that name them.
//!
//! - **Roots** ([`Roots`]) come from the config: `[mcp] roots` (each read-only unless
//!   `writable = true`) and, read-only, the `local_path` of every confirmed `[[mappings]]`
//!   entry. None configured: every directory is refused. Each root is canonicalized when the
//!   roots are built (at start and on each config reload); one that does not exist then is
//!   left out, with a warning in the log. Roots grant, never restrict: a workspace is writable
//!   when any root that holds it is writable.
//! - **[`Workspaces::open`]** canonicalizes a directory (so a symbolic link is judged by its
//!   target), checks it with the pure [`policy`] (by path component, never a filesystem root,
//!   never inside `.git`, case-insensitive on Windows), and answers a [`Workspace`] with an
//!   opaque, unguessable handle `ws_<32 hex digits>` (128 bits from the OS's random source).
//!   Opening the same directory again answers the same handle.
//! - Handles are **stored** (the `workspaces` table of [`Store`]) and survive a restart.
//!   **[`Workspaces::get`]** re-checks on every use: the directory still exists, is still the
//!   directory the handle was bound to (no component replaced by a symbolic link), and is inside
//!   a root configured *now*; [`Workspace::writable`] is what the roots allow now.
//! - Paths inside a workspace ([`Workspace::resolve`], [`Workspace::resolve_for_write`]) follow
//!   `tools/path.rs` with [`Base::Workspace`]: relative, `/`-separated, no `..` out, no NUL or
//!   backslash, no `.git` component at any depth, nothing resolving outside through a link.
//!
//! A handle is a name, not a credential: whoever may call the gateway may open any directory
//! the roots allow. What protects the directories is the roots and the gateway's own
//! authentication.
//!
//! **Invariant:** no path reaches a tool from here without [`Workspaces::get`]'s re-check of
//! the roots configured now.

pub mod policy;

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

pub use installer::Os;

use crate::config::Config;
use crate::error::{GatewayError, codes};
use crate::store::{Store, WorkspaceRecord};
use crate::tools::path::{self as tool_path, Base};
use policy::Refusal;

/// Length of a handle's random part in bytes (128 bits).
const HANDLE_BYTES: usize = 16;
/// The handle prefix.
const HANDLE_PREFIX: &str = "ws_";

// === Roots ===

/// Where a root comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootSource {
    /// `[mcp] roots`.
    Config,
    /// The `local_path` of a confirmed `[[mappings]]` entry (always read-only).
    Mapping,
}

/// One allowed root, canonicalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    // Invariant: canonical when built by `Roots::from_config`, and valid UTF-8.
    path: String,
    writable: bool,
    source: RootSource,
}

impl Root {
    /// The canonical directory.
    pub fn path(&self) -> &Path {
        Path::new(&self.path)
    }

    /// Whether workspaces under it may be written.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// Where it was configured.
    pub fn source(&self) -> RootSource {
        self.source
    }
}

/// The allowed roots of one configuration, for one platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    platform: Os,
    roots: Vec<Root>,
}

impl Roots {
    /// The roots of `config` on this platform: `[mcp] roots`, then each mapping's
    /// `local_path` (read-only), each canonicalized. A root that cannot be canonicalized (it
    /// does not exist), is not valid UTF-8, or resolves to a filesystem root is left out with a
    /// warning.
    pub fn from_config(config: &Config) -> Roots {
        let configured = config
            .mcp
            .roots
            .iter()
            .map(|r| (r.path.as_path(), r.writable, RootSource::Config));
        let mapped = config
            .mappings
            .iter()
            .map(|m| (m.local_path.as_path(), false, RootSource::Mapping));
        Roots::canonical(Os::current(), configured.chain(mapped))
    }

    /// Roots from `(path, writable, source)` entries, canonicalized on this machine and judged
    /// by `platform`'s rules (left out as by [`Roots::from_config`]).
    pub fn canonical<'a>(
        platform: Os,
        entries: impl IntoIterator<Item = (&'a Path, bool, RootSource)>,
    ) -> Roots {
        let mut roots = Vec::new();
        for (path, writable, source) in entries {
            let canonical = match std::fs::canonicalize(path) {
                Ok(canonical) => canonical,
                Err(error) => {
                    tracing::warn!(root = %path.display(), %error, "an MCP root is left out: it cannot be resolved");
                    continue;
                }
            };
            let Some(text) = canonical.to_str() else {
                tracing::warn!(root = %path.display(), "an MCP root is left out: its path is not UTF-8");
                continue;
            };
            match policy::parse(platform, text) {
                Ok(parsed) if !parsed.is_filesystem_root() => roots.push(Root {
                    path: text.to_owned(),
                    writable,
                    source,
                }),
                _ => {
                    tracing::warn!(root = %path.display(), resolved = text, "an MCP root is left out: it resolves to a filesystem root");
                }
            }
        }
        Roots { platform, roots }
    }

    /// The platform whose rules these roots follow.
    pub fn platform(&self) -> Os {
        self.platform
    }

    /// The roots, configured ones first.
    pub fn roots(&self) -> &[Root] {
        &self.roots
    }

    /// Whether the canonical `path` may be a workspace: `Ok(writable)`.
    fn check(&self, path: &str) -> Result<bool, Refusal> {
        let texts: Vec<&str> = self.roots.iter().map(|r| r.path.as_str()).collect();
        let inside = policy::check(self.platform, &texts, path)?;
        Ok(inside.iter().any(|&i| self.roots[i].writable))
    }
}

// === Workspace ===

/// A workspace checked against the roots configured now (from [`Workspaces::open`] or
/// [`Workspaces::get`]). Holds no lock: check it again with [`Workspaces::get`] for each call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    handle: String,
    // Invariant: canonical, inside a root when this value was made.
    dir: PathBuf,
    writable: bool,
}

impl Workspace {
    /// The opaque handle, `ws_…`.
    pub fn handle(&self) -> &str {
        &self.handle
    }

    /// The canonical directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether a root that holds it allows writes now.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// Refuses a write in a read-only workspace.
    ///
    /// # Errors
    /// `workspace.read_only` when no root that holds it is writable.
    pub fn require_writable(&self) -> Result<(), GatewayError> {
        if self.writable {
            return Ok(());
        }
        Err(GatewayError::new(
            codes::WORKSPACE_READ_ONLY,
            format!(
                "workspace {} ({}) is read-only",
                self.handle,
                self.dir.display()
            ),
            "Writes need a root with `writable = true` in the `[mcp] roots` of the gateway's \
             config (the mappings' directories are read-only roots); the user edits it, a tool \
             cannot.",
        ))
    }

    /// The canonical location of `relative` (a `/`-separated path from the workspace's
    /// directory; empty names the directory) for reading: it must exist.
    ///
    /// # Errors
    /// `tool.path_outside_repository` for an absolute path, a `..` out, a NUL or backslash, a
    /// `.git` component, or a path that resolves outside through a symbolic link;
    /// `tool.path_not_found` when nothing is there.
    pub fn resolve(&self, relative: &str) -> Result<PathBuf, GatewayError> {
        let rel = tool_path::normalize_in(Base::Workspace, relative)?;
        tool_path::resolve_in(Base::Workspace, &self.dir, &rel)
    }

    /// The location of `relative` for writing a file: the workspace must be writable, the
    /// parent directory must exist and resolve inside the workspace, and the path itself, when
    /// something is there, must not be a symbolic link (writes never go through one) or a
    /// directory. The file may not exist yet.
    ///
    /// # Errors
    /// `workspace.read_only`; as [`Workspace::resolve`] for the parent (`tool.path_not_found`
    /// when it does not exist); `tool.path_outside_repository` for a link or the workspace's
    /// own directory; `request.invalid` for a parent that is not a directory or a directory
    /// at the path.
    pub fn resolve_for_write(&self, relative: &str) -> Result<PathBuf, GatewayError> {
        self.require_writable()?;
        let rel = tool_path::normalize_in(Base::Workspace, relative)?;
        let (parent, name) = match rel.rsplit_once('/') {
            Some((parent, name)) => (parent, name),
            None if rel.is_empty() => {
                return Err(GatewayError::new(
                    codes::REQUEST_INVALID,
                    "the workspace's own directory is not a file".to_owned(),
                    "Give the path of a file inside the workspace.",
                ));
            }
            None => ("", rel.as_str()),
        };
        let parent_dir = tool_path::resolve_in(Base::Workspace, &self.dir, parent)?;
        if !parent_dir.is_dir() {
            return Err(GatewayError::new(
                codes::REQUEST_INVALID,
                format!("`{parent}` in the workspace is not a directory"),
                "Give the path of a file in an existing directory of the workspace.",
            ));
        }
        let target = parent_dir.join(name);
        match std::fs::symlink_metadata(&target) {
            Ok(meta) if meta.file_type().is_symlink() => Err(GatewayError::new(
                codes::TOOL_PATH_OUTSIDE_REPOSITORY,
                format!("`{rel}` is a symbolic link; writes never go through one"),
                "Write to the link's target instead, by its own path in the workspace.",
            )),
            Ok(meta) if meta.is_dir() => Err(GatewayError::new(
                codes::REQUEST_INVALID,
                format!("`{rel}` is a directory"),
                "Give the path of a file.",
            )),
            _ => Ok(target),
        }
    }
}

// === Workspaces ===

/// The opened workspaces: handles in the store, checked against the current roots.
/// `Send + Sync`; its methods block on the store and the file system.
pub struct Workspaces {
    store: Arc<Store>,
    roots: RwLock<Arc<Roots>>,
    // Canonical directories of the gateway's own data (config, state: the token, API keys, the
    // store, audit logs): no workspace may hold them or lie inside them.
    private: Vec<PathBuf>,
}

/// A path for messages, control characters escaped.
fn printable(path: &Path) -> String {
    path.display().to_string().escape_debug().to_string()
}

fn refusal(refusal: Refusal, path: &Path) -> GatewayError {
    let shown = printable(path);
    match refusal {
        Refusal::OutsideRoots | Refusal::NotCanonical => GatewayError::new(
            codes::WORKSPACE_OUTSIDE_ROOTS,
            format!("`{shown}` is inside no allowed root"),
            "Open a directory inside one of the gateway's allowed roots: `[mcp] roots` in its \
             config, or a mapped repository's directory (`review-agent-gateway mappings list`). \
             The user edits the config; a tool cannot.",
        ),
        Refusal::FilesystemRoot => GatewayError::new(
            codes::WORKSPACE_FILESYSTEM_ROOT,
            format!("`{shown}` is the root of a file system"),
            "Open a project directory inside an allowed root, not a whole file system.",
        ),
        Refusal::GitDir => GatewayError::new(
            codes::WORKSPACE_INSIDE_GIT_DIR,
            format!("`{shown}` is inside a `.git` directory"),
            "Open the repository's work tree (the directory that holds `.git`); git's own data \
             is read with the git tools.",
        ),
    }
}

fn not_found(path: &Path, why: &str) -> GatewayError {
    GatewayError::new(
        codes::WORKSPACE_NOT_FOUND,
        format!("`{}` {why}", printable(path)),
        "Check the directory's path, then open it again with `workspace_open`.",
    )
}

fn unknown(handle: &str) -> GatewayError {
    GatewayError::new(
        codes::WORKSPACE_UNKNOWN,
        format!("no workspace has the handle `{}`", handle.escape_debug()),
        "Open the directory with `workspace_open` and use the handle it answers.",
    )
}

/// Whether `handle` has the form of one [`Workspaces::open`] makes.
fn well_formed(handle: &str) -> bool {
    handle.strip_prefix(HANDLE_PREFIX).is_some_and(|hex| {
        hex.len() == HANDLE_BYTES * 2 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// A new random handle.
fn new_handle() -> Result<String, GatewayError> {
    let hex = crate::security::random_hex(HANDLE_BYTES, "a workspace handle")?;
    Ok(format!("{HANDLE_PREFIX}{hex}"))
}

/// `path` with `.` dropped and `..` applied lexically (for choosing an error only).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

impl Workspaces {
    /// The workspaces of `store`, checked against `roots`.
    pub fn new(store: Arc<Store>, roots: Roots) -> Workspaces {
        Workspaces {
            store,
            roots: RwLock::new(Arc::new(roots)),
            private: Vec::new(),
        }
    }

    /// These workspaces, refusing any directory that holds one of `dirs` or lies inside one
    /// (the gateway's config and state directories: its token, the API key files, the store,
    /// the audit logs — issue 14 §4, "no tool that changes the gateway's own configuration").
    /// Each is canonicalized now; one that does not exist is kept as given.
    pub fn with_private(mut self, dirs: &[PathBuf]) -> Workspaces {
        self.private = dirs
            .iter()
            .map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()))
            .collect();
        self
    }

    /// Refuses a canonical directory that holds or lies inside the gateway's own data.
    fn check_private(&self, dir: &Path) -> Result<(), GatewayError> {
        match self
            .private
            .iter()
            .find(|p| p.starts_with(dir) || dir.starts_with(p))
        {
            None => Ok(()),
            Some(_) => Err(GatewayError::new(
                codes::WORKSPACE_GATEWAY_DATA,
                format!(
                    "`{}` holds (or is inside) the gateway's own configuration or state",
                    printable(dir)
                ),
                "Open a project directory that does not contain the gateway's config and state \
                 directories (its token, API keys and store are never reachable by tools).",
            )),
        }
    }

    /// Replaces the roots (the config was reloaded); every later use is checked against these.
    pub fn set_roots(&self, roots: Roots) {
        *self.roots.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(roots);
    }

    /// The roots in force.
    pub fn roots(&self) -> Arc<Roots> {
        Arc::clone(&self.roots.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Opens the directory at absolute `path` as a workspace (the seed's `workspace_open`).
    ///
    /// # Errors
    /// - `request.invalid`: `path` is relative, or its canonical form is not UTF-8;
    /// - `workspace.outside_roots`: its canonical directory is inside no root (also answered
    ///   for a missing path outside every root, so existence outside the roots is not told);
    /// - `workspace.filesystem_root`, `workspace.inside_git_dir`: see [`policy`];
    /// - `workspace.not_found`: nothing is there (inside a root);
    /// - `workspace.not_a_directory`: it is a file;
    /// - `workspace.gateway_data`: it holds or lies inside the gateway's config or state
    ///   directory ([`Workspaces::with_private`]);
    /// - `store.unavailable` and the like when the handle cannot be stored.
    pub fn open(&self, path: &Path) -> Result<Workspace, GatewayError> {
        if !path.is_absolute() {
            return Err(GatewayError::new(
                codes::REQUEST_INVALID,
                format!("`{}` is not an absolute path", printable(path)),
                "Give the directory's absolute path.",
            ));
        }
        let roots = self.roots();
        let canonical = match std::fs::canonicalize(path) {
            Ok(canonical) => canonical,
            Err(error) => {
                let lexical = lexical(path);
                return Err(match lexical.to_str().map(|text| roots.check(text)) {
                    Some(Ok(_)) => not_found(path, &format!("cannot be opened: {error}")),
                    Some(Err(r)) => refusal(r, path),
                    None => refusal(Refusal::OutsideRoots, path),
                });
            }
        };
        let Some(text) = canonical.to_str() else {
            return Err(GatewayError::new(
                codes::REQUEST_INVALID,
                format!("`{}` is not a UTF-8 path", printable(&canonical)),
                "Open a directory whose path is valid UTF-8.",
            ));
        };
        let writable = roots.check(text).map_err(|r| refusal(r, &canonical))?;
        self.check_private(&canonical)?;
        if !canonical.is_dir() {
            return Err(GatewayError::new(
                codes::WORKSPACE_NOT_A_DIRECTORY,
                format!("`{}` is not a directory", printable(&canonical)),
                "Open the directory that holds it.",
            ));
        }
        let existing = self
            .store
            .workspaces()
            .map_err(GatewayError::from)?
            .into_iter()
            .find(|w| w.path == text);
        let handle = match existing {
            Some(record) => record.handle,
            None => {
                let record = WorkspaceRecord {
                    handle: new_handle()?,
                    path: text.to_owned(),
                    writable,
                    opened_at: crate::store::now_rfc3339(),
                };
                self.store.put_workspace(&record)?;
                tracing::info!(handle = %record.handle, writable, "workspace opened");
                record.handle
            }
        };
        Ok(Workspace {
            handle,
            dir: canonical,
            writable,
        })
    }

    /// The workspace with this handle, checked again: its directory still exists, is still
    /// the canonical directory it was bound to, and is inside a root configured now;
    /// [`Workspace::writable`] is what those roots allow now.
    ///
    /// # Errors
    /// `workspace.unknown` for a handle never answered here; `workspace.not_found` when the
    /// directory is gone or a component of it became a symbolic link; the refusals of
    /// [`Workspaces::open`] when the roots no longer allow it.
    pub fn get(&self, handle: &str) -> Result<Workspace, GatewayError> {
        if !well_formed(handle) {
            return Err(unknown(handle));
        }
        let record = self
            .store
            .get_workspace(handle)
            .map_err(GatewayError::from)?
            .ok_or_else(|| unknown(handle))?;
        let bound = PathBuf::from(&record.path);
        let roots = self.roots();
        // The roots first: a directory outside them is not described further.
        roots.check(&record.path).map_err(|r| refusal(r, &bound))?;
        let canonical = std::fs::canonicalize(&bound)
            .map_err(|e| not_found(&bound, &format!("cannot be opened any more: {e}")))?;
        if canonical != bound {
            return Err(not_found(
                &bound,
                &format!(
                    "now resolves to `{}` (a component was replaced by a symbolic link)",
                    printable(&canonical)
                ),
            ));
        }
        if !canonical.is_dir() {
            return Err(not_found(&bound, "is no longer a directory"));
        }
        let writable = roots.check(&record.path).map_err(|r| refusal(r, &bound))?;
        self.check_private(&canonical)?;
        Ok(Workspace {
            handle: record.handle,
            dir: canonical,
            writable,
        })
    }

    /// [`Workspaces::get`], then [`Workspace::resolve`]: a checked path to read.
    ///
    /// # Errors
    /// As those two.
    pub fn resolve(&self, handle: &str, relative: &str) -> Result<PathBuf, GatewayError> {
        self.get(handle)?.resolve(relative)
    }

    /// [`Workspaces::get`], then [`Workspace::resolve_for_write`]: a checked path to write.
    ///
    /// # Errors
    /// As those two (`workspace.read_only` among them).
    pub fn resolve_for_write(&self, handle: &str, relative: &str) -> Result<PathBuf, GatewayError> {
        self.get(handle)?.resolve_for_write(relative)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles() {
        let a = new_handle().expect("random");
        let b = new_handle().expect("random");
        assert_ne!(a, b);
        assert!(well_formed(&a), "{a}");
        assert_eq!(a.len(), 3 + 32);
        for bad in [
            "",
            "ws_",
            "ws_../../etc",
            "WS_00000000000000000000000000000000",
            "ws_0000000000000000000000000000000",
            "ws_000000000000000000000000000000000",
            "ws_0000000000000000000000000000000G",
            "ws_0000000000000000000000000000000A",
        ] {
            assert!(!well_formed(bad), "{bad}");
        }
    }

    #[test]
    fn lexical_paths() {
        assert_eq!(lexical(Path::new("/a/./b/../c")), Path::new("/a/c"));
        assert_eq!(lexical(Path::new("/../a")), Path::new("/a"));
    }
}
