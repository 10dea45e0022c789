//! The pure path policy of workspaces (DESIGN §11, §12): whether a canonical path may be a
//! workspace under a set of canonical roots, for an explicit platform.
//!
//! Paths are text parsed by each platform's own rules, so the Windows and macOS rules are
//! compiled and tested on Linux (DESIGN §11). Containment is decided **by component**, never by
//! string prefix: `/allowed_evil` is not inside `/allowed` (CVE-2025-53110 of the reference
//! filesystem server).
//!
//! - **Linux, macOS**: an absolute path starts with `/`; components are compared exactly.
//! - **Windows**: `C:\…` (drive), `\\server\share\…` (UNC), and their verbatim forms
//!   `\\?\C:\…` and `\\?\UNC\server\share\…` (what `std::fs::canonicalize` answers there); `/`
//!   separates like `\`. Components are compared case-insensitively (each character by its
//!   one-character upper case, as NTFS's upcase table does). Device paths (`\\.\`, `\\?\GLOBALROOT`,
//!   `\\?\Volume{…}`), drive-relative (`C:x`) and rooted-relative (`\x`) paths, and components
//!   Win32 would silently rewrite or treat specially (a trailing `.` or space, `:` of an
//!   alternate data stream, `<>"|?*`, device names such as `NUL` or `COM1`) are refused.
//!
//! **macOS is compared case-sensitively**, although its default file systems ignore case: both
//! sides are canonical (`realpath` answers each component in its stored case), so the same
//! directory is the same text; and a case-insensitive comparison would be wrong on a
//! case-sensitive APFS volume, where `/Users/me/Src` and `/Users/me/src` are two directories —
//! an exact comparison can only refuse, never widen.
//!
//! A filesystem root (`/`, `C:\`, `\\server\share\`) is never a workspace, and neither is a
//! directory inside a `.git` directory (compared without case on every platform).

use installer::Os;

/// Why a path cannot be a workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not an absolute path in this platform's canonical form (relative, `.` or `..`
    /// components, a device path, a component Windows would rewrite).
    NotCanonical,
    /// The root of a file system: `/`, `C:\`, `\\server\share\`.
    FilesystemRoot,
    /// Inside no root.
    OutsideRoots,
    /// Inside a `.git` directory (git's own data: hooks run code, config holds credentials).
    GitDir,
}

/// An absolute path split by a platform's rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// What the components hang from, as a comparison key: empty on Linux and macOS, `C:` for a
    /// drive, `\\SERVER\SHARE` for a UNC share (upper-cased on Windows).
    prefix: String,
    /// The components below the prefix, as comparison keys (upper-cased on Windows).
    components: Vec<String>,
}

impl Parsed {
    /// Whether this is the root of its file system (no component below the prefix).
    pub fn is_filesystem_root(&self) -> bool {
        self.components.is_empty()
    }

    /// Whether `self` is `root` or below it, component by component.
    pub fn is_inside(&self, root: &Parsed) -> bool {
        self.prefix == root.prefix && self.components.starts_with(&root.components)
    }

    /// Whether a component is `.git`, in any case.
    pub fn in_git_dir(&self) -> bool {
        self.components
            .iter()
            .any(|c| c.eq_ignore_ascii_case(".git"))
    }
}

/// Split the absolute canonical `path` by `platform`'s rules.
///
/// # Errors
/// [`Refusal::NotCanonical`] for anything but an absolute path without `.`/`..` components
/// (and, on Windows, without the forms listed in the module docs).
pub fn parse(platform: Os, path: &str) -> Result<Parsed, Refusal> {
    match platform {
        Os::Linux | Os::MacOs => parse_unix(path),
        Os::Windows => parse_windows(path),
    }
}

fn parse_unix(path: &str) -> Result<Parsed, Refusal> {
    let rest = path.strip_prefix('/').ok_or(Refusal::NotCanonical)?;
    if path.contains('\0') {
        return Err(Refusal::NotCanonical);
    }
    let mut components = Vec::new();
    for c in rest.split('/') {
        match c {
            "" => {}
            "." | ".." => return Err(Refusal::NotCanonical),
            name => components.push(name.to_owned()),
        }
    }
    Ok(Parsed {
        prefix: String::new(),
        components,
    })
}

