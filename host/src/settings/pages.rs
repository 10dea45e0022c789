//! The settings page's handlers and templates (issue 18 §2): each GET renders one page from the
//! engine's data with `askama` (HTML-escaped by default: nothing from a browser, a merge
//! request or a model becomes markup), each POST calls the engine or the library function the
//! command line uses too, then redirects back (303) with a one-time message (a *flash*) kept in
//! the session.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::time::Duration;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use futures_util::{Stream, StreamExt};
use serde::Deserialize;

use super::session::{self, Flash};
use super::{Change, LANG_COOKIE, Lang, LoggedIn, SettingsState, Tr, read_form};
use crate::error::{GatewayError, codes};
use crate::protocol::AgentEvent;
use crate::report::wire_name;
use crate::store::RunRecord;

// === chrome: what every page shares ===

/// One entry of the navigation.
pub(crate) struct NavItem {
    pub(crate) href: &'static str,
    pub(crate) label: &'static str,
    pub(crate) current: bool,
}

/// One entry of the language menu.
pub(crate) struct LangOption {
    pub(crate) tag: &'static str,
    pub(crate) name: &'static str,
    pub(crate) selected: bool,
}

/// What the base template needs: the strings, the session's anti-CSRF token, the navigation,
/// the one-time message.
pub(crate) struct Chrome {
    pub(crate) t: Tr,
    pub(crate) csrf: String,
    pub(crate) nav: Vec<NavItem>,
    pub(crate) langs: Vec<LangOption>,
    pub(crate) flash: Option<Flash>,
    pub(crate) back: String,
    pub(crate) title: String,
}

/// The pages of the navigation: (path, catalogue key).
pub(crate) const NAV: [(&str, &str); 7] = [
    ("/settings/status", "settings.nav.status"),
    ("/settings/mappings", "settings.nav.mappings"),
    ("/settings/providers", "settings.nav.providers"),
    ("/settings/rules", "settings.nav.rules"),
    ("/settings/runs", "settings.nav.runs"),
    ("/settings/agents", "settings.nav.agents"),
    ("/settings/token", "settings.nav.token"),
];

impl Chrome {
    /// The chrome of a page at `current` (a path of [`NAV`] highlights its entry and names the
    /// page), for `who` (no navigation when logged out); takes the session's flash.
    pub(crate) fn new(
        state: &SettingsState,
        t: Tr,
        who: Option<&LoggedIn>,
        current: &str,
    ) -> Chrome {
        let flash = who.and_then(|w| state.sessions.take_flash(&w.cookie));
        let title_key = NAV
            .iter()
            .find(|(href, _)| *href == current)
            .map_or("settings.title", |(_, key)| key);
        Chrome {
            t,
            csrf: who.map(|w| w.session.csrf.clone()).unwrap_or_default(),
            nav: if who.is_some() {
                NAV.iter()
                    .map(|(href, key)| NavItem {
                        href,
                        label: t.get(key),
                        current: *href == current,
                    })
                    .collect()
            } else {
                Vec::new()
            },
            langs: Lang::ALL
                .iter()
                .map(|l| LangOption {
                    tag: l.tag(),
                    name: l.native_name(),
                    selected: *l == t.lang(),
                })
                .collect(),
            flash,
            back: current.to_owned(),
            title: t.get(title_key).to_owned(),
        }
    }

    /// The same chrome with another page title.
    pub(crate) fn with_title(mut self, title: String) -> Chrome {
        self.title = title;
        self
    }
}

/// The page rendered as HTML (500 with a plain message if the template fails).
pub(crate) fn render(page: &impl Template) -> Response {
    match page.render() {
        Ok(html) => Html(html).into_response(),
        Err(error) => {
            tracing::warn!(%error, "a settings page did not render");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal.error: the page did not render; see the daemon's log",
            )
                .into_response()
        }
    }
}

