//! The **Agents and MCP** page (issue 18 §2): the MCP roots, the open workspaces, the audit
//! log, each client's set-up entry, and the delegated tasks with their pending permission
//! requests, answered here with *Once*, *Always* or *Reject* — the human approval the MCP seed
//! promises (DESIGN §14). The data is the engine's ([`Gateway::agents_view`]); a reply is the
//! engine's `agent_reply_permission` ([`Gateway::settings_reply_permission`]), recorded as
//! given by the settings page (`by: settings`). The page never answers anything by itself;
//! `Always` is offered only when `[delegation] allow_always = true`, and otherwise refused by
//! the engine, not by the page.
//!
//! Routes: `GET /settings/agents`, `GET /settings/agents/live` (SSE: an `agents` event with a
//! signature of the sessions' runs and pending requests, now and whenever it changes; the
//! script reads the page again then), `POST /settings/agents/reply` (`session`, `request`,
//! `reply`).
//!
//! [`Gateway::agents_view`]: crate::engine::Gateway::agents_view
//! [`Gateway::settings_reply_permission`]: crate::engine::Gateway::settings_reply_permission

use std::convert::Infallible;
use std::time::Duration;

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use axum::response::sse::{Event, Sse};
use futures_util::Stream;

use super::pages::{Chrome, done, error_flash, ok_flash, render};
use super::{Change, LoggedIn, SettingsState, Tr};
use crate::engine::AgentsView;

/// The page's path.
pub const PAGE: &str = "/settings/agents";

#[derive(Template)]
#[template(path = "settings/agents.html")]
struct AgentsPage {
    chrome: Chrome,
    view: AgentsView,
    pending: usize,
    sessions_more: String,
}

/// `GET /settings/agents`.
pub(crate) async fn page(State(state): State<SettingsState>, t: Tr, who: LoggedIn) -> Response {
    let view = state.gateway.agents_view(state.port).await;
    let pending = view.sessions.iter().map(|s| s.permissions.len()).sum();
    let sessions_more = if view.session_count > view.sessions.len() {
        t.with2(
            "settings.agents.sessions_more",
            ("shown", &view.sessions.len()),
            ("count", &view.session_count),
        )
    } else {
        String::new()
    };
    render(&AgentsPage {
        chrome: Chrome::new(&state, t, Some(&who), PAGE),
        view,
        pending,
        sessions_more,
    })
}

/// `GET /settings/agents/live`: SSE, one `agents` event (the signature) now and whenever the
/// store changes it (looked at most every 500 ms, and every 3 s in any case: a request the
/// agent's server holds appears in the store only once the run's watcher writes it).
pub(crate) async fn live(
    State(state): State<SettingsState>,
    _who: LoggedIn,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let pace = super::pages::Pace {
        coalesce: Duration::from_millis(500),
        at_least_every: Some(Duration::from_secs(3)),
    };
    super::pages::live_snapshots(&state, "agents", pace, |gateway| async move {
        Some(gateway.agents_signature().await)
    })
}

/// `POST /settings/agents/reply` (`session`, `request`, `reply`): the answer sent through the
/// engine, back to the page with what happened (the engine's error with its code and
/// remediation when refused).
pub(crate) async fn reply(State(state): State<SettingsState>, change: Change) -> Response {
    let session = change.field("session").to_owned();
    let request = change.field("request").to_owned();
    let reply = change.field("reply").to_owned();
    let flash = match state
        .gateway
        .settings_reply_permission(&session, &request, &reply)
        .await
    {
        Ok(also_rejected) => {
            let word = change.t.get(match reply.as_str() {
                "once" => "settings.agents.once",
                "always" => "settings.agents.always",
                _ => "settings.agents.reject",
            });
            let mut text = change.t.with2(
                "settings.agents.replied",
                ("request", &request),
                ("reply", &word),
            );
            if !also_rejected.is_empty() {
                text.push(' ');
                text.push_str(
                    &change
                        .t
                        .count("settings.agents.also_rejected", also_rejected.len() as u64),
                );
            }
            ok_flash(text)
        }
        Err(error) => error_flash(&error),
    };
    done(&state, &change, PAGE, flash)
}
