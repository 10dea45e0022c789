//! The local settings page (issue 18, DESIGN §15): `/settings` on the daemon, where the person
//! at the keyboard confirms what browsers and agents propose and watches runs live.
//!
//! Access (issue 18 §1):
//! - **Login**: `review-agent-gateway settings` issues a one-time code ([`login`]) and opens
//!   `/settings/login#code=…`; the page's script moves the code out of the address bar
//!   (`history.replaceState`) and posts it (the fragment never reaches a server or a log). A
//!   headless box types the printed code into the same form. A redeemed code becomes a session
//!   ([`session`]): an `HttpOnly`, `SameSite=Strict`, `Path=/settings` cookie.
//! - **Every state-changing request** (any method but GET/HEAD) needs an `Origin` that is the
//!   daemon's own (`http://127.0.0.1:<port>` or `http://localhost:<port>`) and, once logged in,
//!   the session's anti-CSRF token (form field `csrf`); otherwise 403 `settings.csrf_invalid`
//!   or `origin.not_allowed`, before any handler runs. (`SameSite=Strict` alone is not enough:
//!   a page on another port of 127.0.0.1 is the same *site*.)
//! - **Headers on every answer**: a strict Content-Security-Policy ([`CSP`]: nothing but the
//!   page's own scripts, styles and fetches; no inline script; `frame-ancestors 'none'`),
//!   `X-Frame-Options: DENY`, `X-Content-Type-Options: nosniff`, `Referrer-Policy: same-origin`,
//!   `Cache-Control: no-store`, `Cross-Origin-Opener-Policy` and `-Resource-Policy: same-origin`.
//! - **Separate from `/v1`**: these routes never read `Authorization` (the bearer token does not
//!   open them) and `/v1` never reads cookies (the session does not open it). The `Host` check
//!   of `/v1` applies here too (DNS rebinding), loopback only.
//!
//! **Invariant:** no business logic here: every page reads the engine ([`Gateway`]) and every
//! form calls an engine or library function that the command line uses too; templates only
//! render. Strings come from [`i18n`]'s catalogues.

pub mod agents;
pub mod i18n;
pub mod login;
pub mod pages;
pub mod providers;
pub mod rules;
pub mod session;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};

use crate::engine::Gateway;
use crate::error::{GatewayError, codes};
use crate::security::{HostRefusal, PublicHosts, check_host_with_public, own_origin};

pub use i18n::{Lang, Tr};
pub use login::LoginCodes;
pub use session::{Session, Sessions};

/// The path every settings route is under.
pub const PATH: &str = "/settings";

/// The Content-Security-Policy of every settings answer: only the page's own assets, no inline
/// script or style, no framing, forms only to the page itself.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
    base-uri 'none'";

/// The cookie holding the language chosen in the menu (not a secret).
pub const LANG_COOKIE: &str = "rag_lang";

/// The most bytes a settings form may send (a pasted rule snippet is the largest).
pub const MAX_FORM_BYTES: usize = 256 * 1024;

/// What the settings routes share.
#[derive(Clone)]
pub struct SettingsState {
    pub(crate) gateway: Gateway,
    pub(crate) port: u16,
    pub(crate) sessions: Arc<Sessions>,
    pub(crate) codes: LoginCodes,
    pub(crate) token_file: std::path::PathBuf,
    pub(crate) listening: Arc<Vec<String>>,
    pub(crate) stop: tokio_util::sync::CancellationToken,
}

impl SettingsState {
    /// State for [`router`]: the engine (its state directory holds the login codes and the
    /// token file), the port the daemon listens on (for the `Host` and `Origin` checks), and
    /// `stop`, which ends the live streams when the daemon shuts down.
    pub fn new(
        gateway: Gateway,
        port: u16,
        stop: tokio_util::sync::CancellationToken,
    ) -> SettingsState {
        let state_dir = gateway.state_dir();
        SettingsState {
            gateway,
            port,
            sessions: Arc::new(Sessions::new()),
            codes: LoginCodes::new(&state_dir),
            token_file: state_dir.join("token"),
            listening: Arc::new(vec![format!("http://127.0.0.1:{port}")]),
            stop,
        }
    }