/// A 303 redirect to `to` (a settings path).
pub(crate) fn see_other(to: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(to) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// Redirect back after a change, leaving `flash` for the next page.
pub(crate) fn done(state: &SettingsState, change: &Change, to: &str, flash: Flash) -> Response {
    state.sessions.set_flash(&change.who.cookie, flash);
    see_other(to)
}

/// A flash saying the change was made.
pub(crate) fn ok_flash(text: String) -> Flash {
    Flash {
        ok: true,
        text,
        code: None,
        remediation: None,
    }
}

/// A flash showing `error` (code, message, remediation).
pub(crate) fn error_flash(error: &GatewayError) -> Flash {
    Flash {
        ok: false,
        text: error.message.clone(),
        code: Some(error.code.to_owned()),
        remediation: Some(error.remediation.clone()),
    }
}

#[derive(Template)]
#[template(path = "settings/error.html")]
struct ErrorPage {
    chrome: Chrome,
    status: u16,
    code: String,
    message: String,
    remediation: String,
}

/// `text` as HTML: every character escaped, and each `` `code` `` span (as remediations write
/// commands) in a `<code>` element. What templates print with `|safe` after this, and only
/// this.
pub(crate) fn rich(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for (i, part) in text.split('`').enumerate() {
        // An odd count of backticks leaves the last part outside a span.
        let inside = i % 2 == 1 && text.split('`').count() > i + 1;
        if inside {
            out.push_str("<code>");
        } else if i > 0 && i % 2 == 1 {
            out.push('`');
        }
        for c in part.chars() {
            match c {
                '&' => out.push_str("&amp;"),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                '"' => out.push_str("&quot;"),
                '\'' => out.push_str("&#39;"),
                c => out.push(c),
            }
        }
        if inside {
            out.push_str("</code>");
        }
    }
    out
}

/// An error page (`status`) showing the error's code, message and remediation.
pub(crate) fn error_page(t: Tr, status: StatusCode, error: &GatewayError) -> Response {
    // As `/v1` logs its refusals: a line per refused settings request (the message is redacted
    // by the log's formatter like every other).
    tracing::info!(
        code = error.code,
        status = status.as_u16(),
        "settings request refused"
    );
    let page = ErrorPage {
        chrome: Chrome {
            t,
            csrf: String::new(),
            nav: Vec::new(),
            langs: Vec::new(),
            flash: None,
            back: "/settings/status".into(),
            title: t.get("settings.error.title").to_owned(),
        },
        status: status.as_u16(),
        code: error.code.to_owned(),
        message: error.message.clone(),
        remediation: error.remediation.clone(),
    };
    let mut response = render(&page);
    *response.status_mut() = status;
    response
}

/// Anything else under `/settings`.
pub(crate) async fn not_found(t: Tr) -> Response {
    error_page(
        t,
        StatusCode::NOT_FOUND,
        &GatewayError::new(
            codes::REQUEST_NOT_FOUND,
            "there is no such settings page",
            "Use the navigation of the settings page.",
        ),
    )
}

/// `GET /settings`: the Status page.
pub(crate) async fn home() -> Response {
    see_other("/settings/status")
}

// === assets ===

/// `GET /settings/assets/{name}`: the embedded style sheet and script.
pub(crate) async fn asset(Path(name): Path<String>, t: Tr) -> Response {
    let (body, kind): (&'static str, &'static str) = match name.as_str() {
        "settings.css" => (
            include_str!("assets/settings.css"),
            "text/css; charset=utf-8",
        ),
        "settings.js" => (
            include_str!("assets/settings.js"),
            "text/javascript; charset=utf-8",
        ),
        _ => return not_found(t).await,
    };
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

// === login ===

#[derive(Template)]
#[template(path = "settings/login.html")]
struct LoginPage {
    chrome: Chrome,
    error: Option<(String, String, String)>,
}

/// `GET /settings/login`: the code form (the script fills it from `#code=` and submits it).
pub(crate) async fn login_page(State(state): State<SettingsState>, t: Tr) -> Response {
    render(&LoginPage {
        chrome: Chrome::new(&state, t, None, "/settings/login"),
        error: None,
    })
}

/// `POST /settings/login`: redeem the code for a session cookie.
pub(crate) async fn login(
    State(state): State<SettingsState>,
    t: Tr,
    request: axum::extract::Request,
) -> Response {
    let fields = match read_form(request, t).await {
        Ok(fields) => fields,
        Err(response) => return response,
    };
    let code = fields
        .iter()
        .find(|(k, _)| k == "code")
        .map_or("", |(_, v)| v.as_str())
        .to_owned();
    let codes = state.codes.clone();
    let redeemed = tokio::task::spawn_blocking(move || codes.redeem(&code))
        .await
        .unwrap_or_else(|_| {
            Err(GatewayError::new(
                codes::INTERNAL,
                "the login did not finish",
                "Retry with a new code.",
            ))
        });
    if let Err(error) = redeemed {
        tracing::info!(code = error.code, "settings login refused");
        let mut response = render(&LoginPage {
            chrome: Chrome::new(&state, t, None, "/settings/login"),
            error: Some((error.code.to_owned(), error.message, error.remediation)),
        });
        *response.status_mut() = StatusCode::FORBIDDEN;
        return response;
    }
    let (cookie, _) = match state.sessions.create() {
        Ok(created) => created,
        Err(message) => {
            return error_page(
                t,
                StatusCode::INTERNAL_SERVER_ERROR,
                &GatewayError::new(codes::INTERNAL, message, "Retry with a new code."),
            );
        }
    };
    let mut response = see_other("/settings/status");
    let value = format!(
        "{}={cookie}; HttpOnly; SameSite=Strict; Path=/settings; Max-Age={}",
        session::COOKIE,
        session::ABSOLUTE.as_secs()
    );
    if let Ok(value) = HeaderValue::from_str(&value) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// `POST /settings/logout`: end the session.
pub(crate) async fn logout(State(state): State<SettingsState>, change: Change) -> Response {
    state.sessions.end(&change.who.cookie);
    let mut response = see_other("/settings/login");
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "rag_settings=; HttpOnly; SameSite=Strict; Path=/settings; Max-Age=0",
        ),
    );
    response
}

/// `POST /settings/language`: remember the menu's language in a cookie, back to the page.
pub(crate) async fn language(change: Change) -> Response {
    let lang = Lang::from_tag(change.field("lang")).unwrap_or(Lang::En);
    let back = change.field("back");
    let back = if back.starts_with("/settings/")
        && !back.contains("//")
        && !back.contains("..")
        && !back.contains('\\')
        && back.bytes().all(|b| b.is_ascii_graphic())
    {
        back
    } else {
        "/settings/status"
    };
    let mut response = see_other(back);
    let value = format!(
        "{LANG_COOKIE}={}; SameSite=Strict; Path=/settings; Max-Age=31536000",
        lang.tag()
    );
    if let Ok(value) = HeaderValue::from_str(&value) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

// === status ===

#[derive(Template)]
#[template(path = "settings/status.html")]
struct StatusPage {
    chrome: Chrome,
    view: crate::engine::SettingsStatus,
}

/// `GET /settings/status`.
pub(crate) async fn status(State(state): State<SettingsState>, t: Tr, who: LoggedIn) -> Response {
    let view = state.gateway.settings_status(&state.listening).await;
    render(&StatusPage {
        chrome: Chrome::new(&state, t, Some(&who), "/settings/status"),
        view,
    })
}

// === mappings ===

#[derive(Template)]
#[template(path = "settings/mappings.html")]
struct MappingsPage {
    chrome: Chrome,
    view: crate::engine::MappingsView,
}

/// `GET /settings/mappings`.
pub(crate) async fn mappings(State(state): State<SettingsState>, t: Tr, who: LoggedIn) -> Response {
    let gateway = state.gateway.clone();
    let view = match tokio::task::spawn_blocking(move || gateway.mappings_view()).await {
        Ok(Ok(view)) => view,
        Ok(Err(error)) => return error_page(t, StatusCode::SERVICE_UNAVAILABLE, &error),
        Err(_) => return internal(t),
    };
    render(&MappingsPage {
        chrome: Chrome::new(&state, t, Some(&who), "/settings/mappings"),
        view,
    })
}

/// Run a blocking engine call off the async workers.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, GatewayError> + Send + 'static,
) -> Result<T, GatewayError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|_| {
        Err(GatewayError::new(
            codes::INTERNAL,
            "the change did not finish",
            "Retry; the daemon's log says what went wrong.",
        ))
    })
}

