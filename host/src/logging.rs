//! Logging set-up shared by every command (`serve`, `native-host`, `providers`, ...): the
//! `REVIEW_AGENT_GATEWAY_LOG` filter with the dependencies that log request headers capped, and
//! a writer that passes every log line through the [`Redactor`] (issue 12 §3: no log level may
//! print the token).
//!
//! Two layers, so one failing does not leak a secret:
//!
//! 1. [`filter`]: the user's directives (`REVIEW_AGENT_GATEWAY_LOG`, e.g. `trace` or
//!    `review_agent_gateway=debug`), **and** a fixed cap of [`DEPENDENCY_CAP`] on the targets of
//!    the HTTP and WebSocket crates ([`CAPPED_TARGETS`]): at `debug`/`trace` they print whole
//!    handshakes and header maps (tungstenite logged `authorization: Bearer <token>`). The cap
//!    is combined with the user's filter, not added to it, so no directive lifts it.
//! 2. [`RedactingFields`]: each event's message and fields (and each span's fields) go
//!    through the default [`Redactor`] (`Authorization`/`Bearer` values, token formats,
//!    secret-looking environment values) plus the secrets registered with [`add_secret`] (the
//!    gateway's token: a bare hex string no pattern recognizes, e.g. in a `bearer.<token>`
//!    WebSocket subprotocol). The timestamp, level and target are not redacted: a target such
//!    as `…::security::secrets:` followed by a message would read as a secret assignment.

use std::io;
use std::sync::{LazyLock, PoisonError, RwLock};

use tracing::level_filters::LevelFilter;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::filter::{EnvFilter, FilterExt, Targets};
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::{DefaultFields, Writer};
use tracing_subscriber::layer::Filter;

use crate::security::Redactor;

/// Environment variable holding the log filter (`tracing_subscriber` `EnvFilter` syntax).
pub const LOG_ENV: &str = "REVIEW_AGENT_GATEWAY_LOG";

/// Targets capped at [`DEPENDENCY_CAP`] whatever the filter says: the crates that log requests
/// and handshakes with their headers at `debug`/`trace`.
pub const CAPPED_TARGETS: [&str; 9] = [
    "tungstenite",
    "tokio_tungstenite",
    "hyper",
    "hyper_util",
    "h2",
    "reqwest",
    "rustls",
    "axum",
    "tower_http",
];

/// The most verbose level [`CAPPED_TARGETS`] may log at: `info` (none of them prints a header
/// there).
pub const DEPENDENCY_CAP: LevelFilter = LevelFilter::INFO;

/// The filter of every log output: [`LOG_ENV`] if set and valid, else `default` (e.g.
/// `"info"`), intersected with the cap of [`CAPPED_TARGETS`] at [`DEPENDENCY_CAP`].
pub fn filter<S>(default: &str) -> impl Filter<S> + Send + Sync + 'static
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let user = EnvFilter::try_from_env(LOG_ENV).unwrap_or_else(|_| EnvFilter::new(default));
    let cap = CAPPED_TARGETS.iter().fold(
        Targets::new().with_default(LevelFilter::TRACE),
        |t, target| t.with_target(*target, DEPENDENCY_CAP),
    );
    user.and(cap)
}

/// Installs the process's subscriber: formatted lines on stderr (ANSI colours on a terminal),
/// filtered by [`filter`] with `default`, fields redacted by [`RedactingFields`]. Does nothing
/// when a subscriber is already installed.
pub fn init_stderr(default: &str) {
    use std::io::IsTerminal;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let layer = tracing_subscriber::fmt::layer()
        .fmt_fields(RedactingFields::default())
        .with_writer(io::stderr)
        .with_ansi(io::stderr().is_terminal())
        .with_filter(filter(default));
    let _ = tracing_subscriber::registry().with(layer).try_init();
}

// === Secrets ===

/// The redactor of log lines: the default one plus the registered secrets.
static REDACTOR: LazyLock<RwLock<Redactor>> = LazyLock::new(|| RwLock::new(Redactor::new()));

/// Registers `value` (e.g. the gateway's token, once read) so that every later log line shows
/// `[REDACTED:secret]` in its place. Values shorter than
/// [`MIN_SECRET_LEN`](crate::security::redact::MIN_SECRET_LEN) are ignored; registering a value
/// twice costs nothing more.
pub fn add_secret(value: &str) {
    let mut redactor = REDACTOR.write().unwrap_or_else(PoisonError::into_inner);
    if redactor.redact(value).as_ref() == value {
        *redactor = redactor.clone().with_secret(value);
    }
}

/// `line` as it may be logged: redacted like every log line.
pub fn redact_line(line: &str) -> String {
    REDACTOR
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .redact(line)
        .into_owned()
}

// === impl RedactingFields ===

/// The fields formatter of every log output (`fmt::layer().fmt_fields(..)`): the default
/// rendering of the message and fields, passed through [`redact_line`] as a whole (so a
/// secret split over the message and a field is still found).
#[derive(Debug, Default)]
pub struct RedactingFields(DefaultFields);

impl<'writer> FormatFields<'writer> for RedactingFields {
    /// Renders `fields` like [`DefaultFields`] (without ANSI styling), redacts the text and
    /// writes it to `writer`.
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> std::fmt::Result {
        let mut rendered = String::new();
        self.0.format_fields(Writer::new(&mut rendered), fields)?;
        writer.write_str(&redact_line(&rendered))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_secret_and_bearer_values_are_redacted() {
        add_secret("0123456789abcdef0123456789abcdef");
        let line = "sec-websocket-protocol: bearer.0123456789abcdef0123456789abcdef\n\
                    authorization: Bearer 0123456789abcdef0123456789abcdef";
        let out = redact_line(line);
        assert!(!out.contains("0123456789abcdef0123456789abcdef"), "{out}");
        // A message that merely follows a target named `secrets` is left alone.
        assert_eq!(
            redact_line("no OS keyring; trying the key file"),
            "no OS keyring; trying the key file"
        );
    }
}
