//! `providers list | set-key | delete-key` and where keys come from (issue 7 item 2; DESIGN §8
//! "Secrets"): the real binary, a temporary `REVIEW_AGENT_GATEWAY_HOME`, and for the keyring a
//! real Secret Service — GNOME Keyring on a private D-Bus session bus that this test starts
//! (`dbus-daemon`, `gnome-keyring-daemon`; `.ci/run` installs them). Every other test points the
//! binary at a bus address where nothing listens, so no test touches the developer's keyring.
//!
//! Each test keeps what the binary printed (stdout and stderr, with `debug` logs on) and checks
//! at the end that no key ever appears in it, nor in any file of the home but the key file.

mod common;

use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::bin;
use common::secret_service::SecretService;

const CONFIG: &str = r#"
[[providers]]
id = "local"
kind = "openai-compatible"
base_url = "http://127.0.0.1:9/v1"
model = "qwen2.5-coder:7b"

[[providers]]
id = "claude"
kind = "anthropic"
base_url = "https://api.anthropic.com"
context_window = 100000
api_key_env = "RAG_TEST_CLAUDE_KEY"
"#;

/// What one run of the binary printed.
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn ok(&self) -> &Self {
        assert_eq!(
            self.code, 0,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }

    /// The `list` table row of a provider.
    fn row(&self, id: &str) -> &str {
        self.stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("no row for {id} in:\n{}", self.stdout))
    }
}

/// A gateway home with the config above, and the bus its runs use.
struct Home {
    dir: tempfile::TempDir,
    bus: String,
    transcript: RefCell<String>,
}

impl Home {
    /// A home whose runs find no D-Bus at all (no keyring service).
    fn without_keyring() -> Home {
        let dir = tempfile::tempdir().expect("tempdir");
        let bus = format!("unix:path={}", dir.path().join("no-bus").display());
        Home::with_bus(dir, bus)
    }

    fn with_bus(dir: tempfile::TempDir, bus: String) -> Home {
        std::fs::create_dir_all(dir.path().join("config")).expect("config dir");
        std::fs::write(dir.path().join("config/config.toml"), CONFIG).expect("config");
        Home {
            dir,
            bus,
            transcript: RefCell::new(String::new()),
        }
    }

    fn key_file(&self, id: &str) -> PathBuf {
        self.dir.path().join("config/keys").join(id)
    }

    /// Run the binary with `stdin` piped in and `env` set on top of a clean key environment.
    fn run(&self, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Out {
        let mut cmd = Command::new(bin());
        cmd.args(args)
            .env("REVIEW_AGENT_GATEWAY_HOME", self.dir.path())
            .env("DBUS_SESSION_BUS_ADDRESS", &self.bus)
            .env("XDG_RUNTIME_DIR", self.dir.path())
            .env("REVIEW_AGENT_GATEWAY_LOG", "debug")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("RAG_TEST_CLAUDE_KEY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn the gateway");
        // A run that fails before reading (an unknown id) closes the pipe first: fine.
        match child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin.as_bytes())
        {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("write stdin: {e}"),
            _ => {}
        }
        let out = child.wait_with_output().expect("wait");
        let out = Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        let mut transcript = self.transcript.borrow_mut();
        transcript.push_str(&out.stdout);
        transcript.push_str(&out.stderr);
        out
    }

    fn list(&self) -> Out {
        self.run(&["providers", "list"], "", &[])
    }

    /// No run printed any of `keys`, and no file of the home but the key files holds one.
    fn assert_never_shown(&self, keys: &[&str]) {
        let transcript = self.transcript.borrow();
        for key in keys {
            assert!(
                !transcript.contains(key),
                "key {key} was printed:\n{transcript}"
            );
        }
        let mut stack = vec![self.dir.path().to_owned()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("read dir") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.parent() != Some(&self.dir.path().join("config/keys")) {
                    let bytes = std::fs::read(&path).unwrap_or_default();
                    let text = String::from_utf8_lossy(&bytes);
                    for key in keys {
                        assert!(!text.contains(key), "key {key} is in {}", path.display());
                    }
                }
            }
        }
    }
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).expect("meta").permissions().mode() & 0o777
}

