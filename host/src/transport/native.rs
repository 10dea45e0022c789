//! `review-agent-gateway native-host` (DESIGN §3, issue 5 item 3): what the browser starts. A
//! thin relay between the browser's pipes (native messaging: 32-bit native-endian length +
//! UTF-8 JSON, [`crate::protocol::codec`]) and the daemon's `GET /v1/ws` ([`super::ws`]), where
//! the frames of DESIGN §4 are served. The relay holds no business logic: every frame goes to
//! the daemon, every answer back.
//!
//! - **Caller** ([`parse_caller`]): Chrome-family browsers pass `chrome-extension://<id>/` (and
//!   `--parent-window=<n>` on Windows); Firefox-family ones the absolute manifest path and the
//!   add-on id. A caller not in the [`Allowlist`] is refused: one `error` frame
//!   (`origin.not_allowed`) on stdout, exit 1.
//! - **Connection** ([`DaemonConnector`], [`connect_with_retry`]): `ws://127.0.0.1:<port>/v1/ws`
//!   with the token file's token as `Authorization: Bearer`; the port is the running daemon's
//!   (its `<state>/daemon.json` record, re-read at every attempt), else the config's, else
//!   `REVIEW_AGENT_GATEWAY_PORT`, else 4317 ([`crate::config::daemon_port`]). When nothing answers, the daemon is
//!   started detached (`<this exe> serve`, its own process group / on Windows a detached process
//!   outside the browser's job object, so closing the browser does not stop runs), then the
//!   connection is retried with backoff for at most [`RelayOptions::connect_timeout`] (5 s). Two
//!   hosts starting at once both start `serve`; the second one fails to bind and exits, and both
//!   hosts connect to the first.
//! - **Relay** ([`relay`]): stdin bytes → [`Decoder`] (64 MiB cap) → each frame's JSON as one
//!   WebSocket text message; each frame the decoder cannot take (zero or over-cap length,
//!   invalid UTF-8, malformed JSON, unknown type, a missing or mistyped field) → one `error`
//!   frame on stdout, carrying the frame's `id` whenever the JSON object has a readable one
//!   ([`crate::protocol::frame::readable_id`], as `/v1/ws` answers), and the stream goes on. Daemon text messages → stdout, a frame whose JSON is over 1 MiB as `chunk` frames
//!   ([`encode_chunked`] at [`OUTBOUND_FRAME_CAP`]); nothing over 1 MiB is ever written.
//! - **Connection loss**: every request still open (sent, no `response`/`end`/`error` yet) gets
//!   an `error` frame `gateway.unavailable` (retryable: its answer is lost; runs go on in the
//!   daemon and can be re-subscribed), then the connection is re-established as above (the
//!   daemon restarted if needed). If that fails: one `error` frame saying why, exit 0.
//! - **stdin EOF** (the browser closed the port): the WebSocket is closed cleanly, exit 0.
//!
//! Nothing but frames is written to stdout; logs go through `tracing` (the CLI sends them to
//! `<state>/logs/native-host.log` and stderr). The token never reaches a log or an error.

use std::collections::{BTreeSet, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};

use crate::config::Config;
use crate::error::{GatewayError, codes};
use crate::protocol::ErrorObject;
use crate::protocol::codec::{
    Decoder, INBOUND_FRAME_CAP, OUTBOUND_FRAME_CAP, encode_chunked, encode_raw, frame_json,
};
use crate::protocol::frame::{ErrorFrame, Frame, FrameId};
use crate::security::Token;

/// How long [`connect_with_retry`] keeps trying by default (DESIGN §3: "bounded to a few
/// seconds").
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// First pause between connection attempts; doubled after each failed attempt up to
/// [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(20);

/// Longest pause between connection attempts.
pub const MAX_BACKOFF: Duration = Duration::from_millis(400);

/// Longest a single TCP connect + WebSocket handshake may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);

/// Bytes read from stdin at a time.
const READ_BUFFER: usize = 64 * 1024;

/// Largest WebSocket message taken from the daemon (its responses are capped at 64 MiB of JSON).
const MAX_DAEMON_MESSAGE: usize = 128 * 1024 * 1024;

/// Frames that may wait for stdout or for the WebSocket.
const CHANNEL_CAPACITY: usize = 256;

/// The remediation of an `origin.not_allowed` refusal: where the allowlist comes from.
pub const ALLOWLIST_REMEDIATION: &str = "Allow the extension: add its id to \
    `[native_messaging] allowed_extensions` in the gateway's config.toml, or register the host \
    for it with `review-agent-gateway install --extension-id ID`.";

// === caller ===

/// Who started the host, as the browser said on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A Chrome-family browser: `chrome-extension://<id>/`.
    Chrome {
        /// The extension id (32 letters `a`–`p`).
        id: String,
    },
    /// A Firefox-family browser: the manifest it read and the add-on id.
    Firefox {
        /// The absolute path of the host manifest the browser read.
        manifest: PathBuf,
        /// The add-on id (`name@domain` or `{uuid}`).
        id: String,
    },
}

impl std::fmt::Display for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Caller::Chrome { id } => write!(f, "chrome-extension://{id}/"),
            Caller::Firefox { id, .. } => write!(f, "Firefox add-on {id}"),
        }
    }
}

