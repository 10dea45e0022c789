//! `review_agent_gateway::repo::checkout` on real git repositories: a commit's tree written from
//! the object database (modes, links verbatim, submodules, no filters, no `.git`), hostile trees
//! made with `git hash-object --literally` refused with nothing left behind, the size limits,
//! racing calls, least-recently-used eviction that spares checkouts in use, and removal of
//! checkouts a command made read-only or filled with links out.

#[path = "e2e/support.rs"]
mod support;

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};

use gix::ObjectId;
use review_agent_gateway::error::codes;
use review_agent_gateway::repo::Repository;
use review_agent_gateway::repo::checkout::{Checkouts, Limits};
use sha2::{Digest, Sha256};
use support::TestRepo;

fn id(hex: &str) -> ObjectId {
    ObjectId::from_hex(hex.as_bytes()).expect("commit id")
}

fn open(repo: &TestRepo) -> Repository {
    Repository::open(repo.path()).expect("open")
}

/// Every path under `dir` (relative, `/`-separated; directories included), links not followed.
fn listing(dir: &Path) -> BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let entry = entry.expect("entry");
            let rel = entry
                .path()
                .strip_prefix(root)
                .expect("under root")
                .to_owned();
            out.insert(rel.to_string_lossy().into_owned());
            if entry.file_type().expect("type").is_dir() {
                walk(root, &entry.path(), out);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).expect("stat").mode() & 0o7777
}

