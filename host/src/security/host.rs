//! The `Host` header policy: the DNS-rebinding defence of DESIGN §9.
//!
//! A web page on `evil.example` can make its own name resolve to 127.0.0.1; the browser then
//! sends `Host: evil.example:4317` to our loopback port. Accepting only loopback names makes
//! every such request fail before any route runs.

/// Why [`check_host`] refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostRefusal {
    /// More than one `Host` header line (RFC 9112 §3.2: answered with 400).
    #[error("the request has {0} Host headers; HTTP allows one")]
    Duplicate(usize),
    /// An absolute-form request target (`GET http://name/path`) whose authority is not the
    /// `Host` header (RFC 9112 §3.2: a server must not let the two disagree).
    #[error("the request target names `{authority}` but the Host header says `{host}`")]
    Disagrees {
        /// The request target's authority.
        authority: String,
        /// The `Host` header.
        host: String,
    },
    /// The host is not one of this gateway's names ([`host_allowed`]); empty when missing.
    #[error("Host `{0}` is not this gateway")]
    NotAllowed(String),
}

/// The whole `Host` policy of a request (DESIGN §9, RFC 9112 §3.2): `hosts` are its `Host`
/// header lines (a value that is not text given as anything [`host_allowed`] refuses),
/// `authority` the authority of an absolute-form request target (`http://127.0.0.1:4317/v1/…`),
/// if any. The host that decides is the authority when there is one (RFC 9112 §3.2.3), else the
/// `Host` header.
///
/// # Errors
/// [`HostRefusal::Duplicate`] for more than one `Host` line, [`HostRefusal::Disagrees`] when the
/// authority and the `Host` header differ (names compared case-insensitively),
/// [`HostRefusal::NotAllowed`] when the deciding host fails [`host_allowed`].
pub fn check_host(hosts: &[&str], authority: Option<&str>, port: u16) -> Result<(), HostRefusal> {
    if hosts.len() > 1 {
        return Err(HostRefusal::Duplicate(hosts.len()));
    }
    let host = hosts.first().copied();
    if let (Some(authority), Some(host)) = (authority, host)
        && !authority.eq_ignore_ascii_case(host)
    {
        return Err(HostRefusal::Disagrees {
            authority: authority.to_owned(),
            host: host.to_owned(),
        });
    }
    let deciding = authority.or(host);
    if host_allowed(deciding, port) {
        Ok(())
    } else {
        Err(HostRefusal::NotAllowed(
            deciding.unwrap_or_default().to_owned(),
        ))
    }
}

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
    use super::{HostRefusal, check_host, host_allowed};

    #[test]
    fn one_host_and_an_agreeing_authority() {
        let ok = "127.0.0.1:4317";
        assert_eq!(check_host(&[ok], None, 4317), Ok(()));
        assert_eq!(check_host(&[ok], Some(ok), 4317), Ok(()));
        assert_eq!(
            check_host(&["LOCALHOST:4317"], Some("localhost:4317"), 4317),
            Ok(())
        );
        // HTTP/2 may carry only the authority.
        assert_eq!(check_host(&[], Some(ok), 4317), Ok(()));
        assert_eq!(
            check_host(&[ok, ok], None, 4317),
            Err(HostRefusal::Duplicate(2))
        );
        assert_eq!(
            check_host(&[ok, "evil.example"], None, 4317),
            Err(HostRefusal::Duplicate(2))
        );
        assert!(matches!(
            check_host(&[ok], Some("evil.example"), 4317),
            Err(HostRefusal::Disagrees { .. })
        ));
        assert_eq!(
            check_host(&[], Some("evil.example:4317"), 4317),
            Err(HostRefusal::NotAllowed("evil.example:4317".into()))
        );
        assert_eq!(
            check_host(&[], None, 4317),
            Err(HostRefusal::NotAllowed(String::new()))
        );
    }

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
