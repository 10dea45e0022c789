//! Files and directories only the user may read (DESIGN §9, issue 12 §3): a temporary file
//! created with mode 0600 in the target's directory, written and synced, then moved into place
//! in one step; the state dir made 0700 and the stores created 0600 whichever command creates
//! them first ([`ensure_private_dir`], [`ensure_private_file`]).
//!
//! **Decision:** a store file or state dir that group or others may read is *repaired* (mode
//! set to 0600/0700, a warning logged), not refused as the token file is: the store's
//! contents are not a credential that must be replaced once exposed, and refusing would stop
//! the daemon on a file left by an earlier version.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What to do when the target exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IfExists {
    /// Replace it atomically (rename over it).
    Replace,
    /// Fail with `io::ErrorKind::AlreadyExists` and leave it untouched (hard link, which never
    /// overwrites).
    Fail,
}

/// Write `contents` to `path` atomically with mode 0600, creating the parent directory (mode
/// 0700) if needed. Readers see either the old file or the complete new one, never a part.
///
/// # Errors
/// Any I/O error; with [`IfExists::Fail`], `AlreadyExists` when `path` exists.
pub(crate) fn write_private(path: &Path, contents: &[u8], if_exists: IfExists) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    create_private_dir(&dir)?;
    let (tmp, mut file) = create_temp(&dir, path)?;
    let result = (|| {
        file.write_all(contents)?;
        file.sync_all()?;
        drop(file);
        match if_exists {
            IfExists::Replace => fs::rename(&tmp, path),
            IfExists::Fail => fs::hard_link(&tmp, path),
        }
    })();
    if result.is_err() || if_exists == IfExists::Fail {
        let _ = fs::remove_file(&tmp);
    }
    result?;
    // Make the rename durable; failure here (e.g. a filesystem without directory fsync) does not
    // undo the write.
    if let Ok(d) = File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Create `dir` and its parents; a directory this creates gets mode 0700.
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Makes the directory `dir` private (issue 12 §3: the state dir holds request bodies and
/// finding evidence): created with its missing parents at mode 0700, or, when it exists with
/// any group or world permission bit, repaired to 0700 with a warning in the log. Returns the
/// previous mode when it repaired one.
///
/// # Errors
/// The I/O error of creating the directory, reading its metadata or changing its mode; an
/// `InvalidInput` error when `dir` exists and is not a directory.
pub fn ensure_private_dir(dir: &Path) -> io::Result<Option<u32>> {
    if !dir.exists() {
        create_private_dir(dir)?;
        return Ok(None);
    }
    if !dir.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a directory", dir.display()),
        ));
    }
    tighten(dir, 0o700, "directory")
}

/// Makes the file `path` private: created empty at mode 0600 when missing (before anything is
/// written to it, so no other user can open it in between), or, when it exists with any group
/// or world permission bit, repaired to 0600 with a warning in the log. Returns the previous
/// mode when it repaired one. Used for the stores (`gateway.redb`, `symbols.redb`), which
/// their database library would otherwise create with the umask's mode (usually 0644).
///
/// # Errors
/// The I/O error of creating the file, reading its metadata or changing its mode.
pub fn ensure_private_file(path: &Path) -> io::Result<Option<u32>> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(_) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => tighten(path, 0o600, "file"),
        Err(e) => Err(e),
    }
}

/// Sets `path` to `mode` when it has any group or world bit; returns the old mode then.
#[cfg(unix)]
fn tighten(path: &Path, mode: u32, what: &str) -> io::Result<Option<u32>> {
    use std::os::unix::fs::PermissionsExt;
    let old = fs::metadata(path)?.permissions().mode() & 0o7777;
    if old & 0o077 == 0 {
        return Ok(None);
    }
    fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    tracing::warn!(
        path = %path.display(),
        old_mode = format_args!("{old:04o}"),
        new_mode = format_args!("{mode:04o}"),
        "the {what} was readable by other users; made it private"
    );
    Ok(Some(old))
}

#[cfg(not(unix))]
fn tighten(_path: &Path, _mode: u32, _what: &str) -> io::Result<Option<u32>> {
    // The per-user profile directories holding the state dir are private on Windows.
    Ok(None)
}

/// A new, empty file with mode 0600 next to `target`, named `.<target name>.tmp-<pid>-<n>`.
fn create_temp(dir: &Path, target: &Path) -> io::Result<(PathBuf, File)> {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".to_owned());
    let pid = std::process::id();
    for attempt in 0..100u32 {
        let nonce = getrandom::u64().unwrap_or(u64::from(attempt));
        let tmp = dir.join(format!(".{name}.tmp-{pid}-{nonce:x}"));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        match options.open(&tmp) {
            Ok(file) => {
                // The umask can only remove bits from 0600, but be explicit before any byte is
                // written.
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    file.set_permissions(fs::Permissions::from_mode(0o600))?;
                }
                return Ok((tmp, file));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "cannot create a temporary file",
    ))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn replace_and_fail_modes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub").join("f");
        write_private(&path, b"one", IfExists::Fail).expect("create");
        let mode = fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let err = write_private(&path, b"two", IfExists::Fail).expect_err("exists");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&path).expect("read"), b"one");
        write_private(&path, b"three", IfExists::Replace).expect("replace");
        assert_eq!(fs::read(&path).expect("read"), b"three");
        let leftovers = fs::read_dir(path.parent().expect("parent"))
            .expect("dir")
            .count();
        assert_eq!(leftovers, 1, "no temporary files left behind");
    }
}
