//! The settings page's Providers and Rules pages (issue 18 §2) over raw HTTP against a spawned
//! daemon, logged in with a code from the real `review-agent-gateway settings` command: bad
//! inputs — an unknown provider id, an empty key, a key with a line break, an over-long key, a
//! snippet over the 64 KiB cap, an unknown rule set, a path that is not repository-relative —
//! each answered with its dotted code and a remediation, nothing stored, the daemon still
//! serving; and the working paths next to them (a key stored in the 0600 key file without a
//! keyring, never shown back or logged; a snippet's shell injection found). The browser side is
//! `browser_settings.rs` (`extension-bridge/tests/settings/providers.mjs`, `rules.mjs`).

mod common;

use std::path::Path;
use std::process::{Child, Command};

use common::http::{Response, spawn_serve};

/// A key for the tests: never expected in an answer or the log.
const KEY: &str = "sk-settings-pages-5b1d0c9e7f";

struct Daemon {
    child: Child,
    port: u16,
    home: tempfile::TempDir,
    cookie: String,
    csrf: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    /// A daemon whose config has provider `paid` (an openai-compatible server on a closed
    /// port), without a keyring (no D-Bus) and without `OPENAI_API_KEY`; logged in.
    fn start() -> Daemon {
        Daemon::start_with(None, "", |_| {})
    }

    /// The same on the D-Bus session bus `bus` (a Secret Service), else on none.
    fn start_on(bus: Option<&str>) -> Daemon {
        Daemon::start_with(bus, "", |_| {})
    }

    /// The same with `top` at the top of config.toml, after `prepare` got the home directory.
    fn start_with(bus: Option<&str>, top: &str, prepare: impl FnOnce(&Path)) -> Daemon {
        let home = tempfile::tempdir().expect("temp dir");
        prepare(home.path());
        std::fs::create_dir_all(home.path().join("config")).expect("config dir");
        let port = common::fake_provider::closed_port();
        std::fs::write(
            home.path().join("config/config.toml"),
            format!(
                "{top}\n[[providers]]\nid = \"paid\"\nkind = \"openai-compatible\"\n\
                 base_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"m\"\n"
            ),
        )
        .expect("config");
        let bus = bus.map_or_else(
            || format!("unix:path={}/no-bus", home.path().display()),
            str::to_owned,
        );
        let runtime = home.path().display().to_string();
        let mut child = spawn_serve(
            home.path(),
            &[
                ("DBUS_SESSION_BUS_ADDRESS", &bus),
                ("XDG_RUNTIME_DIR", &runtime),
                ("OPENAI_API_KEY", ""),
            ],
        );
        let port = common::read_port(&mut child);
        let mut daemon = Daemon {
            child,
            port,
            home,
            cookie: String::new(),
            csrf: String::new(),
        };
        daemon.login();
        daemon
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], form: &str) -> Response {
        common::settings::send_form(self.port, method, path, headers, form)
    }

    fn login(&mut self) {
        let session = common::settings::login(self.port, self.home.path());
        self.cookie = session.cookie;
        self.csrf = session.csrf;
    }

    fn get(&self, path: &str) -> Response {
        let cookie = self.cookie.clone();
        self.send("GET", path, &[("Cookie", &cookie)], "")
    }

    /// POST `fields` (with the session's anti-CSRF token) as the page's form does.
    fn post(&self, path: &str, fields: &[(&str, &str)]) -> Response {
        let mut form = format!("csrf={}", self.csrf);
        for (k, v) in fields {
            form.push_str(&format!("&{}={}", encode(k), encode(v)));
        }
        let (cookie, origin) = (self.cookie.clone(), self.origin());
        self.send(
            "POST",
            path,
            &[("Cookie", &cookie), ("Origin", &origin)],
            &form,
        )
    }

    /// POST a Providers form, follow the 303: the page showing the change's flash.
    fn provider_change(&self, path: &str, fields: &[(&str, &str)]) -> String {
        let answer = self.post(path, fields);
        assert_eq!(answer.status, 303, "{path}: {}", answer.body);
        let to = answer.header("location").expect("a location").to_owned();
        assert!(to.starts_with("/settings/providers"), "{to}");
        let page = self.get(&to);
        assert_eq!(page.status, 200, "{}", page.body);
        page.body
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("serve.log")).unwrap_or_default()
    }

    fn key_file(&self) -> std::path::PathBuf {
        self.home.path().join("config/keys/paid")
    }
}

