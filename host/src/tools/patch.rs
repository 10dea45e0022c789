//! Unified diffs for the write tools (issue 14 §3): [`parse`] reads one, [`apply`] applies one
//! file's hunks to a text. Pure: no I/O, no paths resolved — the caller checks every path with
//! the safe-path rules of [`super::path`] and reads and writes the files.
//!
//! # What [`parse`] accepts
//!
//! `git diff` output and plain `diff -u` output, several files in one text. A file starts at
//! `diff --git a/x b/x` or at a `--- x` line directly followed by `+++ x`; text before the first
//! file (a commit message, `Index:` lines) is skipped. In `---`/`+++` lines a tab and what
//! follows (a `diff -u` timestamp) is dropped, `/dev/null` means "no file" (a created or deleted
//! file), and the `a/` and `b/` prefixes are stripped when both sides carry theirs. Hunk headers
//! are `@@ -l,s +l,s @@ section`, a missing count meaning 1. Each hunk must have exactly the
//! numbers of old (context and removed) and new (context and added) lines its header says; an
//! empty line inside a hunk counts as an empty context line (some editors strip the space). A
//! `\ No newline at end of file` line marks the line before it.
//!
//! Refused, with [`PatchError::Unsupported`]: binary patches, renames and copies, mode changes,
//! created files with a mode other than `100644`, quoted (escaped) file names.
//!
//! # How [`apply`] places a hunk
//!
//! This goes beyond exact-context patching on purpose (a model's patch is often a few lines off,
//! or has lost trailing whitespace). For each hunk, in order, the *old side* (its context and
//! removed lines) is looked for in the file:
//!
//! - a. exactly at the expected line — the header's old start plus the offset of the previous
//!   hunk — then it applies there;
//! - b. else every exact match at or after the end of the previous hunk: exactly one applies
//!   there (with its offset); several are refused as ambiguous ([`PatchError::Ambiguous`],
//!   naming the candidate lines);
//! - c. else the same two steps comparing lines with trailing spaces, tabs and `\r` ignored; a
//!   hunk placed so is reported with `whitespace: true`;
//! - d. else the hunk is refused as a conflict ([`PatchError::Conflict`]), naming the hunk, the
//!   expected line and, at the candidate position sharing the most lines with the old side, the
//!   first line that differs (expected and found text, each cut to 200 characters).
//!
//! Hunks never overlap and never go before the previous one. Context lines keep the file's own
//! text (so whitespace the patch lost is not lost from the file) and every kept line its own
//! ending; added lines get the file's ending: that of its first line (`\r\n` or `\n`), for an
//! empty file the patch's (`\r\n` when every patch line had one). Line endings are not part of a
//! line's content when comparing, so an LF patch matches a CRLF file exactly. The file's final-newline state is kept
//! unless the hunk that reaches the end of the file says otherwise with `\ No newline at end of
//! file` on its new side (no final newline) or only on its old side (add one).
//!
//! A created file (`--- /dev/null`) needs an empty original (the caller passes `""` for an absent
//! file); a deleted file (`+++ /dev/null`) needs the hunks to remove every line.
//!
//! Placing a hunk compares at most (file lines × hunk lines) lines per step; the caller bounds
//! file and patch sizes.

use crate::error::{GatewayError, codes};

/// Longest text of a line quoted in a [`PatchError::Conflict`], in characters.
pub const QUOTE_CHARS: usize = 200;

/// Most candidate lines named in a [`PatchError::Ambiguous`].
pub const MAX_CANDIDATES: usize = 10;

/// A patch's changes to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePatch {
    /// The path before the change as written in the patch (prefix `a/` stripped); `None` for
    /// `/dev/null` (a created file).
    pub old_path: Option<String>,
    /// The path after the change (prefix `b/` stripped); `None` for `/dev/null` (a deleted
    /// file). Equal to `old_path` when both are set (renames are refused).
    pub new_path: Option<String>,
    /// The hunks in patch order; empty only for a created or deleted empty file in `git diff`
    /// form.
    pub hunks: Vec<Hunk>,
    /// Every line of the hunks ended with `\r\n` (and there was at least one): the line ending a
    /// created file gets.
    pub crlf: bool,
}

