//! Logging in to a spawned daemon's settings page (issue 18) the way a user does, for the
//! tests that drive its forms over raw HTTP: a code from the real `review-agent-gateway
//! settings`, redeemed at `POST /settings/login`, the session's anti-CSRF token read from a
//! page.

use std::path::Path;
use std::process::{Command, Output};

use super::http::{Response, request_bytes_raw};

/// A logged-in settings session.
pub struct Session {
    /// The `Cookie` header value: `rag_settings=<64 hex>`.
    pub cookie: String,
    /// The session's anti-CSRF token (a form's `csrf` field).
    pub csrf: String,
}

/// `review-agent-gateway settings --no-open [extra]` with gateway home `home`.
pub fn settings_command(home: &Path, extra: &[&str]) -> Output {
    Command::new(super::bin())
        .args(["settings", "--no-open"])
        .args(extra)
        .env("REVIEW_AGENT_GATEWAY_HOME", home)
        .env_remove("REVIEW_AGENT_GATEWAY_PORT")
        .output()
        .expect("settings runs")
}

/// A login code printed by [`settings_command`] (which must succeed).
pub fn login_code(home: &Path, extra: &[&str]) -> String {
    let out = settings_command(home, extra);
    assert!(out.status.success(), "settings failed: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("Login code:"))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("a code")
        .to_owned()
}

/// A raw request to `127.0.0.1:port` with exactly `headers` (plus `Host` and `Connection:
/// close`) and, but for GET, `form` as its `application/x-www-form-urlencoded` body.
pub fn send_form(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    form: &str,
) -> Response {
    let mut raw =
        format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nHost: 127.0.0.1:{port}\r\n");
    for (k, v) in headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    if method != "GET" {
        raw.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            form.len()
        ));
    }
    raw.push_str("\r\n");
    raw.push_str(form);
    request_bytes_raw(port, raw.as_bytes())
}

/// Log in to the daemon of `home` on `port` with a fresh code; the cookie's attributes are
/// checked (`HttpOnly`, `SameSite=Strict`, `Path=/settings`), the anti-CSRF token read from
/// the Status page.
pub fn login(port: u16, home: &Path) -> Session {
    let code = login_code(home, &[]);
    let origin = format!("http://127.0.0.1:{port}");
    let answer = send_form(
        port,
        "POST",
        "/settings/login",
        &[("Origin", &origin)],
        &format!("code={code}"),
    );
    assert_eq!(answer.status, 303, "{}", answer.body);
    let set_cookie = answer.header("set-cookie").expect("a cookie").to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/settings"] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    let cookie = set_cookie
        .split(';')
        .next()
        .filter(|kv| kv.starts_with("rag_settings="))
        .expect("rag_settings")
        .to_owned();
    let page = send_form(port, "GET", "/settings/status", &[("Cookie", &cookie)], "");
    assert_eq!(page.status, 200, "{}", page.body);
    let csrf = page
        .body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a CSRF token in the page")
        .to_owned();
    Session { cookie, csrf }
}