/// `application/x-www-form-urlencoded` as a browser encodes a field.
fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(b as char);
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The flash of a page: (whether it is an error, its text), or `None`.
fn flash(page: &str) -> Option<(bool, String)> {
    let start = page.find("<div class=\"flash ")?;
    let rest = &page[start..];
    let end = rest.find("</div>")?;
    let block = &rest[..end];
    Some((block.contains("flash error"), block.to_owned()))
}

/// The page shows an error flash with `code` and a remediation.
#[track_caller]
fn assert_error_flash(page: &str, code: &str, words: &[&str]) {
    let (error, block) = flash(page).unwrap_or_else(|| panic!("no flash in {page}"));
    assert!(error, "not an error: {block}");
    assert!(block.contains(&format!("<code>{code}</code>")), "{block}");
    // The remediation is the flash's second paragraph.
    assert!(block.matches("<p>").count() >= 2, "no remediation: {block}");
    for w in words {
        assert!(block.contains(w), "no `{w}` in {block}");
    }
}

#[test]
fn bad_provider_inputs_are_refused_with_a_code_and_a_remediation() {
    let daemon = Daemon::start();

    // An unknown provider id, for each change.
    for path in [
        "/settings/providers/key",
        "/settings/providers/test",
        "/settings/providers/delete-key",
    ] {
        let page = daemon.provider_change(path, &[("id", "nope"), ("key", KEY)]);
        assert_error_flash(
            &page,
            "provider.not_configured",
            &["nope", "review-agent-gateway providers list"],
        );
        assert!(!page.contains(KEY), "{path}: the key is in the page");
    }
    // An id that could name a path outside keys/.
    let page = daemon.provider_change("/settings/providers/delete-key", &[("id", "../token")]);
    assert_error_flash(&page, "config.invalid", &["provider id"]);

    // Keys that are not keys: nothing stored, the key never quoted.
    let long = "k".repeat(5000);
    for (key, why) in [
        ("", "the key is empty"),
        ("   ", "the key is empty"),
        ("sk-first\nsk-second", "line break"),
        ("sk-first\r\nsk-second", "line break"),
        ("sk with space", "space"),
        ("sk-\u{7f}", "control"),
        (long.as_str(), "longer than 4096 bytes"),
    ] {
        let page =
            daemon.provider_change("/settings/providers/key", &[("id", "paid"), ("key", key)]);
        assert_error_flash(&page, "request.invalid", &[why, "Paste the key"]);
        if key.len() > 3 {
            assert!(!page.contains(key), "the refused key is shown: {key:?}");
        }
        assert!(
            !daemon.key_file().exists(),
            "a refused key was stored: {key:?}"
        );
    }

    // The working path: no keyring here, so the key file, 0600, never shown back.
    let page = daemon.provider_change("/settings/providers/key", &[("id", "paid"), ("key", KEY)]);
    let (_, block) = flash(&page).expect("a flash");
    let file = daemon.key_file();
    assert!(
        block.contains(&file.display().to_string()) && block.contains("0600"),
        "{block}"
    );
    // Nothing answers at the provider's URL: stored, but the test says unavailable.
    assert!(block.contains("provider.unavailable"), "{block}");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file)
            .expect("key file")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
    }
    assert_eq!(
        std::fs::read_to_string(&file).expect("key file"),
        format!("{KEY}\n")
    );
    assert!(!page.contains(KEY), "the key is in the page");
    assert!(
        page.contains("data-key-source=\"file\""),
        "the page does not say file"
    );
    // The command line sees the same key file.
    let list = Command::new(common::bin())
        .args(["providers", "list"])
        .env("REVIEW_AGENT_GATEWAY_HOME", daemon.home.path())
        .env("OPENAI_API_KEY", "")
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            format!("unix:path={}/no-bus", daemon.home.path().display()),
        )
        .output()
        .expect("providers list");
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(
        listed.contains(&format!("key file {}", file.display())),
        "{listed}"
    );

    // Deleted: the file is gone.
    let page = daemon.provider_change("/settings/providers/delete-key", &[("id", "paid")]);
    let (error, block) = flash(&page).expect("a flash");
    assert!(!error && block.contains("removed"), "{block}");
    assert!(!file.exists());

    // The daemon serves on, and its log never saw the key.
    assert_eq!(daemon.get("/settings/providers").status, 200);
    assert!(
        !daemon.log().contains(KEY),
        "the key is in the daemon's log"
    );
    assert!(!daemon.log().contains("panicked"), "{}", daemon.log());
}

