//! The settings page's access rules (issue 18 §1, DESIGN §15) over raw HTTP against a spawned
//! daemon, with login codes from the real `review-agent-gateway settings` command: a code opens
//! the page once and expires; a change needs the daemon's own `Origin` and the session's
//! anti-CSRF token; the bearer token does not open the page and the page's cookie does not open
//! `/v1`; the `Host` check; the security headers on every answer, refusals included; forms over
//! the cap; the command's own bad inputs. The browser side (the code leaving the address bar,
//! a cross-site page's form) is `browser_settings.rs`.

mod common;

use std::process::{Child, Command};

use common::http::{Response, request_bytes_raw, spawn_serve};
use common::settings::settings_command;

struct Daemon {
    child: Child,
    port: u16,
    home: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    fn start() -> Daemon {
        let home = tempfile::tempdir().expect("temp dir");
        let mut child = spawn_serve(home.path(), &[]);
        let port = common::read_port(&mut child);
        Daemon { child, port, home }
    }

    /// `review-agent-gateway settings --no-open [extra]`: the printed code (and the address
    /// it prints is this daemon's).
    fn code(&self, extra: &[&str]) -> String {
        let out = settings_command(self.home.path(), extra);
        assert!(out.status.success(), "settings failed: {out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            stdout.contains(&format!("http://127.0.0.1:{}/settings/login", self.port)),
            "{stdout}"
        );
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("Login code:"))
            .and_then(|rest| rest.split_whitespace().next())
            .expect("a code")
            .to_owned()
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A raw request with a form body.
    fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], form: &str) -> Response {
        common::settings::send_form(self.port, method, path, headers, form)
    }

    /// Log in with a fresh code: the session cookie's value and the page's anti-CSRF token.
    fn login(&self) -> (String, String) {
        let session = common::settings::login(self.port, self.home.path());
        let value = session
            .cookie
            .strip_prefix("rag_settings=")
            .expect("rag_settings")
            .to_owned();
        (value, session.csrf)
    }
}

fn cookie_header(value: &str) -> String {
    format!("rag_settings={value}")
}

/// The headers every settings answer carries.
fn assert_secure_headers(answer: &Response, context: &str) {
    let csp = answer.header("content-security-policy").unwrap_or("");
    assert!(
        csp.contains("frame-ancestors 'none'")
            && csp.contains("script-src 'self'")
            && csp.contains("default-src 'none'")
            && !csp.contains("unsafe"),
        "{context}: CSP `{csp}`"
    );
    assert_eq!(answer.header("x-frame-options"), Some("DENY"), "{context}");
    assert_eq!(
        answer.header("x-content-type-options"),
        Some("nosniff"),
        "{context}"
    );
    assert_eq!(
        answer.header("cache-control"),
        Some("no-store"),
        "{context}"
    );
}

