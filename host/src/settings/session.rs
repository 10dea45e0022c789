//! Settings-page sessions (issue 18 §1, DESIGN §15): what a redeemed login code becomes.
//!
//! A session is 256 random bits, given to the browser once as the `HttpOnly`,
//! `SameSite=Strict`, `Path=/settings` cookie [`COOKIE`]; the daemon keeps only its SHA-256, in
//! memory (a restarted daemon has no sessions: run `review-agent-gateway settings` again). Each
//! session has its own anti-CSRF token, which every state-changing request must carry (a form's
//! `csrf` field or the `X-CSRF-Token` header) besides a matching `Origin`; both are compared in
//! constant time.
//!
//! Lifetime: [`IDLE`] (1 h) without a request, [`ABSOLUTE`] (12 h) at most; at most
//! [`MAX_SESSIONS`] at once (the oldest is dropped for a new one).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub const COOKIE: &str = "rag_settings";
/// A session unused this long ends.
pub const IDLE: Duration = Duration::from_secs(3600);
/// A session ends this long after the login, used or not.
pub const ABSOLUTE: Duration = Duration::from_secs(12 * 3600);
/// The most sessions kept at once.
pub const MAX_SESSIONS: usize = 32;

/// One logged-in browser.
#[derive(Debug, Clone)]
pub struct Session {
    /// The anti-CSRF token of this session: 64 hex digits.
    pub csrf: String,
    created: Instant,
    last_used: Instant,
}

/// A one-time message for the next page a session sees (the outcome of a change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flash {
    /// Whether the change was made.
    pub ok: bool,
    /// What happened, in the page's language (or the engine's message for an error).
    pub text: String,
    /// The error's dotted code.
    pub code: Option<String>,
    /// The error's remediation.
    pub remediation: Option<String>,
}

/// The daemon's settings sessions, by the SHA-256 of the cookie value.
#[derive(Debug, Default)]
pub struct Sessions {
    map: Mutex<HashMap<[u8; 32], Session>>,
    flashes: Mutex<HashMap<[u8; 32], Flash>>,
}

impl Sessions {
    /// No sessions.
    pub fn new() -> Sessions {
        Sessions::default()
    }

    /// A new session: returns the cookie value (64 hex digits) to set, and the session.
    ///
    /// # Errors
    /// When the random source fails (the message says so).
    pub fn create(&self) -> Result<(String, Session), String> {
        let cookie = random_hex::<32>()?;
        let now = Instant::now();
        let session = Session {
            csrf: random_hex::<32>()?,
            created: now,
            last_used: now,
        };
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, s| alive(s, now));
        while map.len() >= MAX_SESSIONS {
            let oldest = map.iter().min_by_key(|(_, s)| s.created).map(|(k, _)| *k);
            match oldest {
                Some(k) => map.remove(&k),
                None => break,
            };
        }
        map.insert(digest(&cookie), session.clone());
        Ok((cookie, session))
    }

    /// The live session of `cookie`, its last use set to now; `None` when unknown or ended.
    pub fn get(&self, cookie: &str) -> Option<Session> {
        let key = digest(cookie);
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        match map.get_mut(&key) {
            Some(s) if alive(s, now) => {
                s.last_used = now;
                Some(s.clone())
            }
            Some(_) => {
                map.remove(&key);
                None
            }
            None => None,
        }
    }

    /// End the session of `cookie` (log out).
    pub fn end(&self, cookie: &str) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(&digest(cookie));
        self.take_flash(cookie);
    }

    /// Leave `flash` for the next page of `cookie`'s session (replacing an unread one).
    pub fn set_flash(&self, cookie: &str, flash: Flash) {
        let mut flashes = self.flashes.lock().unwrap_or_else(|p| p.into_inner());
        // Sessions that ended leave no flash behind for long: at most one per live session.
        if flashes.len() > MAX_SESSIONS * 2 {
            flashes.clear();
        }
        flashes.insert(digest(cookie), flash);
    }

    /// The flash left for `cookie`'s session, once.
    pub fn take_flash(&self, cookie: &str) -> Option<Flash> {
        let mut flashes = self.flashes.lock().unwrap_or_else(|p| p.into_inner());
        flashes.remove(&digest(cookie))
    }
}

impl Session {
    /// Whether `presented` is this session's anti-CSRF token (constant time).
    pub fn csrf_matches(&self, presented: &str) -> bool {
        self.csrf.as_bytes().ct_eq(presented.as_bytes()).into()
    }
}

fn alive(s: &Session, now: Instant) -> bool {
    now.duration_since(s.last_used) < IDLE && now.duration_since(s.created) < ABSOLUTE
}

fn digest(cookie: &str) -> [u8; 32] {
    Sha256::digest(cookie.as_bytes()).into()
}

fn random_hex<const N: usize>() -> Result<String, String> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| format!("no random source: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_found_by_cookie_and_end() {
        let sessions = Sessions::new();
        let (cookie, session) = sessions.create().expect("create");
        assert_eq!(cookie.len(), 64);
        let found = sessions.get(&cookie).expect("found");
        assert!(found.csrf_matches(&session.csrf));
        assert!(!found.csrf_matches(""));
        assert!(!found.csrf_matches(&cookie));
        assert!(sessions.get("nope").is_none());
        sessions.end(&cookie);
        assert!(sessions.get(&cookie).is_none());
    }

    #[test]
    fn at_most_max_sessions_are_kept() {
        let sessions = Sessions::new();
        let (first, _) = sessions.create().expect("create");
        for _ in 0..MAX_SESSIONS {
            sessions.create().expect("create");
        }
        assert!(sessions.get(&first).is_none(), "the oldest was dropped");
    }
}