#[cfg(unix)]
fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn list_shows_each_provider_and_no_key() {
    let home = Home::without_keyring();
    let out = home.list();
    out.ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", out.stdout);
    for column in ["ID", "KIND", "BASE_URL", "MODEL", "CONTEXT", "KEY"] {
        assert!(lines[0].contains(column), "{}", lines[0]);
    }
    let local = out.row("local");
    for cell in [
        "openai-compatible",
        "http://127.0.0.1:9/v1",
        "qwen2.5-coder:7b",
        "8192 (default)",
        "no key",
    ] {
        assert!(local.contains(cell), "{local}");
    }
    let claude = out.row("claude");
    for cell in ["anthropic", "https://api.anthropic.com", "100000", "no key"] {
        assert!(claude.contains(cell), "{claude}");
    }
    let json = home.run(&["providers", "list", "--format", "json"], "", &[]);
    json.ok();
    let first: serde_json::Value =
        serde_json::from_str(json.stdout.lines().next().expect("a line")).expect("json");
    assert_eq!(first["id"], "local");
    assert_eq!(first["contextWindow"], 8192);
    assert_eq!(first["keySource"], serde_json::Value::Null);
}

#[cfg(unix)]
#[test]
fn file_key_is_0600_found_shadowed_by_env_and_deleted() {
    const KEY: &str = "sk-test-file-5b1d7e9a";
    const ENV_KEY: &str = "sk-test-env-0c3f8d21";
    let home = Home::without_keyring();
    let set = home.run(
        &["providers", "set-key", "local", "--file"],
        &format!("{KEY}\n"),
        &[],
    );
    set.ok();
    let path = home.key_file("local");
    assert!(
        set.stderr.contains(&path.display().to_string()),
        "{}",
        set.stderr
    );
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().expect("keys dir")), 0o700);
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        format!("{KEY}\n")
    );

    let list = home.list();
    list.ok();
    let row = list.row("local");
    assert!(
        row.contains(&format!("key file {}", path.display())),
        "{row}"
    );
    assert!(list.row("claude").contains("no key"));

    // The environment wins over the file: the conventional variable, and `api_key_env`.
    let env = home.run(&["providers", "list"], "", &[("OPENAI_API_KEY", ENV_KEY)]);
    env.ok();
    assert!(
        env.row("local")
            .contains("environment variable OPENAI_API_KEY"),
        "{}",
        env.stdout
    );
    let env = home.run(
        &["providers", "list"],
        "",
        &[("RAG_TEST_CLAUDE_KEY", ENV_KEY)],
    );
    assert!(
        env.row("claude")
            .contains("environment variable RAG_TEST_CLAUDE_KEY"),
        "{}",
        env.stdout
    );
    // An empty variable is unset.
    let empty = home.run(&["providers", "list"], "", &[("OPENAI_API_KEY", "")]);
    assert!(empty.row("local").contains("key file"), "{}", empty.stdout);

    // set-key again replaces the key (and mentions the variable that shadows it).
    let again = home.run(
        &["providers", "set-key", "local", "--file"],
        "sk-test-file-second\n",
        &[("OPENAI_API_KEY", ENV_KEY)],
    );
    again.ok();
    assert!(
        again.stderr.contains("OPENAI_API_KEY is set"),
        "{}",
        again.stderr
    );
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        "sk-test-file-second\n"
    );

    let delete = home.run(&["providers", "delete-key", "local"], "", &[]);
    delete.ok();
    assert!(delete.stderr.contains("Removed"), "{}", delete.stderr);
    assert!(!path.exists());
    assert!(home.list().ok().row("local").contains("no key"));
    // Deleting again is fine: nothing is stored.
    let twice = home.run(&["providers", "delete-key", "local"], "", &[]);
    twice.ok();
    assert!(twice.stderr.contains("No stored key"), "{}", twice.stderr);

    home.assert_never_shown(&[KEY, ENV_KEY, "sk-test-file-second"]);
}