#[test]
fn a_code_opens_the_page_once_and_expires() {
    let daemon = Daemon::start();
    let origin = daemon.origin();
    let code = daemon.code(&[]);
    let first = daemon.send(
        "POST",
        "/settings/login",
        &[("Origin", &origin)],
        &format!("code={code}"),
    );
    assert_eq!(first.status, 303);
    assert_eq!(first.header("location"), Some("/settings/status"));
    let again = daemon.send(
        "POST",
        "/settings/login",
        &[("Origin", &origin)],
        &format!("code={code}"),
    );
    assert_eq!(again.status, 403);
    assert!(
        again.body.contains("settings.code_invalid"),
        "{}",
        again.body
    );
    assert!(again.header("set-cookie").is_none());
    assert_secure_headers(&again, "a used code");

    let short = daemon.code(&["--valid-for", "1"]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let expired = daemon.send(
        "POST",
        "/settings/login",
        &[("Origin", &origin)],
        &format!("code={short}"),
    );
    assert_eq!(expired.status, 403);
    assert!(
        expired.body.contains("settings.code_expired"),
        "{}",
        expired.body
    );

    for bad in [
        "",
        "code=",
        "code=../../token",
        "code=%00%00",
        &format!("code={}", "f".repeat(5000)),
    ] {
        let answer = daemon.send("POST", "/settings/login", &[("Origin", &origin)], bad);
        assert_eq!(answer.status, 403, "{bad}: {}", answer.body);
        assert!(answer.body.contains("settings.code_invalid"), "{bad}");
    }
    // The code file holds no code, only its hash; nothing is left once used or expired.
    let left: Vec<_> = std::fs::read_dir(daemon.home.path().join("state/settings-login"))
        .expect("codes dir")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_login_from_another_origin_is_refused() {
    let daemon = Daemon::start();
    let code = daemon.code(&[]);
    for origin in [
        "http://127.0.0.1:1",
        "http://localhost:1",
        "null",
        "https://gitlab.example.com",
    ] {
        let answer = daemon.send(
            "POST",
            "/settings/login",
            &[("Origin", origin)],
            &format!("code={code}"),
        );
        assert_eq!(answer.status, 403, "{origin}");
        assert!(
            answer.body.contains("origin.not_allowed"),
            "{origin}: {}",
            answer.body
        );
        assert_secure_headers(&answer, origin);
    }
    let without = daemon.send("POST", "/settings/login", &[], &format!("code={code}"));
    assert_eq!(without.status, 403);
    // The refusals left the code unused.
    let origin = daemon.origin();
    let answer = daemon.send(
        "POST",
        "/settings/login",
        &[("Origin", &origin)],
        &format!("code={code}"),
    );
    assert_eq!(answer.status, 303, "{}", answer.body);
}

#[test]
fn changes_need_the_origin_and_the_sessions_token() {
    let daemon = Daemon::start();
    let (cookie, csrf) = daemon.login();
    let origin = daemon.origin();
    let jar = cookie_header(&cookie);
    let token_before = common::token(daemon.home.path());
    let rotate = |headers: &[(&str, &str)], form: &str| {
        daemon.send("POST", "/settings/token/rotate", headers, form)
    };
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, String, &'a str);
    let cases: [Case; 5] = [
        (
            "no token",
            vec![("Origin", &origin), ("Cookie", &jar)],
            String::new(),
            "settings.csrf_invalid",
        ),
        (
            "a wrong token",
            vec![("Origin", &origin), ("Cookie", &jar)],
            "csrf=0000".into(),
            "settings.csrf_invalid",
        ),
        (
            "another origin",
            vec![("Origin", "http://127.0.0.1:9"), ("Cookie", &jar)],
            format!("csrf={csrf}"),
            "origin.not_allowed",
        ),
        (
            "no origin",
            vec![("Cookie", &jar)],
            format!("csrf={csrf}"),
            "origin.not_allowed",
        ),
        (
            "no session",
            vec![("Origin", &origin)],
            format!("csrf={csrf}"),
            "settings.session_missing",
        ),
    ];
    for (what, headers, form, code) in &cases {
        let answer = rotate(headers, form);
        assert!(
            matches!(answer.status, 401 | 403),
            "{what}: {}",
            answer.status
        );
        assert!(answer.body.contains(code), "{what}: {}", answer.body);
        assert_secure_headers(&answer, what);
    }
    assert_eq!(
        common::token(daemon.home.path()),
        token_before,
        "a refused change changed the token"
    );
    let answer = rotate(
        &[("Origin", &origin), ("Cookie", &jar)],
        &format!("csrf={csrf}"),
    );
    assert_eq!(answer.status, 303, "{}", answer.body);
    assert_ne!(common::token(daemon.home.path()), token_before);
    // Over the form cap: refused whole.
    let big = format!("csrf={csrf}&snippet={}", "a".repeat(300 * 1024));
    let answer = rotate(&[("Origin", &origin), ("Cookie", &jar)], &big);
    assert_eq!(answer.status, 413, "{}", answer.status);
}

#[test]
fn the_token_and_the_cookie_open_only_their_own_side() {
    let daemon = Daemon::start();
    let (cookie, _) = daemon.login();
    let token = common::token(daemon.home.path());
    let bearer = format!("Bearer {token}");
    let page = daemon.send("GET", "/settings/status", &[("Authorization", &bearer)], "");
    assert_eq!(page.status, 303);
    assert_eq!(page.header("location"), Some("/settings/login"));
    let jar = cookie_header(&cookie);
    let v1 = daemon.send("GET", "/v1/capabilities", &[("Cookie", &jar)], "");
    assert_eq!(v1.status, 401, "{}", v1.body);
    let live = daemon.send(
        "GET",
        "/settings/runs/live",
        &[("Authorization", &bearer)],
        "",
    );
    assert_eq!(live.status, 303);
    // A rebinding name, the cookie notwithstanding.
    let raw = format!(
        "GET /settings/status HTTP/1.1\r\nConnection: close\r\nHost: evil.example:{}\r\nCookie: {jar}\r\n\r\n",
        daemon.port
    );
    let rebound = request_bytes_raw(daemon.port, raw.as_bytes());
    assert_eq!(rebound.status, 403);
    assert!(rebound.body.contains("request.host_not_allowed"));
    assert_secure_headers(&rebound, "a foreign Host");
    // An unknown page and a logged-out page.
    let missing = daemon.send("GET", "/settings/no-such-page", &[("Cookie", &jar)], "");
    assert_eq!(missing.status, 404);
    assert!(missing.body.contains("request.not_found"));
    let out = daemon.send("GET", "/settings/mappings", &[], "");
    assert_eq!(out.status, 303);
    assert_eq!(out.header("location"), Some("/settings/login"));
    // The login page and assets need no session.
    let login = daemon.send("GET", "/settings/login", &[], "");
    assert_eq!(login.status, 200);
    assert_secure_headers(&login, "the login page");
    let css = daemon.send("GET", "/settings/assets/settings.css", &[], "");
    assert_eq!(css.status, 200);
    assert_eq!(css.header("content-type"), Some("text/css; charset=utf-8"));
    let nope = daemon.send("GET", "/settings/assets/../token", &[], "");
    assert_ne!(nope.status, 200);
}

#[test]
fn the_command_starts_the_daemon_and_refuses_bad_lifetimes() {
    let home = tempfile::tempdir().expect("temp dir");
    for bad in ["0", "601", "-1", "soon"] {
        let out = settings_command(home.path(), &["--valid-for", bad]);
        assert!(!out.status.success(), "--valid-for {bad} was taken");
        let stderr = String::from_utf8_lossy(&out.stderr);
        // clap names the option, except for a value it takes for an option of its own (`-1`).
        assert!(
            bad == "-1" || stderr.contains("--valid-for"),
            "{bad}: {stderr}"
        );
    }
    // No daemon runs for this home: the command starts one (on the config's port) and prints
    // its address.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    std::fs::create_dir_all(home.path().join("config")).expect("mkdir");
    std::fs::write(
        home.path().join("config/config.toml"),
        format!("port = {port}\n"),
    )
    .expect("config");
    let out = settings_command(home.path(), &[]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("http://127.0.0.1:{port}/settings/login")),
        "{stdout}"
    );
    let health = common::http::request(port, "GET", "/v1/health", &[], None);
    assert_eq!(health.status, 200);
    // Stop the daemon it started: the `serve` process whose environment names this home.
    let needle = format!("REVIEW_AGENT_GATEWAY_HOME={}", home.path().display());
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let has = |hay: &[u8], needle: &[u8]| hay.split(|&b| b == 0).any(|part| part == needle);
        if has(&environ, needle.as_bytes()) && has(&cmdline, b"serve") {
            let _ = Command::new("kill").arg(entry.file_name()).status();
        }
    }
}
