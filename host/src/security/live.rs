//! The daemon's view of the token file: re-read when the file changes, so
//! `review-agent-gateway token rotate` takes effect without a restart.

use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::SystemTime;

use super::Token;

/// The token a running daemon checks requests against, following the token file.
///
/// On each check the file's modification time is compared with the one last seen; when it
/// changed, the file is loaded again with every check of [`Token::load`] (mode 0600, shape).
/// A file that fails those checks keeps the previous token in force (and is logged): a broken
/// rotation never opens the gateway.
#[derive(Debug)]
pub struct LiveToken {
    path: PathBuf,
    // Invariant: the token last loaded from `path`, and that file's mtime when it was loaded.
    state: RwLock<(Token, Option<SystemTime>)>,
}

impl LiveToken {
    /// Follow the token file at `path`, starting from `token` (already loaded from it).
    pub fn new(path: &Path, token: Token) -> Self {
        LiveToken {
            path: path.to_owned(),
            state: RwLock::new((token, modified(path))),
        }
    }

    /// Whether `presented` is the current token (constant-time comparison, [`Token::verify`]).
    pub fn verify(&self, presented: &str) -> bool {
        let mtime = modified(&self.path);
        let stale = self.state.read().map(|s| s.1 != mtime).unwrap_or(true);
        if stale {
            let mut state = match self.state.write() {
                Ok(state) => state,
                Err(poisoned) => poisoned.into_inner(),
            };
            match Token::load(&self.path) {
                Ok(token) => {
                    *state = (token, mtime);
                    tracing::info!("the token file changed; using the new token");
                }
                Err(error) => {
                    state.1 = mtime;
                    tracing::warn!(%error, "the changed token file is not usable; keeping the previous token");
                }
            }
        }
        match self.state.read() {
            Ok(state) => state.0.verify(presented),
            Err(poisoned) => poisoned.into_inner().0.verify(presented),
        }
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}