    /// The same state, showing `addr` as where the daemon listens.
    pub fn with_listening(mut self, addr: std::net::SocketAddr) -> SettingsState {
        self.listening = Arc::new(vec![format!("http://{addr}")]);
        self
    }
}

/// The `/settings` router with its guard (see the module docs).
pub fn router(state: SettingsState) -> Router {
    Router::new()
        .route("/settings", get(pages::home))
        .route("/settings/", get(pages::home))
        .route("/settings/login", get(pages::login_page).post(pages::login))
        .route("/settings/logout", post(pages::logout))
        .route("/settings/language", post(pages::language))
        .route("/settings/assets/{name}", get(pages::asset))
        .route("/settings/status", get(pages::status))
        .route("/settings/mappings", get(pages::mappings))
        .route("/settings/mappings/confirm", post(pages::confirm_proposal))
        .route("/settings/mappings/reject", post(pages::reject_proposal))
        .route("/settings/mappings/remove", post(pages::remove_mapping))
        .route(
            "/settings/mappings/default-ref",
            post(pages::set_default_ref),
        )
        .route("/settings/mappings/origins/add", post(pages::add_origin))
        .route(
            "/settings/mappings/origins/remove",
            post(pages::remove_origin),
        )
        .route("/settings/providers", get(providers::providers))
        .route("/settings/providers/test", post(providers::test))
        .route("/settings/providers/key", post(providers::set_key))
        .route(
            "/settings/providers/delete-key",
            post(providers::delete_key),
        )
        .route("/settings/rules", get(rules::rules))
        .route("/settings/rules/try", post(rules::try_rules))
        .route("/settings/runs", get(pages::runs))
        .route("/settings/runs/live", get(pages::runs_live))
        .route("/settings/runs/{run_id}", get(pages::run))
        .route("/settings/runs/{run_id}/events", get(pages::run_events))
        .route("/settings/runs/{run_id}/cancel", post(pages::cancel_run))
        .route("/settings/runs/{run_id}/resume", post(pages::resume_run))
        .route("/settings/agents", get(agents::page))
        .route("/settings/agents/live", get(agents::live))
        .route("/settings/agents/reply", post(agents::reply))
        .route("/settings/token", get(pages::token))
        .route("/settings/token/rotate", post(pages::rotate_token))
        // Every other path under /settings: the page's own 404, behind the same guard (the
        // `/v1` router keeps the fallback, and two fallbacks cannot merge).
        .route(
            "/settings/{*rest}",
            get(pages::not_found).post(pages::not_found),
        )
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

// === guard ===

/// Paths served without a session: the login page and the static assets.
fn public_path(path: &str) -> bool {
    path == "/settings/login" || path.starts_with("/settings/assets/")
}

async fn guard(State(state): State<SettingsState>, mut request: Request, next: Next) -> Response {
    let mut response = match check(&state, &mut request) {
        Ok(()) => next.run(request).await,
        Err(refused) => refused,
    };
    secure_headers(response.headers_mut());
    response
}

/// The checks of the module docs; on success the session (if any) and the page's language are
/// request extensions.
// The refusal is the answer itself, made once per refused request: boxing it buys nothing.
#[allow(clippy::result_large_err)]
fn check(state: &SettingsState, request: &mut Request) -> Result<(), Response> {
    let headers = request.headers();
    let lang = Lang::negotiate(
        cookie(headers, LANG_COOKIE).as_deref(),
        headers
            .get(header::ACCEPT_LANGUAGE)
            .and_then(|v| v.to_str().ok()),
    );
    let t = Tr::new(lang);
    let hosts: Vec<&str> = headers
        .get_all(header::HOST)
        .iter()
        .map(|h| h.to_str().unwrap_or("\u{fffd}"))
        .collect();
    let authority = request.uri().authority().map(|a| a.as_str());
    let public = PublicHosts {
        names: &[],
        mcp_route: false,
    };
    if let Err(refusal) = check_host_with_public(&hosts, authority, state.port, public) {
        let host = match refusal {
            HostRefusal::NotAllowed(host) => host,
            other => other.to_string(),
        };
        return Err(pages::error_page(
            t,
            StatusCode::FORBIDDEN,
            &GatewayError::new(
                codes::REQUEST_HOST_NOT_ALLOWED,
                format!("Host `{}` is not this gateway", clip(&host, 120)),
                format!(
                    "Open the settings page as http://127.0.0.1:{}/settings (run \
                     `review-agent-gateway settings`).",
                    state.port
                ),
            ),
        ));
    }
    let changes = !matches!(*request.method(), Method::GET | Method::HEAD);
    if changes {
        let origin = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok());
        if !origin.is_some_and(|o| own_origin(o, state.port)) {
            return Err(pages::error_page(
                t,
                StatusCode::FORBIDDEN,
                &GatewayError::new(
                    codes::ORIGIN_NOT_ALLOWED,
                    format!(
                        "a change to the settings came from {}, not from the settings page",
                        origin.map_or("a request without an Origin".to_owned(), |o| format!(
                            "`{}`",
                            clip(o, 120)
                        ))
                    ),
                    "Make changes on the settings page itself; nothing was changed.",
                ),
            ));
        }
    }
    let session =
        cookie(headers, session::COOKIE).and_then(|c| state.sessions.get(&c).map(|s| (c, s)));
    let path = request.uri().path().to_owned();
    request.extensions_mut().insert(t);
    match session {
        Some((cookie, session)) => {
            request
                .extensions_mut()
                .insert(LoggedIn { cookie, session });
            Ok(())
        }
        None if public_path(&path) => Ok(()),
        None if !changes => Err(pages::see_other("/settings/login")),
        None => Err(pages::error_page(
            t,
            StatusCode::UNAUTHORIZED,
            &GatewayError::new(
                codes::SETTINGS_SESSION_MISSING,
                "you are not logged in to the settings page (or the session ended)",
                "Run `review-agent-gateway settings` to open the page with a new login code; \
                 nothing was changed.",
            ),
        )),
    }
}

