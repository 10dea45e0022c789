//! Writing and removing registrations: the only module (with [`crate::registry`]) that changes
//! the machine.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::InstallerError;
use crate::launcher;
use crate::manifest;
use crate::plan::{Location, RegistryKey, Target};
use crate::registry;

/// One change made (or, with `dry_run`, that would be made), in the order performed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A directory was created.
    CreatedDir(PathBuf),
    /// A manifest file was written.
    WroteManifest(PathBuf),
    /// A launcher script was written (mode 0755).
    WroteLauncher(PathBuf),
    /// A registry key's default value was set to the manifest path (Windows).
    SetRegistry {
        /// The key.
        key: RegistryKey,
        /// The value written.
        value: PathBuf,
    },
    /// A file was removed.
    Removed(PathBuf),
    /// An emptied manifest directory was removed.
    RemovedDir(PathBuf),
    /// A registry key was deleted (Windows).
    DeletedRegistry(RegistryKey),
    /// A file at one of our locations was left alone because it is not ours.
    SkippedNotOurs {
        /// The file.
        path: PathBuf,
        /// Why we think it is not ours.
        reason: String,
    },
}

impl Action {
    /// The action as something that would be done (`would write manifest …`), for a dry run's
    /// output: a dry run changes nothing, so it must not say "wrote" (issue 12 §5).
    pub fn planned(&self) -> String {
        match self {
            Action::CreatedDir(p) => format!("would create directory {}", p.display()),
            Action::WroteManifest(p) => format!("would write manifest {}", p.display()),
            Action::WroteLauncher(p) => format!("would write launcher {}", p.display()),
            Action::SetRegistry { key, value } => {
                format!("would set registry key {key} = {}", value.display())
            }
            Action::Removed(p) => format!("would remove {}", p.display()),
            Action::RemovedDir(p) => format!("would remove empty directory {}", p.display()),
            Action::DeletedRegistry(key) => format!("would delete registry key {key}"),
            Action::SkippedNotOurs { path, reason } => {
                format!("would leave {} in place: {reason}", path.display())
            }
        }
    }
}

/// What was done, in the past tense (`wrote manifest …`); [`Action::planned`] for a dry run.
impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::CreatedDir(p) => write!(f, "created directory {}", p.display()),
            Action::WroteManifest(p) => write!(f, "wrote manifest {}", p.display()),
            Action::WroteLauncher(p) => write!(f, "wrote launcher {}", p.display()),
            Action::SetRegistry { key, value } => {
                write!(f, "set registry key {key} = {}", value.display())
            }
            Action::Removed(p) => write!(f, "removed {}", p.display()),
            Action::RemovedDir(p) => write!(f, "removed empty directory {}", p.display()),
            Action::DeletedRegistry(key) => write!(f, "deleted registry key {key}"),
            Action::SkippedNotOurs { path, reason } => {
                write!(f, "left {} in place: {reason}", path.display())
            }
        }
    }
}

/// Write every target: create missing directories, the manifest (UTF-8, no BOM, via a temporary
/// file renamed into place), the launcher (mode 0755) and the registry key. A path or key shared
/// by several targets is written once. With `dry_run`, nothing is touched and the actions that
/// would be performed are returned.
///
/// # Errors
/// [`InstallerError::Io`] / [`InstallerError::Registry`] for the first write the machine
/// refuses; what was written before it stays written (the actions are not returned then, so run
/// `uninstall` or re-run `install` after fixing the cause).
pub fn install(targets: &[Target], dry_run: bool) -> Result<Vec<Action>, InstallerError> {
    if !dry_run {
        // Refuse a Windows plan off Windows before writing any of its files.
        if let Some(key) = targets.iter().find_map(|t| t.location.registry.as_ref()) {
            registry::ensure_supported(key)?;
        }
    }
    let mut actions = Vec::new();
    let mut seen_files = HashSet::new();
    let mut seen_keys = HashSet::new();
    for target in targets {
        let location = &target.location;
        if seen_files.insert(location.manifest_path.clone()) {
            if let Some(dir) = location.manifest_path.parent() {
                create_dirs(dir, dry_run, &mut actions)?;
            }
            let text = manifest::to_file_text(&target.manifest);
            if !dry_run {
                write_atomic(&location.manifest_path, text.as_bytes(), false)?;
            }
            actions.push(Action::WroteManifest(location.manifest_path.clone()));
            if let (Some(path), Some(script)) = (&location.launcher_path, &target.launcher) {
                if !dry_run {
                    write_atomic(path, script.as_bytes(), true)?;
                }
                actions.push(Action::WroteLauncher(path.clone()));
            }
        }
        if let Some(key) = &location.registry
            && seen_keys.insert(key.clone())
        {
            if !dry_run {
                registry::set_default(key, &location.manifest_path)?;
            }
            actions.push(Action::SetRegistry {
                key: key.clone(),
                value: location.manifest_path.clone(),
            });
        }
    }
    Ok(actions)
}

