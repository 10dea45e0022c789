//! The settings page's Agents and MCP page (issue 18 §2) over raw HTTP against a spawned
//! daemon: bad answers to a delegated agent's permission request are refused with the engine's
//! dotted code and remediation in the page's flash, and nothing reaches the agent; a good one
//! goes through and is recorded `by: settings`.
//!
//! - [`bad_answers_are_refused_with_a_code_and_a_remediation`]: a REAL `opencode serve`
//!   (extension-bridge's `opencode-linux-x64`, started by the daemon in its sandbox) driven by
//!   the scripted model of `common::agent_model` (`TASK:edit` asks to edit a file), so a request
//!   is really pending. Then, through `POST /settings/agents/reply` with the session cookie,
//!   the daemon's `Origin` and the anti-CSRF token: an unknown session
//!   (`delegation.session_not_found`), an unknown request (`delegation.permission_not_pending`),
//!   a reply that is not once/always/reject (`request.invalid`), `always` while
//!   `allow_always` is off (`delegation.always_not_allowed`, the engine's refusal), a blank
//!   field, markup in a field (escaped) — the request still pending after each; then `once`
//!   (the edit made, `permission.replied` `by: settings`) and the same answer again, stale
//!   (`delegation.permission_not_pending`); a follow-up asking two edits at once, rejected from
//!   the page (both refused, the flash says one other went with it). The daemon never panics
//!   and still answers.
//! - [`with_delegation_off_a_reply_is_refused`]: no OpenCode at all; the page says delegation is
//!   off and a reply answers `delegation.disabled` with the key to set.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::agent_model::{opencode_binary, respond};
use common::fake_provider::FakeProvider;
use common::http::{Response, request, spawn_serve};
use review_agent_gateway::config::ProviderKind;
use serde_json::{Value, json};

const TEXT: &str = "hello from the fixture\nsecond line\n";

struct Daemon {
    child: Child,
    port: u16,
    token: String,
    home: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    fn start(home: &Path, config: &str) -> Daemon {
        std::fs::create_dir_all(home.join("config")).expect("mkdir");
        std::fs::write(home.join("config/config.toml"), config).expect("write config");
        let mut child = spawn_serve(home, &[]);
        let port = common::read_port(&mut child);
        Daemon {
            child,
            port,
            token: common::token(home),
            home: home.to_owned(),
        }
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A raw request with a form body (or none, for GET).
    fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], form: &str) -> Response {
        common::settings::send_form(self.port, method, path, headers, form)
    }

    /// A logged-in settings session: its cookie header and anti-CSRF token.
    fn login(&self) -> Page {
        let session = common::settings::login(self.port, &self.home);
        Page {
            cookie: session.cookie,
            csrf: session.csrf,
        }
    }

    /// `POST /settings/agents/reply` with `fields` (form-encoded as given, plus the token),
    /// then the page it leads to: (the answer's status, the page's HTML).
    fn reply(&self, page: &Page, fields: &str) -> String {
        let origin = self.origin();
        let answer = self.send(
            "POST",
            "/settings/agents/reply",
            &[("Origin", &origin), ("Cookie", &page.cookie)],
            &format!("csrf={}&{fields}", page.csrf),
        );
        assert_eq!(answer.status, 303, "{fields}: {}", answer.body);
        assert_eq!(
            answer.header("location"),
            Some("/settings/agents"),
            "{fields}"
        );
        let shown = self.send("GET", "/settings/agents", &[("Cookie", &page.cookie)], "");
        assert_eq!(shown.status, 200, "{}", shown.body);
        shown.body
    }

    /// `POST /v1/agents/<call>`: the answer's `data`.
    fn agent(&self, call: &str, input: Value) -> Value {
        let auth = format!("Bearer {}", self.token);
        let answer = request(
            self.port,
            "POST",
            &format!("/v1/agents/{call}"),
            &[("Authorization", &auth)],
            Some(&input),
        );
        assert_eq!(answer.status, 200, "{call}: {}", answer.body);
        answer.json()["data"].clone()
    }

    /// An MCP session's `workspace_open` of `dir`: the handle.
    fn open_workspace(&self, dir: &Path) -> String {
        let auth = format!("Bearer {}", self.token);
        let post = |session: Option<&str>, body: Value| {
            let mut headers = vec![
                ("Authorization", auth.as_str()),
                ("Accept", "application/json, text/event-stream"),
            ];
            if let Some(session) = session {
                headers.push(("Mcp-Session-Id", session));
                headers.push(("MCP-Protocol-Version", "2025-11-25"));
            }
            request(self.port, "POST", "/mcp", &headers, Some(&body))
        };
        let init = post(
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "settings-agents", "version": "1"}}}),
        );
        assert_eq!(init.status, 200, "{}", init.body);
        let session = init.header("mcp-session-id").expect("session").to_owned();
        post(
            Some(&session),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        let opened = post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                   "params": {"name": "workspace_open", "arguments": {"path": dir}}}),
        )
        .rpc();
        opened["result"]["structuredContent"]["workspace"]
            .as_str()
            .unwrap_or_else(|| panic!("workspace_open: {opened}"))
            .to_owned()
    }

    /// The daemon still answers, and its log has no panic.
    fn assert_healthy(&self) {
        let health = request(self.port, "GET", "/v1/health", &[], None);
        assert_eq!(health.status, 200, "{}", health.body);
        let log = std::fs::read_to_string(self.home.join("serve.log")).unwrap_or_default();
        assert!(!log.contains("panicked"), "the daemon panicked:\n{log}");
    }
}