/// Each character by its upper case when that is one character (NTFS's upcase table maps one
/// UTF-16 unit to one; `ß` stays `ß`).
fn fold(text: &str) -> String {
    text.chars()
        .map(|c| {
            let mut upper = c.to_uppercase();
            match (upper.next(), upper.next()) {
                (Some(u), None) => u,
                _ => c,
            }
        })
        .collect()
}

fn parse_windows(path: &str) -> Result<Parsed, Refusal> {
    if path.contains('\0') {
        return Err(Refusal::NotCanonical);
    }
    let path = path.replace('/', "\\");
    // The verbatim forms `std::fs::canonicalize` answers: `\\?\C:\…`, `\\?\UNC\server\share\…`.
    let (prefix, rest) = if let Some(verbatim) = path.strip_prefix(r"\\?\") {
        if let Some(unc) = strip_prefix_fold(verbatim, r"UNC\") {
            unc_share(unc)?
        } else {
            drive(verbatim)?
        }
    } else if let Some(unc) = path.strip_prefix(r"\\") {
        // `\\.\` (devices) and `\\?` without its backslash are not shares.
        if unc.starts_with('.') || unc.starts_with('?') {
            return Err(Refusal::NotCanonical);
        }
        unc_share(unc)?
    } else {
        drive(&path)?
    };
    let mut components = Vec::new();
    for c in rest.split('\\') {
        match c {
            "" => {}
            "." | ".." => return Err(Refusal::NotCanonical),
            name if !windows_name(name) => return Err(Refusal::NotCanonical),
            name => components.push(fold(name)),
        }
    }
    Ok(Parsed { prefix, components })
}

fn strip_prefix_fold<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// `C:\rest` → (`C:`, `rest`); a drive-relative `C:rest` or anything else is refused.
fn drive(path: &str) -> Result<(String, &str), Refusal> {
    let bytes = path.as_bytes();
    let is_drive =
        bytes.len() >= 3 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' && bytes[2] == b'\\';
    if !is_drive {
        return Err(Refusal::NotCanonical);
    }
    Ok((path[..2].to_ascii_uppercase(), &path[3..]))
}

/// `server\share\rest` → (`\\SERVER\SHARE`, `rest`).
fn unc_share(unc: &str) -> Result<(String, &str), Refusal> {
    let mut parts = unc.splitn(3, '\\');
    let server = parts.next().unwrap_or_default();
    let share = parts.next().unwrap_or_default();
    let rest = parts.next().unwrap_or_default();
    if server.is_empty() || share.is_empty() || !windows_name(server) || !windows_name(share) {
        return Err(Refusal::NotCanonical);
    }
    Ok((format!(r"\\{}\{}", fold(server), fold(share)), rest))
}

/// Whether Win32 takes a component as written: no trailing `.` or space (stripped), no `:`
/// (alternate data streams), no wildcard or reserved character, not a device name.
fn windows_name(name: &str) -> bool {
    const RESERVED: [&str; 22] = [
        "CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7", "COM8",
        "COM9", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9",
    ];
    if name.ends_with('.') || name.ends_with(' ') {
        return false;
    }
    if name
        .chars()
        .any(|c| matches!(c, ':' | '<' | '>' | '"' | '|' | '?' | '*') || c.is_control())
    {
        return false;
    }
    // `NUL.txt` is the device too.
    let stem = name.split('.').next().unwrap_or(name).trim_end();
    !RESERVED.iter().any(|r| r.eq_ignore_ascii_case(stem))
}

/// Whether canonical `path` may be a workspace under the canonical `roots`: the indexes of the
/// roots it is inside (at least one).
///
/// Checked in this order: the path's form, a filesystem root, a `.git` directory, then the
/// roots (a root that does not parse contains nothing).
///
/// # Errors
/// The first [`Refusal`] that applies.
pub fn check(platform: Os, roots: &[&str], path: &str) -> Result<Vec<usize>, Refusal> {
    let parsed = parse(platform, path)?;
    if parsed.is_filesystem_root() {
        return Err(Refusal::FilesystemRoot);
    }
    if parsed.in_git_dir() {
        return Err(Refusal::GitDir);
    }
    let inside: Vec<usize> = roots
        .iter()
        .enumerate()
        .filter(|(_, root)| parse(platform, root).is_ok_and(|root| parsed.is_inside(&root)))
        .map(|(i, _)| i)
        .collect();
    if inside.is_empty() {
        return Err(Refusal::OutsideRoots);
    }
    Ok(inside)
}