impl FilePatch {
    /// The file the patch is about: the new path, else the old one.
    pub fn path(&self) -> &str {
        self.new_path
            .as_deref()
            .or(self.old_path.as_deref())
            .unwrap_or_default()
    }

    /// Whether the patch creates the file (`--- /dev/null`).
    pub fn is_create(&self) -> bool {
        self.old_path.is_none()
    }

    /// Whether the patch deletes the file (`+++ /dev/null`).
    pub fn is_delete(&self) -> bool {
        self.new_path.is_none()
    }
}

/// One `@@` hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// The header's old start line (1-based; for an old count of 0, the line after which the new
    /// lines go, 0 for the top).
    pub old_start: usize,
    /// The header's old line count.
    pub old_count: usize,
    /// The header's new start line.
    pub new_start: usize,
    /// The header's new line count.
    pub new_count: usize,
    /// The text after the closing `@@` (often the enclosing function), possibly empty.
    pub section: String,
    /// The lines, without their `\n` or `\r\n`.
    pub lines: Vec<HunkLine>,
    /// The old side's last line has no newline (`\ No newline at end of file` after it).
    pub old_missing_newline: bool,
    /// The new side's last line has no newline.
    pub new_missing_newline: bool,
}

impl Hunk {
    /// The header as written: `@@ -l,s +l,s @@`.
    pub fn header(&self) -> String {
        format!(
            "@@ -{},{} +{},{} @@",
            self.old_start, self.old_count, self.new_start, self.new_count
        )
    }

    /// The old side: context and removed lines, in order.
    fn old_side(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(t) | HunkLine::Removed(t) => Some(t.as_str()),
                HunkLine::Added(_) => None,
            })
            .collect()
    }
}

/// A line of a hunk, without its marker character and line ending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    /// ` text`: on both sides.
    Context(String),
    /// `-text`: on the old side only.
    Removed(String),
    /// `+text`: on the new side only.
    Added(String),
}

/// The result of [`apply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The patched text (empty for a deleted file).
    pub text: String,
    /// One report per hunk, in order.
    pub hunks: Vec<HunkReport>,
}

/// Where one hunk was applied (serialized in camelCase for the tool's answer).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HunkReport {
    /// The hunk's number in its file, from 1.
    pub index: usize,
    /// The header's old start line.
    pub old_start: usize,
    /// The line of the original text where the hunk's old side was found, counted as the header
    /// counts (for a hunk with no old lines, the line it was inserted after).
    pub applied_at: usize,
    /// `applied_at - old_start`, in lines.
    pub offset: isize,
    /// The old side matched only with trailing whitespace ignored (rule c).
    pub whitespace: bool,
}