#[cfg(unix)]
#[test]
fn insecure_or_broken_key_files_are_refused() {
    const KEY: &str = "sk-test-insecure-77aa01";
    let home = Home::without_keyring();
    home.run(&["providers", "set-key", "local", "--file"], KEY, &[])
        .ok();
    let path = home.key_file("local");
    for bad in [0o644, 0o640, 0o604, 0o660] {
        chmod(&path, bad);
        let out = home.list();
        assert_eq!(out.code, 2, "{}", out.stderr);
        assert!(
            out.row("local").contains("refused: secrets.file_insecure"),
            "{}",
            out.stdout
        );
        assert!(
            out.row("claude").contains("no key"),
            "the others are listed"
        );
        assert!(
            out.stderr.contains("error[secrets.file_insecure]")
                && out.stderr.contains(&format!("mode {bad:04o}")),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr
                .contains(&format!("remediation: Run `chmod 600 {}`", path.display())),
            "{}",
            out.stderr
        );
    }
    // The remediation works.
    chmod(&path, 0o600);
    assert!(home.list().ok().row("local").contains("key file"));

    // A key file that is no key: empty, two words, a symlink.
    for contents in ["\n", "sk one two\n"] {
        std::fs::write(&path, contents).expect("write");
        chmod(&path, 0o600);
        let out = home.list();
        assert_eq!(out.code, 2);
        assert!(
            out.stderr.contains("error[secrets.file_insecure]")
                && out.stderr.contains("holds no usable key")
                && out.stderr.contains("set-key local --file"),
            "{}",
            out.stderr
        );
    }
    std::fs::remove_file(&path).expect("rm");
    let target = home.dir.path().join("elsewhere");
    std::fs::write(&target, format!("{KEY}\n")).expect("write");
    chmod(&target, 0o600);
    std::os::unix::fs::symlink(&target, &path).expect("symlink");
    let out = home.list();
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("not a regular file"), "{}", out.stderr);
    std::fs::remove_file(&target).expect("rm");

    home.assert_never_shown(&[KEY]);
}

#[test]
fn unknown_ids_and_bad_keys_are_refused() {
    let home = Home::without_keyring();
    for args in [
        &["providers", "set-key", "nope", "--file"][..],
        &["providers", "set-key", "nope"][..],
        &["providers", "delete-key", "nope"][..],
    ] {
        let out = home.run(args, "sk-test-unknown-1\n", &[]);
        assert_eq!(out.code, 2, "{args:?}");
        assert!(
            out.stderr.contains("error[provider.not_configured]")
                && out.stderr.contains("`nope`")
                && out.stderr.contains("review-agent-gateway providers list"),
            "{args:?}: {}",
            out.stderr
        );
    }
    // An id that would leave the keys directory is not a provider id.
    let out = home.run(&["providers", "delete-key", ".."], "", &[]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("error[config.invalid]"),
        "{}",
        out.stderr
    );

    for (input, why) in [
        ("", "the key is empty"),
        ("\n", "the key is empty"),
        ("   \n", "the key is empty"),
        ("sk-test bad\n", "space, line break"),
    ] {
        let out = home.run(&["providers", "set-key", "local", "--file"], input, &[]);
        assert_eq!(out.code, 2, "{input:?}");
        assert!(
            out.stderr.contains("error[request.invalid]") && out.stderr.contains(why),
            "{input:?}: {}",
            out.stderr
        );
        assert!(out.stderr.contains("remediation:"), "{}", out.stderr);
        assert!(!home.key_file("local").exists(), "nothing stored");
    }
    // Only the first line of a pipe is the key.
    home.run(
        &["providers", "set-key", "local", "--file"],
        "sk-test-first\nsk-test-second\n",
        &[],
    )
    .ok();
    assert_eq!(
        std::fs::read_to_string(home.key_file("local")).expect("read"),
        "sk-test-first\n"
    );
    home.assert_never_shown(&["sk-test-unknown-1", "sk-test-first", "sk-test-second"]);
}

#[test]
fn without_a_keyring_service_set_key_names_the_file_option() {
    const KEY: &str = "sk-test-nokeyring-42c0";
    let home = Home::without_keyring();
    let out = home.run(&["providers", "set-key", "claude"], KEY, &[]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("error[secrets.unavailable]")
            && out.stderr.contains("OS keyring")
            && out
                .stderr
                .contains("`review-agent-gateway providers set-key claude --file`"),
        "{}",
        out.stderr
    );
    // Resolving without a keyring is not an error: the file is next (the reason is a debug log).
    home.run(&["providers", "set-key", "claude", "--file"], KEY, &[])
        .ok();
    let list = home.list();
    list.ok();
    assert!(list.row("claude").contains("key file"), "{}", list.stdout);
    assert!(list.stderr.contains("no OS keyring"), "{}", list.stderr);
    let delete = home.run(&["providers", "delete-key", "claude"], "", &[]);
    delete.ok();
    assert!(
        delete.stderr.contains("the OS keyring could not be asked"),
        "{}",
        delete.stderr
    );
    home.assert_never_shown(&[KEY]);
}

