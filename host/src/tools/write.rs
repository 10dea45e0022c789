//! The write tools' file primitives (issue 14 §3): [`atomic_write`] replaces a file so a reader
//! sees the old content or the new, never a part; [`replace_exact`] is the exact-text edit.
//!
//! Neither checks paths: the caller resolves `dir` and `name` with the safe-path rules of
//! [`super::path`] (and the workspace's write permission) first. [`atomic_write`] refuses a
//! symbolic link or a directory at the target itself, so a link planted after that check is
//! replaced, never followed.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::{GatewayError, codes};

/// Attempts at a fresh temporary name before giving up (names are random, so a second is rare).
const TEMP_ATTEMPTS: usize = 8;

/// Characters of the target's name kept in the temporary file's name (file names are limited
/// to 255 bytes on most file systems).
const TEMP_NAME_CHARS: usize = 64;

/// Writes `bytes` to `dir/name` atomically.
///
/// The bytes go to a new temporary file `.<name>.tmp-<16 hex digits>` in `dir` (created with
/// `create_new`, so nothing existing is reused), which gets the permission bits of the file it
/// replaces (a new file keeps the default mode: 0o666 masked by the umask on Unix), is synced
/// to disk, and is renamed over `dir/name` — atomic on one file system (POSIX `rename(2)`,
/// `MoveFileEx` with replace on Windows). The directory is then synced, best effort (so the
/// rename survives a crash where the system allows it). On any failure the temporary file is
/// removed. The owner and extended attributes of a replaced file are not kept, and other hard
/// links to it keep the old content (the name gets a new file).
///
/// # Errors
///
/// Kind `InvalidInput` when `name` is not one plain file name (empty, `.`, `..`, or with a
/// separator) or when `dir/name` is a symbolic link or a directory; otherwise the I/O error of
/// the step that failed (reading the old metadata, creating, writing, syncing, renaming).
pub fn atomic_write(dir: &Path, name: &OsStr, bytes: &[u8]) -> io::Result<()> {
    let mut components = Path::new(name).components();
    let plain = matches!(
        (components.next(), components.next()),
        (Some(std::path::Component::Normal(n)), None) if n == name
    );
    if !plain {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a plain file name"),
        ));
    }
    let target = dir.join(name);
    let permissions = match fs::symlink_metadata(&target) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} is a symbolic link; it is not written through",
                    target.display()
                ),
            ));
        }
        Ok(meta) if meta.is_dir() => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is a directory", target.display()),
            ));
        }
        Ok(meta) => Some(meta.permissions()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let (mut file, temp) = create_temp(dir, name)?;
    let written = (|| {
        file.write_all(bytes)?;
        if let Some(permissions) = permissions {
            file.set_permissions(permissions)?;
        }
        file.sync_all()?;
        drop(file);
        fs::rename(temp.path(), &target)
    })();
    match written {
        Ok(()) => {
            temp.disarm();
            // Best effort: some systems (Windows) cannot open or sync a directory.
            let _ = File::open(dir).and_then(|d| d.sync_all());
            Ok(())
        }
        // `temp` is dropped here and removes the temporary file.
        Err(e) => Err(e),
    }
}

/// Creates the temporary file next to the target.
fn create_temp(dir: &Path, name: &OsStr) -> io::Result<(File, TempFile)> {
    let shown: String = name
        .to_string_lossy()
        .chars()
        .take(TEMP_NAME_CHARS)
        .collect();
    let mut last = None;
    for _ in 0..TEMP_ATTEMPTS {
        let nonce = getrandom::u64().map_err(|e| io::Error::other(e.to_string()))?;
        let mut temp_name = OsString::from(".");
        temp_name.push(&shown);
        temp_name.push(format!(".tmp-{nonce:016x}"));
        let path = dir.join(temp_name);
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => return Ok((file, TempFile { path: Some(path) })),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no temporary name was free")))
}

/// A temporary file removed on drop unless [`TempFile::disarm`]ed.
struct TempFile {
    // Invariant: `Some` until disarmed; the path of a file this process created.
    path: Option<PathBuf>,
}

impl TempFile {
    fn path(&self) -> &Path {
        self.path.as_deref().unwrap_or(Path::new(""))
    }

    /// The file was renamed into place: nothing to remove.
    fn disarm(mut self) {
        self.path = None;
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            let _ = fs::remove_file(path);
        }
    }
}

