use std::ffi::OsStr;
use std::fs;
use std::io::{ErrorKind, Read};
use std::path::Path;

use super::*;

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn creates_a_new_file_and_leaves_no_temporary() {
    let dir = tempfile::tempdir().expect("tempdir");
    atomic_write(dir.path(), OsStr::new("a.txt"), b"hello\n").expect("write");
    assert_eq!(
        fs::read(dir.path().join("a.txt")).expect("read"),
        b"hello\n"
    );
    assert_eq!(names(dir.path()), ["a.txt"]);
}

#[test]
fn replaces_whole_content_and_a_reader_of_the_old_file_sees_the_old_content_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big.txt");
    let old: Vec<u8> = (0..4_000_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    fs::write(&path, &old).expect("seed");
    // A reader that opened the file before the write keeps reading the old file, whole: the new
    // content arrives by rename, never by overwriting in place.
    let mut reader = fs::File::open(&path).expect("open");
    let new: Vec<u8> = (0..3_000_000u32).map(|i| b'0' + (i % 10) as u8).collect();
    atomic_write(dir.path(), OsStr::new("big.txt"), &new).expect("write");
    let mut seen = Vec::new();
    reader.read_to_end(&mut seen).expect("read old");
    assert_eq!(seen, old);
    assert_eq!(fs::read(&path).expect("read new"), new);
    assert_eq!(names(dir.path()), ["big.txt"]);
}

#[cfg(unix)]
#[test]
fn keeps_the_permission_bits_of_the_replaced_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    for mode in [0o600, 0o755, 0o640] {
        let path = dir.path().join("script.sh");
        fs::write(&path, "old").expect("seed");
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod");
        atomic_write(dir.path(), OsStr::new("script.sh"), b"new").expect("write");
        let got = fs::metadata(&path).expect("meta").permissions().mode() & 0o7777;
        assert_eq!(got, mode, "mode {mode:o}");
        assert_eq!(fs::read_to_string(&path).expect("read"), "new");
    }
}

#[cfg(unix)]
#[test]
fn a_new_file_gets_the_default_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("plain"), "x").expect("reference file");
    atomic_write(dir.path(), OsStr::new("made"), b"x").expect("write");
    let mode = |n: &str| {
        fs::metadata(dir.path().join(n))
            .expect("meta")
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("made"), mode("plain"));
}

#[cfg(unix)]
#[test]
fn refuses_a_symbolic_link_and_leaves_its_target_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("tempdir");
    let target = outside.path().join("secret");
    fs::write(&target, "keep").expect("seed");
    std::os::unix::fs::symlink(&target, dir.path().join("link")).expect("symlink");
    let err = atomic_write(dir.path(), OsStr::new("link"), b"evil").expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(fs::read_to_string(&target).expect("read"), "keep");
    assert!(
        fs::symlink_metadata(dir.path().join("link"))
            .expect("meta")
            .file_type()
            .is_symlink()
    );
    assert_eq!(names(dir.path()), ["link"]);
}

#[test]
fn refuses_a_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::create_dir(dir.path().join("sub")).expect("mkdir");
    let err = atomic_write(dir.path(), OsStr::new("sub"), b"x").expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(dir.path().join("sub").is_dir());
    assert_eq!(names(dir.path()), ["sub"]);
}

#[test]
fn refuses_names_that_are_not_one_plain_component() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["", ".", "..", "a/b", "/etc"] {
        let err = atomic_write(dir.path(), OsStr::new(name), b"x").expect_err(name);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{name:?}");
    }
    assert!(names(dir.path()).is_empty());
}

#[test]
fn a_missing_directory_is_an_error_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope");
    let err = atomic_write(&missing, OsStr::new("a"), b"x").expect_err("no dir");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(names(dir.path()).is_empty());
}

