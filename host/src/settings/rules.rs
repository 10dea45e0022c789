//! The Rules page (issue 18 §2): the rule sets a review runs with, their versions and where
//! they come from, each rule with its examples ([`crate::engine::Gateway::rules_view`]); and a
//! box that tries one rule set on a pasted snippet as if a merge request added it as a file
//! ([`crate::engine::Gateway::try_rule_set`]). The try box is a CSRF-checked POST whose answer
//! is the page itself with the result (nothing is changed, so nothing to redirect after).

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::pages::{Chrome, blocking, internal, render};
use super::{Change, LoggedIn, SettingsState, Tr};
use crate::engine::RulesView;
use crate::error::codes;

/// The page's path.
pub(crate) const PAGE: &str = "/settings/rules";

/// The try box's fields, as sent (shown again with the result).
#[derive(Debug, Default)]
pub(crate) struct TryForm {
    set: String,
    path: String,
    snippet: String,
}

/// What the try box found, as shown.
pub(crate) struct Tried {
    heading: String,
    rules_applying: usize,
    matches: Vec<TriedMatch>,
}

/// One match, as shown.
pub(crate) struct TriedMatch {
    line: u32,
    end_line: u32,
    rule_id: String,
    severity: String,
    title: String,
    text: String,
}

#[derive(Template)]
#[template(path = "settings/rules.html")]
struct RulesPage {
    chrome: Chrome,
    view: RulesView,
    form: TryForm,
    tried: Option<Tried>,
    try_error: Option<(String, String, String)>,
}

impl RulesPage {
    /// The catalogue key naming a rule set's source.
    fn source_key(&self, source: &str) -> &'static str {
        match source {
            "builtin" => "settings.rules.source_builtin",
            "config_dir" => "settings.rules.source_config_dir",
            "rules_dirs" => "settings.rules.source_rules_dirs",
            "repository" => "settings.rules.source_repository",
            _ => "settings.rules.source_local",
        }
    }

    /// "N rules" of a rule set.
    fn rule_count(&self, set: &crate::engine::RuleSetRow) -> String {
        self.chrome.t.count(
            "settings.rules.rule_count",
            u64::try_from(set.rules.len()).unwrap_or(u64::MAX),
        )
    }

    /// The catalogue key naming a rule's kind.
    fn kind_key(&self, kind: &str) -> &'static str {
        match kind {
            "syntax" => "settings.rules.kind_syntax",
            _ => "settings.rules.kind_line",
        }
    }
}

async fn view(state: &SettingsState) -> Option<RulesView> {
    let gateway = state.gateway.clone();
    blocking(move || Ok(gateway.rules_view())).await.ok()
}

/// `GET /settings/rules`.
pub(crate) async fn rules(State(state): State<SettingsState>, t: Tr, who: LoggedIn) -> Response {
    let Some(view) = view(&state).await else {
        return internal(t);
    };
    let form = TryForm {
        set: view
            .sets
            .iter()
            .find(|s| s.id == "security-default")
            .or(view.sets.first())
            .map(|s| s.id.clone())
            .unwrap_or_default(),
        path: "app.py".into(),
        snippet: String::new(),
    };
    render(&RulesPage {
        chrome: Chrome::new(&state, t, Some(&who), PAGE),
        view,
        form,
        tried: None,
        try_error: None,
    })
}

/// `POST /settings/rules/try` (`set`, `path`, `snippet`): the page with what the rule set
/// flags in the snippet, or the error (400) above the form.
pub(crate) async fn try_rules(State(state): State<SettingsState>, change: Change) -> Response {
    let t = change.t;
    // The snippet as sent: its leading and trailing lines count for the line numbers.
    let snippet = change
        .fields
        .iter()
        .find(|(k, _)| k == "snippet")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let form = TryForm {
        set: change.field("set").to_owned(),
        path: change.field("path").to_owned(),
        snippet,
    };
    let gateway = state.gateway.clone();
    let (set, path, text) = (form.set.clone(), form.path.clone(), form.snippet.clone());
    let outcome = blocking(move || gateway.try_rule_set(&set, &path, &text)).await;
    let Some(view) = view(&state).await else {
        return internal(t);
    };
    let (tried, try_error, status) = match outcome {
        Ok(tried) => (
            Some(Tried {
                heading: t.with2(
                    "settings.rules.try_result",
                    ("set", &format!("{}@{}", tried.rule_set, tried.version)),
                    ("path", &tried.path),
                ),
                rules_applying: tried.rules_applying,
                matches: tried
                    .matches
                    .into_iter()
                    .map(|m| TriedMatch {
                        line: m.line,
                        end_line: m.end_line,
                        rule_id: m.rule_id,
                        severity: crate::report::wire_name(&m.severity),
                        title: m.title,
                        text: m.text,
                    })
                    .collect(),
            }),
            None,
            StatusCode::OK,
        ),
        Err(error) => {
            let status = if error.code == codes::INTERNAL {
                StatusCode::INTERNAL_SERVER_ERROR
            } else {
                StatusCode::BAD_REQUEST
            };
            (
                None,
                Some((error.code.to_owned(), error.message, error.remediation)),
                status,
            )
        }
    };
    // A snippet over the cap is not shown again (the form keeps what fits).
    let mut form = form;
    if try_error.is_some() && form.snippet.len() > view.max_snippet_bytes {
        form.snippet = String::new();
    }
    let mut response = render(&RulesPage {
        chrome: Chrome::new(&state, t, Some(&change.who), PAGE),
        view,
        form,
        tried,
        try_error,
    });
    *response.status_mut() = status;
    response
}
