//! The `Origin` policy: CORS and Private-Network-Access preflights are answered, and
//! cross-origin requests served, only for GitLab origins the user configured (DESIGN §9).
//!
//! One more origin is accepted, without any CORS answer: the daemon's own loopback origin
//! ([`own_origin`]). Pages it serves itself (the settings page, DESIGN §15) send it, and so
//! does the MCP conformance suite's DNS-rebinding scenario for a valid local request. A browser
//! sends `Origin` on a same-origin `POST` too, and a same-origin request needs no CORS headers,
//! so accepting it widens nothing DESIGN §9 keeps for GitLab origins: the `Host` check and the
//! bearer token still apply, and a page of another port or host is still refused.

use crate::config::normalize_origin;

/// Whether a request's `Origin` header value is one of the configured `allowed` origins.
///
/// Both sides are compared in the normal form of [`normalize_origin`] (case of scheme and host,
/// default port), so `https://GitLab.com:443` matches a configured `https://gitlab.com`. The
/// opaque origin `null`, anything with a path, another scheme, port or host — including
/// look-alikes such as `https://gitlab.com.evil.example` — is refused. Configured entries that
/// are not valid origins never match.
pub fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    let Ok(origin) = normalize_origin(origin) else {
        return false;
    };
    allowed
        .iter()
        .any(|a| normalize_origin(a).is_ok_and(|a| a == origin))
}

/// Whether a request's `Origin` header value is the daemon's own loopback origin:
/// `http://127.0.0.1:<port>` or `http://localhost:<port>` with `port` the daemon's listening
/// port, compared in the normal form of [`normalize_origin`] (so `HTTP://LocalHost:<port>`
/// matches; port 80 may then be left out).
///
/// Refused: another port, another host (`[::1]`, `127.0.0.2`, `localhost.evil.example`),
/// `https` (the daemon serves plain HTTP on loopback), the opaque origin `null`, anything with
/// a path, and anything [`normalize_origin`] rejects. The daemon is reachable only on loopback
/// (DESIGN §9), so only a page served by this daemon carries this origin.
pub fn own_origin(origin: &str, port: u16) -> bool {
    let Ok(origin) = normalize_origin(origin) else {
        return false;
    };
    ["127.0.0.1", "localhost"].iter().any(|host| {
        normalize_origin(&format!("http://{host}:{port}")).is_ok_and(|own| own == origin)
    })
}

#[cfg(test)]
mod tests {
    use super::{origin_allowed, own_origin};

    #[test]
    fn origin_policy() {
        let allowed = vec![
            "https://gitlab.com".to_owned(),
            "http://gitlab.local:8080".to_owned(),
            "not an origin".to_owned(),
        ];
        let cases: &[(&str, bool)] = &[
            ("https://gitlab.com", true),
            ("https://GITLAB.com", true),
            ("https://gitlab.com:443", true),
            ("http://gitlab.local:8080", true),
            ("http://gitlab.com", false),
            ("https://gitlab.com:8443", false),
            ("https://gitlab.com/", false),
            ("https://gitlab.com.evil.example", false),
            ("https://evil.example", false),
            ("https://sub.gitlab.com", false),
            ("http://gitlab.local", false),
            ("null", false),
            ("", false),
            ("not an origin", false),
            (" https://gitlab.com", false),
        ];
        for (origin, want) in cases {
            assert_eq!(origin_allowed(origin, &allowed), *want, "{origin:?}");
        }
        assert!(!origin_allowed("https://gitlab.com", &[]));
    }

    #[test]
    fn own_origin_policy() {
        let cases: &[(&str, bool)] = &[
            ("http://127.0.0.1:4317", true),
            ("http://localhost:4317", true),
            ("HTTP://LocalHost:4317", true),
            ("http://127.0.0.1:4318", false),
            ("http://localhost:431", false),
            ("http://127.0.0.1", false),
            ("http://localhost", false),
            ("https://127.0.0.1:4317", false),
            ("https://localhost:4317", false),
            ("http://[::1]:4317", false),
            ("http://127.0.0.2:4317", false),
            ("http://localhost.evil.example:4317", false),
            ("http://evil.example:4317", false),
            ("http://127.0.0.1:4317/", false),
            ("http://user@127.0.0.1:4317", false),
            ("null", false),
            ("", false),
        ];
        for (origin, want) in cases {
            assert_eq!(own_origin(origin, 4317), *want, "{origin:?}");
        }
        // Port 80: the browser leaves the default port out.
        assert!(own_origin("http://127.0.0.1", 80));
        assert!(own_origin("http://localhost:80", 80));
        assert!(!own_origin("http://127.0.0.1:8080", 80));
    }
}