#[test]
fn the_temporary_file_is_removed_when_the_write_fails_after_creating_it() {
    // The guard `atomic_write` holds from creating the temporary file until the rename.
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, temp) = create_temp(dir.path(), OsStr::new("x.txt")).expect("temp");
    drop(file);
    let name = names(dir.path());
    assert_eq!(name.len(), 1);
    assert!(name[0].starts_with(".x.txt.tmp-") && name[0].len() == ".x.txt.tmp-".len() + 16);
    drop(temp);
    assert!(names(dir.path()).is_empty());
}

#[cfg(unix)]
#[test]
fn a_read_only_directory_fails_cleanly() {
    use std::os::unix::fs::PermissionsExt;
    // A read-only directory cannot take a new entry: the temporary file cannot be created, the
    // old file stays and no stray file is left. (Root ignores the permission: then the write
    // succeeds, and still leaves no temporary file.)
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("f"), "old").expect("seed");
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o500)).expect("chmod");
    let result = atomic_write(dir.path(), OsStr::new("f"), b"new");
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).expect("chmod back");
    if let Err(err) = result {
        assert_eq!(err.kind(), ErrorKind::PermissionDenied);
        assert_eq!(
            fs::read_to_string(dir.path().join("f")).expect("read"),
            "old"
        );
    }
    assert_eq!(names(dir.path()), ["f"]);
}

// === replace_exact ===

#[test]
fn replaces_the_single_occurrence() {
    let (text, n) = replace_exact("a = 1;\nb = 2;\n", "b = 2", "b = 3", None).expect("replace");
    assert_eq!((text.as_str(), n), ("a = 1;\nb = 3;\n", 1));
}

#[test]
fn replaces_every_occurrence_when_the_count_is_given() {
    let (text, n) = replace_exact("x x x", "x", "yy", Some(3)).expect("replace");
    assert_eq!((text.as_str(), n), ("yy yy yy", 3));
}

#[test]
fn a_count_mismatch_says_how_many_were_found() {
    let err = replace_exact("x x x", "x", "y", None).expect_err("three");
    assert_eq!(
        err,
        ReplaceError::CountMismatch {
            found: 3,
            expected: 1
        }
    );
    assert_eq!(
        err.to_string(),
        "the text to replace occurs 3 times, 1 expected"
    );
    assert_eq!(GatewayError::from(err).code, codes::EDIT_COUNT_MISMATCH);
    let err = replace_exact("x x x", "x", "y", Some(2)).expect_err("three");
    assert_eq!(
        err,
        ReplaceError::CountMismatch {
            found: 3,
            expected: 2
        }
    );
}

#[test]
fn no_match_names_the_line_of_a_whitespace_normalized_match() {
    let text = "fn main() {\n    let a = 1;\n    if a == 1 {\n        go();\n    }\n}\n";
    let err = replace_exact(text, "if a == 1 {\n  go();", "x", None).expect_err("indent differs");
    assert_eq!(err, ReplaceError::NoMatch { near_line: Some(3) });
    assert!(err.to_string().contains("line 3"), "{err}");
    let gateway = GatewayError::from(err);
    assert_eq!(gateway.code, codes::EDIT_NO_MATCH);
    assert!(!gateway.remediation.is_empty());
}

#[test]
fn no_match_without_any_near_match_has_no_hint() {
    let err = replace_exact("abc\n", "xyz", "q", None).expect_err("absent");
    assert_eq!(err, ReplaceError::NoMatch { near_line: None });
    assert_eq!(err.to_string(), "the text to replace is not in the file");
}

#[test]
fn empty_old_text_and_zero_count_are_refused() {
    assert_eq!(
        replace_exact("abc", "", "x", None),
        Err(ReplaceError::Empty)
    );
    assert_eq!(
        replace_exact("abc", "a", "x", Some(0)),
        Err(ReplaceError::Empty)
    );
    assert_eq!(
        GatewayError::from(ReplaceError::Empty).code,
        codes::REQUEST_INVALID
    );
}

#[test]
fn occurrences_are_counted_without_overlap() {
    let (text, n) = replace_exact("aaaa", "aa", "b", Some(2)).expect("two");
    assert_eq!((text.as_str(), n), ("bb", 2));
}