/// The 500 page.
pub(crate) fn internal(t: Tr) -> Response {
    error_page(
        t,
        StatusCode::INTERNAL_SERVER_ERROR,
        &GatewayError::new(
            codes::INTERNAL,
            "the page could not be made",
            "Retry; the daemon's log says what went wrong.",
        ),
    )
}

/// `POST /settings/mappings/confirm` (`id`): the proposal checked and written to config.toml.
pub(crate) async fn confirm_proposal(
    State(state): State<SettingsState>,
    change: Change,
) -> Response {
    let id = change.field("id").to_owned();
    let gateway = state.gateway.clone();
    let flash = match blocking(move || gateway.confirm_proposal(&id)).await {
        Ok(confirmed) => ok_flash(change.t.with2(
            "settings.mappings.confirmed",
            ("project", &confirmed.mapping.project_path),
            ("ref", &confirmed.mapping.default_ref),
        )),
        Err(error) => error_flash(&error),
    };
    done(&state, &change, "/settings/mappings", flash)
}

/// `POST /settings/mappings/reject` (`id`): the proposal forgotten.
pub(crate) async fn reject_proposal(
    State(state): State<SettingsState>,
    change: Change,
) -> Response {
    let id = change.field("id").to_owned();
    let gateway = state.gateway.clone();
    let flash = match blocking(move || gateway.reject_proposal(&id)).await {
        Ok(()) => ok_flash(change.t.get("settings.mappings.rejected").to_owned()),
        Err(error) => error_flash(&error),
    };
    done(&state, &change, "/settings/mappings", flash)
}