fn secure_headers(headers: &mut HeaderMap) {
    let set = |h: &mut HeaderMap, name: &'static str, value: &'static str| {
        h.insert(name, HeaderValue::from_static(value));
    };
    set(headers, "content-security-policy", CSP);
    set(headers, "x-frame-options", "DENY");
    set(headers, "x-content-type-options", "nosniff");
    // Not `no-referrer`: with it, browsers send `Origin: null` on the page's own form posts.
    set(headers, "referrer-policy", "same-origin");
    set(headers, "cross-origin-opener-policy", "same-origin");
    set(headers, "cross-origin-resource-policy", "same-origin");
    if !headers.contains_key(header::CACHE_CONTROL) {
        set(headers, "cache-control", "no-store");
    }
}

/// The value of cookie `name` in the request's `Cookie` headers (the first one).
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (k, v) = pair.trim().split_once('=')?;
            (k == name).then(|| v.trim().to_owned())
        })
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

// === extractors ===

/// A request of a logged-in browser: its session (the guard put it there).
#[derive(Debug, Clone)]
pub(crate) struct LoggedIn {
    pub(crate) cookie: String,
    pub(crate) session: Session,
}

impl<S: Send + Sync> FromRequestParts<S> for LoggedIn {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Response> {
        parts
            .extensions
            .get::<LoggedIn>()
            .cloned()
            .ok_or_else(|| pages::see_other("/settings/login"))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Tr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(parts
            .extensions
            .get::<Tr>()
            .copied()
            .unwrap_or(Tr::new(Lang::En)))
    }
}