/// Why a patch cannot be parsed or applied. [`GatewayError`] codes: `patch.invalid` for
/// [`Invalid`](PatchError::Invalid), [`Unsupported`](PatchError::Unsupported) and
/// [`Counts`](PatchError::Counts); `patch.ambiguous` for [`Ambiguous`](PatchError::Ambiguous);
/// `patch.conflict` for the others.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The text is not a unified diff (or a line of it is malformed).
    #[error("the patch is not a unified diff: {message}{}", at_line(*line))]
    Invalid {
        /// The patch line at fault, from 1; 0 when the whole text is at fault.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A kind of patch the write tools do not apply.
    #[error(
        "{path}: {what} is not supported; only text changes to existing files, created files \
         (mode 100644) and deleted files are"
    )]
    Unsupported {
        /// The file named by the patch.
        path: String,
        /// What the patch asks for ("a binary patch", "a rename or copy", ...).
        what: &'static str,
    },
    /// A hunk's lines do not add up to its header's counts.
    #[error(
        "hunk {hunk} of {path}: its header `{header}` counts {old_count} old and {new_count} new \
         lines, but the hunk has {old_found} old and {new_found} new lines"
    )]
    Counts {
        /// The file.
        path: String,
        /// The hunk's number in its file, from 1.
        hunk: usize,
        /// The hunk header as written.
        header: String,
        /// The header's old count.
        old_count: usize,
        /// The header's new count.
        new_count: usize,
        /// Old lines (context and removed) found before the hunk ended.
        old_found: usize,
        /// New lines (context and added) found before the hunk ended.
        new_found: usize,
    },
    /// A hunk's old side is not in the file (rule d).
    #[error("hunk {hunk} of {path} does not apply: expected at line {expected_line}; {detail}")]
    Conflict {
        /// The file.
        path: String,
        /// The hunk's number, from 1.
        hunk: usize,
        /// Where the hunk was expected (header line plus the previous hunk's offset).
        expected_line: usize,
        /// What differs at the best candidate position, or why there is none.
        detail: String,
    },
    /// A hunk's old side is in the file at several places and none at the expected line.
    #[error(
        "hunk {hunk} of {path} matches at lines {} (not at the expected line {expected_line})",
        join_lines(candidates)
    )]
    Ambiguous {
        /// The file.
        path: String,
        /// The hunk's number, from 1.
        hunk: usize,
        /// Where the hunk was expected.
        expected_line: usize,
        /// The first [`MAX_CANDIDATES`] lines where the old side starts.
        candidates: Vec<usize>,
    },
    /// A patch creating a file was applied to a non-empty text.
    #[error("{path}: the patch creates the file, but it exists and is not empty")]
    AlreadyExists {
        /// The file.
        path: String,
    },
    /// A patch deleting a file leaves lines it does not remove.
    #[error(
        "{path}: the patch deletes the file, but {remaining} line(s) of it are not in the patch"
    )]
    DeleteIncomplete {
        /// The file.
        path: String,
        /// Lines left over.
        remaining: usize,
    },
}

fn at_line(line: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(" (patch line {line})")
    }
}

fn join_lines(lines: &[usize]) -> String {
    lines
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl From<PatchError> for GatewayError {
    fn from(err: PatchError) -> Self {
        let message = err.to_string();
        match err {
            PatchError::Invalid { .. } | PatchError::Counts { .. } => GatewayError::new(
                codes::PATCH_INVALID,
                message,
                "Send a unified diff as `git diff` writes it: `--- a/path` and `+++ b/path` \
                 lines, then `@@ -start,count +start,count @@` hunks whose counts match their \
                 ` `, `-` and `+` lines.",
            ),
            PatchError::Unsupported { .. } => GatewayError::new(
                codes::PATCH_INVALID,
                message,
                "Change text files only; for a rename, delete the old file and create the new \
                 one in two patches; change modes and binary files outside the gateway.",
            ),
            PatchError::Ambiguous { .. } => GatewayError::new(
                codes::PATCH_AMBIGUOUS,
                message,
                "Add more context lines to the hunk, or correct its `@@` line number, so it \
                 matches at one place only.",
            ),
            PatchError::Conflict { .. } => GatewayError::new(
                codes::PATCH_CONFLICT,
                message,
                "Read the file again and rebuild the hunk from its current text; the message \
                 shows the first line that differs.",
            ),
            PatchError::AlreadyExists { .. } => GatewayError::new(
                codes::PATCH_CONFLICT,
                message,
                "Read the existing file and send a patch that changes it (`--- a/path`), or \
                 choose another path.",
            ),
            PatchError::DeleteIncomplete { .. } => GatewayError::new(
                codes::PATCH_CONFLICT,
                message,
                "Read the file again and list every one of its lines as removed in the \
                 deletion patch.",
            ),
        }
    }
}

// === parse ===

/// Reads a unified diff (see the module docs for what is accepted).
///
/// Takes the patch text; returns one [`FilePatch`] per file in patch order, paths as written
/// (prefixes stripped, nothing else checked: the caller applies the safe-path rules).
///
/// # Errors
///
/// [`PatchError::Invalid`] when no file header is found or a header or line is malformed,
/// [`PatchError::Counts`] when a hunk's lines disagree with its header, and
/// [`PatchError::Unsupported`] for binary patches, renames, copies and mode changes.
pub fn parse(text: &str) -> Result<Vec<FilePatch>, PatchError> {
    let lines: Vec<&str> = text
        .split_inclusive('\n')
        .map(|l| l.strip_suffix('\n').unwrap_or(l))
        .collect();
    let mut files = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(rest) = line.strip_prefix("diff --git ") {
            let (file, next) = parse_git_file(&lines, i, rest)?;
            files.push(file);
            i = next;
        } else if is_file_header(&lines, i) {
            let (file, next) = parse_file_body(&lines, i, None)?;
            files.push(file);
            i = next;
        } else if line.starts_with("@@ ") {
            return Err(invalid(
                i,
                "a hunk comes before any `---`/`+++` file header",
            ));
        } else if line.starts_with("Binary files ") || line.starts_with("GIT binary patch") {
            return Err(PatchError::Unsupported {
                path: binary_path(line),
                what: "a binary patch",
            });
        } else {
            i += 1;
        }
    }
    if files.is_empty() {
        return Err(PatchError::Invalid {
            line: 0,
            message: "no file header (`diff --git`, or `--- path` followed by `+++ path`) found"
                .to_owned(),
        });
    }
    Ok(files)
}