/// `POST /settings/mappings/remove` (`origin`, `project`).
pub(crate) async fn remove_mapping(State(state): State<SettingsState>, change: Change) -> Response {
    let (origin, project) = (
        change.field("origin").to_owned(),
        change.field("project").to_owned(),
    );
    let gateway = state.gateway.clone();
    let shown = project.clone();
    let flash = match blocking(move || gateway.remove_mapping(&origin, &project)).await {
        Ok(()) => ok_flash(change.t.with("settings.mappings.removed", "project", shown)),
        Err(error) => error_flash(&error),
    };
    done(&state, &change, "/settings/mappings", flash)
}

/// `POST /settings/mappings/default-ref` (`origin`, `project`, `ref`): checked to resolve.
pub(crate) async fn set_default_ref(
    State(state): State<SettingsState>,
    change: Change,
) -> Response {
    let origin = change.field("origin").to_owned();
    let project = change.field("project").to_owned();
    let default_ref = change.field("ref").to_owned();
    let gateway = state.gateway.clone();
    let shown = (project.clone(), default_ref.clone());
    let flash =
        match blocking(move || gateway.set_default_ref(&origin, &project, &default_ref)).await {
            Ok(()) => ok_flash(change.t.with2(
                "settings.mappings.ref_set",
                ("project", &shown.0),
                ("ref", &shown.1),
            )),
            Err(error) => error_flash(&error),
        };
    done(&state, &change, "/settings/mappings", flash)
}