/// Whether `path` is `root` or below it, both canonical, by component.
pub fn is_inside(platform: Os, root: &str, path: &str) -> bool {
    match (parse(platform, root), parse(platform, path)) {
        (Ok(root), Ok(path)) => path.is_inside(&root),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row: platform, roots, candidate, expected answer (indexes of containing roots).
    type Row<'a> = (Os, &'a [&'a str], &'a str, Result<Vec<usize>, Refusal>);

    fn check_table(rows: &[Row<'_>]) {
        for (platform, roots, path, expect) in rows {
            assert_eq!(
                &check(*platform, roots, path),
                expect,
                "{platform:?} roots {roots:?} path {path:?}"
            );
        }
    }

    use Refusal::*;

    #[test]
    fn linux_and_macos() {
        let roots: &[&str] = &["/allowed", "/home/me/src"];
        for os in [Os::Linux, Os::MacOs] {
            check_table(&[
                (os, roots, "/allowed", Ok(vec![0])),
                (os, roots, "/allowed/sub/dir", Ok(vec![0])),
                (os, roots, "/allowed/", Ok(vec![0])),
                (os, roots, "/home/me/src/proj", Ok(vec![1])),
                // Sibling prefix: not inside.
                (os, roots, "/allowed_evil", Err(OutsideRoots)),
                (os, roots, "/allowed-evil/x", Err(OutsideRoots)),
                (os, roots, "/allowedx", Err(OutsideRoots)),
                (os, roots, "/home/me/src2", Err(OutsideRoots)),
                (os, roots, "/home/me", Err(OutsideRoots)),
                (os, roots, "/etc", Err(OutsideRoots)),
                // Exact case on both (macOS: see the module docs).
                (os, roots, "/Allowed", Err(OutsideRoots)),
                (os, roots, "/ALLOWED/sub", Err(OutsideRoots)),
                // Filesystem root, before the roots.
                (os, roots, "/", Err(FilesystemRoot)),
                (os, roots, "//", Err(FilesystemRoot)),
                (os, &["/"], "/", Err(FilesystemRoot)),
                // Not canonical.
                (os, roots, "allowed", Err(NotCanonical)),
                (os, roots, "", Err(NotCanonical)),
                (os, roots, "/allowed/../etc", Err(NotCanonical)),
                (os, roots, "/allowed/./x", Err(NotCanonical)),
                (os, roots, "/allowed/x\0", Err(NotCanonical)),
                // A Windows path means nothing here.
                (os, roots, "C:\\allowed", Err(NotCanonical)),
                // `.git`, any case.
                (os, roots, "/allowed/repo/.git", Err(GitDir)),
                (os, roots, "/allowed/repo/.GIT/hooks", Err(GitDir)),
                (os, roots, "/allowed/repo/.github", Ok(vec![0])),
                // Nested roots: each one that holds it.
                (os, &["/a", "/a/b"], "/a/b/c", Ok(vec![0, 1])),
                // A root that does not parse holds nothing.
                (os, &["relative", "/a/../b"], "/b/c", Err(OutsideRoots)),
            ]);
        }
        // A backslash is an ordinary character of a Unix name.
        assert!(is_inside(Os::Linux, "/a", "/a/b\\..\\..\\etc"));
        assert!(!is_inside(Os::Linux, "/a", "/a\\b"));
    }

    #[test]
    fn windows() {
        let os = Os::Windows;
        let roots: &[&str] = &[r"C:\Users\me\src", r"\\server\share\team"];
        check_table(&[
            (os, roots, r"C:\Users\me\src", Ok(vec![0])),
            (os, roots, r"C:\Users\me\src\proj", Ok(vec![0])),
            // Case-insensitive: drive letter, components, non-ASCII.
            (os, roots, r"c:\users\ME\SRC\proj", Ok(vec![0])),
            (os, &[r"C:\Données"], r"c:\DONNÉES\x", Ok(vec![0])),
            // `/` separates too; verbatim forms are the same paths.
            (os, roots, "C:/Users/me/src/proj", Ok(vec![0])),
            (os, roots, r"\\?\C:\Users\me\src\proj", Ok(vec![0])),
            (os, roots, r"\\?\UNC\server\share\team\x", Ok(vec![1])),
            (os, roots, r"\\?\unc\SERVER\Share\team", Ok(vec![1])),
            (os, roots, r"\\SERVER\SHARE\TEAM\x", Ok(vec![1])),
            // Sibling prefixes, other drives, other shares.
            (os, roots, r"C:\Users\me\src_evil", Err(OutsideRoots)),
            (os, roots, r"C:\Users\me\src-evil\x", Err(OutsideRoots)),
            (os, roots, r"D:\Users\me\src", Err(OutsideRoots)),
            (os, roots, r"\\server\share\team2", Err(OutsideRoots)),
            (os, roots, r"\\server\share2\team", Err(OutsideRoots)),
            (os, roots, r"\\server2\share\team", Err(OutsideRoots)),
            (os, roots, r"C:\Users\me", Err(OutsideRoots)),
            // Filesystem roots.
            (os, roots, r"C:\", Err(FilesystemRoot)),
            (os, roots, "C:/", Err(FilesystemRoot)),
            (os, roots, r"\\?\C:\", Err(FilesystemRoot)),
            (os, roots, r"\\server\share\", Err(FilesystemRoot)),
            (os, roots, r"\\server\share", Err(FilesystemRoot)),
            (os, roots, r"\\?\UNC\server\share", Err(FilesystemRoot)),
            (os, &[r"C:\"], r"C:\", Err(FilesystemRoot)),
            // Not canonical, or not a plain path.
            (os, roots, "C:", Err(NotCanonical)),
            (os, roots, r"C:Users\me\src", Err(NotCanonical)),
            (os, roots, r"\Users\me\src", Err(NotCanonical)),
            (os, roots, r"Users\me\src", Err(NotCanonical)),
            (os, roots, r"C:\Users\me\src\..\..\x", Err(NotCanonical)),
            (os, roots, r"C:\Users\me\src\.\x", Err(NotCanonical)),
            (os, roots, r"\\.\C:\Users\me\src", Err(NotCanonical)),
            (os, roots, r"\\.\pipe\x", Err(NotCanonical)),
            (os, roots, r"\\?\GLOBALROOT\Device\x", Err(NotCanonical)),
            (os, roots, r"\\?\Volume{1234}\x", Err(NotCanonical)),
            (os, roots, r"\\server", Err(NotCanonical)),
            (os, roots, r"\\\share\x", Err(NotCanonical)),
            // Names Win32 rewrites or treats specially.
            (os, roots, r"C:\Users\me\src.", Err(NotCanonical)),
            (os, roots, r"C:\Users\me\src ", Err(NotCanonical)),
            (os, roots, r"C:\Users\me\src\x::$DATA", Err(NotCanonical)),
            (os, roots, r"C:\Users\me\src\a*b", Err(NotCanonical)),
            (os, roots, r"C:\Users\me\src\NUL", Err(NotCanonical)),
            (os, roots, r"C:\Users\me\src\com1.txt", Err(NotCanonical)),
            (os, roots, r"C:\Users\me\src\CON ", Err(NotCanonical)),
            (os, roots, "C:\\Users\\me\\src\\a\0", Err(NotCanonical)),
            // A Unix path means nothing here.
            (os, roots, "/Users/me/src", Err(NotCanonical)),
            // `.git`, any case.
            (os, roots, r"C:\Users\me\src\p\.Git", Err(GitDir)),
            // Names that only look special.
            (os, roots, r"C:\Users\me\src\console", Ok(vec![0])),
            (os, roots, r"C:\Users\me\src\a.b", Ok(vec![0])),
        ]);
        // `ß` has no one-character upper case: compared as is.
        assert!(!is_inside(os, r"C:\STRASSE", r"C:\straße\x"));
        assert!(is_inside(os, r"C:\straße", r"C:\STRAßE\x"));
    }

    #[test]
    fn parsed_keys() {
        let parsed = parse(Os::Windows, r"\\?\c:\A\b").expect("parses");
        assert_eq!(parsed.prefix, "C:");
        assert_eq!(parsed.components, ["A", "B"]);
        let parsed = parse(Os::Linux, "/A//b/").expect("parses");
        assert_eq!(parsed.components, ["A", "b"]);
    }
}
