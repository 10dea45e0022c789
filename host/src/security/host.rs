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

/// Which routes a request's `Host` must be good for, beyond the loopback names of
/// [`check_host`]: the opt-in public host names of a tunnel (`[mcp] public_hosts`, issue 14 §5).
#[derive(Debug, Clone, Copy, Default)]
pub struct PublicHosts<'a> {
    /// The configured names (already checked by [`public_host_name_error`]).
    pub names: &'a [String],
    /// Whether the request is for `/mcp` — the only route a public name may reach.
    pub mcp_route: bool,
}

/// [`check_host`], plus a tunnel's public name: a deciding host that is one of
/// `public.names` ([`public_host_allowed`]) is accepted when `public.mcp_route` — every other
/// route (all of `/v1`) keeps the loopback-only rule, and nothing else changes (the bearer token
/// and the `Origin` rule still apply after this check).
///
/// # Errors
/// As [`check_host`]; a public name on a route other than `/mcp` stays
/// [`HostRefusal::NotAllowed`].
pub fn check_host_with_public(
    hosts: &[&str],
    authority: Option<&str>,
    port: u16,
    public: PublicHosts<'_>,
) -> Result<(), HostRefusal> {
    match check_host(hosts, authority, port) {
        Err(HostRefusal::NotAllowed(host))
            if public.mcp_route && public_host_allowed(Some(&host), public.names) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// Whether a `Host` value is one of the configured public host names (a tunnel's, such as
/// `agent.example.com`): the name exactly (compared case-insensitively), alone or with the
/// default port of HTTPS or HTTP (`:443`, `:80`, which a client may add, RFC 9110 §7.2). No
/// wildcard, no suffix match: `x.agent.example.com` and `agent.example.com.evil` are refused.
pub fn public_host_allowed(host_header: Option<&str>, names: &[String]) -> bool {
    let Some(host) = host_header else {
        return false;
    };
    let name = match host.rsplit_once(':') {
        Some((name, "443" | "80")) => name,
        Some(_) => return false,
        None => host,
    };
    !name.is_empty() && names.iter().any(|n| n.eq_ignore_ascii_case(name))
}

/// Why `name` cannot be a public host name (`[mcp] public_hosts`), or `None` when it can: a DNS
/// name of letters, digits, `-` and `.` (labels of 1 to 63 characters, not starting or ending
/// with `-`, 253 characters in all), with no scheme, port, path or wildcard, and not a loopback
/// name (those are always allowed).
pub fn public_host_name_error(name: &str) -> Option<String> {
    if name.contains("://") {
        return Some(format!(
            "`{name}` has a scheme; give the host name alone (`agent.example.com`)"
        ));
    }
    if name.contains('*') {
        return Some(format!(
            "`{name}` has a wildcard; list each host name exactly"
        ));
    }
    if name.contains(':') {
        return Some(format!("`{name}` has a port; give the host name alone"));
    }
    if name.contains('/') {
        return Some(format!("`{name}` has a path; give the host name alone"));
    }
    let bad_label = |l: &str| {
        l.is_empty()
            || l.len() > 63
            || l.starts_with('-')
            || l.ends_with('-')
            || !l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if name.is_empty() || name.len() > 253 || name.split('.').any(bad_label) {
        return Some(format!(
            "`{name}` is not a host name (letters, digits, `-` and `.`, e.g. `agent.example.com`)"
        ));
    }
    if name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok() {
        return Some(format!(
            "`{name}` is not a public host name; loopback names are always allowed"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{
        HostRefusal, PublicHosts, check_host, check_host_with_public, host_allowed,
        public_host_allowed, public_host_name_error,
    };

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

    #[test]
    fn public_host_names() {
        let names = vec!["agent.example.com".to_owned()];
        let cases: &[(Option<&str>, bool)] = &[
            (Some("agent.example.com"), true),
            (Some("Agent.Example.COM"), true),
            (Some("agent.example.com:443"), true),
            (Some("agent.example.com:80"), true),
            (Some("agent.example.com:4317"), false),
            (Some("agent.example.com:"), false),
            (Some("x.agent.example.com"), false),
            (Some("agent.example.com.evil.example"), false),
            (Some("agent.example.com."), false),
            (Some("example.com"), false),
            (Some(""), false),
            (Some(":443"), false),
            (None, false),
        ];
        for (input, want) in cases {
            assert_eq!(public_host_allowed(*input, &names), *want, "{input:?}");
        }
        assert!(!public_host_allowed(Some("agent.example.com"), &[]));
    }

    #[test]
    fn a_public_host_reaches_mcp_only() {
        let names = vec!["agent.example.com".to_owned()];
        let mcp = PublicHosts {
            names: &names,
            mcp_route: true,
        };
        let v1 = PublicHosts {
            names: &names,
            mcp_route: false,
        };
        let host = "agent.example.com";
        assert_eq!(check_host_with_public(&[host], None, 4317, mcp), Ok(()));
        assert_eq!(
            check_host_with_public(&[host], None, 4317, v1),
            Err(HostRefusal::NotAllowed(host.into()))
        );
        // The loopback names still pass everywhere; other names nowhere.
        assert_eq!(
            check_host_with_public(&["127.0.0.1:4317"], None, 4317, v1),
            Ok(())
        );
        assert!(check_host_with_public(&["evil.example"], None, 4317, mcp).is_err());
        // Duplicates and disagreeing authorities stay refused, public name or not.
        assert_eq!(
            check_host_with_public(&[host, host], None, 4317, mcp),
            Err(HostRefusal::Duplicate(2))
        );
        assert!(matches!(
            check_host_with_public(&[host], Some("evil.example"), 4317, mcp),
            Err(HostRefusal::Disagrees { .. })
        ));
        // Nothing configured: nothing public.
        let none = PublicHosts {
            names: &[],
            mcp_route: true,
        };
        assert!(check_host_with_public(&[host], None, 4317, none).is_err());
    }

    #[test]
    fn public_host_name_validation() {
        for good in [
            "agent.example.com",
            "a-b.example",
            "tunnel",
            "x1.trycloudflare.com",
        ] {
            assert_eq!(public_host_name_error(good), None, "{good}");
        }
        for bad in [
            "https://agent.example.com",
            "agent.example.com:443",
            "*.example.com",
            "agent.example.com/mcp",
            "",
            "agent..example.com",
            "-agent.example.com",
            "agent.example.com.",
            "agent example.com",
            "localhost",
            "127.0.0.1",
            "[::1]",
            "ägent.example.com",
        ] {
            assert!(public_host_name_error(bad).is_some(), "{bad}");
        }
    }
}