/// A state-changing form of a logged-in browser, its anti-CSRF token checked: the fields as
/// sent (`application/x-www-form-urlencoded`, at most [`MAX_FORM_BYTES`]).
#[derive(Debug)]
pub(crate) struct Change {
    pub(crate) who: LoggedIn,
    pub(crate) t: Tr,
    fields: Vec<(String, String)>,
}

impl Change {
    /// The first value of field `name`, trimmed; `""` when absent.
    pub(crate) fn field(&self, name: &str) -> &str {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.trim())
    }
}

impl FromRequest<SettingsState> for Change {
    type Rejection = Response;

    async fn from_request(request: Request, state: &SettingsState) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let t = Tr::from_request_parts(&mut parts, state)
            .await
            .unwrap_or(Tr::new(Lang::En));
        let who = LoggedIn::from_request_parts(&mut parts, state).await?;
        let fields = read_form(Request::from_parts(parts, body), t).await?;
        let presented = fields
            .iter()
            .find(|(k, _)| k == "csrf")
            .map_or("", |(_, v)| v.as_str());
        if !who.session.csrf_matches(presented) {
            return Err(pages::error_page(
                t,
                StatusCode::FORBIDDEN,
                &GatewayError::new(
                    codes::SETTINGS_CSRF_INVALID,
                    "the form did not carry this session's anti-CSRF token",
                    "Reload the settings page and submit the form again; nothing was changed.",
                ),
            ));
        }
        Ok(Change { who, t, fields })
    }
}

/// The fields of a form body (at most [`MAX_FORM_BYTES`]).
pub(crate) async fn read_form(
    request: Request<Body>,
    t: Tr,
) -> Result<Vec<(String, String)>, Response> {
    let too_large = || {
        pages::error_page(
            t,
            StatusCode::PAYLOAD_TOO_LARGE,
            &GatewayError::new(
                codes::REQUEST_INVALID,
                format!("the form is larger than {} KiB", MAX_FORM_BYTES / 1024),
                "Send a smaller form (a shorter snippet).",
            ),
        )
    };
    let bytes = axum::body::to_bytes(request.into_body(), MAX_FORM_BYTES)
        .await
        .map_err(|_| too_large())?;
    Ok(form_urlencoded(&bytes))
}

/// `application/x-www-form-urlencoded` decoding (WHATWG URL §5.1): `+` is a space, `%XX` a byte,
/// invalid UTF-8 replaced.
fn form_urlencoded(bytes: &[u8]) -> Vec<(String, String)> {
    fn decode(part: &[u8]) -> String {
        let mut out = Vec::with_capacity(part.len());
        let mut i = 0;
        while i < part.len() {
            match part[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < part.len() => {
                    let hex = |b: u8| (b as char).to_digit(16);
                    match (hex(part[i + 1]), hex(part[i + 2])) {
                        (Some(h), Some(l)) => {
                            out.push((h * 16 + l) as u8);
                            i += 2;
                        }
                        _ => out.push(b'%'),
                    }
                }
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    bytes
        .split(|&b| b == b'&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let mut kv = pair.splitn(2, |&b| b == b'=');
            let k = kv.next().unwrap_or(&[]);
            let v = kv.next().unwrap_or(&[]);
            (decode(k), decode(v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_decode_as_browsers_encode() {
        assert_eq!(
            form_urlencoded(b"a=1&b=x+y%21&c=%E4%BD%A0&d&=e&f=%zz&g=%4"),
            vec![
                ("a".into(), "1".into()),
                ("b".into(), "x y!".into()),
                ("c".into(), "你".into()),
                ("d".into(), "".into()),
                ("".into(), "e".into()),
                ("f".into(), "%zz".into()),
                ("g".into(), "%4".into()),
            ]
        );
    }

    #[test]
    fn cookies_are_found_by_name() {
        let mut h = HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; rag_settings=abc ; b=2"),
        );
        assert_eq!(cookie(&h, "rag_settings").as_deref(), Some("abc"));
        assert_eq!(cookie(&h, "rag"), None);
    }
}
