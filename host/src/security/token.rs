//! The local bearer token (DESIGN §9, draft §13): 32 random bytes as 64 lowercase hex digits, in
//! the state dir's `token` file, mode 0600. HTTP and WebSocket clients present it as
//! `Authorization: Bearer <token>`; the native host reads it from the file.

use std::fmt;
use std::io::Read;
use std::path::Path;

use subtle::ConstantTimeEq;

use super::SecurityError;
use super::fs::{IfExists, write_private};

/// Bytes of randomness in a new token.
const TOKEN_BYTES: usize = 32;
/// Accepted length range of a token read from the file (a hand-written one may differ from ours).
const MIN_LEN: usize = 32;
const MAX_LEN: usize = 512;

/// The gateway's local bearer token.
///
/// `Debug` prints `Token(<redacted>)`, and there is no `Display`: the value leaves this type
/// only through [`Token::expose_secret`], for the few places that must show or send it.
#[derive(Clone)]
pub struct Token {
    // Invariant: MIN_LEN..=MAX_LEN characters, each allowed by `is_token_char` (so it can always
    // be sent in an `Authorization: Bearer` header).
    value: String,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// A fresh token from the operating system's random source (not stored anywhere).
    ///
    /// # Errors
    /// [`SecurityError::Random`] if the random source fails.
    pub fn generate() -> Result<Token, SecurityError> {
        let mut bytes = [0u8; TOKEN_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| SecurityError::Random(e.to_string()))?;
        let mut value = String::with_capacity(TOKEN_BYTES * 2);
        for b in bytes {
            value.push(char::from(HEX[usize::from(b >> 4)]));
            value.push(char::from(HEX[usize::from(b & 0xf)]));
        }
        Ok(Token { value })
    }

    /// Read the token file at `path`, or create it with a fresh token if it does not exist
    /// (what `serve` does at start, DESIGN §9).
    ///
    /// Creation is atomic and never overwrites: the token is written to a 0600 temporary file
    /// that is then hard-linked into place, so a concurrent starter either wins or reads the
    /// complete file the other one wrote.
    ///
    /// # Errors
    /// - [`SecurityError::TokenFilePermissions`]: the file grants any permission to group or
    ///   others (mode & 0o077 ≠ 0);
    /// - [`SecurityError::TokenFileInvalid`]: it is not a regular file (a symlink is refused,
    ///   not followed) or holds no usable token;
    /// - [`SecurityError::Io`], [`SecurityError::Random`].
    pub fn load_or_create(path: &Path) -> Result<Token, SecurityError> {
        if let Some(token) = read_existing(path)? {
            return Ok(token);
        }
        let token = Token::generate()?;
        match write_private(path, token.file_contents().as_bytes(), IfExists::Fail) {
            Ok(()) => Ok(token),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // Someone else created it between our read and our link: theirs wins.
                read_existing(path)?.ok_or_else(|| SecurityError::Io {
                    path: path.to_owned(),
                    operation: "read",
                    source: e,
                })
            }
            Err(source) => Err(SecurityError::Io {
                path: path.to_owned(),
                operation: "create",
                source,
            }),
        }
    }

    /// Read the existing token file at `path` (what the native host does; it never creates
    /// one).
    ///
    /// # Errors
    /// As [`Token::load_or_create`]; a missing file is [`SecurityError::Io`] with
    /// `io::ErrorKind::NotFound`.
    pub fn load(path: &Path) -> Result<Token, SecurityError> {
        read_existing(path)?.ok_or_else(|| SecurityError::Io {
            path: path.to_owned(),
            operation: "read",
            source: std::io::ErrorKind::NotFound.into(),
        })
    }

    /// Replace the token file at `path` with a fresh token (atomically, mode 0600) and return
    /// it. Clients holding the old token are refused from then on (once the daemon reloads it).
    ///
    /// # Errors
    /// [`SecurityError::Io`], [`SecurityError::Random`].
    pub fn rotate(path: &Path) -> Result<Token, SecurityError> {
        let token = Token::generate()?;
        write_private(path, token.file_contents().as_bytes(), IfExists::Replace).map_err(
            |source| SecurityError::Io {
                path: path.to_owned(),
                operation: "replace",
                source,
            },
        )?;
        Ok(token)
    }

    /// Whether `presented` is this token, compared in constant time (`subtle`): the time taken
    /// does not depend on where the first differing byte is. Only the length comparison is not
    /// constant-time, and the length of our tokens is public (64).
    pub fn verify(&self, presented: &str) -> bool {
        bool::from(self.value.as_bytes().ct_eq(presented.as_bytes()))
    }

    /// The token itself, for `token show` and for the native host's connection to the daemon.
    /// Never log it.
    pub fn expose_secret(&self) -> &str {
        &self.value
    }

    fn file_contents(&self) -> String {
        format!("{}\n", self.value)
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// RFC 6750 `b64token` characters.
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '+' | '/' | '=')
}