/// With a keyring service (GNOME Keyring on a private bus), the page stores the key there — the
/// old key file removed, as `providers set-key` does — and deletes it from there.
#[cfg(unix)]
#[test]
fn with_a_keyring_the_key_goes_to_the_keyring() {
    let service = common::secret_service::SecretService::start();
    let daemon = Daemon::start_on(Some(&service.address));
    let file = daemon.key_file();
    std::fs::create_dir_all(file.parent().expect("keys dir")).expect("keys dir");
    std::fs::write(&file, "sk-old-file-key\n").expect("old key file");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    let page = daemon.provider_change("/settings/providers/key", &[("id", "paid"), ("key", KEY)]);
    let (_, block) = flash(&page).expect("a flash");
    assert!(block.contains("in the OS keyring"), "{block}");
    assert!(!block.contains("key file"), "{block}");
    assert_eq!(service.lookup("paid").as_deref(), Some(KEY));
    assert!(!file.exists(), "the old key file is still there");
    assert!(
        page.contains("data-key-source=\"keyring\""),
        "the page does not say keyring"
    );
    assert!(!page.contains(KEY), "the key is in the page");

    let page = daemon.provider_change("/settings/providers/delete-key", &[("id", "paid")]);
    let (error, block) = flash(&page).expect("a flash");
    assert!(!error && block.contains("from the OS keyring"), "{block}");
    assert_eq!(service.lookup("paid"), None);
    assert!(page.contains("data-key-source=\"none\""));
    assert!(
        !daemon.log().contains(KEY),
        "the key is in the daemon's log"
    );
}

#[test]
fn bad_snippets_and_rule_sets_are_refused_with_a_code_and_a_remediation() {
    let daemon = Daemon::start();
    let try_rules = |set: &str, path: &str, snippet: &str| {
        daemon.post(
            "/settings/rules/try",
            &[("set", set), ("path", path), ("snippet", snippet)],
        )
    };
    // The working path first.
    let found = try_rules(
        "security-default",
        "app.py",
        "import os\nos.system(\"rm \" + input())",
    );
    assert_eq!(found.status, 200, "{}", found.body);
    assert!(
        found
            .body
            .contains("data-rule=\"python.shell-injection\" data-line=\"2\""),
        "{}",
        found.body
    );

    let over = "x = 1\n".repeat(64 * 1024 / 6 + 10);
    let cases: [(&str, &str, &str, &str, &[&str]); 5] = [
        (
            "security-default",
            "app.py",
            over.as_str(),
            "request.invalid",
            &["64 KiB", "Paste only the part"],
        ),
        (
            "no-such-set",
            "app.py",
            "x = 1",
            "rules.unknown_rule_set",
            &["no-such-set", "security-default", "Rules page"],
        ),
        (
            "security-default",
            "../app.py",
            "x = 1",
            "request.invalid",
            &["repository-relative"],
        ),
        (
            "security-default",
            "",
            "x = 1",
            "request.invalid",
            &["path"],
        ),
        (
            "security-default",
            "app.py",
            " \n ",
            "request.invalid",
            &["empty", "Paste the code"],
        ),
    ];
    for (set, path, snippet, code, words) in cases {
        let answer = try_rules(set, path, snippet);
        assert_eq!(
            answer.status,
            400,
            "{code}: {}",
            &answer.body[..answer.body.len().min(400)]
        );
        let start = answer.body.find("id=\"try-error\"").expect("the error box");
        let block = &answer.body[start..];
        let block = &block[..block.find("</div>").unwrap_or(block.len())];
        assert!(block.contains(&format!("<code>{code}</code>")), "{block}");
        for w in words {
            assert!(block.contains(w), "no `{w}` in {block}");
        }
        assert!(
            !answer.body.contains("id=\"try-result\""),
            "{code}: a result too"
        );
    }
    assert_eq!(daemon.get("/settings/rules").status, 200);
    assert!(!daemon.log().contains("panicked"), "{}", daemon.log());
}

/// A rule file of set `id` with one line rule flagging `print(`.
fn rule_file(id: &str, version: &str) -> String {
    format!(
        "id = \"{id}\"\nversion = \"{version}\"\ndescription = \"{id} rules\"\n\n[[rules]]\n\
         id = \"{id}.no-print\"\ntitle = \"A print left in\"\ncategory = \"style\"\n\
         severity = \"low\"\nconfidence = \"high\"\nlanguages = [\"python\"]\n\
         pattern = '\\bprint\\('\nmessage = \"Remove the debug print.\"\n\n\
         [rules.examples]\nmatch = [\"print(x)\"]\nno_match = [\"log(x)\"]\n"
    )
}