/// The caller from the host's arguments (those after `native-host`):
/// `chrome-extension://<id>/` (Chrome, Chromium, Edge, Brave, Vivaldi; `--parent-window=<n>`,
/// which Chrome adds on Windows, is ignored), or `<absolute manifest path> <add-on id>` (Firefox,
/// LibreWolf). Sources: developer.chrome.com "Native messaging" (the caller's origin as the first
/// argument) and MDN "Native messaging" (manifest path, then the add-on id).
///
/// # Errors
/// `origin.not_allowed` when the arguments are neither form (a malformed extension id, a
/// relative manifest path, a missing add-on id, extra arguments).
pub fn parse_caller<S: AsRef<str>>(args: &[S]) -> Result<Caller, GatewayError> {
    let args: Vec<&str> = args
        .iter()
        .map(AsRef::as_ref)
        .filter(|a| !a.starts_with("--parent-window="))
        .collect();
    let refuse = |why: String| {
        GatewayError::new(
            codes::ORIGIN_NOT_ALLOWED,
            format!("native-host was not started by a browser extension it knows: {why}"),
            "The browser starts the host as `native-host chrome-extension://ID/` (Chrome family) \
             or `native-host /path/to/manifest.json ADDON_ID` (Firefox family); register it with \
             `review-agent-gateway install`.",
        )
    };
    match args.as_slice() {
        [origin] if origin.starts_with("chrome-extension://") => {
            let id = origin["chrome-extension://".len()..].trim_end_matches('/');
            if installer::ids::is_chrome_extension_id(id) {
                Ok(Caller::Chrome { id: id.to_owned() })
            } else {
                Err(refuse(format!(
                    "`{}` is not a Chrome extension origin (chrome-extension:// + 32 letters a-p + /)",
                    clip(origin)
                )))
            }
        }
        [manifest, id] => {
            let manifest = Path::new(manifest);
            if !manifest.is_absolute() {
                Err(refuse(format!(
                    "`{}` is not an absolute manifest path",
                    clip(&manifest.display().to_string())
                )))
            } else if !installer::ids::is_firefox_extension_id(id) {
                Err(refuse(format!(
                    "`{}` is not a Firefox add-on id (name@domain or {{uuid}})",
                    clip(id)
                )))
            } else {
                Ok(Caller::Firefox {
                    manifest: manifest.to_owned(),
                    id: (*id).to_owned(),
                })
            }
        }
        [] => Err(refuse("no arguments were given".into())),
        other => Err(refuse(format!(
            "unexpected arguments {:?}",
            other.iter().map(|a| clip(a)).collect::<Vec<_>>()
        ))),
    }
}

/// `text` cut to 120 characters, for messages quoting arguments.
fn clip(text: &str) -> String {
    match text.char_indices().nth(120) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

// === allowlist ===

/// The extensions allowed to start the host. Built by [`Allowlist::discover`] from, in order:
/// 1. the companion extension's ids ([`installer::COMPANION_CHROME_EXTENSION_ID`],
///    [`installer::COMPANION_FIREFOX_EXTENSION_ID`]);
/// 2. the config's `[native_messaging] allowed_extensions`;
/// 3. the `allowed_origins` / `allowed_extensions` of the host manifests named
///    `com.review_agent.gateway.json` at every location `install` writes to (user and system
///    scope, every browser; on Windows the manifests the registry keys name) — so
///    `install --extension-id ID` is enough to allow `ID` (DESIGN §9: "the native host accepts
///    only the extension origins in its manifest").
///
/// The browser itself checks the manifest it read before starting the host; this check also
/// refuses an extension the user never allowed when the host is started some other way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist {
    chrome: BTreeSet<String>,
    firefox: BTreeSet<String>,
}

impl Allowlist {
    /// Add one id: a Chrome id (32 letters a-p), a `chrome-extension://ID/` origin, or a Firefox
    /// add-on id. Anything else is ignored (the config is validated at load; manifests by
    /// `doctor`).
    pub fn add(&mut self, id: &str) {
        let mut ids = installer::ExtensionIds::default();
        if ids.add(id).is_ok() {
            self.chrome.extend(ids.chrome().iter().cloned());
            self.firefox.extend(ids.firefox().iter().cloned());
        }
    }

    /// The allowlist of this machine for `config` (see [`Allowlist`]); manifest locations are
    /// found with [`installer::locations`] for the current `HOME` (nothing is added from them
    /// when it is unset).
    pub fn discover(config: &Config) -> Allowlist {
        let mut list = Allowlist::default();
        for id in [
            installer::COMPANION_CHROME_EXTENSION_ID,
            installer::COMPANION_FIREFOX_EXTENSION_ID,
        ]
        .into_iter()
        .flatten()
        {
            list.add(id);
        }
        for id in &config.native_messaging.allowed_extensions {
            list.add(id);
        }
        if let Ok(env) = installer::Environment::detect(None) {
            for scope in [installer::Scope::User, installer::Scope::System] {
                let Ok(locations) = installer::locations(&env, &installer::Browser::ALL, scope)
                else {
                    continue;
                };
                let mut seen = HashSet::new();
                for location in locations {
                    let path = match &location.registry {
                        Some(key) => match installer::registry::get_default(key) {
                            Ok(Some(path)) => PathBuf::from(path),
                            _ => continue,
                        },
                        None => location.manifest_path.clone(),
                    };
                    if seen.insert(path.clone()) {
                        list.add_manifest(&path);
                    }
                }
            }
        }
        list
    }

    /// Add the allowlist of the host manifest at `path` when it is ours (its `name` is
    /// [`installer::HOST_NAME`]); unreadable or foreign files add nothing.
    pub fn add_manifest(&mut self, path: &Path) {
        let Ok(bytes) = std::fs::read(path) else {
            return;
        };
        let Ok(manifest) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
            return;
        };
        if manifest["name"] != installer::HOST_NAME {
            return;
        }
        for key in ["allowed_origins", "allowed_extensions"] {
            for id in manifest[key].as_array().into_iter().flatten() {
                if let Some(id) = id.as_str() {
                    self.add(id);
                }
            }
        }
    }

    /// Whether `caller` may use the host.
    ///
    /// # Errors
    /// `origin.not_allowed` naming the caller, with [`ALLOWLIST_REMEDIATION`].
    pub fn check(&self, caller: &Caller) -> Result<(), GatewayError> {
        let allowed = match caller {
            Caller::Chrome { id } => self.chrome.contains(id),
            Caller::Firefox { id, .. } => self.firefox.contains(id),
        };
        if allowed {
            Ok(())
        } else {
            Err(GatewayError::new(
                codes::ORIGIN_NOT_ALLOWED,
                format!("{caller} is not allowed to use the review-agent-gateway native host"),
                ALLOWLIST_REMEDIATION,
            ))
        }
    }
}

