use std::path::Path;
use std::process::Command;

use super::*;

/// Parses `diff` (one file) and applies it to `original`.
fn apply_one(original: &str, diff: &str) -> Result<Applied, PatchError> {
    let files = parse(diff).expect("parses");
    assert_eq!(files.len(), 1, "one file");
    apply(original, &files[0])
}

/// Applies `diff` to `original` and checks the text and the (appliedAt, offset, whitespace) of
/// each hunk.
fn check(original: &str, diff: &str, expected: &str, hunks: &[(usize, isize, bool)]) {
    let applied = apply_one(original, diff).expect("applies");
    assert_eq!(applied.text, expected);
    let got: Vec<(usize, isize, bool)> = applied
        .hunks
        .iter()
        .map(|h| (h.applied_at, h.offset, h.whitespace))
        .collect();
    assert_eq!(got, hunks);
}

fn numbered(range: std::ops::RangeInclusive<usize>) -> String {
    range.map(|i| format!("line {i}\n")).collect()
}

const SIMPLE: &str = "\
--- a/f.txt
+++ b/f.txt
@@ -2,3 +2,3 @@ section
 line 2
-line 3
+line three
 line 4
";

#[test]
fn parses_paths_counts_and_lines() {
    let files = parse(SIMPLE).expect("parses");
    let f = &files[0];
    assert_eq!(f.old_path.as_deref(), Some("f.txt"));
    assert_eq!(f.new_path.as_deref(), Some("f.txt"));
    let h = &f.hunks[0];
    assert_eq!(
        (h.old_start, h.old_count, h.new_start, h.new_count),
        (2, 3, 2, 3)
    );
    assert_eq!(h.section, "section");
    assert_eq!(
        h.lines,
        [
            HunkLine::Context("line 2".into()),
            HunkLine::Removed("line 3".into()),
            HunkLine::Added("line three".into()),
            HunkLine::Context("line 4".into()),
        ]
    );
}

#[test]
fn exact_position_applies_with_no_offset() {
    let original = numbered(1..=6);
    let expected = original.replace("line 3\n", "line three\n");
    check(&original, SIMPLE, &expected, &[(2, 0, false)]);
}

#[test]
fn moved_context_applies_with_positive_and_negative_offsets() {
    // Five lines added above: +5.
    let original = format!("{}{}", numbered(100..=104), numbered(1..=6));
    let expected = original.replace("line 3\n", "line three\n");
    check(&original, SIMPLE, &expected, &[(7, 5, false)]);
    // The header says line 9, the text is at line 2: -7.
    let diff = SIMPLE.replace("@@ -2,3 +2,3 @@", "@@ -9,3 +9,3 @@");
    let original = numbered(1..=6);
    let expected = original.replace("line 3\n", "line three\n");
    check(&original, &diff, &expected, &[(2, -7, false)]);
}

#[test]
fn trailing_whitespace_only_difference_is_marked_and_the_file_text_is_kept() {
    let original = "line 1\nline 2  \nline 3\t\nline 4\n";
    // Context line 2 keeps its trailing spaces; removed line 3 matched ignoring its tab.
    check(
        original,
        SIMPLE,
        "line 1\nline 2  \nline three\nline 4\n",
        &[(2, 0, true)],
    );
}

#[test]
fn two_identical_blocks_are_ambiguous_when_the_expected_line_differs() {
    let block = "line 2\nline 3\nline 4\n";
    let original = format!("top\n{block}middle\n{block}end\n");
    let diff = SIMPLE.replace("@@ -2,3 +2,3 @@", "@@ -20,3 +20,3 @@");
    let err = apply_one(&original, &diff).expect_err("ambiguous");
    assert_eq!(
        err,
        PatchError::Ambiguous {
            path: "f.txt".into(),
            hunk: 1,
            expected_line: 20,
            candidates: vec![2, 6],
        }
    );
    assert_eq!(
        err.to_string(),
        "hunk 1 of f.txt matches at lines 2, 6 (not at the expected line 20)"
    );
    assert_eq!(GatewayError::from(err).code, codes::PATCH_AMBIGUOUS);
    // At the expected line, the duplicate does not matter (rule a).
    let applied = apply_one(&original, SIMPLE).expect("expected line wins");
    assert_eq!(applied.hunks[0].applied_at, 2);
    assert!(applied.text.starts_with("top\nline 2\nline three\n"));
    assert!(
        applied
            .text
            .ends_with("middle\nline 2\nline 3\nline 4\nend\n")
    );
}