/// The Rules page lists where each set comes from (the config directory, `rules_dirs`), tries
/// a user's set, and shows a broken rule file's error with the built-in sets still listed.
#[test]
fn the_rules_page_names_each_sets_source_and_a_broken_file() {
    let more = tempfile::tempdir().expect("rules dir");
    std::fs::write(more.path().join("extra.toml"), rule_file("extra", "0.3.0")).expect("extra");
    let top = format!("rules_dirs = [\"{}\"]\n", more.path().display());
    let daemon = Daemon::start_with(None, &top, |home| {
        let dir = home.join("config/rules");
        std::fs::create_dir_all(&dir).expect("rules dir");
        std::fs::write(dir.join("team.toml"), rule_file("team", "2.1.0")).expect("team");
    });
    let page = daemon.get("/settings/rules");
    assert_eq!(page.status, 200);
    let row = |id: &str| {
        let start = page
            .body
            .find(&format!("<tr data-set=\"{id}\">"))
            .unwrap_or_else(|| panic!("no row of {id}"));
        let rest = &page.body[start..];
        rest[..rest.find("</tr>").unwrap_or(rest.len())].to_owned()
    };
    assert!(row("security-default").contains("built in"));
    let team = row("team");
    assert!(
        team.contains("2.1.0") && team.contains("config directory") && team.contains("team.toml"),
        "{team}"
    );
    let extra = row("extra");
    assert!(
        extra.contains("0.3.0") && extra.contains("rules_dirs in config.toml"),
        "{extra}"
    );
    assert!(page.body.contains("data-rule=\"team.no-print\""));
    // A user's set tried on a snippet: its line rule, on line 3.
    let tried = daemon.post(
        "/settings/rules/try",
        &[
            ("set", "team"),
            ("path", "src/app.py"),
            ("snippet", "x = 1\n\nprint(x)\n"),
        ],
    );
    assert_eq!(tried.status, 200);
    assert!(
        tried
            .body
            .contains("data-rule=\"team.no-print\" data-line=\"3\""),
        "{}",
        tried.body
    );
    // The same line in a file of another language: the rule does not apply.
    let other = daemon.post(
        "/settings/rules/try",
        &[("set", "team"), ("path", "app.js"), ("snippet", "print(x)")],
    );
    assert!(other.body.contains("id=\"try-none\""), "{}", other.body);

    // A broken rule file: the error with its file and line, the built-in sets still shown.
    std::fs::write(
        more.path().join("extra.toml"),
        "id = \"extra\"\nversion = 3\n",
    )
    .expect("break");
    let page = daemon.get("/settings/rules");
    assert_eq!(page.status, 200);
    let start = page.body.find("id=\"rules-error\"").expect("the error box");
    let block = &page.body[start..];
    let block = &block[..block.find("</div>").unwrap_or(block.len())];
    assert!(
        block.contains("<code>rules.invalid</code>") && block.contains("extra.toml"),
        "{block}"
    );
    assert!(page.body.contains("<tr data-set=\"security-default\">"));
    let tried = daemon.post(
        "/settings/rules/try",
        &[
            ("set", "security-default"),
            ("path", "app.py"),
            ("snippet", "x = 1"),
        ],
    );
    assert_eq!(tried.status, 400);
    assert!(
        tried.body.contains("<code>rules.invalid</code>"),
        "{}",
        tried.body
    );
}

/// A mapped repository's own rule sets (`.review-agent/rules/` at its default ref) are listed
/// apart, with their version.
#[test]
fn the_rules_page_lists_a_repositorys_own_sets() {
    let repo = tempfile::tempdir().expect("repo");
    common::git(repo.path(), &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(repo.path().join(".review-agent/rules")).expect("dir");
    std::fs::write(
        repo.path().join(".review-agent/rules/own.toml"),
        rule_file("own", "4.0.1"),
    )
    .expect("rule file");
    common::git(repo.path(), &["add", "-A"]);
    common::git(repo.path(), &["commit", "-q", "-m", "rules"]);
    let top = format!(
        "[[mappings]]\ngitlab_origin = \"https://gitlab.example.com\"\n\
         project_path = \"group/own\"\nlocal_path = \"{}\"\ndefault_ref = \"main\"\n",
        repo.path().display()
    );
    let daemon = Daemon::start_with(None, &top, |_| {});
    let page = daemon.get("/settings/rules");
    assert_eq!(page.status, 200);
    let start = page
        .body
        .find("id=\"repo-rules\"")
        .expect("the repositories' list");
    let list = &page.body[start..];
    let list = &list[..list.find("</ul>").unwrap_or(list.len())];
    assert!(
        list.contains("group/own") && list.contains("own@4.0.1") && list.contains("1 rule)"),
        "{list}"
    );
    // Not a set of the daemon's own catalogue: not in the try box.
    assert!(!page.body.contains("<option value=\"own\""));
}
