//! Where the running daemon listens: one fact for every process (issue 12 §5).
//!
//! `serve` may listen on a port the config does not name (`serve --port N`). So that the native
//! host, `doctor` and any other command reach that daemon — and do not start a second one on the
//! config's port, which would die on the locked store — `serve` records its address in
//! `<state dir>/daemon.json` ([`Paths::daemon_file`], mode 0600, `{"port": N, "pid": P}`) right
//! after it binds, and removes it at a clean exit. A record left by a killed daemon is stale:
//! [`running_daemon_port`] checks it by connecting.
//!
//! The port a process talks to ([`daemon_port`]) is, in order: the running daemon's recorded
//! port; the config file's `port`; `REVIEW_AGENT_GATEWAY_PORT` ([`PORT_ENV`]); 4317.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{LoadedConfig, Paths};

/// Environment variable giving the daemon's port when the config file sets none (tests,
/// benchmarks and side-by-side daemons; the config's `port` wins over it).
pub const PORT_ENV: &str = "REVIEW_AGENT_GATEWAY_PORT";

/// How long [`running_daemon_port`] waits for the recorded port to accept a connection.
const LIVE_CHECK_TIMEOUT: Duration = Duration::from_millis(500);

/// The content of `<state dir>/daemon.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonRecord {
    /// The port the daemon listens on (on its `bind` address; loopback by default).
    pub port: u16,
    /// The daemon's process id, so that only the daemon that wrote the record removes it.
    pub pid: u32,
}

/// Where a port came from ([`daemon_port`]), for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortSource {
    /// The running daemon's record ([`running_daemon_port`]).
    Running,
    /// The config file's `port`.
    Config,
    /// [`PORT_ENV`].
    Environment,
    /// The built-in default, 4317.
    Default,
}

/// Record this process as the daemon listening on `port`: writes [`Paths::daemon_file`]
/// (mode 0600, atomically; the state dir is created 0700 if missing).
///
/// # Errors
/// The I/O error of writing the file.
pub fn record_daemon(paths: &Paths, port: u16) -> std::io::Result<()> {
    let record = DaemonRecord {
        port,
        pid: std::process::id(),
    };
    let text = serde_json::to_vec(&record).expect("a record serializes");
    crate::security::fs::write_private(
        &paths.daemon_file(),
        &text,
        crate::security::fs::IfExists::Replace,
    )
}

/// Remove [`Paths::daemon_file`] if this process wrote it (another daemon may have replaced it
/// since); a missing file is fine.
pub fn remove_daemon_record(paths: &Paths) {
    if read_daemon_record(paths).is_some_and(|r| r.pid == std::process::id()) {
        let _ = std::fs::remove_file(paths.daemon_file());
    }
}

/// The record in [`Paths::daemon_file`], if there is a readable one (it may be stale).
pub fn read_daemon_record(paths: &Paths) -> Option<DaemonRecord> {
    read_record_file(&paths.daemon_file())
}

/// [`read_daemon_record`] of an explicit file.
pub fn read_record_file(path: &Path) -> Option<DaemonRecord> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes)
        .ok()
        .filter(|r: &DaemonRecord| r.port != 0)
}

/// The recorded daemon port when something accepts connections on it (127.0.0.1); `None` when
/// there is no record or it is stale (the daemon was killed).
pub fn running_daemon_port(paths: &Paths) -> Option<u16> {
    let record = read_daemon_record(paths)?;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, record.port));
    TcpStream::connect_timeout(&addr, LIVE_CHECK_TIMEOUT)
        .ok()
        .map(|_| record.port)
}

/// The config file's own `port`, when the file sets one (not the default).
pub fn configured_port(loaded: &LoadedConfig) -> Option<u16> {
    if !loaded.from_file() {
        return None;
    }
    let text = std::fs::read_to_string(loaded.path()).ok()?;
    let table = text.parse::<toml::Table>().ok()?;
    table.contains_key("port").then(|| loaded.config().port)
}

/// The port a process should talk to the daemon on, and where it came from: the running
/// daemon's ([`running_daemon_port`]), else the config file's `port`, else [`PORT_ENV`], else
/// the default 4317.
pub fn daemon_port(paths: &Paths, loaded: Option<&LoadedConfig>) -> (u16, PortSource) {
    if let Some(port) = running_daemon_port(paths) {
        return (port, PortSource::Running);
    }
    if let Some(port) = loaded.and_then(configured_port) {
        return (port, PortSource::Config);
    }
    if let Some(port) = std::env::var(PORT_ENV)
        .ok()
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|&p| p != 0)
    {
        return (port, PortSource::Environment);
    }
    (super::Config::default().port, PortSource::Default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_a_stale_one_is_not_running() {
        let home = tempfile::tempdir().expect("temp dir");
        let paths = Paths::from_home(home.path());
        assert_eq!(read_daemon_record(&paths), None);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        record_daemon(&paths, port).expect("record");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(paths.daemon_file())
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(running_daemon_port(&paths), Some(port));
        assert_eq!(daemon_port(&paths, None), (port, PortSource::Running));
        drop(listener);
        assert_eq!(
            running_daemon_port(&paths),
            None,
            "stale once nothing listens"
        );
        remove_daemon_record(&paths);
        assert!(!paths.daemon_file().exists());
    }
}
