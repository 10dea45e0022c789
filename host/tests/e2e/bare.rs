//! A bare repository (no work tree) is reviewed the same as its work-tree original.

use crate::multi_language::{EXPECTED, fixture};
use crate::support::found;

#[test]
fn a_bare_clone_gives_the_same_findings() {
    let repo = fixture();
    let clones = tempfile::tempdir().expect("temp dir");
    let bare = repo.bare_clone(clones.path());
    assert!(!bare.join(".git").exists(), "fixture sanity: bare");

    let args = ["--base", "main", "--head", "feature", "--format", "json"];
    let original = repo.review(&args);
    let cloned = repo.review_at(&bare, &args);
    cloned.assert_code(1);
    assert_eq!(cloned.found(), found(EXPECTED), "{}", cloned.describe());
    let fingerprints = |run: &crate::support::Run| {
        let mut v: Vec<String> = run.findings().into_iter().map(|f| f.fingerprint).collect();
        v.sort();
        v
    };
    assert_eq!(fingerprints(&cloned), fingerprints(&original));
    assert_eq!(cloned.reviewed(), original.reviewed());

    // A folder inside the work tree works like its root.
    let nested = repo.review_at(&repo.path().join("web"), &args);
    assert_eq!(nested.found(), found(EXPECTED), "{}", nested.describe());
}