/// The names in a repository's key dir (the only one under `root`), empty when there is none.
fn key_dir_names(root: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for key in std::fs::read_dir(root).expect("root") {
        for entry in std::fs::read_dir(key.expect("key").path()).expect("key dir") {
            names.push(
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    names.sort();
    names
}

/// A raw tree entry: mode as written in the tree, name bytes, object id (hex).
type RawEntry<'a> = (&'a str, &'a [u8], &'a str);

/// A commit whose root tree is written byte for byte from `entries` (`mode`, name, object id),
/// the way a tool other than git could: `git hash-object --literally` stores what git fsck
/// would refuse.
fn raw_commit(repo: &TestRepo, entries: &[RawEntry]) -> String {
    let mut tree = Vec::new();
    for (mode, name, oid) in entries {
        tree.extend_from_slice(mode.as_bytes());
        tree.push(b' ');
        tree.extend_from_slice(name);
        tree.push(0);
        tree.extend_from_slice(id(oid).as_bytes());
    }
    let tree = hash_object(repo, "tree", &tree);
    repo.git(&["commit-tree", &tree, "-m", "crafted"])
}

fn hash_object(repo: &TestRepo, kind: &str, data: &[u8]) -> String {
    let mut child = Command::new("git")
        .args(["hash-object", "-t", kind, "-w", "--literally", "--stdin"])
        .current_dir(repo.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("git hash-object");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(data)
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "git hash-object failed");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

/// A repository with one commit per entry of `contents` (`app.txt` set to it).
fn history(contents: &[&str]) -> (TestRepo, Vec<ObjectId>) {
    let mut repo = TestRepo::new();
    let mut commits = Vec::new();
    for content in contents {
        repo.write("app.txt", content);
        commits.push(id(&repo.commit(content)));
    }
    (repo, commits)
}

#[test]
fn the_tree_is_written_from_objects() {
    let mut repo = TestRepo::new();
    repo.write(".gitattributes", "* text eol=crlf\n*.sh filter=nope\n")
        .write("src/lib.rs", "fn main() {}\n")
        .write("crlf.txt", "one\r\ntwo\r\n")
        .write("bin/run.sh", "#!/bin/sh\necho hi\n")
        .write("deep/a/b/c.txt", "deep\n")
        .make_executable("bin/run.sh")
        .symlink("up", "../../outside")
        .symlink("abs", "/etc/passwd")
        .symlink("dangling", "no/such/file")
        .symlink("deep/dir-link", "../src");
    repo.commit("files");
    repo.stage_gitlink("vendor/sub", &"1".repeat(40));
    let head = id(&repo.commit_staged("submodule"));

    let root = tempfile::tempdir().expect("tempdir");
    let checkouts = Checkouts::new(root.path().join("checkouts"), 4).expect("checkouts");
    let git = open(&repo);
    let checkout = checkouts.get(&git, head).expect("checkout");
    assert!(checkout.created());
    assert_eq!(checkout.commit(), head);

    // `<root>/<16 hex of sha256(canonical git dir)>/<commit hex>`
    let git_dir = std::fs::canonicalize(repo.path().join(".git")).expect("canonical");
    let digest = Sha256::digest(git_dir.as_os_str().as_encoded_bytes());
    let key: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let expected = root
        .path()
        .join("checkouts")
        .join(&key)
        .join(head.to_string());
    assert_eq!(checkout.path(), expected);
    assert_eq!(mode(&root.path().join("checkouts")), 0o700);

    // Exactly the paths of `git ls-tree -r -t`: no `.git`, the submodule an empty directory.
    let tree = repo.git(&["ls-tree", "-r", "-t", "--name-only", "HEAD"]);
    let want: BTreeSet<String> = tree.lines().map(str::to_owned).collect();
    assert_eq!(listing(checkout.path()), want);
    let p = |rel: &str| checkout.path().join(rel);
    assert!(p("vendor/sub").is_dir());
    assert_eq!(std::fs::read_dir(p("vendor/sub")).expect("dir").count(), 0);

    // Raw blob bytes: `git add` stored crlf.txt with LF (the `text` attribute) and git's own
    // checkout would write CRLF again (`eol=crlf`); a scratch checkout writes the blob.
    assert_eq!(std::fs::read(p("crlf.txt")).expect("read"), b"one\ntwo\n");
    for file in ["src/lib.rs", "crlf.txt", "bin/run.sh", ".gitattributes"] {
        let blob = repo.git_output(&["cat-file", "blob", &format!("HEAD:{file}")]);
        assert_eq!(std::fs::read(p(file)).expect("read"), blob.stdout, "{file}");
    }
    assert_eq!(mode(&p("src/lib.rs")), 0o644);
    assert_eq!(mode(&p("bin/run.sh")), 0o755);

    // Links verbatim, never followed or checked.
    for (link, target) in [
        ("up", "../../outside"),
        ("abs", "/etc/passwd"),
        ("dangling", "no/such/file"),
        ("deep/dir-link", "../src"),
    ] {
        let meta = std::fs::symlink_metadata(p(link)).expect("lstat");
        assert!(meta.file_type().is_symlink(), "{link}");
        assert_eq!(
            std::fs::read_link(p(link)).expect("readlink"),
            PathBuf::from(target)
        );
    }

    // Reused the second time, through the same repository opened from a subdirectory.
    drop(checkout);
    let again = checkouts
        .get(
            &Repository::open(&repo.path().join("src")).expect("open"),
            head,
        )
        .expect("again");
    assert!(!again.created());
    assert_eq!(again.path(), expected);
}

#[test]
fn linked_work_trees_share_the_repository_key() {
    let (repo, commits) = history(&["one\n"]);
    let linked = tempfile::tempdir().expect("tempdir");
    let linked_path = linked.path().join("wt");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        linked_path.to_str().expect("utf-8"),
    ]);
    let root = tempfile::tempdir().expect("tempdir");
    let checkouts = Checkouts::new(root.path().to_owned(), 2).expect("checkouts");
    let main = checkouts.get(&open(&repo), commits[0]).expect("main");
    let other = checkouts
        .get(&Repository::open(&linked_path).expect("open"), commits[0])
        .expect("linked");
    assert_eq!(main.path(), other.path());
    assert!(!other.created());
}

#[test]
fn hostile_trees_are_refused_and_nothing_is_left() {
    let repo = TestRepo::new();
    let blob = hash_object(&repo, "blob", b"payload\n");
    let empty_link = hash_object(&repo, "blob", b"");
    let fine_tree = hash_object(&repo, "tree", b"");
    let hostile_sub = {
        let mut tree = b"100644 ok.txt\0".to_vec();
        tree.extend_from_slice(id(&blob).as_bytes());
        tree.extend_from_slice(b"40000 .GiT\0");
        tree.extend_from_slice(id(&fine_tree).as_bytes());
        hash_object(&repo, "tree", &tree)
    };
    // (what, root tree entries, a phrase the message must hold)
    let cases: Vec<(&str, Vec<RawEntry>, &str)> = vec![
        (".git", vec![("100644", b".git", &blob)], "`.git`"),
        (".GIT dir", vec![("40000", b".GIT", &fine_tree)], "`.GIT`"),
        (".Git", vec![("100644", b".Git", &blob)], "`.Git`"),
        ("dot", vec![("100644", b".", &blob)], "`.`"),
        ("dot-dot", vec![("40000", b"..", &fine_tree)], "`..`"),
        ("empty", vec![("100644", b"", &blob)], "empty name"),
        ("slash", vec![("100644", b"a/../../b", &blob)], "`/`"),
        (
            "nested .git after a good file",
            vec![("100644", b"a.txt", &blob), ("40000", b"sub", &hostile_sub)],
            "`sub/.GiT`",
        ),
        (
            "duplicate",
            vec![("100644", b"a", &blob), ("40000", b"a", &fine_tree)],
            "same name",
        ),
        (
            "empty link target",
            vec![("120000", b"l", &empty_link)],
            "empty target",
        ),
        (
            "unknown mode",
            vec![("170000", b"odd", &blob)],
            "unknown mode",
        ),
        (
            "tree entry of a blob",
            vec![("40000", b"d", &blob)],
            "not a tree",
        ),
        (
            "file entry of a tree",
            vec![("100644", b"f", &fine_tree)],
            "not a blob",
        ),
    ];
    for (what, entries, needle) in cases {
        let commit = id(&raw_commit(&repo, &entries));
        let root = tempfile::tempdir().expect("tempdir");
        let checkouts = Checkouts::new(root.path().to_owned(), 2).expect("checkouts");
        let err = checkouts.get(&open(&repo), commit).expect_err(what);
        assert_eq!(err.code, codes::CHECKOUT_INVALID_TREE, "{what}: {err}");
        assert!(err.message.contains(needle), "{what}: {}", err.message);
        assert!(!err.remediation.is_empty());
        assert_eq!(key_dir_names(root.path()), Vec::<String>::new(), "{what}");
    }
}

#[test]
fn trees_over_the_limits_are_refused_and_cleaned_up() {
    let mut repo = TestRepo::new();
    repo.write_all(&[("a", "12345"), ("d/b", "67890")]); // 3 entries, 10 bytes
    let commit = id(&repo.commit("four"));
    let git = open(&repo);
    let check = |limits: Limits, ok: bool| {
        let root = tempfile::tempdir().expect("tempdir");
        let checkouts = Checkouts::with_limits(root.path().to_owned(), 2, limits).expect("new");
        match checkouts.get(&git, commit) {
            Ok(checkout) => assert!(ok && checkout.created(), "{limits:?}"),
            Err(err) => {
                assert!(!ok, "{limits:?}: {err}");
                assert_eq!(err.code, codes::CHECKOUT_TOO_LARGE);
                assert_eq!(key_dir_names(root.path()), Vec::<String>::new());
            }
        }
    };
    let limits = |max_entries, max_bytes| Limits {
        max_entries,
        max_bytes,
    };
    check(limits(3, 10), true);
    check(limits(2, 10), false);
    check(limits(3, 9), false);
    assert_eq!(Limits::default(), limits(200_000, 4 << 30));
}

#[test]
fn racing_calls_make_one_checkout() {
    let mut repo = TestRepo::new();
    for i in 0..50 {
        repo.write(&format!("dir{}/file{i}.txt", i % 5), format!("{i}\n"));
    }
    let commit = id(&repo.commit("many"));
    let root = tempfile::tempdir().expect("tempdir");
    let checkouts = Checkouts::new(root.path().to_owned(), 2).expect("checkouts");
    let threads = 6;
    let barrier = Arc::new(Barrier::new(threads));
    let created: Vec<(bool, PathBuf)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let barrier = barrier.clone();
                let (checkouts, path) = (&checkouts, repo.path());
                scope.spawn(move || {
                    let git = Repository::open(path).expect("open");
                    barrier.wait();
                    let checkout = checkouts.get(&git, commit).expect("get");
                    assert_eq!(listing(checkout.path()).len(), 55);
                    (checkout.created(), checkout.path().to_owned())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    assert_eq!(created.iter().filter(|(c, _)| *c).count(), 1, "{created:?}");
    assert!(created.iter().all(|(_, p)| p == &created[0].1));
    let hex = commit.to_string();
    assert_eq!(
        key_dir_names(root.path()),
        vec![hex.clone(), format!("{hex}.lock")]
    );
}

/// Whether the checkout of `commit` exists under `root`.
fn present(root: &Path, commit: ObjectId) -> bool {
    std::fs::read_dir(root)
        .expect("root")
        .any(|key| key.expect("key").path().join(commit.to_string()).is_dir())
}

/// Lock-file mtimes are "last used"; file system clocks tick coarsely, so calls that must be
/// ordered are spaced apart.
fn later() {
    std::thread::sleep(std::time::Duration::from_millis(30));
}

#[test]
fn least_recently_used_checkouts_beyond_keep_are_evicted() {
    let (repo, c) = history(&["1\n", "2\n", "3\n", "4\n"]);
    let git = open(&repo);
    let root = tempfile::tempdir().expect("tempdir");
    let checkouts = Checkouts::new(root.path().to_owned(), 2).expect("checkouts");
    for commit in [c[0], c[1], c[0]] {
        drop(checkouts.get(&git, commit).expect("get"));
        later();
    }
    // c[1] is now the least recently used: reusing c[0] touched it.
    drop(checkouts.get(&git, c[2]).expect("get"));
    let state = |commits: &[ObjectId]| {
        commits
            .iter()
            .map(|&x| present(root.path(), x))
            .collect::<Vec<_>>()
    };
    assert_eq!(state(&c), vec![true, false, true, false]);
    // No lock files of evicted checkouts stay behind.
    assert_eq!(key_dir_names(root.path()).len(), 4);

    // keep 0 is taken as 1.
    let one = Checkouts::new(root.path().to_owned(), 0).expect("checkouts");
    assert_eq!(one.keep(), 1);
    later();
    drop(one.get(&git, c[3]).expect("get"));
    assert_eq!(state(&c), vec![false, false, false, true]);
}

#[test]
fn eviction_skips_checkouts_in_use() {
    let (repo, c) = history(&["1\n", "2\n", "3\n"]);
    let git = open(&repo);
    let root = tempfile::tempdir().expect("tempdir");
    let checkouts = Checkouts::new(root.path().to_owned(), 1).expect("checkouts");
    let held = checkouts.get(&git, c[0]).expect("get");
    later();
    drop(checkouts.get(&git, c[1]).expect("get"));
    later();
    let newest = checkouts.get(&git, c[2]).expect("get");
    assert!(held.path().join("app.txt").is_file(), "in use, kept");
    assert!(!present(root.path(), c[1]), "not in use, evicted");
    assert!(newest.path().is_dir());
    drop(held);
    later();
    drop(checkouts.get(&git, c[1]).expect("get"));
    assert!(!present(root.path(), c[0]), "evicted once released");
}

#[test]
fn removal_copes_with_read_only_dirs_and_never_follows_links() {
    let mut repo = TestRepo::new();
    repo.write("a/b/c.txt", "c\n").write("top.txt", "t\n");
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(outside.path().join("keep")).expect("mkdir");
    std::fs::write(outside.path().join("keep/precious"), "x").expect("write");
    std::fs::set_permissions(
        outside.path().join("keep"),
        std::fs::Permissions::from_mode(0o500),
    )
    .expect("chmod");
    repo.symlink(
        "committed-out",
        outside.path().join("keep").to_str().expect("utf-8"),
    );
    let (one, two) = (id(&repo.commit("one")), {
        repo.write("top.txt", "t2\n");
        id(&repo.commit("two"))
    });
    let git = open(&repo);
    let root = tempfile::tempdir().expect("tempdir");
    let checkouts = Checkouts::new(root.path().to_owned(), 1).expect("checkouts");

    // What a command might leave: links out, read-only and unreadable directories.
    let vandalize = |dir: &Path| {
        std::os::unix::fs::symlink(outside.path(), dir.join("made-out")).expect("symlink");
        std::os::unix::fs::symlink(outside.path(), dir.join("a/b/deep-out")).expect("symlink");
        std::fs::write(dir.join("a/b/new.txt"), "n").expect("write");
        std::fs::create_dir(dir.join("a/locked")).expect("mkdir");
        std::fs::write(dir.join("a/locked/f"), "f").expect("write");
        for (rel, mode) in [
            ("a/locked", 0o000),
            ("a/b", 0o555),
            ("a", 0o500),
            ("", 0o555),
        ] {
            std::fs::set_permissions(dir.join(rel), std::fs::Permissions::from_mode(mode))
                .expect("chmod");
        }
    };
    let first = checkouts.get(&git, one).expect("get");
    vandalize(first.path());
    drop(first);
    assert!(checkouts.remove(&git, one).expect("remove"));
    assert!(!present(root.path(), one));

    // The same through eviction.
    let first = checkouts.get(&git, one).expect("get");
    assert!(first.created());
    vandalize(first.path());
    drop(first);
    later();
    drop(checkouts.get(&git, two).expect("get"));
    assert!(!present(root.path(), one));

    assert_eq!(
        std::fs::read(outside.path().join("keep/precious")).expect("still there"),
        b"x"
    );
    assert_eq!(
        mode(&outside.path().join("keep")),
        0o500,
        "not chmod-ed through a link"
    );
    std::fs::set_permissions(
        outside.path().join("keep"),
        std::fs::Permissions::from_mode(0o700),
    )
    .expect("chmod back");
    // Only the live checkout and its lock are left; no `.tmp-` directories.
    assert_eq!(key_dir_names(root.path()).len(), 2);
}

#[test]
fn a_damaged_checkout_is_reused_until_removed() {
    let (repo, c) = history(&["1\n"]);
    let git = open(&repo);
    let root = tempfile::tempdir().expect("tempdir");
    let checkouts = Checkouts::new(root.path().to_owned(), 2).expect("checkouts");
    let checkout = checkouts.get(&git, c[0]).expect("get");
    std::fs::remove_file(checkout.path().join("app.txt")).expect("rm");
    std::fs::write(checkout.path().join("build.out"), "artifact").expect("write");
    drop(checkout);

    let reused = checkouts.get(&git, c[0]).expect("get");
    assert!(!reused.created());
    assert!(!reused.path().join("app.txt").exists());
    assert!(reused.path().join("build.out").exists());

    let err = checkouts.remove(&git, c[0]).expect_err("in use");
    assert_eq!(err.code, codes::CHECKOUT_IN_USE);
    assert!(err.retryable);
    drop(reused);
    assert!(checkouts.remove(&git, c[0]).expect("remove"));
    assert!(!checkouts.remove(&git, c[0]).expect("nothing to remove"));

    let fresh = checkouts.get(&git, c[0]).expect("get");
    assert!(fresh.created());
    assert_eq!(
        std::fs::read(fresh.path().join("app.txt")).expect("read"),
        b"1\n"
    );
    assert!(!fresh.path().join("build.out").exists());
}

#[test]
fn removal_waits_a_moment_for_a_checkout_being_dropped() {
    let (repo, c) = history(&["1\n"]);
    let git = open(&repo);
    let root = tempfile::tempdir().expect("tempdir");
    let checkouts = Checkouts::new(root.path().to_owned(), 2).expect("checkouts");
    let held = checkouts.get(&git, c[0]).expect("get");
    // Dropped 100 ms into the removal's wait, as a lock a spawning child holds until its exec.
    let dropper = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(100));
        drop(held);
    });
    assert!(checkouts.remove(&git, c[0]).expect("removed once dropped"));
    dropper.join().expect("dropper");
    assert!(checkouts.get(&git, c[0]).expect("get").created());
}

#[test]
fn a_missing_commit_is_a_read_error() {
    let (repo, _) = history(&["1\n"]);
    let root = tempfile::tempdir().expect("tempdir");
    let checkouts = Checkouts::new(root.path().to_owned(), 2).expect("checkouts");
    let err = checkouts
        .get(&open(&repo), id(&"ab".repeat(20)))
        .expect_err("missing");
    assert_eq!(err.code, codes::REPOSITORY_READ_FAILED);
    assert_eq!(key_dir_names(root.path()), Vec::<String>::new());
}