fn invalid(index: usize, message: impl Into<String>) -> PatchError {
    PatchError::Invalid {
        line: index + 1,
        message: message.into(),
    }
}

fn is_file_header(lines: &[&str], i: usize) -> bool {
    lines.get(i).is_some_and(|l| l.starts_with("--- "))
        && lines.get(i + 1).is_some_and(|l| l.starts_with("+++ "))
}

fn binary_path(line: &str) -> String {
    // "Binary files a/x and b/x differ"
    line.strip_prefix("Binary files ")
        .and_then(|r| r.split(" and ").next())
        .map(|p| p.strip_prefix("a/").unwrap_or(p).to_owned())
        .unwrap_or_default()
}

/// The path of `diff --git a/P b/P` when both halves name the same path.
fn git_header_path(rest: &str) -> Option<String> {
    let rest = rest.trim_end_matches('\r');
    let len = rest.len().checked_sub(5)?;
    if len % 2 != 0 {
        return None;
    }
    let path = rest.get(2..2 + len / 2)?;
    (rest == format!("a/{path} b/{path}")).then(|| path.to_owned())
}

fn parse_git_file(
    lines: &[&str],
    start: usize,
    rest: &str,
) -> Result<(FilePatch, usize), PatchError> {
    if rest.starts_with('"') {
        return Err(PatchError::Unsupported {
            path: rest.to_owned(),
            what: "a quoted (escaped) file name",
        });
    }
    let git_path = git_header_path(rest);
    let shown = git_path.clone().unwrap_or_else(|| rest.to_owned());
    let unsupported = |what| PatchError::Unsupported {
        path: shown.clone(),
        what,
    };
    let (mut created, mut deleted) = (false, false);
    let mut j = start + 1;
    while j < lines.len() && !is_file_header(lines, j) {
        let line = lines[j].trim_end_matches('\r');
        if let Some(mode) = line.strip_prefix("new file mode ") {
            if mode != "100644" {
                return Err(unsupported("creating a file with a mode other than 100644"));
            }
            created = true;
        } else if let Some(mode) = line.strip_prefix("deleted file mode ") {
            if mode != "100644" && mode != "100755" {
                return Err(unsupported("deleting a symbolic link or submodule"));
            }
            deleted = true;
        } else if line.starts_with("old mode ") || line.starts_with("new mode ") {
            return Err(unsupported("a mode change"));
        } else if [
            "similarity index ",
            "dissimilarity index ",
            "rename ",
            "copy ",
        ]
        .iter()
        .any(|p| line.starts_with(p))
        {
            return Err(unsupported("a rename or copy"));
        } else if line.starts_with("Binary files ") || line.starts_with("GIT binary patch") {
            return Err(unsupported("a binary patch"));
        } else if !line.starts_with("index ") {
            break;
        }
        j += 1;
    }
    if is_file_header(lines, j) {
        let (file, next) = parse_file_body(lines, j, Some(&shown))?;
        return Ok((file, next));
    }
    // `git diff` writes no `---`/`+++` for an empty created or deleted file.
    match git_path {
        Some(path) if created || deleted => Ok((
            FilePatch {
                old_path: (!created).then(|| path.clone()),
                new_path: (!deleted).then_some(path),
                hunks: Vec::new(),
                crlf: false,
            },
            j,
        )),
        _ => Err(invalid(
            start,
            format!("`diff --git` for {shown} is not followed by `---` and `+++` lines"),
        )),
    }
}