/// One `error` frame for `error` (`id` null) as native-messaging bytes, e.g. the refusal the
/// host writes before exiting 1. At most 1 MiB: messages of [`GatewayError`]s are short.
pub fn error_frame_bytes(id: Option<FrameId>, error: &GatewayError) -> Vec<u8> {
    let frame = error_frame(id, error);
    encode_chunked(&frame, OUTBOUND_FRAME_CAP)
        .map(|parts| parts.concat())
        .unwrap_or_default()
}

fn error_frame(id: Option<FrameId>, error: &GatewayError) -> Frame {
    Frame::Error(ErrorFrame {
        id,
        error: ErrorObject::from(error),
    })
}

// === connecting ===

/// Why one connection attempt failed.
#[derive(Debug)]
pub enum ConnectError {
    /// Nothing answered (connection refused, timed out, no token file yet): start the daemon and
    /// retry.
    Unreachable(String),
    /// Something answered and refused (e.g. 401 `auth.token_invalid`): retrying will not help.
    Refused(GatewayError),
}

/// How the relay reaches the daemon: one connection attempt at a time, and a way to start the
/// daemon. Tests inject in-memory sockets.
pub trait Connector: Send {
    /// The byte stream under the WebSocket.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// One attempt to open the WebSocket.
    ///
    /// # Errors
    /// [`ConnectError::Unreachable`] or [`ConnectError::Refused`].
    fn connect(
        &mut self,
    ) -> impl Future<Output = Result<WebSocketStream<Self::Io>, ConnectError>> + Send;

    /// Start the daemon (detached); called once per outage, on the first unreachable attempt.
    ///
    /// # Errors
    /// `internal.error` when it cannot even be spawned.
    fn start_daemon(&mut self) -> Result<(), GatewayError>;

    /// Where the daemon is, for messages (e.g. `127.0.0.1:4317`).
    fn describe(&self) -> String;

    /// What became of the daemon this connector started, if it already exited (e.g. `exit
    /// status: 1; see /state/logs/daemon.log`), for messages.
    fn daemon_exit(&mut self) -> Option<String> {
        None
    }
}

/// The real daemon on `127.0.0.1:<port>`: token from `token_file` (read at every attempt, so a
/// rotated token or one created by a just-started daemon is picked up), started as
/// `<program> serve [--port <port>]` with stderr appended to `daemon_log`.
#[derive(Debug)]
pub struct DaemonConnector {
    /// The daemon's port (the config's `port`).
    pub port: u16,
    /// Whether to pass `--port` to `serve` (the port did not come from the config).
    pub pass_port: bool,
    /// `<state>/token`.
    pub token_file: PathBuf,
    /// The binary to start (`std::env::current_exe()`).
    pub program: PathBuf,
    /// Where the started daemon's stderr goes, e.g. `<state>/logs/daemon.log` (mode 0600).
    pub daemon_log: PathBuf,
    /// `<state>/daemon.json`, re-read at every attempt ([`DaemonConnector::with_daemon_record`]).
    daemon_record: Option<PathBuf>,
    started: Option<std::sync::Arc<std::sync::Mutex<Option<String>>>>,
}

impl DaemonConnector {
    /// A connector for the daemon on `port` (see the fields).
    pub fn new(
        port: u16,
        pass_port: bool,
        token_file: PathBuf,
        program: PathBuf,
        daemon_log: PathBuf,
    ) -> Self {
        DaemonConnector {
            port,
            pass_port,
            token_file,
            program,
            daemon_log,
            daemon_record: None,
            started: None,
        }
    }

    /// The connector every command of this user uses for its daemon: port `port` (from
    /// [`crate::config::daemon_port`], passed to `serve` unless it came from the config), the
    /// token file, the daemon log and the daemon record of `paths`, and `program` started as the
    /// daemon.
    pub fn for_paths(
        paths: &crate::config::Paths,
        (port, source): (u16, crate::config::PortSource),
        program: PathBuf,
    ) -> Self {
        DaemonConnector::new(
            port,
            source != crate::config::PortSource::Config,
            paths.token_file(),
            program,
            paths.log_dir().join("daemon.log"),
        )
        .with_daemon_record(paths.daemon_file())
    }

    /// Also follow the running daemon's record `file` (`<state>/daemon.json`,
    /// [`crate::config::record_daemon`]): at every attempt, a recorded port other than
    /// [`DaemonConnector::port`] is tried first, and once it answers it becomes the port (so a
    /// daemon restarted with `serve --port N` is found again, and a restart started from here
    /// keeps that port).
    pub fn with_daemon_record(mut self, file: PathBuf) -> Self {
        self.daemon_record = Some(file);
        self
    }

    /// The port to reach the daemon on now: the running daemon's record, else
    /// [`DaemonConnector::port`].
    pub fn current_port(&self) -> u16 {
        self.recorded_port().unwrap_or(self.port)
    }

    /// Start the daemon, detached (`<program> serve [--port N]`, stderr to
    /// [`DaemonConnector::daemon_log`]).
    ///
    /// # Errors
    /// `internal.error` when it cannot be spawned.
    pub fn start_detached(&mut self) -> Result<(), GatewayError> {
        self.start()
    }

    /// The recorded daemon port, when it differs from [`DaemonConnector::port`].
    fn recorded_port(&self) -> Option<u16> {
        let record = crate::config::read_record_file(self.daemon_record.as_deref()?)?;
        (record.port != self.port).then_some(record.port)
    }
}

impl Connector for DaemonConnector {
    type Io = TcpStream;

    async fn connect(&mut self) -> Result<WebSocketStream<TcpStream>, ConnectError> {
        if let Some(port) = self.recorded_port() {
            match self.connect_to(port).await {
                Ok(ws) => {
                    tracing::info!(port, "following the running daemon's record");
                    self.port = port;
                    self.pass_port = true;
                    return Ok(ws);
                }
                // A stale record (the daemon was killed): fall back to our port.
                Err(ConnectError::Unreachable(_)) => {}
                Err(refused) => return Err(refused),
            }
        }
        self.connect_to(self.port).await
    }

    fn start_daemon(&mut self) -> Result<(), GatewayError> {
        self.start()
    }