/// Why [`replace_exact`] refused. [`GatewayError`] codes: `edit.no_match`,
/// `edit.count_mismatch`, and `request.invalid` for [`Empty`](ReplaceError::Empty).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplaceError {
    /// The text to replace is empty, or zero occurrences were asked for.
    #[error("the text to replace must be non-empty and expected at least once")]
    Empty,
    /// The text to replace is not in the file.
    #[error(
        "the text to replace is not in the file{}",
        match near_line {
            Some(line) => format!(
                "; it matches at line {line} when whitespace (indentation, line breaks, \
                 trailing spaces) is ignored"
            ),
            None => String::new(),
        }
    )]
    NoMatch {
        /// The line (from 1) where a match ignoring whitespace differences starts, if any.
        near_line: Option<usize>,
    },
    /// The text occurs a different number of times than expected.
    #[error("the text to replace occurs {found} times, {expected} expected")]
    CountMismatch {
        /// Occurrences found (non-overlapping, from the start).
        found: usize,
        /// Occurrences expected.
        expected: usize,
    },
}

impl From<ReplaceError> for GatewayError {
    fn from(err: ReplaceError) -> Self {
        let message = err.to_string();
        match err {
            ReplaceError::Empty => GatewayError::new(
                codes::REQUEST_INVALID,
                message,
                "Give the exact text to replace, and an expected count of 1 or more.",
            ),
            ReplaceError::NoMatch { .. } => GatewayError::new(
                codes::EDIT_NO_MATCH,
                message,
                "Read the file again and copy the text to replace exactly, with its indentation \
                 and line breaks.",
            ),
            ReplaceError::CountMismatch { .. } => GatewayError::new(
                codes::EDIT_COUNT_MISMATCH,
                message,
                "Add surrounding lines to the text to replace so it occurs once, or give the \
                 number of occurrences to replace them all.",
            ),
        }
    }
}

/// Replaces every occurrence of `old` in `text` by `new`, when there are exactly `expected` of
/// them (1 when `None`).
///
/// Occurrences are counted as [`str::matches`] finds them: non-overlapping, from the start.
/// Returns the new text and the number of replacements.
///
/// # Errors
///
/// [`ReplaceError::Empty`] for an empty `old` or `expected` of 0; [`ReplaceError::NoMatch`] when
/// `old` is absent (naming the line where a match ignoring whitespace starts, if one does);
/// [`ReplaceError::CountMismatch`] when the count differs.
pub fn replace_exact(
    text: &str,
    old: &str,
    new: &str,
    expected: Option<usize>,
) -> Result<(String, usize), ReplaceError> {
    let expected = expected.unwrap_or(1);
    if old.is_empty() || expected == 0 {
        return Err(ReplaceError::Empty);
    }
    let found = text.matches(old).count();
    if found == 0 {
        return Err(ReplaceError::NoMatch {
            near_line: whitespace_match_line(text, old),
        });
    }
    if found != expected {
        return Err(ReplaceError::CountMismatch { found, expected });
    }
    Ok((text.replace(old, new), found))
}

/// The line (from 1) where `old`'s words first occur in `text` as consecutive words, whatever
/// the whitespace between them.
fn whitespace_match_line(text: &str, old: &str) -> Option<usize> {
    let wanted: Vec<&str> = old.split_whitespace().collect();
    if wanted.is_empty() {
        return None;
    }
    let words: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .flat_map(|(i, line)| line.split_whitespace().map(move |w| (i + 1, w)))
        .collect();
    words
        .windows(wanted.len())
        .find(|window| window.iter().map(|(_, w)| w).eq(wanted.iter()))
        .map(|window| window[0].0)
}

#[cfg(test)]
mod tests;
