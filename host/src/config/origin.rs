//! Web origins as the configuration and the browser write them: `scheme://host[:port]`.
//!
//! One normal form, so that `https://GitLab.Example.com:443` in the config file and the browser's
//! `Origin: https://gitlab.example.com` compare equal: lowercase scheme and host, no default port
//! (443 for `https`, 80 for `http`), no path, no trailing slash (the form of the HTML `Origin`
//! header, RFC 6454 §6.1).

/// Check `origin` and return its normal form (module docs).
///
/// Accepted: `http` or `https` (any case), then a host — a DNS name of ASCII letters, digits,
/// `-` and `_` in non-empty dot-separated labels, an IPv4 address, or a bracketed IPv6 address —
/// then an optional `:port` (1–65535, no sign). Nothing else: no user info, path (not even a
/// trailing `/`), query, fragment or whitespace. Internationalized names must be written in
/// their `xn--` form, as browsers send them.
///
/// # Errors
/// A short English explanation of what is wrong, meant to follow "invalid origin `...`: ".
pub fn normalize_origin(origin: &str) -> Result<String, String> {
    let (scheme, rest) = origin
        .split_once("://")
        .ok_or_else(|| "expected `https://host` or `http://host[:port]`".to_owned())?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "https" => 443,
        "http" => 80,
        _ => return Err(format!("scheme `{scheme}` is not http or https")),
    };
    if rest.is_empty() {
        return Err("the host is missing".to_owned());
    }
    if let Some(c) = rest
        .chars()
        .find(|c| matches!(c, '/' | '?' | '#' | '@' | '\\') || c.is_whitespace())
    {
        return Err(match c {
            '/' | '?' | '#' | '\\' => {
                "an origin has no path, query or trailing slash: write only scheme, host and port"
                    .to_owned()
            }
            '@' => "an origin has no user name or password".to_owned(),
            _ => "an origin has no whitespace".to_owned(),
        });
    }
    let (host, port) = split_host_port(rest)?;
    let host = normalize_host(host)?;
    let port = match port {
        None => None,
        Some(digits) => {
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("port `{digits}` is not a number"));
            }
            match digits.parse::<u32>() {
                Ok(p) if (1..=65535).contains(&p) => Some(p),
                _ => return Err(format!("port `{digits}` is not between 1 and 65535")),
            }
        }
    };
    Ok(match port {
        Some(p) if p != default_port => format!("{scheme}://{host}:{p}"),
        _ => format!("{scheme}://{host}"),
    })
}

/// Split `host[:port]` or `[v6][:port]`; the port part is returned without its colon.
fn split_host_port(authority: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(after) = authority.strip_prefix('[') {
        let (inside, tail) = after
            .split_once(']')
            .ok_or_else(|| "unclosed `[` in an IPv6 host".to_owned())?;
        let host = &authority[..inside.len() + 2];
        match tail {
            "" => Ok((host, None)),
            _ => match tail.strip_prefix(':') {
                Some(port) => Ok((host, Some(port))),
                None => Err(format!("unexpected `{tail}` after the IPv6 host")),
            },
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => Ok((host, Some(port))),
            None => Ok((authority, None)),
        }
    }
}

fn normalize_host(host: &str) -> Result<String, String> {
    if host.is_empty() {
        return Err("the host is missing".to_owned());
    }
    if let Some(inside) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return match inside.parse::<std::net::Ipv6Addr>() {
            Ok(addr) => Ok(format!("[{addr}]")),
            Err(_) => Err(format!("`{host}` is not an IPv6 address")),
        };
    }
    if !host.is_ascii() {
        return Err(format!(
            "host `{host}` is not ASCII: write an internationalized name in its `xn--` form"
        ));
    }
    let host = host.to_ascii_lowercase();
    let labels_ok = host.split('.').all(|label| {
        !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    if !labels_ok {
        return Err(format!(
            "host `{host}` is not a valid host name (letters, digits, `-`, `_` in dot-separated labels)"
        ));
    }
    Ok(host)
}

#[cfg(test)]
mod tests {
    use super::normalize_origin;

    fn check(input: &str, expect: Result<&str, &str>) {
        let got = normalize_origin(input);
        match (got, expect) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{input}"),
            (Err(got), Err(fragment)) => {
                assert!(
                    got.contains(fragment),
                    "{input}: `{got}` lacks `{fragment}`"
                )
            }
            (got, want) => panic!("{input}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn normal_forms() {
        check("https://gitlab.com", Ok("https://gitlab.com"));
        check(
            "HTTPS://GitLab.Example.COM",
            Ok("https://gitlab.example.com"),
        );
        check(
            "https://gitlab.example.com:443",
            Ok("https://gitlab.example.com"),
        );
        check("http://gitlab.local:80", Ok("http://gitlab.local"));
        check("http://gitlab.local:8080", Ok("http://gitlab.local:8080"));
        check("https://gitlab.local:80", Ok("https://gitlab.local:80"));
        check("http://10.0.0.5:8929", Ok("http://10.0.0.5:8929"));
        check("http://[::1]:8080", Ok("http://[::1]:8080"));
        check("http://[0:0:0:0:0:0:0:1]", Ok("http://[::1]"));
        check("https://my_host.internal", Ok("https://my_host.internal"));
    }

    #[test]
    fn rejected() {
        check("https://gitlab.com/", Err("trailing slash"));
        check("https://gitlab.com/group", Err("no path"));
        check("https://gitlab.com?x", Err("no path"));
        check("gitlab.com", Err("expected"));
        check("ftp://gitlab.com", Err("not http or https"));
        check("https://", Err("host is missing"));
        check("https://:443", Err("host is missing"));
        check("https://user@gitlab.com", Err("user name"));
        check("https://gitlab.com:", Err("not a number"));
        check("https://gitlab.com:0", Err("between 1 and 65535"));
        check("https://gitlab.com:70000", Err("between 1 and 65535"));
        check("https://gitlab.com:+1", Err("not a number"));
        check("https://gitlab..com", Err("not a valid host"));
        check("https://gitlab.com.", Err("not a valid host"));
        check("https://gitläb.com", Err("xn--"));
        check("https://[::1", Err("unclosed"));
        check("https://[zz]", Err("not an IPv6"));
        check("https://[::1]x", Err("unexpected"));
        check(" https://gitlab.com", Err("not http or https"));
        check("https://gitlab.com ", Err("whitespace"));
        check("null", Err("expected"));
    }
}