/// A logged-in browser.
struct Page {
    cookie: String,
    csrf: String,
}

/// The page's flash: (whether it is an error, its HTML).
fn flash(html: &str) -> (bool, String) {
    let start = html
        .find("<div class=\"flash ")
        .expect("a flash on the page");
    let rest = &html[start..];
    let end = rest.find("</div>").expect("the flash's end");
    (
        rest.starts_with("<div class=\"flash error"),
        rest[..end].to_owned(),
    )
}

/// The page's flash is an error with `code` and `needle` in its remediation.
fn assert_refused(html: &str, code: &str, needle: &str, context: &str) {
    let (error, text) = flash(html);
    assert!(error, "{context}: not an error flash: {text}");
    assert!(
        text.contains(&format!("<code>{code}</code>")),
        "{context}: no {code} in {text}"
    );
    let remediation = text.split("</p>").nth(1).unwrap_or_default();
    assert!(
        remediation.contains(needle),
        "{context}: no {needle:?} in the remediation of {text}"
    );
}

#[test]
fn bad_answers_are_refused_with_a_code_and_a_remediation() {
    let home = tempfile::tempdir().expect("home");
    let roots = tempfile::tempdir().expect("roots");
    let root = std::fs::canonicalize(roots.path()).expect("canonical");
    let repo = root.join("work");
    std::fs::create_dir(&repo).expect("mkdir");
    common::git(&repo, &["init", "-q", "-b", "main"]);
    for name in ["edit.txt", "a.txt", "b.txt"] {
        std::fs::write(repo.join(name), TEXT).expect("write");
    }
    common::git(&repo, &["add", "-A"]);
    common::git(&repo, &["commit", "-q", "-m", "first"]);
    let fake = FakeProvider::start();
    fake.set_responder(respond);
    let config = format!(
        "[[mcp.roots]]\npath = \"{}\"\nwritable = true\n\n{}\n[delegation]\nenabled = true\n\
         provider = \"fake\"\nopencode_binary = \"{}\"\n",
        root.display(),
        fake.toml("fake", ProviderKind::OpenaiCompatible, None),
        opencode_binary().display()
    );
    let daemon = Daemon::start(home.path(), &config);
    let ws = daemon.open_workspace(&repo);
    let file = repo.join("edit.txt");
    let task = daemon.agent(
        "agent_start_task",
        json!({"executor": "opencode", "task": format!("TASK:edit FILE:{} please", file.display()),
               "workspace": ws}),
    );
    let session = task["sessionId"].as_str().expect("sessionId").to_owned();
    let run_id = task["runId"].as_str().expect("runId").to_owned();
    let pending = || -> Vec<String> {
        daemon.agent("agent_pending_permissions", json!({"session_id": session}))["permissions"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| p["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let until = Instant::now() + Duration::from_secs(90);
    let request_id = loop {
        if let Some(id) = pending().first() {
            break id.clone();
        }
        assert!(Instant::now() < until, "no permission request pending");
        std::thread::sleep(Duration::from_millis(250));
    };

    let page = daemon.login();
    let listed = daemon.send("GET", "/settings/agents", &[("Cookie", &page.cookie)], "");
    assert!(
        listed
            .body
            .contains(&format!("data-request=\"{request_id}\"")),
        "the page does not list {request_id}"
    );
    assert!(
        listed.body.contains("value=\"always\" disabled"),
        "Always is offered with allow_always off"
    );

    let cases: Vec<(String, &str, &str, &str)> = vec![
        (
            format!("session=ses_made_up&request={request_id}&reply=once"),
            "delegation.session_not_found",
            "agents list",
            "an unknown session",
        ),
        (
            format!("session={session}&request=per_made_up&reply=once"),
            "delegation.permission_not_pending",
            "pending permissions again",
            "an unknown request",
        ),
        (
            format!("session={session}&request={request_id}&reply=sometimes"),
            "request.invalid",
            "Once, Always or Reject",
            "a reply other than once/always/reject",
        ),
        (
            format!("session={session}&request={request_id}&reply="),
            "request.invalid",
            "Once, Always or Reject",
            "no reply",
        ),
        (
            format!("session={session}&request={request_id}&reply=always"),
            "delegation.always_not_allowed",
            "allow_always = true",
            "always while not allowed",
        ),
        (
            format!("session=&request={request_id}&reply=once"),
            "request.invalid",
            "reload it",
            "no session",
        ),
        (
            format!("session={session}&request=%3Cscript%3Ex%3C%2Fscript%3E&reply=once"),
            "delegation.permission_not_pending",
            "pending permissions again",
            "markup as the request",
        ),
    ];
    for (fields, code, needle, context) in &cases {
        let html = daemon.reply(&page, fields);
        assert_refused(&html, code, needle, context);
        assert!(!html.contains("<script>x"), "{context}: markup not escaped");
        assert_eq!(
            pending(),
            vec![request_id.clone()],
            "{context}: the request changed"
        );
        assert_eq!(std::fs::read_to_string(&file).expect("read"), TEXT);
    }

    // Once: answered, the edit made, recorded as given by the settings page.
    let html = daemon.reply(
        &page,
        &format!("session={session}&request={request_id}&reply=once"),
    );
    let (error, text) = flash(&html);
    assert!(!error && text.contains(&request_id), "once: {text}");
    let until = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&file).expect("read") == TEXT {
        assert!(Instant::now() < until, "the approved edit was not made");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        TEXT.replace("hello", "goodbye")
    );
    // The same answer again: stale.
    let html = daemon.reply(
        &page,
        &format!("session={session}&request={request_id}&reply=once"),
    );
    assert_refused(
        &html,
        "delegation.permission_not_pending",
        "pending permissions again",
        "a stale request",
    );
    // The run records the reply `by: settings`.
    let until = Instant::now() + Duration::from_secs(60);
    let replied = loop {
        let out = Command::new(common::bin())
            .args(["runs", "show", &run_id, "--events", "--format", "json"])
            .env("REVIEW_AGENT_GATEWAY_HOME", home.path())
            .output()
            .expect("runs show");
        let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if let Some(e) = events.iter().find(|e| e["type"] == "permission.replied") {
            break e.clone();
        }
        assert!(Instant::now() < until, "no permission.replied: {events:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(replied["requestId"], request_id.as_str(), "{replied}");
    assert_eq!(replied["reply"], "once", "{replied}");
    assert_eq!(replied["by"], "settings", "{replied}");

    // Reject with two requests pending: both refused, the flash says so, nothing written.
    let (a, b) = (repo.join("a.txt"), repo.join("b.txt"));
    let until = Instant::now() + Duration::from_secs(30);
    while daemon.agent("agent_status", json!({"session_id": session}))["state"] != "idle" {
        assert!(Instant::now() < until, "the first task did not end");
        std::thread::sleep(Duration::from_millis(200));
    }
    let task = daemon.agent(
        "agent_continue",
        json!({"session_id": session,
               "followup": format!("TASK:edit2 FILE:{} FILE:{} please", a.display(), b.display())}),
    );
    let run2 = task["runId"].as_str().expect("runId").to_owned();
    let until = Instant::now() + Duration::from_secs(90);
    let two = loop {
        let ids = pending();
        if ids.len() == 2 {
            break ids;
        }
        assert!(Instant::now() < until, "not two requests pending: {ids:?}");
        std::thread::sleep(Duration::from_millis(250));
    };
    let html = daemon.reply(
        &page,
        &format!("session={session}&request={}&reply=reject", two[0]),
    );
    let (error, text) = flash(&html);
    assert!(
        !error && text.contains(&two[0]) && text.contains("other pending request was rejected"),
        "reject: {text}"
    );
    assert!(pending().is_empty(), "requests left after a reject");
    let until = Instant::now() + Duration::from_secs(60);
    let rejected = loop {
        let out = Command::new(common::bin())
            .args(["runs", "show", &run2, "--events", "--format", "json"])
            .env("REVIEW_AGENT_GATEWAY_HOME", home.path())
            .output()
            .expect("runs show");
        let replies: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["type"] == "permission.replied")
            .collect();
        if replies.len() == 2 {
            break replies;
        }
        assert!(
            Instant::now() < until,
            "not two permission.replied: {replies:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    for replied in &rejected {
        assert_eq!(
            (replied["reply"].as_str(), replied["by"].as_str()),
            (Some("reject"), Some("settings")),
            "{replied}"
        );
    }
    for file in [&a, &b] {
        assert_eq!(std::fs::read_to_string(file).expect("read"), TEXT);
    }
    daemon.assert_healthy();
}

#[test]
fn with_delegation_off_a_reply_is_refused() {
    let home = tempfile::tempdir().expect("home");
    let daemon = Daemon::start(home.path(), "");
    let page = daemon.login();
    let shown = daemon.send("GET", "/settings/agents", &[("Cookie", &page.cookie)], "");
    assert!(
        shown.body.contains("id=\"delegation-off\""),
        "{}",
        shown.body
    );
    assert!(shown.body.contains("id=\"no-roots\""), "{}", shown.body);
    let html = daemon.reply(&page, "session=ses_x&request=per_x&reply=once");
    assert_refused(
        &html,
        "delegation.disabled",
        "enabled = true",
        "delegation off",
    );
    // A form without the anti-CSRF token changes nothing and says why.
    let origin = daemon.origin();
    let forged = daemon.send(
        "POST",
        "/settings/agents/reply",
        &[("Origin", &origin), ("Cookie", &page.cookie)],
        "csrf=nope&session=ses_x&request=per_x&reply=once",
    );
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert!(
        forged.body.contains("settings.csrf_invalid"),
        "{}",
        forged.body
    );
    daemon.assert_healthy();
}
