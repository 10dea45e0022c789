//! Where the gateway keeps its files: the config dir and the state dir.

use std::path::{Path, PathBuf};

use super::ConfigError;

/// The gateway's two directories and the files in them.
///
/// - config dir: `config.toml` ([`Paths::config_file`]), user rule sets in `rules/` and model
///   API key files in `keys/` ([`Paths::keys_dir`]);
/// - state dir: the redb store `gateway.redb`, the local bearer token `token` (DESIGN §9),
///   the running daemon's address `daemon.json` and `logs/`.
///
/// By default these come from `directories::ProjectDirs::from("", "", "review-agent-gateway")`:
/// on Linux `$XDG_CONFIG_HOME/review-agent-gateway` (`~/.config/...`) and
/// `$XDG_STATE_HOME/review-agent-gateway` (`~/.local/state/...`); on macOS and Windows, which
/// have no state dir, the local data dir stands in for it.
///
/// **Override**: when the environment variable [`Paths::HOME_ENV`]
/// (`REVIEW_AGENT_GATEWAY_HOME`) is set to a non-empty value, that single directory holds
/// both: `$REVIEW_AGENT_GATEWAY_HOME/config/` and `$REVIEW_AGENT_GATEWAY_HOME/state/`. Tests and
/// side-by-side installations use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    config_dir: PathBuf,
    state_dir: PathBuf,
}

impl Paths {
    /// Name of the environment variable that relocates both directories (type docs).
    pub const HOME_ENV: &'static str = "REVIEW_AGENT_GATEWAY_HOME";

    /// The directories for this user: [`Paths::HOME_ENV`] if set, else the platform's.
    ///
    /// # Errors
    /// [`ConfigError::NoHomeDirectory`] when the override is unset and the platform reports no
    /// home directory for the user.
    pub fn discover() -> Result<Paths, ConfigError> {
        if let Some(home) = std::env::var_os(Self::HOME_ENV).filter(|v| !v.is_empty()) {
            return Ok(Paths::from_home(Path::new(&home)));
        }
        let dirs = directories::ProjectDirs::from("", "", "review-agent-gateway")
            .ok_or(ConfigError::NoHomeDirectory)?;
        let state_dir = dirs
            .state_dir()
            .unwrap_or_else(|| dirs.data_local_dir())
            .to_owned();
        Ok(Paths {
            config_dir: dirs.config_dir().to_owned(),
            state_dir,
        })
    }

    /// The layout of the [`Paths::HOME_ENV`] override: `home/config` and `home/state`.
    pub fn from_home(home: &Path) -> Paths {
        Paths {
            config_dir: home.join("config"),
            state_dir: home.join("state"),
        }
    }

    /// Explicit directories (tests, embedding).
    pub fn new(config_dir: PathBuf, state_dir: PathBuf) -> Paths {
        Paths {
            config_dir,
            state_dir,
        }
    }

    /// The config directory.
    pub fn config_dir(&self) -> &Path {
        &self.config_dir
    }

    /// The state directory (store, token, logs).
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// `<config dir>/config.toml`, read by [`crate::config::Config::load`] when no `--config`
    /// is given.
    pub fn config_file(&self) -> PathBuf {
        self.config_dir.join("config.toml")
    }

    /// `<config dir>/rules`: the user's rule sets.
    pub fn rules_dir(&self) -> PathBuf {
        self.config_dir.join("rules")
    }

    /// `<config dir>/keys`: one 0600 file per provider whose API key is stored in a file
    /// rather than the OS keyring ([`crate::security::secrets`]).
    pub fn keys_dir(&self) -> PathBuf {
        self.config_dir.join("keys")
    }

    /// `<state dir>/gateway.redb`: the daemon's store.
    pub fn store_file(&self) -> PathBuf {
        self.state_dir.join("gateway.redb")
    }

    /// `<state dir>/token`: the local bearer token (DESIGN §9, [`crate::security::Token`]).
    pub fn token_file(&self) -> PathBuf {
        self.state_dir.join("token")
    }

    /// `<state dir>/daemon.json`: where the running daemon listens (mode 0600; written by
    /// `serve` after it binds, removed at a clean exit; [`crate::config::running_daemon_port`]).
    pub fn daemon_file(&self) -> PathBuf {
        self.state_dir.join("daemon.json")
    }

    /// `<state dir>/logs`: daemon and native-host logs.
    pub fn log_dir(&self) -> PathBuf {
        self.state_dir.join("logs")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_layout() {
        let paths = Paths::from_home(Path::new("/tmp/h"));
        assert_eq!(paths.config_file(), Path::new("/tmp/h/config/config.toml"));
        assert_eq!(paths.rules_dir(), Path::new("/tmp/h/config/rules"));
        assert_eq!(paths.keys_dir(), Path::new("/tmp/h/config/keys"));
        assert_eq!(paths.store_file(), Path::new("/tmp/h/state/gateway.redb"));
        assert_eq!(paths.token_file(), Path::new("/tmp/h/state/token"));
        assert_eq!(paths.log_dir(), Path::new("/tmp/h/state/logs"));
        assert_eq!(paths.daemon_file(), Path::new("/tmp/h/state/daemon.json"));
    }
}