/// A `---`/`+++` path: timestamp dropped, `None` for `/dev/null`.
fn header_path(raw: &str, index: usize) -> Result<Option<String>, PatchError> {
    let raw = raw.trim_end_matches('\r');
    let raw = raw.split('\t').next().unwrap_or_default();
    if raw.starts_with('"') {
        return Err(PatchError::Unsupported {
            path: raw.to_owned(),
            what: "a quoted (escaped) file name",
        });
    }
    if raw.is_empty() {
        return Err(invalid(index, "a `---` or `+++` line names no file"));
    }
    Ok((raw != "/dev/null").then(|| raw.to_owned()))
}

fn parse_file_body(
    lines: &[&str],
    start: usize,
    git_shown: Option<&str>,
) -> Result<(FilePatch, usize), PatchError> {
    let mut old = header_path(&lines[start][4..], start)?;
    let mut new = header_path(&lines[start + 1][4..], start + 1)?;
    let prefixed =
        |p: &Option<String>, prefix: &str| p.as_ref().is_none_or(|p| p.starts_with(prefix));
    if prefixed(&old, "a/") && prefixed(&new, "b/") {
        old = old.map(|p| p[2..].to_owned());
        new = new.map(|p| p[2..].to_owned());
    }
    let path = new
        .clone()
        .or_else(|| old.clone())
        .ok_or_else(|| invalid(start, "both `---` and `+++` are /dev/null"))?;
    if let (Some(o), Some(n)) = (&old, &new)
        && o != n
    {
        return Err(PatchError::Unsupported {
            path: git_shown.map_or_else(|| format!("{o} -> {n}"), str::to_owned),
            what: "a rename or copy",
        });
    }
    let mut hunks = Vec::new();
    let mut crlf_lines = (0usize, 0usize); // (lines, lines ending in \r)
    let mut i = start + 2;
    while i < lines.len() && lines[i].starts_with("@@") {
        let (hunk, next) = parse_hunk(lines, i, &path, hunks.len() + 1, &mut crlf_lines)?;
        hunks.push(hunk);
        i = next;
    }
    if hunks.is_empty() {
        return Err(invalid(
            start + 2,
            format!("the file header for {path} is followed by no `@@` hunk"),
        ));
    }
    Ok((
        FilePatch {
            old_path: old,
            new_path: new,
            hunks,
            crlf: crlf_lines.0 > 0 && crlf_lines.0 == crlf_lines.1,
        },
        i,
    ))
}

/// `l` or `l,s` of a hunk header.
fn parse_range(s: &str) -> Option<(usize, usize)> {
    match s.split_once(',') {
        Some((start, count)) => Some((start.parse().ok()?, count.parse().ok()?)),
        None => Some((s.parse().ok()?, 1)),
    }
}

