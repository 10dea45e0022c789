//! The `Origin` policy: CORS and Private-Network-Access preflights are answered, and
//! cross-origin requests served, only for GitLab origins the user configured (DESIGN §9).

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

#[cfg(test)]
mod tests {
    use super::origin_allowed;

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
}
