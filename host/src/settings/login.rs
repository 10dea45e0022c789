//! One-time login codes for the settings page (issue 18 §1, DESIGN §15).
//!
//! `review-agent-gateway settings` writes a code; the daemon redeems it once for a session.
//! They meet in the state directory, which only the user can read or write (0700), so holding
//! a code proves being the local user — the `/v1` bearer token plays no part, and a process
//! that has only the token (a userscript, a browser extension) cannot mint one.
//!
//! - A code is 128 random bits as 32 lower-case hex digits. Only its SHA-256 is stored, as the
//!   name of a file `<state>/settings-login/<sha256 hex>` (0600) holding the code's expiry in
//!   Unix seconds; the code itself is never written to disk.
//! - **One time:** redeeming renames that file to a unique `.redeemed-` name first — of two
//!   racing redemptions (two tabs, two processes) exactly one rename succeeds — then reads the
//!   expiry and deletes it. A code used twice is `settings.code_invalid`.
//! - **Short-lived:** [`DEFAULT_TTL`] (2 minutes) unless the command asks for another, at most
//!   [`MAX_TTL`]; an expired code is `settings.code_expired` (and deleted).
//! - Codes expired for more than a minute are removed whenever a new one is issued.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::error::{GatewayError, codes};
use crate::security::fs::{IfExists, write_private};

/// How long a code is valid unless the command asks otherwise.
pub const DEFAULT_TTL: Duration = Duration::from_secs(120);
/// The longest validity a code may be given.
pub const MAX_TTL: Duration = Duration::from_secs(600);

/// The folder of pending codes under the state directory.
pub const DIR_NAME: &str = "settings-login";

/// Issued login codes of one state directory.
#[derive(Debug, Clone)]
pub struct LoginCodes {
    dir: PathBuf,
}

/// A code just issued: give `code` to the browser (never store it).
#[derive(Debug)]
pub struct Issued {
    /// 32 lower-case hex digits.
    pub code: String,
    /// When it stops being accepted.
    pub expires: SystemTime,
}

impl LoginCodes {
    /// The codes of the state directory `state_dir` (`<state_dir>/settings-login`).
    pub fn new(state_dir: &Path) -> LoginCodes {
        LoginCodes {
            dir: state_dir.join(DIR_NAME),
        }
    }

    /// Issue a code valid for `ttl` (clamped to 1 s ..= [`MAX_TTL`]).
    ///
    /// # Errors
    /// `internal.error` when the random source or the state directory fails.
    pub fn issue(&self, ttl: Duration) -> Result<Issued, GatewayError> {
        let ttl = ttl.clamp(Duration::from_secs(1), MAX_TTL);
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| internal(format!("no random source: {e}")))?;
        let code: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let expires = SystemTime::now() + ttl;
        let secs = expires
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        self.sweep();
        write_private(
            &self.path_of(&code),
            secs.to_string().as_bytes(),
            IfExists::Fail,
        )
        .map_err(|e| {
            internal(format!(
                "cannot write a login code into {}: {e}",
                self.dir.display()
            ))
        })?;
        Ok(Issued { code, expires })
    }

    /// Redeem `code` once.
    ///
    /// # Errors
    /// `settings.code_invalid` for a code that is malformed, unknown or already used;
    /// `settings.code_expired` for one past its expiry (it is removed).
    pub fn redeem(&self, code: &str) -> Result<(), GatewayError> {
        let code = code.trim();
        if code.len() != 32 || !code.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(invalid_code());
        }
        let code = code.to_ascii_lowercase();
        let path = self.path_of(&code);
        let mut nonce = [0u8; 8];
        getrandom::fill(&mut nonce).map_err(|e| internal(format!("no random source: {e}")))?;
        let claimed = self.dir.join(format!(
            ".redeemed-{}",
            nonce.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ));
        match fs::rename(&path, &claimed) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(invalid_code()),
            Err(e) => return Err(internal(format!("cannot redeem a login code: {e}"))),
        }
        let expiry = fs::read_to_string(&claimed)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        let _ = fs::remove_file(&claimed);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(u64::MAX);
        match expiry {
            Some(expiry) if now < expiry => Ok(()),
            _ => Err(GatewayError::new(
                codes::SETTINGS_CODE_EXPIRED,
                "this login code has expired",
                "Run `review-agent-gateway settings` again for a new code and use it within \
                 its validity (2 minutes unless `--valid-for` gives another).",
            )),
        }
    }

    fn path_of(&self, code: &str) -> PathBuf {
        let digest = Sha256::digest(code.as_bytes());
        let name: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(name)
    }

    /// Remove codes expired over a minute ago and `.redeemed-` files a crash left behind.
    fn sweep(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        let cutoff = SystemTime::now()
            .checked_sub(Duration::from_secs(60))
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_secs())
            .unwrap_or(0);
        for entry in entries.flatten() {
            let path = entry.path();
            let stale = if entry
                .file_name()
                .to_string_lossy()
                .starts_with(".redeemed-")
            {
                entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|m| m.elapsed().ok())
                    .is_some_and(|age| age > Duration::from_secs(60))
            } else {
                fs::read_to_string(&path)
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .is_none_or(|expiry| expiry < cutoff)
            };
            if stale {
                let _ = fs::remove_file(&path);
            }
        }
    }
}

fn invalid_code() -> GatewayError {
    GatewayError::new(
        codes::SETTINGS_CODE_INVALID,
        "this login code is not valid: it was used already, or never issued",
        "Run `review-agent-gateway settings` for a new code; each code opens the page once.",
    )
}

fn internal(message: String) -> GatewayError {
    GatewayError::new(
        codes::INTERNAL,
        message,
        "Check that the gateway's state directory is writable, then retry.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_opens_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let codes = LoginCodes::new(dir.path());
        let issued = codes.issue(DEFAULT_TTL).expect("issue");
        assert_eq!(issued.code.len(), 32);
        codes
            .redeem(&issued.code.to_uppercase())
            .expect("first use");
        let again = codes.redeem(&issued.code).expect_err("second use");
        assert_eq!(again.code, codes::SETTINGS_CODE_INVALID);
        assert_eq!(
            fs::read_dir(dir.path().join(DIR_NAME))
                .expect("dir")
                .count(),
            0
        );
    }

    #[test]
    fn bad_and_expired_codes_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let codes = LoginCodes::new(dir.path());
        let (g32, a33) = ("g".repeat(32), "a".repeat(33));
        for bad in ["", "zz", g32.as_str(), "../../etc/passwd", a33.as_str()] {
            assert_eq!(
                codes.redeem(bad).expect_err(bad).code,
                codes::SETTINGS_CODE_INVALID
            );
        }
        let issued = codes.issue(Duration::from_secs(1)).expect("issue");
        std::thread::sleep(Duration::from_millis(1100));
        let err = codes.redeem(&issued.code).expect_err("expired");
        assert_eq!(err.code, codes::SETTINGS_CODE_EXPIRED);
        assert_eq!(
            codes.redeem(&issued.code).expect_err("gone").code,
            codes::SETTINGS_CODE_INVALID
        );
    }
}