    fn describe(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn daemon_exit(&mut self) -> Option<String> {
        self.started.as_ref()?.lock().ok()?.clone()
    }
}

impl DaemonConnector {
    async fn connect_to(&self, port: u16) -> Result<WebSocketStream<TcpStream>, ConnectError> {
        let token_file = self.token_file.clone();
        let attempt = async move {
            let tcp = TcpStream::connect(("127.0.0.1", port))
                .await
                .map_err(|e| ConnectError::Unreachable(format!("127.0.0.1:{port}: {e}")))?;
            let _ = tcp.set_nodelay(true);
            let token = match Token::load(&token_file) {
                Ok(token) => token,
                // `serve` creates the token before it binds: a listener without our token file
                // is not our daemon (another REVIEW_AGENT_GATEWAY_HOME, another program).
                Err(crate::security::SecurityError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    return Err(ConnectError::Refused(GatewayError::new(
                        codes::GATEWAY_UNAVAILABLE,
                        format!(
                            "something listens on 127.0.0.1:{port}, but there is no token file \
                             at {}: it is not this user's gateway daemon (another \
                             REVIEW_AGENT_GATEWAY_HOME, or another program)",
                            token_file.display()
                        ),
                        "Stop the other program or daemon, or set another `port` in the \
                         gateway's config.toml.",
                    )));
                }
                Err(e) => return Err(ConnectError::Refused(e.into())),
            };
            // Whatever a dependency logs about the handshake, the token is not in a log line.
            crate::logging::add_secret(token.expose_secret());
            tracing::debug!(port, "opening /v1/ws with the token file's bearer token");
            let mut request = format!("ws://127.0.0.1:{port}/v1/ws")
                .into_client_request()
                .map_err(|e| ConnectError::Unreachable(e.to_string()))?;
            let mut auth = HeaderValue::from_str(&format!("Bearer {}", token.expose_secret()))
                .map_err(|_| {
                    ConnectError::Refused(GatewayError::new(
                        codes::SECURITY_TOKEN_FILE_INVALID,
                        format!(
                            "the token in {} cannot be sent in a header",
                            token_file.display()
                        ),
                        "Run `review-agent-gateway token rotate`.",
                    ))
                })?;
            auth.set_sensitive(true);
            request.headers_mut().insert("authorization", auth);
            let config = WebSocketConfig::default()
                .max_message_size(Some(MAX_DAEMON_MESSAGE))
                .max_frame_size(Some(MAX_DAEMON_MESSAGE));
            match tokio_tungstenite::client_async_with_config(request, tcp, Some(config)).await {
                Ok((ws, _)) => Ok(ws),
                Err(tungstenite::Error::Http(response)) => {
                    Err(ConnectError::Refused(refusal(port, *response)))
                }
                Err(e) => Err(ConnectError::Unreachable(format!(
                    "WebSocket handshake with 127.0.0.1:{port}: {e}"
                ))),
            }
        };
        match tokio::time::timeout(ATTEMPT_TIMEOUT, attempt).await {
            Ok(result) => result,
            Err(_) => Err(ConnectError::Unreachable(format!(
                "127.0.0.1:{port} did not answer within {} ms",
                ATTEMPT_TIMEOUT.as_millis()
            ))),
        }
    }