/// The token in the file, `None` if there is no file.
fn read_existing(path: &Path) -> Result<Option<Token>, SecurityError> {
    let io = |operation, source| SecurityError::Io {
        path: path.to_owned(),
        operation,
        source,
    };
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("read", e)),
        Ok(meta) if !meta.file_type().is_file() => {
            return Err(SecurityError::TokenFileInvalid {
                path: path.to_owned(),
                reason: "it is not a regular file (a symlink, directory or device)",
            });
        }
        Ok(_) => {}
    }
    let mut file = std::fs::File::open(path).map_err(|e| io("read", e))?;
    // Check the permissions of the file we actually opened.
    let meta = file.metadata().map_err(|e| io("read", e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(SecurityError::TokenFilePermissions {
                path: path.to_owned(),
                mode,
            });
        }
    }
    if meta.len() > MAX_LEN as u64 + 2 {
        return Err(SecurityError::TokenFileInvalid {
            path: path.to_owned(),
            reason: "the file is too long",
        });
    }
    let mut text = String::new();
    (&mut file)
        .take(MAX_LEN as u64 + 2)
        .read_to_string(&mut text)
        .map_err(|_| SecurityError::TokenFileInvalid {
            path: path.to_owned(),
            reason: "the file is not text",
        })?;
    let value = text.trim_end_matches(['\n', '\r']);
    let reason = if value.len() < MIN_LEN {
        Some("it is shorter than 32 characters")
    } else if value.len() > MAX_LEN {
        Some("it is longer than 512 characters")
    } else if !value.chars().all(is_token_char) {
        Some("it has characters other than letters, digits and -._~+/=")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(SecurityError::TokenFileInvalid {
            path: path.to_owned(),
            reason,
        }),
        None => Ok(Some(Token {
            value: value.to_owned(),
        })),
    }
}

/// The token of an `Authorization: Bearer <token>` header value (RFC 6750 §2.1), or `None`.
///
/// The scheme is matched case-insensitively (RFC 9110 §11.1) and followed by one or more
/// spaces; surrounding whitespace is ignored. `None` for a missing header, another scheme, an
/// empty token, or a token with characters outside RFC 6750's `b64token` (e.g. an inner space).
pub fn bearer_token(authorization_header: Option<&str>) -> Option<&str> {
    let value = authorization_header?.trim_matches([' ', '\t']);
    let scheme = value.get(..6)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let rest = &value[6..];
    let token = rest.trim_start_matches(' ');
    if token.len() == rest.len() || token.is_empty() {
        return None; // no separating space ("Bearerabc"), or no token
    }
    let body = token.trim_end_matches('=');
    if body.is_empty() || !token.chars().all(is_token_char) {
        return None;
    }
    Some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_parsing() {
        let cases: &[(Option<&str>, Option<&str>)] = &[
            (None, None),
            (Some(""), None),
            (Some("Bearer abc123"), Some("abc123")),
            (Some("bearer abc123"), Some("abc123")),
            (Some("BEARER abc123"), Some("abc123")),
            (Some("Bearer    abc123"), Some("abc123")),
            (Some("  Bearer abc123  "), Some("abc123")),
            (Some("Bearer"), None),
            (Some("Bearer "), None),
            (Some("Bearer    "), None),
            (Some("Bearerabc123"), None),
            (Some("Bearer\tabc123"), None),
            (Some("Basic dXNlcjpwYXNz"), None),
            (Some("Bearer abc 123"), None),
            (Some("Bearer ==="), None),
            (Some("Bearer a.b-c_d~e+f/g=="), Some("a.b-c_d~e+f/g==")),
            (Some("Bearer tökén"), None),
            (Some("Beärer abc"), None),
            (Some("Token abc123"), None),
        ];
        for (input, want) in cases {
            assert_eq!(bearer_token(*input), *want, "{input:?}");
        }
    }

    #[test]
    fn generated_tokens_are_hex_and_distinct() {
        let a = Token::generate().expect("random");
        let b = Token::generate().expect("random");
        assert_eq!(a.expose_secret().len(), 64);
        assert!(a.expose_secret().bytes().all(|c| HEX.contains(&c)));
        assert_ne!(a.expose_secret(), b.expose_secret());
        assert!(a.verify(a.expose_secret()));
        assert!(!a.verify(b.expose_secret()));
        assert!(!a.verify(""));
        assert!(!a.verify(&a.expose_secret()[..63]));
        assert_eq!(format!("{a:?}"), "Token(<redacted>)");
    }
}