// === A real Secret Service ===

#[cfg(unix)]
#[test]
fn keyring_keys_in_a_real_secret_service() {
    const KEY: &str = "sk-ant-test-keyring-9e4b2c";
    const FILE_KEY: &str = "sk-ant-test-file-1a2b3c";
    let service = SecretService::start();
    let home = Home::with_bus(
        tempfile::tempdir().expect("tempdir"),
        service.address.clone(),
    );

    // A key file first; set-key without --file moves the provider to the keyring.
    home.run(&["providers", "set-key", "claude", "--file"], FILE_KEY, &[])
        .ok();
    let set = home.run(
        &["providers", "set-key", "claude"],
        &format!("{KEY}\n"),
        &[],
    );
    set.ok();
    assert!(set.stderr.contains("in the OS keyring"), "{}", set.stderr);
    assert_eq!(service.lookup("claude").as_deref(), Some(KEY));
    assert!(
        !home.key_file("claude").exists(),
        "the old key file is removed"
    );
    let list = home.list();
    list.ok();
    assert!(list.row("claude").contains("OS keyring"), "{}", list.stdout);
    assert!(list.row("local").contains("no key"), "{}", list.stdout);

    // The keyring wins over a key file, and the environment over both.
    std::fs::create_dir_all(home.key_file("claude").parent().expect("dir")).expect("dir");
    std::fs::write(home.key_file("claude"), format!("{FILE_KEY}\n")).expect("write");
    chmod(&home.key_file("claude"), 0o600);
    assert!(home.list().ok().row("claude").contains("OS keyring"));
    let env = home.run(
        &["providers", "list"],
        "",
        &[("RAG_TEST_CLAUDE_KEY", "sk-env")],
    );
    assert!(env.ok().row("claude").contains("environment variable"));

    // set-key --file moves it back: the keyring item is removed.
    home.run(&["providers", "set-key", "claude", "--file"], FILE_KEY, &[])
        .ok();
    assert_eq!(service.lookup("claude"), None);
    assert!(home.list().ok().row("claude").contains("key file"));

    // An item another program stored is found; one that is no key is skipped with a warning.
    service.plant("local", KEY);
    assert!(home.list().ok().row("local").contains("OS keyring"));
    service.plant("local", "two words");
    let list = home.list();
    assert!(list.ok().row("local").contains("no key"), "{}", list.stdout);
    assert!(list.stderr.contains("not a usable key"), "{}", list.stderr);

    // delete-key removes the item and the file.
    service.plant("claude", KEY);
    let delete = home.run(&["providers", "delete-key", "claude"], "", &[]);
    delete.ok();
    assert!(
        delete.stderr.contains("from the OS keyring") && delete.stderr.contains("Removed /"),
        "{}",
        delete.stderr
    );
    assert_eq!(service.lookup("claude"), None);
    assert!(!home.key_file("claude").exists());
    assert!(home.list().ok().row("claude").contains("no key"));

    // A locked keyring: storing fails naming --file; resolving falls through to the file.
    home.run(&["providers", "set-key", "claude", "--file"], FILE_KEY, &[])
        .ok();
    service.lock();
    let set = home.run(&["providers", "set-key", "claude"], KEY, &[]);
    assert_eq!(set.code, 2, "{}", set.stderr);
    assert!(
        set.stderr.contains("error[secrets.unavailable]")
            && set.stderr.contains("set-key claude --file"),
        "{}",
        set.stderr
    );
    let list = home.list();
    assert!(
        list.ok().row("claude").contains("key file"),
        "{}",
        list.stdout
    );
    assert!(list.stderr.contains("locked"), "{}", list.stderr);

    home.assert_never_shown(&[KEY, FILE_KEY, "two words"]);
}