    fn start(&mut self) -> Result<(), GatewayError> {
        let mut command = std::process::Command::new(&self.program);
        command.arg("serve");
        if self.pass_port {
            command.args(["--port", &self.port.to_string()]);
        }
        let log = open_private_append(&self.daemon_log);
        command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(match log {
                Ok(file) => std::process::Stdio::from(file),
                Err(_) => std::process::Stdio::null(),
            });
        detach(&mut command);
        let mut child = spawn_detached(&mut command).map_err(|e| {
            GatewayError::new(
                codes::INTERNAL,
                format!(
                    "cannot start the daemon ({} serve): {e}",
                    self.program.display()
                ),
                "Start it yourself with `review-agent-gateway serve`.",
            )
        })?;
        tracing::info!(pid = child.id(), port = self.port, "started the daemon");
        // Reap it when it exits (a second `serve` that lost the race for the port exits at once),
        // and remember how it ended for messages.
        let outcome = std::sync::Arc::new(std::sync::Mutex::new(None));
        let slot = outcome.clone();
        let log = self.daemon_log.clone();
        std::thread::spawn(move || {
            if let Ok(status) = child.wait() {
                tracing::info!(%status, "the daemon this host started exited");
                if let Ok(mut slot) = slot.lock() {
                    *slot = Some(format!("{status}; see {}", log.display()));
                }
            }
        });
        self.started = Some(outcome);
        Ok(())
    }
}

/// The gateway's error object from a refused upgrade (401, 403, …), or a generic one.
fn refusal(port: u16, response: tungstenite::http::Response<Option<Vec<u8>>>) -> GatewayError {
    #[derive(Deserialize)]
    struct Body {
        error: ErrorObject,
    }
    let status = response.status();
    let parsed = response
        .body()
        .as_deref()
        .and_then(|b| serde_json::from_slice::<Body>(b).ok());
    match parsed {
        Some(Body { error }) => {
            let code = match error.code.as_str() {
                codes::AUTH_TOKEN_INVALID => codes::AUTH_TOKEN_INVALID,
                codes::AUTH_TOKEN_MISSING => codes::AUTH_TOKEN_MISSING,
                codes::ORIGIN_NOT_ALLOWED => codes::ORIGIN_NOT_ALLOWED,
                codes::REQUEST_HOST_NOT_ALLOWED => codes::REQUEST_HOST_NOT_ALLOWED,
                _ => codes::GATEWAY_UNAVAILABLE,
            };
            GatewayError::new(
                code,
                format!(
                    "the daemon on 127.0.0.1:{port} refused the WebSocket ({status}): {}",
                    error.message
                ),
                error.remediation,
            )
        }
        None => GatewayError::new(
            codes::GATEWAY_UNAVAILABLE,
            format!(
                "127.0.0.1:{port} answered the WebSocket upgrade with {status}; is another \
                 program using the gateway's port?"
            ),
            "Set another `port` in the gateway's config.toml, or stop the program on that port.",
        ),
    }
}

/// Opens `path` for appending, creating it with mode 0600 (and its missing directories with
/// 0700) on Unix; an existing file, or its directory, that others may read is made private
/// (0600, 0700) with a warning in the log ([`crate::security::fs`]).
///
/// # Errors
/// The I/O error of creating the directory or opening the file.
pub fn open_private_append(path: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = path.parent() {
        crate::security::fs::ensure_private_dir(dir)?;
    }
    crate::security::fs::ensure_private_file(path)?;
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// Detach the daemon from the host: on Unix its own process group (the browser may kill the
/// host's group); on Windows a detached process in a new process group, out of the browser's
/// job object (Chrome closes the host's job when the port closes).
fn detach(command: &mut std::process::Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    #[cfg(windows)]
    {
        use std::os::windows::process::CommandExt;
        command.creation_flags(WINDOWS_DETACHED_FLAGS);
    }
}

/// `DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP | CREATE_BREAKAWAY_FROM_JOB`.
#[cfg(windows)]
const WINDOWS_DETACHED_FLAGS: u32 = 0x0000_0008 | 0x0000_0200 | 0x0100_0000;

/// Spawn; on Windows, retry without `CREATE_BREAKAWAY_FROM_JOB` when the job forbids breaking
/// away (access denied).
fn spawn_detached(command: &mut std::process::Command) -> std::io::Result<std::process::Child> {
    match command.spawn() {
        #[cfg(windows)]
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            use std::os::windows::process::CommandExt;
            command.creation_flags(WINDOWS_DETACHED_FLAGS & !0x0100_0000);
            command.spawn()
        }
        other => other,
    }
}

/// Connect, starting the daemon on the first unreachable attempt and retrying with backoff
/// ([`FIRST_BACKOFF`] doubling to [`MAX_BACKOFF`]) until `timeout` has passed.
///
/// # Errors
/// The refusal of [`ConnectError::Refused`] as is; otherwise `gateway.unavailable` (retryable)
/// saying what the last attempt met and, when known, how the started daemon exited.
pub async fn connect_with_retry<C: Connector>(
    connector: &mut C,
    timeout: Duration,
) -> Result<WebSocketStream<C::Io>, GatewayError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut delay = FIRST_BACKOFF;
    let mut started = false;
    loop {
        let why = match connector.connect().await {
            Ok(ws) => return Ok(ws),
            Err(ConnectError::Refused(error)) => return Err(error),
            Err(ConnectError::Unreachable(why)) => why,
        };
        if !started {
            started = true;
            tracing::info!(daemon = %connector.describe(), %why, "the daemon does not answer; starting it");
            connector.start_daemon()?;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            let exit = connector
                .daemon_exit()
                .map(|e| format!(" The daemon it started exited ({e})."))
                .unwrap_or_default();
            return Err(GatewayError::new(
                codes::GATEWAY_UNAVAILABLE,
                format!(
                    "the gateway daemon on {} could not be reached within {} ms after starting \
                     it: {why}.{exit}",
                    connector.describe(),
                    timeout.as_millis()
                ),
                "Start it with `review-agent-gateway serve` and look at what it prints; \
                 `review-agent-gateway doctor` checks the setup.",
            )
            .retryable());
        }
        tokio::time::sleep(delay.min(deadline - now)).await;
        delay = (delay * 2).min(MAX_BACKOFF);
    }
}

// === relay ===

/// Settings of [`relay`].
#[derive(Debug, Clone)]
pub struct RelayOptions {
    /// How long (re)connecting may take before the host gives up ([`CONNECT_TIMEOUT`]).
    pub connect_timeout: Duration,
    /// Inbound frame cap in bytes ([`INBOUND_FRAME_CAP`], 64 MiB).
    pub inbound_cap: u32,
}

impl Default for RelayOptions {
    fn default() -> Self {
        RelayOptions {
            connect_timeout: CONNECT_TIMEOUT,
            inbound_cap: INBOUND_FRAME_CAP,
        }
    }
}

/// How a relay session ended. The host exits 0 in every case: the browser learned why from the
/// last frame (or closed the pipe itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayEnd {
    /// stdin reached end of file: the browser closed the port.
    StdinClosed,
    /// stdout could not be written: the browser went away.
    StdoutClosed,
    /// The daemon could not be reached or re-reached; an `error` frame said so.
    Unavailable(String),
}

/// What the stdin reader hands the relay loop.
enum Inbound {
    /// A decoded frame's JSON text, and what the relay tracks of it.
    Frame(String, Track),
    /// End of input.
    Eof,
}

/// What a frame from the browser means for the open-request bookkeeping.
enum Track {
    Request(FrameId),
    Hello,
    Other,
}

/// Relay frames between `stdin`/`stdout` (the browser's pipes) and the daemon reached through
/// `connector`, until stdin ends, stdout closes, or the daemon cannot be (re)reached; see the
/// module docs for the rules. Everything written to `stdout` is a frame of at most 1 MiB of JSON.
pub async fn relay<R, W, C>(
    stdin: R,
    stdout: W,
    mut connector: C,
    options: RelayOptions,
) -> RelayEnd
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
    C: Connector,
{
    let (out_tx, out_rx) = mpsc::channel::<Outbound>(CHANNEL_CAPACITY);
    let writer = tokio::spawn(write_frames(stdout, out_rx));
    let (in_tx, mut in_rx) = mpsc::channel::<Inbound>(CHANNEL_CAPACITY);
    let reader = tokio::spawn(read_frames(
        stdin,
        Decoder::new(options.inbound_cap),
        in_tx,
        out_tx.clone(),
    ));
    let end = session(&mut connector, &options, &mut in_rx, &out_tx).await;
    reader.abort();
    drop(out_tx);
    // Let the last frames (e.g. the one saying why) reach stdout.
    let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
    end
}

