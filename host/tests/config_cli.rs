//! End-to-end: `token show|rotate` and `mappings list|add|remove` on the real binary, with
//! `REVIEW_AGENT_GATEWAY_HOME` pointing at a temporary directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temporary gateway home and a way to run the binary in it.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn config_file(&self) -> PathBuf {
        self.path().join("config").join("config.toml")
    }

    fn token_file(&self) -> PathBuf {
        self.path().join("state").join("token")
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_review-agent-gateway"))
            .args(args)
            .env("REVIEW_AGENT_GATEWAY_HOME", self.path())
            .env_remove("XDG_CONFIG_HOME")
            .current_dir(self.path())
            .output()
            .expect("run the binary")
    }

    /// A fresh git repository (work tree) in the home, one commit on `main`.
    fn git_repo(&self, name: &str) -> PathBuf {
        self.git_repo_on(name, "main")
    }

    /// A fresh git repository (work tree) in the home, one commit on `branch`.
    fn git_repo_on(&self, name: &str, branch: &str) -> PathBuf {
        let repo = self.path().join(name);
        std::fs::create_dir_all(&repo).expect("mkdir");
        git(&repo, &["init", "-q", "-b", branch]);
        std::fs::write(repo.join("a.txt"), "a\n").expect("write");
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "first"]);
        repo.canonicalize().expect("canonical")
    }
}

/// `git` in `dir` with a fixed identity and no user config.
fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Exit 2 with `error[code]: ...` and a remediation line on stderr.
fn assert_fails(output: &Output, code: &str) -> String {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.starts_with(&format!("error[{code}]: ")), "{err}");
    assert!(err.contains("\n  remediation: "), "{err}");
    err
}