/// `POST /settings/mappings/origins/add` (`origin`).
pub(crate) async fn add_origin(State(state): State<SettingsState>, change: Change) -> Response {
    let origin = change.field("origin").to_owned();
    let gateway = state.gateway.clone();
    let shown = origin.clone();
    let flash = match blocking(move || gateway.add_allowed_origin(&origin)).await {
        Ok(true) => ok_flash(
            change
                .t
                .with("settings.mappings.origin_added", "origin", shown),
        ),
        Ok(false) => ok_flash(
            change
                .t
                .with("settings.mappings.origin_already", "origin", shown),
        ),
        Err(error) => error_flash(&error),
    };
    done(&state, &change, "/settings/mappings", flash)
}

/// `POST /settings/mappings/origins/remove` (`origin`).
pub(crate) async fn remove_origin(State(state): State<SettingsState>, change: Change) -> Response {
    let origin = change.field("origin").to_owned();
    let gateway = state.gateway.clone();
    let shown = origin.clone();
    let flash = match blocking(move || gateway.remove_allowed_origin(&origin)).await {
        Ok(()) => ok_flash(
            change
                .t
                .with("settings.mappings.origin_removed", "origin", shown),
        ),
        Err(error) => error_flash(&error),
    };
    done(&state, &change, "/settings/mappings", flash)
}

// === runs ===

/// A run as the Runs page lists it (also what the live list sends, as JSON).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunRow {
    run_id: String,
    kind: String,
    state: String,
    stage: String,
    subject: String,
    findings: u32,
    created_at: String,
    updated_at: String,
    error: String,
}

impl RunRow {
    fn of(run: &RunRecord) -> RunRow {
        let target = &run.request["target"];
        let subject = match (
            target["projectPath"].as_str(),
            target["mergeRequestIid"].as_u64(),
            run.request["tool"].as_str(),
            run.request["sessionId"].as_str(),
        ) {
            (Some(project), Some(iid), _, _) => format!("{project} !{iid}"),
            (Some(project), None, _, _) => project.to_owned(),
            (_, _, Some(tool), _) => tool.to_owned(),
            (_, _, _, Some(session)) => session.to_owned(),
            _ => String::new(),
        };
        RunRow {
            run_id: run.run_id.clone(),
            kind: wire_name(&run.kind),
            state: wire_name(&run.state),
            stage: run.stage.as_ref().map(wire_name).unwrap_or_default(),
            subject,
            findings: run.finding_count,
            created_at: run.created_at.clone(),
            updated_at: run.updated_at.clone(),
            error: run
                .error
                .as_ref()
                .map(|e| e.code.clone())
                .unwrap_or_default(),
        }
    }
}

/// How many runs the Runs page lists.
const RUN_ROWS: usize = 100;

#[derive(Template)]
#[template(path = "settings/runs.html")]
struct RunsPage {
    chrome: Chrome,
    rows: Vec<RunRow>,
}

/// `GET /settings/runs`: the newest runs; the script keeps the list live.
pub(crate) async fn runs(State(state): State<SettingsState>, t: Tr, who: LoggedIn) -> Response {
    let gateway = state.gateway.clone();
    let rows = match blocking(move || gateway.recent_runs(RUN_ROWS)).await {
        Ok(runs) => runs.iter().map(RunRow::of).collect(),
        Err(error) => return error_page(t, StatusCode::SERVICE_UNAVAILABLE, &error),
    };
    render(&RunsPage {
        chrome: Chrome::new(&state, t, Some(&who), "/settings/runs"),
        rows,
    })
}

/// `GET /settings/runs/live`: SSE, one `runs` event (the rows as JSON) now and after every
/// change of the store's runs (at most one per 250 ms).
pub(crate) async fn runs_live(
    State(state): State<SettingsState>,
    _who: LoggedIn,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let pace = Pace {
        coalesce: Duration::from_millis(250),
        at_least_every: None,
    };
    live_snapshots(&state, "runs", pace, |gateway| async move {
        let runs = blocking(move || gateway.recent_runs(RUN_ROWS)).await.ok()?;
        let rows: Vec<RunRow> = runs.iter().map(RunRow::of).collect();
        serde_json::to_string(&rows).ok()
    })
}