/// Remove our registration at every location: the manifest if its `name` is ours, the launcher
/// if it carries [`launcher::LAUNCHER_MARKER`], the registry key if it points at our manifest,
/// then the manifest directory if that left it empty. Anything else found there is left alone
/// and reported as [`Action::SkippedNotOurs`]. Missing files are not an error. With `dry_run`,
/// nothing is touched.
///
/// # Errors
/// [`InstallerError::Io`] / [`InstallerError::Registry`] when a removal is refused.
pub fn uninstall(locations: &[Location], dry_run: bool) -> Result<Vec<Action>, InstallerError> {
    let mut actions = Vec::new();
    let mut seen_files = HashSet::new();
    let mut seen_keys = HashSet::new();
    for location in locations {
        if let Some(key) = &location.registry
            && seen_keys.insert(key.clone())
        {
            match registry::get_default(key)? {
                Some(value) if Path::new(&value) == location.manifest_path => {
                    if !dry_run {
                        registry::delete(key)?;
                    }
                    actions.push(Action::DeletedRegistry(key.clone()));
                }
                Some(value) => actions.push(Action::SkippedNotOurs {
                    path: PathBuf::from(key.to_string()),
                    reason: format!("the key points at {value}, not at our manifest"),
                }),
                None => {}
            }
        }
        if !seen_files.insert(location.manifest_path.clone()) {
            continue;
        }
        let manifest_path = &location.manifest_path;
        if let Some(bytes) = read_if_exists(manifest_path)? {
            match ours(&bytes) {
                Ok(()) => {
                    remove(manifest_path, dry_run)?;
                    actions.push(Action::Removed(manifest_path.clone()));
                }
                Err(reason) => actions.push(Action::SkippedNotOurs {
                    path: manifest_path.clone(),
                    reason,
                }),
            }
        }
        if let Some(launcher_path) = &location.launcher_path
            && let Some(bytes) = read_if_exists(launcher_path)?
        {
            if String::from_utf8_lossy(&bytes).contains(launcher::LAUNCHER_MARKER) {
                remove(launcher_path, dry_run)?;
                actions.push(Action::Removed(launcher_path.clone()));
            } else {
                actions.push(Action::SkippedNotOurs {
                    path: launcher_path.clone(),
                    reason: "it is not a launcher written by `install`".into(),
                });
            }
        }
        if !dry_run
            && let Some(dir) = manifest_path.parent()
            && fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none())
            && fs::remove_dir(dir).is_ok()
        {
            actions.push(Action::RemovedDir(dir.to_path_buf()));
        }
    }
    Ok(actions)
}

/// `Ok` when the manifest bytes are a JSON object whose `name` is [`crate::HOST_NAME`].
fn ours(bytes: &[u8]) -> Result<(), String> {
    let body = bytes.strip_prefix(manifest::BOM).unwrap_or(bytes);
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(value) => match value.get("name").and_then(|n| n.as_str()) {
            Some(crate::HOST_NAME) => Ok(()),
            Some(other) => Err(format!("its name is {other:?}, not {:?}", crate::HOST_NAME)),
            None => Err("it has no `name`".into()),
        },
        Err(e) => Err(format!(
            "it is not a JSON manifest ({e}); remove it by hand if it is ours"
        )),
    }
}

fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>, InstallerError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(InstallerError::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn remove(path: &Path, dry_run: bool) -> Result<(), InstallerError> {
    if dry_run {
        return Ok(());
    }
    fs::remove_file(path).map_err(|source| InstallerError::Io {
        action: "remove",
        path: path.to_path_buf(),
        source,
    })
}

fn create_dirs(dir: &Path, dry_run: bool, actions: &mut Vec<Action>) -> Result<(), InstallerError> {
    let mut missing = Vec::new();
    let mut cursor = Some(dir);
    while let Some(d) = cursor {
        if d.as_os_str().is_empty() || d.is_dir() {
            break;
        }
        missing.push(d.to_path_buf());
        cursor = d.parent();
    }
    for d in missing.into_iter().rev() {
        if !dry_run {
            fs::create_dir(&d)
                .or_else(|e| if d.is_dir() { Ok(()) } else { Err(e) })
                .map_err(|source| InstallerError::Io {
                    action: "create the directory",
                    path: d.clone(),
                    source,
                })?;
        }
        actions.push(Action::CreatedDir(d));
    }
    Ok(())
}

/// Write `bytes` to a temporary sibling, set its mode, rename it over `path`.
fn write_atomic(path: &Path, bytes: &[u8], executable: bool) -> Result<(), InstallerError> {
    let io = |action: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |source| InstallerError::Io {
            action,
            path: p,
            source,
        }
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{file_name}.tmp-{}", std::process::id()));
    fs::write(&tmp, bytes).map_err(io("write", &tmp))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = if executable { 0o755 } else { 0o644 };
        fs::set_permissions(&tmp, fs::Permissions::from_mode(mode)).map_err(io("chmod", &tmp))?;
    }
    #[cfg(not(unix))]
    let _ = executable;
    fs::rename(&tmp, path).map_err(|source| {
        let _ = fs::remove_file(&tmp);
        InstallerError::Io {
            action: "write",
            path: path.to_path_buf(),
            source,
        }
    })
}