#[test]
fn token_show_creates_once_and_rotate_replaces() {
    let home = Home::new();
    let first = home.run(&["token", "show"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let token = stdout(&first);
    let token = token.trim_end();
    assert_eq!(token.len(), 64);
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.token_file())
            .expect("token file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let again = home.run(&["token", "show"]);
    assert_eq!(stdout(&again).trim_end(), token);

    let rotated = home.run(&["token", "rotate"]);
    assert!(rotated.status.success(), "{}", stderr(&rotated));
    let new = stdout(&rotated);
    assert_ne!(new.trim_end(), token);
    assert_eq!(stdout(&home.run(&["token", "show"])), new);
    assert!(
        !stderr(&rotated).contains(new.trim_end()),
        "the token only goes to stdout"
    );
}

#[cfg(unix)]
#[test]
fn token_show_refuses_a_group_readable_file() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new();
    assert!(home.run(&["token", "show"]).status.success());
    std::fs::set_permissions(home.token_file(), std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    let out = home.run(&["token", "show"]);
    let err = assert_fails(&out, "security.token_file_permissions");
    assert!(err.contains("chmod 600"), "{err}");
    assert!(stdout(&out).is_empty(), "no token printed");
}

#[test]
fn mappings_add_list_remove() {
    let home = Home::new();
    let repo = home.git_repo("project");

    let out = home.run(&["mappings", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).is_empty());
    assert!(
        stderr(&out).contains("No repository mappings"),
        "{}",
        stderr(&out)
    );

    // A relative --local-path is made absolute; the origin and project are normalized.
    let out = home.run(&[
        "mappings",
        "add",
        "--gitlab-origin",
        "HTTPS://GitLab.example.com:443",
        "--project-path",
        "group/sub/project/",
        "--local-path",
        "project",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(home.config_file().is_file());

    let out = home.run(&["mappings", "list"]);
    assert_eq!(
        stdout(&out),
        format!(
            "https://gitlab.example.com\tgroup/sub/project\t{}\tmain\n",
            repo.display()
        )
    );

    // The same project again is refused.
    let out = home.run(&[
        "mappings",
        "add",
        "--gitlab-origin",
        "https://gitlab.example.com",
        "--project-path",
        "group/sub/project",
        "--local-path",
        repo.to_str().expect("utf-8"),
        "--default-ref",
        "main",
    ]);
    assert_fails(&out, "repository.mapping_exists");

    let out = home.run(&[
        "mappings",
        "remove",
        "--gitlab-origin",
        "https://gitlab.example.com",
        "--project-path",
        "group/sub/project",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&home.run(&["mappings", "list"])).is_empty());

    let out = home.run(&[
        "mappings",
        "remove",
        "--gitlab-origin",
        "https://gitlab.example.com",
        "--project-path",
        "group/sub/project",
    ]);
    assert_fails(&out, "repository.not_mapped");
}

#[test]
fn mappings_add_refuses_what_is_not_a_repository() {
    let home = Home::new();
    let plain = home.path().join("plain");
    std::fs::create_dir(&plain).expect("mkdir");
    let add = |local: &str, origin: &str| {
        home.run(&[
            "mappings",
            "add",
            "--gitlab-origin",
            origin,
            "--project-path",
            "g/p",
            "--local-path",
            local,
        ])
    };
    assert_fails(&add("plain", "https://gitlab.com"), "repository.not_found");
    assert_fails(
        &add("missing", "https://gitlab.com"),
        "repository.not_found",
    );
    home.git_repo("repo");
    let err = assert_fails(&add("repo", "gitlab.com"), "request.invalid");
    assert!(err.contains("invalid origin"), "{err}");
    assert!(!home.config_file().exists(), "nothing written");
}

#[test]
fn explicit_config_and_invalid_config() {
    let home = Home::new();
    let repo = home.git_repo("r");
    let custom = home.path().join("custom.toml");
    std::fs::write(&custom, "# mine\nport = 4400 # keep\n").expect("write");
    let out = home.run(&[
        "mappings",
        "add",
        "--gitlab-origin",
        "https://gitlab.com",
        "--project-path",
        "a/b",
        "--local-path",
        repo.to_str().expect("utf-8"),
        "--config",
        custom.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&custom).expect("read");
    assert!(text.starts_with("# mine\nport = 4400 # keep\n"), "{text}");
    let out = home.run(&[
        "mappings",
        "list",
        "--config",
        custom.to_str().expect("utf-8"),
    ]);
    assert!(
        stdout(&out).starts_with("https://gitlab.com\ta/b\t"),
        "{}",
        stdout(&out)
    );

    let out = home.run(&["mappings", "list", "--config", "nope.toml"]);
    assert_fails(&out, "config.not_found");

    std::fs::create_dir_all(home.config_file().parent().expect("dir")).expect("mkdir");
    std::fs::write(
        home.config_file(),
        "port = 4317\n\n[[providers]]\nid = \"p\"\nkind = \"anthropic\"\nbase_url = \"https://a\"\napi_key = \"sk-live\"\n",
    )
    .expect("write");
    let out = home.run(&["mappings", "list"]);
    let err = assert_fails(&out, "config.invalid");
    assert!(
        err.contains(&format!(
            "{}:7: key `providers[0].api_key`",
            home.config_file().display()
        )),
        "{err}"
    );
    assert!(err.contains("keyring"), "{err}");
    assert!(!err.contains("sk-live"), "{err}");

    std::fs::write(
        home.config_file(),
        "[limits]\nmax_concurrent_reviews = \"two\"\n",
    )
    .expect("write");
    let err = assert_fails(&home.run(&["mappings", "list"]), "config.invalid");
    assert!(
        err.contains(":2: key `limits.max_concurrent_reviews`"),
        "{err}"
    );
}

/// Issue 12 §5: `mappings add` resolves the default ref in the clone. Without `--default-ref`
/// it picks the repository's own default (tokio's is `master`: origin/HEAD's target, else the
/// checked-out branch) and says which; a `--default-ref` that does not exist is refused with
/// one that does, and nothing is written.
#[test]
fn mappings_add_resolves_the_default_ref() {
    let home = Home::new();
    let upstream = home.git_repo_on("upstream", "master");
    let add = |project: &str, local: &str, extra: &[&str]| {
        let mut args = vec![
            "mappings",
            "add",
            "--gitlab-origin",
            "https://gitlab.com",
            "--project-path",
            project,
            "--local-path",
            local,
        ];
        args.extend_from_slice(extra);
        home.run(&args)
    };

    // An explicit ref that is not there: refused, naming a branch that is.
    let err = assert_fails(
        &add("g/tokio", "upstream", &["--default-ref", "main"]),
        "repository.revision_missing",
    );
    assert!(err.contains("`main` does not exist"), "{err}");
    assert!(err.contains("--default-ref master"), "{err}");
    assert!(!home.config_file().exists(), "nothing written");

    // No --default-ref: the checked-out branch.
    let out = add("g/tokio", "upstream", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("(default ref master, the checked-out branch)"),
        "{}",
        stdout(&out)
    );
    let listed = stdout(&home.run(&["mappings", "list"]));
    assert!(
        listed.contains(&format!("g/tokio\t{}\tmaster\n", upstream.display())),
        "{listed}"
    );

    // A clone with another branch checked out: origin/HEAD's target wins.
    git(home.path(), &["clone", "-q", "upstream", "clone"]);
    let clone = home.path().join("clone");
    git(&clone, &["checkout", "-q", "-b", "topic"]);
    let out = add("g/clone", "clone", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("(default ref master, the branch origin/HEAD points to)"),
        "{}",
        stdout(&out)
    );
    // An explicit existing ref is taken as given.
    let out = add("g/topic", "clone", &["--default-ref", "topic"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("(default ref topic)"),
        "{}",
        stdout(&out)
    );

    // An empty repository has nothing to review.
    let empty = home.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    git(&empty, &["init", "-q"]);
    let err = assert_fails(&add("g/empty", "empty", &[]), "repository.revision_missing");
    assert!(err.contains("has no branch to review"), "{err}");
}