async fn session<C: Connector>(
    connector: &mut C,
    options: &RelayOptions,
    in_rx: &mut mpsc::Receiver<Inbound>,
    out: &mpsc::Sender<Outbound>,
) -> RelayEnd {
    let unavailable = |error: GatewayError| async move {
        tracing::warn!(code = error.code, message = %error.message, "giving up");
        let message = error.message.clone();
        let _ = out.send(Outbound::Frame(error_frame(None, &error))).await;
        RelayEnd::Unavailable(message)
    };
    let mut ws = match connect_with_retry(connector, options.connect_timeout).await {
        Ok(ws) => ws,
        Err(error) => return unavailable(error).await,
    };
    tracing::info!(daemon = %connector.describe(), "connected");
    // Requests sent on this connection and not yet answered; `hello`s not yet answered.
    let mut open: HashSet<FrameId> = HashSet::new();
    let mut hellos: usize = 0;
    loop {
        let lost: String = tokio::select! {
            inbound = in_rx.recv() => match inbound {
                None | Some(Inbound::Eof) => {
                    tracing::info!("stdin closed; closing the connection");
                    let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(None)).await;
                    return RelayEnd::StdinClosed;
                }
                Some(Inbound::Frame(text, track)) => {
                    match track {
                        Track::Request(id) => { open.insert(id); }
                        Track::Hello => hellos += 1,
                        Track::Other => {}
                    }
                    match ws.send(Message::text(text)).await {
                        Ok(()) => continue,
                        Err(e) => format!("sending to the daemon failed: {e}"),
                    }
                }
            },
            message = ws.next() => match message {
                Some(Ok(Message::Text(text))) => {
                    let text = text.as_str();
                    forget_answered(text, &mut open, &mut hellos);
                    if out.send(Outbound::Text(text.to_owned())).await.is_err() {
                        return RelayEnd::StdoutClosed;
                    }
                    continue;
                }
                Some(Ok(Message::Close(frame))) => format!(
                    "the daemon closed the connection{}",
                    frame.map(|f| format!(" ({} {})", f.code, f.reason)).unwrap_or_default()
                ),
                Some(Ok(_)) => continue,
                Some(Err(e)) => format!("the connection to the daemon failed: {e}"),
                None => "the daemon closed the connection".to_owned(),
            },
            () = out.closed() => return RelayEnd::StdoutClosed,
        };
        tracing::warn!(%lost, open = open.len(), "connection to the daemon lost");
        let error = GatewayError::new(
            codes::GATEWAY_UNAVAILABLE,
            format!("{lost}; the answer to this request is lost"),
            "Send the request again (a review goes on in the daemon: fetch its events with \
             GET /v1/runs/:id/events?after=SEQ).",
        )
        .retryable();
        let mut ids: Vec<FrameId> = open.drain().collect();
        ids.sort_by_key(ToString::to_string);
        for id in ids {
            let _ = out
                .send(Outbound::Frame(error_frame(Some(id), &error)))
                .await;
        }
        for _ in 0..std::mem::take(&mut hellos) {
            let _ = out.send(Outbound::Frame(error_frame(None, &error))).await;
        }
        ws = match connect_with_retry(connector, options.connect_timeout).await {
            Ok(ws) => ws,
            Err(error) => return unavailable(error).await,
        };
        tracing::info!(daemon = %connector.describe(), "reconnected");
    }
}

/// Drop the request a daemon frame finishes from `open` (`response`, `end`, or an `error` with
/// its id other than `frame.id_in_use`, which answers a duplicate and leaves the original open);
/// a `hello` answers one pending hello.
fn forget_answered(text: &str, open: &mut HashSet<FrameId>, hellos: &mut usize) {
    #[derive(Deserialize)]
    struct Head {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        id: Option<FrameId>,
        #[serde(default)]
        error: Option<ErrorCode>,
    }
    #[derive(Deserialize)]
    struct ErrorCode {
        code: String,
    }
    let Ok(head) = serde_json::from_str::<Head>(text) else {
        return;
    };
    match (head.kind.as_str(), head.id) {
        ("hello", _) => *hellos = hellos.saturating_sub(1),
        ("error", None)
            if head
                .error
                .as_ref()
                .is_some_and(|e| e.code == codes::PROTOCOL_VERSION_UNSUPPORTED) =>
        {
            *hellos = hellos.saturating_sub(1);
        }
        ("response" | "end", Some(id)) => {
            open.remove(&id);
        }
        ("error", Some(id)) if head.error.is_none_or(|e| e.code != codes::FRAME_ID_IN_USE) => {
            open.remove(&id);
        }
        _ => {}
    }
}

