//! The `Host` header policy: the DNS-rebinding defence of DESIGN §9.
//!
//! A web page on `evil.example` can make its own name resolve to 127.0.0.1; the browser then
//! sends `Host: evil.example:4317` to our loopback port. Accepting only loopback names makes
//! every such request fail before any route runs.

/// Whether a request's `Host` header names this gateway: `127.0.0.1:<port>`,
/// `localhost:<port>` or `[::1]:<port>` exactly, the name compared case-insensitively.
///
/// Refused: a missing header, another name (`localhost.evil.com`, `127.0.0.1.nip.io`, a
/// trailing-dot `localhost.`), another port, a port with a sign or leading zeros, other
/// spellings of loopback addresses (`127.1`, `[0:0:0:0:0:0:0:1]`), user info, whitespace.
/// Without a port only when `port` is 80, the default port a client then leaves out
/// (RFC 9110 §7.2).
pub fn host_allowed(host_header: Option<&str>, port: u16) -> bool {
    let Some(host) = host_header else {
        return false;
    };
    let (name, port_text) = if let Some(after) = host.strip_prefix('[') {
        // `[v6]` or `[v6]:port`
        let Some((inside, tail)) = after.split_once(']') else {
            return false;
        };
        let name = &host[..inside.len() + 2];
        match tail {
            "" => (name, None),
            _ => match tail.strip_prefix(':') {
                Some(p) => (name, Some(p)),
                None => return false,
            },
        }
    } else {
        match host.split_once(':') {
            Some((name, p)) => (name, Some(p)),
            None => (host, None),
        }
    };
    let port_ok = match port_text {
        None => port == 80,
        Some(p) => p == port.to_string(),
    };
    let name_ok = ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .any(|allowed| name.eq_ignore_ascii_case(allowed));
    port_ok && name_ok
}

#[cfg(test)]
mod tests {
    use super::host_allowed;

    #[test]
    fn host_policy() {
        let cases: &[(Option<&str>, bool)] = &[
            (Some("127.0.0.1:4317"), true),
            (Some("localhost:4317"), true),
            (Some("LOCALHOST:4317"), true),
            (Some("LocalHost:4317"), true),
            (Some("[::1]:4317"), true),
            (None, false),
            (Some(""), false),
            (Some("localhost"), false),
            (Some("127.0.0.1"), false),
            (Some("[::1]"), false),
            (Some("localhost:4318"), false),
            (Some("localhost:04317"), false),
            (Some("localhost:+4317"), false),
            (Some("localhost:"), false),
            (Some("localhost:4317:4317"), false),
            (Some("localhost.evil.com:4317"), false),
            (Some("127.0.0.1.nip.io:4317"), false),
            (Some("evil.example:4317"), false),
            (Some("localhost.:4317"), false),
            (Some("127.1:4317"), false),
            (Some("127.0.0.2:4317"), false),
            (Some("0.0.0.0:4317"), false),
            (Some("[0:0:0:0:0:0:0:1]:4317"), false),
            (Some("[::ffff:127.0.0.1]:4317"), false),
            (Some("[::1]4317"), false),
            (Some("[::1:4317"), false),
            (Some("::1:4317"), false),
            (Some("user@localhost:4317"), false),
            (Some(" localhost:4317"), false),
            (Some("localhost:4317 "), false),
        ];
        for (input, want) in cases {
            assert_eq!(host_allowed(*input, 4317), *want, "{input:?}");
        }
    }

    #[test]
    fn default_port_may_be_omitted() {
        assert!(host_allowed(Some("localhost"), 80));
        assert!(host_allowed(Some("[::1]"), 80));
        assert!(host_allowed(Some("localhost:80"), 80));
        assert!(!host_allowed(Some("localhost:4317"), 80));
    }
}