fn parse_hunk(
    lines: &[&str],
    start: usize,
    path: &str,
    number: usize,
    crlf_lines: &mut (usize, usize),
) -> Result<(Hunk, usize), PatchError> {
    let header_line = lines[start].trim_end_matches('\r');
    let bad_header = || {
        invalid(
            start,
            format!("`{header_line}` is not a hunk header `@@ -start,count +start,count @@`"),
        )
    };
    let rest = header_line.strip_prefix("@@ -").ok_or_else(bad_header)?;
    let (ranges, section) = rest.split_once(" @@").ok_or_else(bad_header)?;
    let (old, new) = ranges.split_once(" +").ok_or_else(bad_header)?;
    let (old_start, old_count) = parse_range(old).ok_or_else(bad_header)?;
    let (new_start, new_count) = parse_range(new).ok_or_else(bad_header)?;
    let mut hunk = Hunk {
        old_start,
        old_count,
        new_start,
        new_count,
        section: section.strip_prefix(' ').unwrap_or(section).to_owned(),
        lines: Vec::new(),
        old_missing_newline: false,
        new_missing_newline: false,
    };
    let counts_error = |o: usize, n: usize| PatchError::Counts {
        path: path.to_owned(),
        hunk: number,
        header: header_line.to_owned(),
        old_count,
        new_count,
        old_found: o,
        new_found: n,
    };
    let (mut o, mut n) = (0usize, 0usize);
    let mut i = start + 1;
    loop {
        // A `\` marker belongs to the line before it, also after the last counted line.
        if let Some(line) = lines.get(i)
            && line.starts_with('\\')
        {
            match hunk.lines.last() {
                Some(HunkLine::Context(_)) => {
                    hunk.old_missing_newline = true;
                    hunk.new_missing_newline = true;
                }
                Some(HunkLine::Removed(_)) => hunk.old_missing_newline = true,
                Some(HunkLine::Added(_)) => hunk.new_missing_newline = true,
                None => return Err(invalid(i, "a `\\ No newline` line starts a hunk")),
            }
            i += 1;
            continue;
        }
        if o == old_count && n == new_count {
            break;
        }
        let Some(line) = lines.get(i) else {
            return Err(counts_error(o, n));
        };
        let (kind, text) = match line.chars().next() {
            Some(c @ (' ' | '-' | '+')) => (c, &line[1..]),
            None => (' ', ""),
            Some('\r') if line.len() == 1 => (' ', *line),
            _ => return Err(counts_error(o, n)),
        };
        crlf_lines.0 += 1;
        let text = match text.strip_suffix('\r') {
            Some(t) => {
                crlf_lines.1 += 1;
                t
            }
            None => text,
        };
        match kind {
            ' ' => {
                o += 1;
                n += 1;
                hunk.lines.push(HunkLine::Context(text.to_owned()));
            }
            '-' => {
                o += 1;
                hunk.lines.push(HunkLine::Removed(text.to_owned()));
            }
            _ => {
                n += 1;
                hunk.lines.push(HunkLine::Added(text.to_owned()));
            }
        }
        if o > old_count || n > new_count {
            return Err(counts_error(o, n));
        }
        i += 1;
    }
    // More hunk-looking lines after the counts are used up: the header counts too few. (A
    // following file header and the `-- ` signature line of `git format-patch` are not.)
    if let Some(line) = lines.get(i)
        && (line.starts_with(' ') || line.starts_with('+') || line.starts_with('-'))
        && !is_file_header(lines, i)
        && line.trim_end_matches('\r') != "-- "
    {
        let (mut o2, mut n2) = (o, n);
        for l in &lines[i..] {
            match l.chars().next() {
                Some(' ') => {
                    o2 += 1;
                    n2 += 1;
                }
                Some('-') => o2 += 1,
                Some('+') => n2 += 1,
                _ => break,
            }
        }
        return Err(counts_error(o2, n2));
    }
    Ok((hunk, i))
}

// === apply ===

/// One line of the original text: its content and its line ending (`""` for a last line
/// without one).
#[derive(Clone, Copy)]
struct FileLine<'a> {
    text: &'a str,
    ending: &'static str,
}

impl<'a> FileLine<'a> {
    /// The line as written back: its text and own ending, `dominant` when it had none.
    fn kept(&self, dominant: &'static str) -> (&'a str, &'static str) {
        let ending = if self.ending.is_empty() {
            dominant
        } else {
            self.ending
        };
        (self.text, ending)
    }
}