#[test]
fn conflict_names_hunk_expected_line_and_the_first_differing_line() {
    let original = "line 1\nline 2\nline 3 changed\nline 4\n";
    let err = apply_one(original, SIMPLE).expect_err("conflict");
    assert_eq!(
        err.to_string(),
        "hunk 1 of f.txt does not apply: expected at line 2; best candidate at line 2: line 3 \
         differs: expected \"line 3\", found \"line 3 changed\""
    );
    let gateway = GatewayError::from(err);
    assert_eq!(gateway.code, codes::PATCH_CONFLICT);
    assert!(gateway.remediation.contains("Read the file again"));
}

#[test]
fn conflict_quotes_are_cut_to_200_characters() {
    let long = "x".repeat(500);
    let original = format!("line 1\nline 2\n{long}\nline 4\n");
    let err = apply_one(&original, SIMPLE).expect_err("conflict");
    let message = err.to_string();
    assert!(
        message.contains(&format!("found \"{}…\"", "x".repeat(200))),
        "{message}"
    );
    assert!(!message.contains(&"x".repeat(201)));
}

#[test]
fn a_file_too_short_for_the_hunk_is_a_conflict() {
    let err = apply_one("line 2\n", SIMPLE).expect_err("short");
    assert!(
        err.to_string()
            .contains("its 3 old lines do not fit in the 1 line(s)"),
        "{err}"
    );
}

#[test]
fn multi_hunk_offsets_accumulate() {
    let original = format!("{}{}", numbered(100..=104), numbered(1..=30));
    let diff = "\
--- a/f.txt
+++ b/f.txt
@@ -2,3 +2,4 @@
 line 2
 line 3
+inserted
 line 4
@@ -20,3 +21,2 @@
 line 20
-line 21
 line 22
";
    let expected = original
        .replace("line 3\n", "line 3\ninserted\n")
        .replace("line 21\n", "");
    // The second hunk is found at its header line plus the first hunk's +5 (rule a).
    check(&original, diff, &expected, &[(7, 5, false), (25, 5, false)]);
}

#[test]
fn the_previous_offset_picks_between_two_copies() {
    // Hunk 2's block is at lines 25 and 30; hunk 1 moved +5, so line 20 + 5 is meant (rule a),
    // not an ambiguity.
    let block = "x\ny\nz\n";
    let original = format!(
        "{}{}{block}{}{block}{}",
        numbered(100..=104),
        numbered(1..=19),
        numbered(50..=51),
        numbered(60..=61)
    );
    let diff = "\
--- a/f.txt
+++ b/f.txt
@@ -2,1 +2,1 @@
-line 2
+two
@@ -20,3 +20,3 @@
 x
-y
+Y
 z
";
    let expected = format!(
        "{}{}x\nY\nz\n{}{block}{}",
        numbered(100..=104),
        numbered(1..=19).replace("line 2\n", "two\n"),
        numbered(50..=51),
        numbered(60..=61)
    );
    check(&original, diff, &expected, &[(7, 5, false), (25, 5, false)]);
}

#[test]
fn a_hunk_may_not_go_before_the_previous_one() {
    let original = numbered(1..=10);
    let diff = "\
--- a/f.txt
+++ b/f.txt
@@ -6,2 +6,2 @@
-line 6
+six
 line 7
@@ -2,2 +2,2 @@
-line 2
+two
 line 3
";
    let err = apply_one(&original, diff).expect_err("out of order");
    let message = err.to_string();
    assert!(
        message.starts_with("hunk 2 of f.txt does not apply"),
        "{message}"
    );
    assert!(message.contains("hunks apply in order"), "{message}");
}

#[test]
fn crlf_file_stays_crlf_with_an_lf_patch() {
    let original = "line 1\r\nline 2\r\nline 3\r\nline 4\r\n";
    check(
        original,
        SIMPLE,
        "line 1\r\nline 2\r\nline three\r\nline 4\r\n",
        &[(2, 0, false)],
    );
    // And with a CRLF patch (as `git diff` writes for a CRLF file).
    let crlf_diff = SIMPLE.replace('\n', "\r\n");
    check(
        original,
        &crlf_diff,
        "line 1\r\nline 2\r\nline three\r\nline 4\r\n",
        &[(2, 0, false)],
    );
}