/// Reads stdin, decodes frames, hands their JSON to the relay; answers undecodable frames with
/// an `error` frame directly. Ends at EOF or a read error (both: the browser is gone).
async fn read_frames<R: AsyncRead + Unpin>(
    mut stdin: R,
    mut decoder: Decoder,
    to_relay: mpsc::Sender<Inbound>,
    out: mpsc::Sender<Outbound>,
) {
    let mut buffer = vec![0u8; READ_BUFFER];
    loop {
        let n = match stdin.read(&mut buffer).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "reading stdin failed");
                break;
            }
        };
        for decoded in decoder.frames(&buffer[..n]) {
            match decoded {
                Ok(frame) => {
                    let track = match &frame {
                        Frame::Request(r) => Track::Request(r.id.clone()),
                        Frame::Hello(_) => Track::Hello,
                        _ => Track::Other,
                    };
                    if to_relay
                        .send(Inbound::Frame(frame_json(&frame), track))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                Err(error) => {
                    tracing::info!(%error, "an inbound frame was refused");
                    // The id when the frame has a readable one, as `/v1/ws` answers
                    // (`protocol::frame::readable_id`): its caller is waiting on it.
                    let id = error.id().cloned();
                    let error = GatewayError::from(error);
                    if out
                        .send(Outbound::Frame(error_frame(id, &error)))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    }
    if let Err(error) = decoder.finish() {
        tracing::info!(%error, "stdin ended inside a frame");
    }
    let _ = to_relay.send(Inbound::Eof).await;
}

/// What goes to stdout: a frame built here, or a daemon frame's JSON text.
enum Outbound {
    Frame(Frame),
    Text(String),
}

/// Writes frames to stdout, each as length-prefixed messages of at most 1 MiB of JSON.
async fn write_frames<W: AsyncWrite + Unpin>(mut stdout: W, mut rx: mpsc::Receiver<Outbound>) {
    while let Some(outbound) = rx.recv().await {
        let messages = outbound_messages(outbound);
        for message in messages {
            if let Err(e) = stdout.write_all(&message).await {
                tracing::info!(error = %e, "stdout closed");
                return;
            }
        }
        if stdout.flush().await.is_err() {
            return;
        }
    }
}

/// The native-messaging messages for one outbound frame: a daemon text of at most 1 MiB as is,
/// anything larger re-encoded as `chunk` frames; a frame that cannot be chunked (its `id` alone
/// nearly fills 1 MiB) is replaced by an `error` frame `frame.too_large`.
fn outbound_messages(outbound: Outbound) -> Vec<Vec<u8>> {
    let frame = match outbound {
        Outbound::Text(text) if text.len() <= OUTBOUND_FRAME_CAP => {
            return encode_raw(text.as_bytes()).into_iter().collect();
        }
        Outbound::Text(text) => match serde_json::from_str::<Frame>(&text) {
            Ok(frame) => frame,
            Err(e) => {
                tracing::error!(error = %e, bytes = text.len(), "the daemon sent a frame that is not one");
                return vec![error_frame_bytes(
                    None,
                    &GatewayError::new(
                        codes::INTERNAL,
                        format!(
                            "the daemon sent {} bytes that are not a frame: {e}",
                            text.len()
                        ),
                        "Report this as a bug of review-agent-gateway.",
                    ),
                )];
            }
        },
        Outbound::Frame(frame) => frame,
    };
    match encode_chunked(&frame, OUTBOUND_FRAME_CAP) {
        Ok(messages) => messages,
        Err(e) => {
            let error = GatewayError::from(e);
            let id = match &frame {
                Frame::Response(r) => Some(r.id.clone()),
                Frame::Event(e) => Some(e.id.clone()),
                Frame::End(f) => Some(f.id.clone()),
                Frame::Error(f) => f.id.clone(),
                _ => None,
            };
            let with_id = error_frame_bytes(id, &error);
            if !with_id.is_empty() && with_id.len() - 4 <= OUTBOUND_FRAME_CAP {
                vec![with_id]
            } else {
                vec![error_frame_bytes(None, &error)]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use tokio::io::DuplexStream;
    use tokio_tungstenite::tungstenite::protocol::Role;

    #[test]
    fn callers_from_browser_argv() {
        let id = "knldjmfmopnpolahpmmgbagdohdnhkik";
        let chrome = Caller::Chrome { id: id.into() };
        assert_eq!(
            parse_caller(&[format!("chrome-extension://{id}/")]).ok(),
            Some(chrome.clone())
        );
        assert_eq!(
            parse_caller(&[
                format!("chrome-extension://{id}/"),
                "--parent-window=6".into()
            ])
            .ok(),
            Some(chrome)
        );
        assert_eq!(
            parse_caller(&["/a b/é.json", "x@y"]).ok(),
            Some(Caller::Firefox {
                manifest: "/a b/é.json".into(),
                id: "x@y".into()
            })
        );
        for bad in [
            vec!["chrome-extension://ABC/"],
            vec!["chrome-extension://knldjmfmopnpolahpmmgbagdohdnhki/"],
            vec!["m.json", "x@y"],
            vec!["/m.json", "not an id"],
            vec!["/m.json", "x@y", "extra"],
            vec![],
        ] {
            let error = parse_caller(&bad).expect_err("refused");
            assert_eq!(error.code, codes::ORIGIN_NOT_ALLOWED, "{bad:?}");
        }
    }

    #[test]
    fn allowlist_sources() {
        let dir = tempfile::tempdir().expect("temp dir");
        let ours = dir.path().join("ours.json");
        std::fs::write(
            &ours,
            json!({"name": installer::HOST_NAME, "allowed_origins": ["chrome-extension://abcdefghijklmnopabcdefghijklmnop/"]}).to_string(),
        )
        .expect("write");
        let foreign = dir.path().join("foreign.json");
        std::fs::write(
            &foreign,
            json!({"name": "other.host", "allowed_extensions": ["z@z"]}).to_string(),
        )
        .expect("write");
        let mut list = Allowlist::default();
        list.add("x@y");
        list.add_manifest(&ours);
        list.add_manifest(&foreign);
        list.add_manifest(&dir.path().join("missing.json"));
        let chrome = |id: &str| Caller::Chrome { id: id.into() };
        let firefox = |id: &str| Caller::Firefox {
            manifest: "/m.json".into(),
            id: id.into(),
        };
        assert!(
            list.check(&chrome("abcdefghijklmnopabcdefghijklmnop"))
                .is_ok()
        );
        assert!(list.check(&firefox("x@y")).is_ok());
        let refused = list
            .check(&firefox("z@z"))
            .expect_err("foreign manifest ignored");
        assert_eq!(refused.code, codes::ORIGIN_NOT_ALLOWED);
        assert_eq!(refused.remediation, ALLOWLIST_REMEDIATION);
        // A Chrome id is not a Firefox id and the other way round.
        assert!(
            list.check(&firefox("abcdefghijklmnopabcdefghijklmnop"))
                .is_err()
        );
    }

    /// A connector whose daemon is an in-memory WebSocket served by `serve`; `fail_first`
    /// attempts are unreachable.
    struct Fake {
        daemons: mpsc::UnboundedSender<WebSocketStream<DuplexStream>>,
        fail_first: usize,
        attempts: usize,
        starts: usize,
    }

    impl Connector for Fake {
        type Io = DuplexStream;
        async fn connect(&mut self) -> Result<WebSocketStream<DuplexStream>, ConnectError> {
            self.attempts += 1;
            if self.attempts <= self.fail_first || self.daemons.is_closed() {
                return Err(ConnectError::Unreachable("refused".into()));
            }
            let (client, server) = tokio::io::duplex(1 << 20);
            let server = WebSocketStream::from_raw_socket(server, Role::Server, None).await;
            self.daemons
                .send(server)
                .map_err(|_| ConnectError::Unreachable("gone".into()))?;
            Ok(WebSocketStream::from_raw_socket(client, Role::Client, None).await)
        }
        fn start_daemon(&mut self) -> Result<(), GatewayError> {
            self.starts += 1;
            Ok(())
        }
        fn describe(&self) -> String {
            "fake".into()
        }
    }

    fn framed(value: &Value) -> Vec<u8> {
        encode_raw(value.to_string().as_bytes()).expect("small")
    }

    /// Reads every frame the relay wrote.
    fn frames_of(mut bytes: &[u8]) -> Vec<(usize, Value)> {
        let mut out = Vec::new();
        while bytes.len() >= 4 {
            let len = u32::from_ne_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
            out.push((
                len,
                serde_json::from_slice(&bytes[4..4 + len]).expect("json"),
            ));
            bytes = &bytes[4 + len..];
        }
        out
    }

    #[tokio::test]
    async fn relays_chunks_fails_open_requests_on_loss_and_reconnects() {
        let (daemons_tx, mut daemons) = mpsc::unbounded_channel();
        let connector = Fake {
            daemons: daemons_tx,
            fail_first: 2,
            attempts: 0,
            starts: 0,
        };
        let (mut browser, host_stdin) = tokio::io::duplex(1 << 16);
        let (host_stdout, mut from_host) = tokio::io::duplex(8 << 20);
        let options = RelayOptions {
            connect_timeout: Duration::from_secs(2),
            ..Default::default()
        };
        let relay = tokio::spawn(relay(host_stdin, host_stdout, connector, options));

        // First daemon: answers one request with a 2 MB response, then dies with `b` open.
        let mut daemon = daemons.recv().await.expect("connected after retries");
        browser
            .write_all(&framed(
                &json!({"type": "request", "id": "a", "method": "GET", "path": "/v1/x"}),
            ))
            .await
            .expect("write");
        browser
            .write_all(&framed(
                &json!({"type": "request", "id": "b", "method": "GET", "path": "/v1/y"}),
            ))
            .await
            .expect("write");
        let got = daemon.next().await.expect("a").expect("text");
        assert!(got.to_text().expect("text").contains("\"id\":\"a\""));
        let _ = daemon.next().await;
        let big = json!({"type": "response", "id": "a", "status": 200, "body": {"data": "é".repeat(1 << 20)}});
        daemon
            .send(Message::text(big.to_string()))
            .await
            .expect("send");
        drop(daemon);

        // Second daemon: the relay reconnected; a request goes through it.
        let mut daemon = daemons.recv().await.expect("reconnected");
        browser
            .write_all(&framed(
                &json!({"type": "request", "id": "c", "method": "GET", "path": "/v1/z"}),
            ))
            .await
            .expect("write");
        let got = daemon.next().await.expect("c").expect("text");
        assert!(got.to_text().expect("text").contains("\"id\":\"c\""));
        daemon
            .send(Message::text(json!({"type": "end", "id": "c"}).to_string()))
            .await
            .expect("send");
        drop(browser);
        assert_eq!(relay.await.expect("joins"), RelayEnd::StdinClosed);

        let mut out = Vec::new();
        from_host.read_to_end(&mut out).await.expect("read");
        let frames = frames_of(&out);
        assert!(frames.iter().all(|(len, _)| *len <= OUTBOUND_FRAME_CAP));
        let chunks: Vec<&Value> = frames
            .iter()
            .map(|(_, f)| f)
            .filter(|f| f["type"] == "chunk")
            .collect();
        assert!(chunks.len() >= 3, "2 MB of JSON in 1 MiB chunks");
        let text: String = chunks
            .iter()
            .map(|c| c["data"].as_str().expect("data"))
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&text).expect("reassembles"),
            big
        );
        let rest: Vec<&Value> = frames
            .iter()
            .map(|(_, f)| f)
            .filter(|f| f["type"] != "chunk")
            .collect();
        assert_eq!(rest.len(), 2, "{rest:?}");
        assert_eq!(
            (&rest[0]["id"], &rest[0]["error"]["code"]),
            (&json!("b"), &json!("gateway.unavailable"))
        );
        assert_eq!(rest[0]["error"]["retryable"], true);
        assert_eq!(rest[1], &json!({"type": "end", "id": "c"}));
    }

    #[tokio::test]
    async fn an_unreachable_daemon_is_started_once_then_reported() {
        let (daemons_tx, daemons) = mpsc::unbounded_channel();
        drop(daemons);
        let connector = Fake {
            daemons: daemons_tx,
            fail_first: 0,
            attempts: 0,
            starts: 0,
        };
        let (_browser, host_stdin) = tokio::io::duplex(1024);
        let (host_stdout, mut from_host) = tokio::io::duplex(1 << 16);
        let options = RelayOptions {
            connect_timeout: Duration::from_millis(300),
            ..Default::default()
        };
        let end = relay(host_stdin, host_stdout, connector, options).await;
        assert!(matches!(end, RelayEnd::Unavailable(_)), "{end:?}");
        let mut out = Vec::new();
        from_host.read_to_end(&mut out).await.expect("read");
        let frames = frames_of(&out);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].1["error"]["code"], "gateway.unavailable");
        assert_eq!(frames[0].1["id"], Value::Null);
    }

    #[test]
    fn an_unchunkable_frame_becomes_an_error_frame() {
        // An id that alone fills 1 MiB cannot be chunked: an error frame with a null id instead.
        // (No client can send such an id — ids are capped at 200 characters — so the frame is
        // built here rather than read.)
        let frame = Frame::Response(crate::protocol::ResponseFrame {
            id: FrameId::Text("i".repeat(OUTBOUND_FRAME_CAP)),
            status: 200,
            body: json!({}),
        });
        let messages = outbound_messages(Outbound::Frame(frame));
        assert_eq!(messages.len(), 1);
        let frames = frames_of(&messages[0]);
        assert_eq!(frames[0].1["error"]["code"], codes::FRAME_TOO_LARGE);
        assert_eq!(frames[0].1["id"], Value::Null);
    }
}