fn split_lines(text: &str) -> Vec<FileLine<'_>> {
    text.split_inclusive('\n')
        .map(|piece| {
            if let Some(t) = piece.strip_suffix("\r\n") {
                FileLine {
                    text: t,
                    ending: "\r\n",
                }
            } else if let Some(t) = piece.strip_suffix('\n') {
                FileLine {
                    text: t,
                    ending: "\n",
                }
            } else {
                FileLine {
                    text: piece,
                    ending: "",
                }
            }
        })
        .collect()
}

fn loose(line: &str) -> &str {
    line.trim_end_matches([' ', '\t', '\r'])
}

/// Applies one file's hunks to `original` by the rules of the module docs.
///
/// Takes the file's current text (`""` when it does not exist) and the file's patch; returns
/// the new text and where each hunk went. A deletion returns an empty text: removing the file is
/// the caller's.
///
/// # Errors
///
/// [`PatchError::Conflict`] when a hunk's old side is not found (rule d),
/// [`PatchError::Ambiguous`] when it is found at several places but not at the expected line,
/// [`PatchError::AlreadyExists`] when a creation meets a non-empty text, and
/// [`PatchError::DeleteIncomplete`] when a deletion leaves lines.
pub fn apply(original: &str, patch: &FilePatch) -> Result<Applied, PatchError> {
    let path = patch.path();
    if patch.is_create() && !original.is_empty() {
        return Err(PatchError::AlreadyExists {
            path: path.to_owned(),
        });
    }
    let file = split_lines(original);
    let dominant = file
        .iter()
        .map(|l| l.ending)
        .find(|e| !e.is_empty())
        .unwrap_or(if patch.crlf { "\r\n" } else { "\n" });
    // Each output line with its own ending: the file's for the file's lines, `dominant` for
    // added ones (and for a former last line without one).
    let mut out: Vec<(&str, &'static str)> = Vec::with_capacity(file.len());
    let mut cursor = 0usize;
    let mut last_offset = 0isize;
    let mut reports = Vec::with_capacity(patch.hunks.len());
    let mut end_hunk: Option<&Hunk> = None;
    for (i, hunk) in patch.hunks.iter().enumerate() {
        let old = hunk.old_side();
        let (pos, whitespace) = locate(&file, &old, hunk, i + 1, cursor, last_offset, path)?;
        out.extend(file[cursor..pos].iter().map(|l| l.kept(dominant)));
        let mut k = pos;
        for line in &hunk.lines {
            match line {
                HunkLine::Context(_) => {
                    out.push(file[k].kept(dominant));
                    k += 1;
                }
                HunkLine::Removed(_) => k += 1,
                HunkLine::Added(t) => out.push((t, dominant)),
            }
        }
        cursor = k;
        let applied_at = if old.is_empty() { pos } else { pos + 1 };
        let offset = signed(applied_at).saturating_sub(signed(hunk.old_start));
        last_offset = offset;
        end_hunk = (cursor == file.len()).then_some(hunk);
        reports.push(HunkReport {
            index: i + 1,
            old_start: hunk.old_start,
            applied_at,
            offset,
            whitespace,
        });
    }
    out.extend(file[cursor..].iter().map(|l| l.kept(dominant)));
    if patch.is_delete() && !out.is_empty() {
        return Err(PatchError::DeleteIncomplete {
            path: path.to_owned(),
            remaining: out.len(),
        });
    }
    let final_newline = match end_hunk {
        Some(h) if h.new_missing_newline => false,
        Some(h) if h.old_missing_newline => true,
        _ => file.last().is_none_or(|l| !l.ending.is_empty()),
    };
    let mut text = String::with_capacity(original.len() + 64);
    let last = out.len().saturating_sub(1);
    for (i, (line, ending)) in out.iter().enumerate() {
        text.push_str(line);
        if i < last || final_newline {
            text.push_str(ending);
        }
    }
    Ok(Applied {
        text,
        hunks: reports,
    })
}

/// Finds where `old` goes (rules a–d); returns the 0-based start index and whether only the
/// whitespace-insensitive comparison matched.
fn locate(
    file: &[FileLine<'_>],
    old: &[&str],
    hunk: &Hunk,
    number: usize,
    min: usize,
    last_offset: isize,
    path: &str,
) -> Result<(usize, bool), PatchError> {
    let base = if old.is_empty() {
        signed(hunk.old_start)
    } else {
        signed(hunk.old_start) - 1
    };
    let expected = base.saturating_add(last_offset);
    let expected_line = usize::try_from(expected.saturating_add(1)).unwrap_or(0);
    let conflict = |detail: String| PatchError::Conflict {
        path: path.to_owned(),
        hunk: number,
        expected_line,
        detail,
    };
    let expected_ok = usize::try_from(expected).ok().filter(|&e| e >= min);
    if old.is_empty() {
        // Nothing to match: the header line decides.
        return match expected_ok.filter(|&e| e <= file.len()) {
            Some(e) => Ok((e, false)),
            None => Err(conflict(format!(
                "a hunk with no old lines goes where its header says, and line {} is {}",
                expected.max(0),
                if expected < signed(min) {
                    "before the end of the previous hunk"
                } else {
                    "past the end of the file"
                }
            ))),
        };
    }
    let Some(max_start) = file.len().checked_sub(old.len()).filter(|&m| m >= min) else {
        return Err(conflict(format!(
            "its {} old lines do not fit in the {} line(s) of the file after line {min}",
            old.len(),
            file.len() - min.min(file.len()),
        )));
    };
    let exact = |p: usize| {
        file[p..p + old.len()]
            .iter()
            .zip(old)
            .all(|(f, o)| f.text == *o)
    };
    let fuzzy = |p: usize| {
        file[p..p + old.len()]
            .iter()
            .zip(old)
            .all(|(f, o)| loose(f.text) == loose(o))
    };
    let passes: [(&dyn Fn(usize) -> bool, bool); 2] = [(&exact, false), (&fuzzy, true)];
    for (matches, whitespace) in passes {
        if let Some(e) = expected_ok.filter(|&e| e <= max_start && matches(e)) {
            return Ok((e, whitespace));
        }
        let candidates: Vec<usize> = (min..=max_start).filter(|&p| matches(p)).collect();
        match candidates.as_slice() {
            [] => {}
            [only] => return Ok((*only, whitespace)),
            many => {
                return Err(PatchError::Ambiguous {
                    path: path.to_owned(),
                    hunk: number,
                    expected_line,
                    candidates: many.iter().take(MAX_CANDIDATES).map(|p| p + 1).collect(),
                });
            }
        }
    }
    // Rule d: the position sharing the most lines, the nearest to the expected one on a tie.
    let score = |p: usize| {
        file[p..p + old.len()]
            .iter()
            .zip(old)
            .filter(|(f, o)| loose(f.text) == loose(o))
            .count()
    };
    let best = (min..=max_start)
        .max_by_key(|&p| {
            (
                score(p),
                std::cmp::Reverse(signed(p).saturating_sub(expected).unsigned_abs()),
            )
        })
        .unwrap_or(min);
    let (k, (found, wanted)) = file[best..best + old.len()]
        .iter()
        .zip(old)
        .enumerate()
        .find(|(_, (f, o))| loose(f.text) != loose(o))
        .map_or((0, (file[best].text, old[0])), |(k, (f, o))| {
            (k, (f.text, *o))
        });
    let before = if expected < signed(min) {
        " (the expected line is before the end of the previous hunk; hunks apply in order)"
    } else {
        ""
    };
    Err(conflict(format!(
        "best candidate at line {}{before}: line {} differs: expected {:?}, found {:?}",
        best + 1,
        best + k + 1,
        quote(wanted),
        quote(found),
    )))
}

/// `n` as a signed line count (saturating: line numbers past `isize::MAX` match nothing anyway).
fn signed(n: usize) -> isize {
    isize::try_from(n).unwrap_or(isize::MAX)
}

/// `text` cut to [`QUOTE_CHARS`] characters, with `…` when cut.
fn quote(text: &str) -> String {
    match text.char_indices().nth(QUOTE_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests;