#[test]
fn a_mixed_ending_file_keeps_each_untouched_line_ending() {
    // First line decides the ending of added lines (LF); the CRLF lines stay CRLF.
    let original = "line 1\nline 2\r\nline 3\r\nline 4\r\nline 5\n";
    check(
        original,
        SIMPLE,
        "line 1\nline 2\r\nline three\nline 4\r\nline 5\n",
        &[(2, 0, false)],
    );
}

#[test]
fn no_final_newline_is_kept_removed_and_added() {
    // Kept: the patch does not mention it.
    let diff = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n";
    check("a\nb", diff, "A\nb", &[(1, 0, false)]);
    // Added: the old side says no newline, the new side does not.
    let diff = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n";
    let files = parse(diff).expect("parses");
    assert!(files[0].hunks[0].old_missing_newline && !files[0].hunks[0].new_missing_newline);
    check("a\nb", diff, "a\nb\n", &[(1, 0, false)]);
    // Removed: the new side says no newline.
    let diff = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n";
    check("a\nb\n", diff, "a\nb", &[(1, 0, false)]);
    // A context line with the marker: both sides lack it, the file keeps lacking it.
    let diff = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n\\ No newline at end of file\n";
    check("a\nb", diff, "A\nb", &[(1, 0, false)]);
}

#[test]
fn create_needs_an_empty_original() {
    let diff = "\
diff --git a/new.txt b/new.txt
new file mode 100644
index 0000000..3b18e51
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+hello
+world
";
    let files = parse(diff).expect("parses");
    assert!(files[0].is_create());
    assert_eq!(files[0].path(), "new.txt");
    let applied = apply("", &files[0]).expect("creates");
    assert_eq!(applied.text, "hello\nworld\n");
    assert_eq!(applied.hunks[0].applied_at, 0);
    let err = apply("x\n", &files[0]).expect_err("exists");
    assert_eq!(
        err,
        PatchError::AlreadyExists {
            path: "new.txt".into()
        }
    );
    assert_eq!(GatewayError::from(err).code, codes::PATCH_CONFLICT);
}

#[test]
fn create_an_empty_file_in_git_form() {
    let diff = "diff --git a/empty b/empty\nnew file mode 100644\nindex 0000000..e69de29\n";
    let files = parse(diff).expect("parses");
    assert_eq!(files[0].old_path, None);
    assert_eq!(files[0].new_path.as_deref(), Some("empty"));
    assert_eq!(apply("", &files[0]).expect("creates").text, "");
}

#[test]
fn delete_needs_the_whole_content() {
    let diff = "\
diff --git a/old.txt b/old.txt
deleted file mode 100644
index 3b18e51..0000000
--- a/old.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-hello
-world
";
    let files = parse(diff).expect("parses");
    assert!(files[0].is_delete());
    assert_eq!(
        apply("hello\nworld\n", &files[0]).expect("deletes").text,
        ""
    );
    let err = apply("hello\nworld\nmore\n", &files[0]).expect_err("lines left");
    assert_eq!(
        err,
        PatchError::DeleteIncomplete {
            path: "old.txt".into(),
            remaining: 1
        }
    );
}