/// How [`live_snapshots`] waits between two looks.
pub(crate) struct Pace {
    /// After a change of the store, how long to let a burst of commits settle (a review
    /// stores its events in groups).
    pub(crate) coalesce: Duration,
    /// Look again after this long even without a change (what the store does not see).
    pub(crate) at_least_every: Option<Duration>,
}

/// An SSE stream of `name` events whose data is `snapshot`'s answer: one now, then one after
/// each change of the store's runs ([`Gateway::runs_changed`], paced by `pace`) whose snapshot
/// differs from the last one sent. A snapshot that fails (`None`: the store failing) keeps
/// what was sent and is tried again a second later. Ends when the daemon stops; comments keep
/// the connection alive every 15 s.
pub(crate) fn live_snapshots<F, Fut>(
    state: &SettingsState,
    name: &'static str,
    pace: Pace,
    snapshot: F,
) -> Sse<impl Stream<Item = Result<Event, Infallible>> + use<F, Fut>>
where
    F: Fn(crate::engine::Gateway) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Option<String>> + Send,
{
    let gateway = state.gateway.clone();
    let changes = gateway.runs_changed();
    let stop = state.stop.clone();
    let snapshot = std::sync::Arc::new(snapshot);
    let stream = futures_util::stream::unfold(
        (gateway, changes, None::<String>),
        move |(gateway, mut changes, last)| {
            let (stop, snapshot) = (stop.clone(), snapshot.clone());
            async move {
                loop {
                    if last.is_some() {
                        let every = pace.at_least_every.unwrap_or(Duration::from_secs(86_400));
                        tokio::select! {
                            changed = changes.changed() => if changed.is_err() { return None },
                            () = tokio::time::sleep(every) => {}
                            () = stop.cancelled() => return None,
                        }
                        tokio::time::sleep(pace.coalesce).await;
                        changes.borrow_and_update();
                    }
                    let Some(data) = snapshot(gateway.clone()).await else {
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                            () = stop.cancelled() => return None,
                        }
                    };
                    if last.as_deref() == Some(data.as_str()) {
                        continue;
                    }
                    let event = Event::default().event(name).data(data.clone());
                    return Some((Ok(event), (gateway, changes, Some(data))));
                }
            }
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// One event as the run page's timeline shows it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EventRow {
    seq: u64,
    #[serde(rename = "type")]
    kind: String,
    at: String,
    summary: String,
    /// A tool call's redacted input or output preview (as the event carries it, draft §10), a
    /// warning's remediation; empty otherwise.
    detail: String,
}

impl EventRow {
    fn of(event: &AgentEvent) -> EventRow {
        use crate::protocol::event::EventPayload;
        let detail = match &event.payload {
            EventPayload::ToolStarted(started) => started.input.to_string(),
            EventPayload::ToolCompleted(done) => done.output_preview.clone().unwrap_or_default(),
            EventPayload::Warning(warning) => warning.remediation.clone().unwrap_or_default(),
            _ => String::new(),
        };
        EventRow {
            seq: event.seq,
            kind: event.event_type().to_owned(),
            at: event.at.clone(),
            summary: crate::report::event_summary(event),
            detail: clip(&detail, 2000),
        }
    }
}

/// `text` cut to at most `max` characters, with `…` when cut.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// Findings of one file, for the run page.
pub(crate) struct FileFindings {
    path: String,
    findings: Vec<FindingRow>,
}

/// One finding, for the run page.
pub(crate) struct FindingRow {
    lines: String,
    severity: String,
    title: String,
    rule: String,
    status: String,
}

#[derive(Template)]
#[template(path = "settings/run.html")]
struct RunPage {
    chrome: Chrome,
    row: RunRow,
    stages: Vec<(String, String)>,
    events: Vec<EventRow>,
    files: Vec<FileFindings>,
    last_seq: u64,
    /// Says how many findings are shown of how many, when not all are; empty otherwise.
    findings_cut: String,
    live: bool,
    resumable: bool,
    truncated: bool,
}

/// The most events the run page renders (the rest: `runs show --events`).
const RUN_EVENTS: usize = 2000;

/// `GET /settings/runs/{run_id}`: the timeline (stages, tool calls, warnings), findings by file,
/// cancel and resume; the script follows the run live.
pub(crate) async fn run(
    State(state): State<SettingsState>,
    Path(run_id): Path<String>,
    t: Tr,
    who: LoggedIn,
) -> Response {
    let gateway = state.gateway.clone();
    let id = run_id.clone();
    let (record, events) = match blocking(move || gateway.run_with_events(&id, RUN_EVENTS)).await {
        Ok(found) => found,
        Err(error) if error.code == codes::RUN_NOT_FOUND => {
            return error_page(t, StatusCode::NOT_FOUND, &error);
        }
        Err(error) => return error_page(t, StatusCode::SERVICE_UNAVAILABLE, &error),
    };
    let mut stages: Vec<(String, String)> = Vec::new();
    let mut files: BTreeMap<String, Vec<FindingRow>> = BTreeMap::new();
    for event in &events {
        match &event.payload {
            crate::protocol::event::EventPayload::StageChanged(s) => {
                stages.push((wire_name(&s.stage), event.at.clone()));
            }
            crate::protocol::event::EventPayload::FindingCreated(created) => {
                let f = &created.finding;
                files.entry(f.path.clone()).or_default().push(FindingRow {
                    lines: if f.start_line == f.end_line {
                        f.start_line.to_string()
                    } else {
                        format!("{}–{}", f.start_line, f.end_line)
                    },
                    severity: wire_name(&f.severity),
                    title: f.title.clone(),
                    rule: f.rule_id.clone().unwrap_or_default(),
                    status: wire_name(&f.status),
                });
            }
            _ => {}
        }
    }
    let truncated = events.len() >= RUN_EVENTS;
    let row = RunRow::of(&record);
    let title = t.with("settings.run.title", "run", &record.run_id);
    let page = RunPage {
        chrome: Chrome::new(&state, t, Some(&who), "/settings/runs").with_title(title),
        live: !record.is_finished(),
        resumable: matches!(row.state.as_str(), "interrupted" | "cancelled")
            && matches!(row.kind.as_str(), "review"),
        // Live from the run's last stored event, not the last one rendered: a run longer than
        // the page shows would otherwise replay (and count again) what lies in between.
        last_seq: record.last_seq,
        findings_cut: {
            let shown: usize = files.values().map(Vec::len).sum();
            let total = record.finding_count as usize;
            if shown < total {
                t.with2(
                    "settings.run.findings_cut",
                    ("shown", &shown),
                    ("total", &total),
                )
            } else {
                String::new()
            }
        },
        events: events.iter().map(EventRow::of).collect(),
        files: files
            .into_iter()
            .map(|(path, findings)| FileFindings { path, findings })
            .collect(),
        stages,
        row,
        truncated,
    };
    render(&page)
}

#[derive(Deserialize)]
pub(crate) struct After {
    #[serde(default)]
    after: u64,
}

/// `GET /settings/runs/{run_id}/events?after=SEQ`: SSE, one `event` (an [`EventRow`] as JSON,
/// `id:` its seq) per event of the run after `SEQ`, as they are committed; ends with the run.
pub(crate) async fn run_events(
    State(state): State<SettingsState>,
    Path(run_id): Path<String>,
    Query(after): Query<After>,
    t: Tr,
    _who: LoggedIn,
) -> Response {
    match state.gateway.subscribe(&run_id, after.after) {
        Ok(events) => {
            let stop = state.stop.clone().cancelled_owned();
            let stream = events.take_until(stop).map(|event| {
                let row = EventRow::of(&event);
                Ok::<_, Infallible>(
                    Event::default()
                        .id(row.seq.to_string())
                        .event("event")
                        .data(serde_json::to_string(&row).unwrap_or_default()),
                )
            });
            Sse::new(stream)
                .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
                .into_response()
        }
        Err(error) => error_page(t, StatusCode::NOT_FOUND, &error),
    }
}

/// `POST /settings/runs/{run_id}/cancel`.
pub(crate) async fn cancel_run(
    State(state): State<SettingsState>,
    Path(run_id): Path<String>,
    change: Change,
) -> Response {
    let to = format!("/settings/runs/{}", url_segment(&run_id));
    let flash = match state
        .gateway
        .cancel(&run_id, Some("cancelled on the settings page".into()))
    {
        Ok(_) => ok_flash(change.t.get("settings.run.cancelled").to_owned()),
        Err(error) => error_flash(&error),
    };
    done(&state, &change, &to, flash)
}

/// `POST /settings/runs/{run_id}/resume`.
pub(crate) async fn resume_run(
    State(state): State<SettingsState>,
    Path(run_id): Path<String>,
    change: Change,
) -> Response {
    let gateway = state.gateway.clone();
    let id = run_id.clone();
    let (to, flash) = match blocking(move || gateway.resume(&id)).await {
        Ok(view) => (
            format!("/settings/runs/{}", url_segment(&view.run_id)),
            ok_flash(change.t.get("settings.run.resumed").to_owned()),
        ),
        Err(error) => (
            format!("/settings/runs/{}", url_segment(&run_id)),
            error_flash(&error),
        ),
    };
    done(&state, &change, &to, flash)
}

/// A run id as a path segment: ids are `run_<ULID>`; anything else is dropped to `_`.
fn url_segment(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

// === token ===

#[derive(Template)]
#[template(path = "settings/token.html")]
struct TokenPage {
    chrome: Chrome,
    token: String,
    port: u16,
}

/// `GET /settings/token`: the token for the userscript's fallbacks, and how to give it.
pub(crate) async fn token(State(state): State<SettingsState>, t: Tr, who: LoggedIn) -> Response {
    let path = state.token_file.clone();
    let token = match blocking(move || {
        crate::security::Token::load(&path)
            .map(|t| t.expose_secret().to_owned())
            .map_err(GatewayError::from)
    })
    .await
    {
        Ok(token) => token,
        Err(error) => return error_page(t, StatusCode::SERVICE_UNAVAILABLE, &error),
    };
    render(&TokenPage {
        chrome: Chrome::new(&state, t, Some(&who), "/settings/token"),
        token,
        port: state.port,
    })
}

/// `POST /settings/token/rotate`: a new token; clients holding the old one are refused from now.
pub(crate) async fn rotate_token(State(state): State<SettingsState>, change: Change) -> Response {
    let path = state.token_file.clone();
    let flash = match blocking(move || {
        crate::security::Token::rotate(&path)
            .map(|token| crate::logging::add_secret(token.expose_secret()))
            .map_err(GatewayError::from)
    })
    .await
    {
        Ok(()) => ok_flash(change.t.get("settings.token.rotated").to_owned()),
        Err(error) => error_flash(&error),
    };
    done(&state, &change, "/settings/token", flash)
}

#[cfg(test)]
mod tests {
    use super::rich;

    #[test]
    fn rich_text_escapes_everything_and_marks_code() {
        assert_eq!(rich("Run `a <b>` now"), "Run <code>a &lt;b&gt;</code> now");
        assert_eq!(
            rich("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(rich("odd ` tick"), "odd ` tick");
        assert_eq!(
            rich("`<img src=x onerror=y>`"),
            "<code>&lt;img src=x onerror=y&gt;</code>"
        );
        assert_eq!(rich(""), "");
    }
}