#[test]
fn bad_counts_are_refused_naming_the_hunk() {
    // Too few lines for the header.
    let diff = SIMPLE.replace("@@ -2,3 +2,3 @@", "@@ -2,4 +2,4 @@");
    let err = parse(&diff).expect_err("counts");
    assert_eq!(
        err.to_string(),
        "hunk 1 of f.txt: its header `@@ -2,4 +2,4 @@ section` counts 4 old and 4 new lines, but \
         the hunk has 3 old and 3 new lines"
    );
    assert_eq!(GatewayError::from(err).code, codes::PATCH_INVALID);
    // More lines than the header says.
    let diff = SIMPLE.replace("@@ -2,3 +2,3 @@", "@@ -2,2 +2,2 @@");
    let err = parse(&diff).expect_err("counts");
    assert!(
        matches!(
            err,
            PatchError::Counts {
                hunk: 1,
                old_found: 3,
                new_found: 3,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn omitted_counts_mean_one() {
    let diff = "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\n+B\n";
    let files = parse(diff).expect("parses");
    assert_eq!(files[0].hunks[0].old_count, 1);
    check("a\nb\nc\n", diff, "a\nB\nc\n", &[(2, 0, false)]);
}

#[test]
fn garbage_is_not_a_patch() {
    for text in [
        "",
        "hello world\n",
        "@@ -1 +1 @@\n-a\n+b\n",
        "--- a\n+++ a\n@@ nonsense @@\n",
    ] {
        let err = parse(text).expect_err(text);
        assert!(
            matches!(err, PatchError::Invalid { .. }),
            "{text:?}: {err:?}"
        );
        assert_eq!(GatewayError::from(err).code, codes::PATCH_INVALID);
    }
    let err = parse("--- a/f\n+++ b/f\n@@ nonsense @@\n").expect_err("bad header");
    assert_eq!(
        err.to_string(),
        "the patch is not a unified diff: `@@ nonsense @@` is not a hunk header `@@ \
         -start,count +start,count @@` (patch line 3)"
    );
}

#[test]
fn binary_renames_and_mode_changes_are_refused() {
    let cases = [
        (
            "diff --git a/img.png b/img.png\nindex 1..2 100644\nBinary files a/img.png and b/img.png differ\n",
            "a binary patch",
        ),
        (
            "diff --git a/a.txt b/b.txt\nsimilarity index 100%\nrename from a.txt\nrename to b.txt\n",
            "a rename or copy",
        ),
        (
            "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n",
            "a mode change",
        ),
        (
            "--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n",
            "a rename or copy",
        ),
        (
            "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+t\n",
            "creating a file with a mode other than 100644",
        ),
    ];
    for (text, what) in cases {
        match parse(text) {
            Err(PatchError::Unsupported { what: got, .. }) => assert_eq!(got, what, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }
    let message = parse(cases[0].0).expect_err("binary").to_string();
    assert_eq!(
        message,
        "img.png: a binary patch is not supported; only text changes to existing files, created \
         files (mode 100644) and deleted files are"
    );
}

#[test]
fn several_files_plain_timestamps_and_signature() {
    let diff = "\
From 1234 Mon Sep 17 00:00:00 2001
Subject: [PATCH] two files

---
diff --git a/a.txt b/a.txt
index 1..2 100644
--- a/a.txt
+++ b/a.txt
@@ -1 +1 @@
-a
+A
diff --git a/b.txt b/b.txt
index 1..2 100644
--- a/b.txt
+++ b/b.txt
@@ -1 +1 @@
-b
+B
-- 
2.40.0
";
    let files = parse(diff).expect("parses");
    let paths: Vec<&str> = files.iter().map(FilePatch::path).collect();
    assert_eq!(paths, ["a.txt", "b.txt"]);
    let plain =
        "--- f.txt\t2024-01-01 10:00:00\n+++ f.txt\t2024-01-02 10:00:00\n@@ -1 +1 @@\n-a\n+b\n";
    let files = parse(plain).expect("parses");
    assert_eq!(files[0].old_path.as_deref(), Some("f.txt"));
    assert_eq!(apply("a\n", &files[0]).expect("applies").text, "b\n");
}

#[test]
fn a_pure_insertion_goes_where_the_header_says() {
    let diff = "--- a/f\n+++ b/f\n@@ -1,0 +2 @@\n+new\n";
    check("a\nb\n", diff, "a\nnew\nb\n", &[(1, 0, false)]);
    let diff = "--- a/f\n+++ b/f\n@@ -9,0 +10 @@\n+new\n";
    assert!(matches!(
        apply_one("a\nb\n", diff),
        Err(PatchError::Conflict { .. })
    ));
}

#[test]
fn huge_line_numbers_are_a_conflict_not_an_overflow() {
    let diff = format!("--- a/f\n+++ b/f\n@@ -{0} +{0} @@\n-x\n+y\n", usize::MAX);
    assert!(matches!(
        apply_one("a\n", &diff),
        Err(PatchError::Conflict { .. })
    ));
    let diff = format!("--- a/f\n+++ b/f\n@@ -{0},0 +{0} @@\n+y\n", usize::MAX);
    assert!(matches!(
        apply_one("a\n", &diff),
        Err(PatchError::Conflict { .. })
    ));
}

#[test]
fn hunk_report_serializes_in_camel_case() {
    let applied = apply_one(&numbered(1..=6), SIMPLE).expect("applies");
    let json = serde_json::to_value(&applied.hunks[0]).expect("json");
    assert_eq!(
        json,
        serde_json::json!({"index": 1, "oldStart": 2, "appliedAt": 2, "offset": 0, "whitespace": false})
    );
}

// === round trip through real `git diff` ===

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "core.autocrlf=false", "-c", "diff.noprefix=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Commits `before` files, writes `after` files, and applies `git diff` back to `before`.
fn round_trip(before: &[(&str, &str)], after: &[(&str, Option<&str>)]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    git(root, &["init", "-q"]);
    for (name, text) in before {
        std::fs::write(root.join(name), text).expect("write");
    }
    git(root, &["add", "-A"]);
    git(
        root,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "before",
        ],
    );
    for (name, text) in after {
        match text {
            Some(text) => std::fs::write(root.join(name), text).expect("write"),
            None => std::fs::remove_file(root.join(name)).expect("remove"),
        }
    }
    git(root, &["add", "-A"]);
    let diff = git(root, &["diff", "--cached", "--no-renames", "-U3"]);
    let files = parse(&diff).expect("git diff parses");
    assert_eq!(files.len(), after.len(), "{diff}");
    for (name, text) in after {
        let patch = files
            .iter()
            .find(|f| f.path() == *name)
            .expect("file in diff");
        let original = before
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, t)| *t);
        let applied = apply(original, patch).expect("applies back");
        assert_eq!(applied.text, text.unwrap_or(""), "{name}\n{diff}");
        assert!(applied.hunks.iter().all(|h| h.offset == 0 && !h.whitespace));
    }
}

const RUST: &str = "\
use std::io;

/// Reads a number.
fn read() -> io::Result<u32> {
    let mut line = String::new();
    io::stdin().read_line(&mut line)?;
    line.trim().parse().map_err(io::Error::other)
}

fn main() {
    match read() {
        Ok(n) => println!(\"{n}\"),
        Err(e) => eprintln!(\"{e}\"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn it_works() {
        assert_eq!(2 + 2, 4);
    }
}
";

#[test]
fn git_diff_round_trip_on_real_files() {
    let rust_after = RUST
        .replace(
            "/// Reads a number.\n",
            "/// Reads a number from stdin.\n/// Errors on junk.\n",
        )
        .replace(
            "        assert_eq!(2 + 2, 4);\n",
            "        assert_eq!(2 + 2, 4);\n        assert!(true);\n",
        )
        .replace("fn main() {\n", "fn main() {\n    // entry\n");
    let python = "import os\n\n\ndef f(x):\n    return x + 1\n\n\nclass A:\n    pass\n";
    let python_after = python
        .replace("x + 1", "x + 2")
        .replace("    pass\n", "    y = 1\n");
    let crlf = "[a]\r\nk = 1\r\n\r\n[b]\r\nk = 2\r\n";
    let crlf_after = "[a]\r\nk = 10\r\n\r\n[b]\r\nk = 2\r\nnew = true\r\n";
    let no_newline = "first\nsecond";
    let no_newline_after = "first\nsecond\nthird\n";
    let lost_newline = "one\ntwo\n";
    let lost_newline_after = "one\n2";
    round_trip(
        &[
            ("main.rs", RUST),
            ("lib.py", python),
            ("conf.ini", crlf),
            ("nl.txt", no_newline),
            ("lost.txt", lost_newline),
            ("gone.txt", "bye\nnow\n"),
        ],
        &[
            ("main.rs", Some(rust_after.as_str())),
            ("lib.py", Some(python_after.as_str())),
            ("conf.ini", Some(crlf_after)),
            ("nl.txt", Some(no_newline_after)),
            ("lost.txt", Some(lost_newline_after)),
            ("gone.txt", None),
            ("new.md", Some("# Title\r\n\r\ntext\r\n")),
            ("empty.txt", Some("")),
        ],
    );
}

#[test]
fn http_statuses_of_the_patch_and_edit_codes() {
    use crate::transport::http::status_for;
    for (code, status) in [
        (codes::PATCH_INVALID, 400),
        (codes::PATCH_CONFLICT, 409),
        (codes::PATCH_AMBIGUOUS, 409),
        (codes::EDIT_NO_MATCH, 409),
        (codes::EDIT_COUNT_MISMATCH, 409),
    ] {
        assert_eq!(status_for(code).as_u16(), status, "{code}");
    }
}
