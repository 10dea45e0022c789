//! The Providers page (issue 18 §2): each `[[providers]]` entry's settings and health, a Test
//! button (one fresh probe, [`crate::engine::Gateway::test_provider`]), and a provider's key
//! stored or deleted through the library functions `providers set-key|delete-key` use
//! ([`crate::security::secrets::set_key`], [`crate::security::secrets::delete_key`]).
//!
//! **Invariant:** the key is never shown back, logged, or put in a flash or an error: the form
//! field goes straight to the engine, and only where it was stored comes back.

use askama::Template;
use axum::extract::State;
use axum::response::Response;

use super::pages::{Chrome, done, error_flash, ok_flash, render};
use super::session::Flash;
use super::{Change, LoggedIn, SettingsState, Tr};
use crate::engine::{ProviderTest, ProvidersView};
use crate::error::{GatewayError, codes};
use crate::protocol::capability::ProviderStatus;
use crate::security::secrets::KeySource;

/// The page's path.
pub(crate) const PAGE: &str = "/settings/providers";

#[derive(Template)]
#[template(path = "settings/providers.html")]
struct ProvidersPage {
    chrome: Chrome,
    view: ProvidersView,
}

/// `GET /settings/providers`.
pub(crate) async fn providers(
    State(state): State<SettingsState>,
    t: Tr,
    who: LoggedIn,
) -> Response {
    let view = state.gateway.providers_view().await;
    render(&ProvidersPage {
        chrome: Chrome::new(&state, t, Some(&who), PAGE),
        view,
    })
}

/// Back to the page, at the provider's section.
fn back_to(id: &str) -> String {
    if !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        format!("{PAGE}#provider-{id}")
    } else {
        PAGE.to_owned()
    }
}

/// `POST /settings/providers/test` (`id`): one probe now; its answer replaces the cached
/// health.
pub(crate) async fn test(State(state): State<SettingsState>, change: Change) -> Response {
    let id = change.field("id").to_owned();
    let flash = match state.gateway.test_provider(&id).await {
        Ok(test) => test_flash(change.t, &test, None),
        Err(error) => error_flash(&error),
    };
    done(&state, &change, &back_to(&id), flash)
}

/// `POST /settings/providers/key` (`id`, `key`): stored in the OS keyring, else the 0600 key
/// file; then probed.
pub(crate) async fn set_key(State(state): State<SettingsState>, change: Change) -> Response {
    let id = change.field("id").to_owned();
    // The field as sent (not trimmed here): the library decides what is a key.
    let key = change
        .fields
        .iter()
        .find(|(k, _)| k == "key")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let t = change.t;
    let flash = match state.gateway.set_provider_key(&id, key).await {
        Ok((set, test)) => {
            let mut stored = match &set.source {
                KeySource::File(path) => t.with2(
                    "settings.providers.stored_file",
                    ("id", &id),
                    ("path", &path.display()),
                ),
                _ => t.with("settings.providers.stored_keyring", "id", &id),
            };
            if set.keyring_unavailable.is_some() {
                stored.push(' ');
                stored.push_str(t.get("settings.providers.no_keyring"));
            }
            if let Some(env) = &set.env_override {
                stored.push(' ');
                stored.push_str(&t.with("settings.providers.env_wins", "name", env));
            }
            test_flash(t, &test, Some(stored))
        }
        Err(error) => error_flash(&error),
    };
    done(&state, &change, &back_to(&id), flash)
}

/// `POST /settings/providers/delete-key` (`id`): removed from the OS keyring and the key file;
/// then probed.
pub(crate) async fn delete_key(State(state): State<SettingsState>, change: Change) -> Response {
    let id = change.field("id").to_owned();
    let t = change.t;
    let flash = match state.gateway.delete_provider_key(&id).await {
        Ok((deleted, test)) => {
            let mut text = match (&deleted.deleted.file, deleted.deleted.keyring) {
                (Some(path), _) => t.with2(
                    "settings.providers.deleted_file",
                    ("id", &id),
                    ("path", &path.display()),
                ),
                (None, true) => t.with("settings.providers.deleted_keyring", "id", &id),
                (None, false) => t.with("settings.providers.nothing_stored", "id", &id),
            };
            if let Some(env) = &deleted.env_still_set {
                text.push(' ');
                text.push_str(&t.with("settings.providers.env_still", "name", env));
            }
            // Deleting was asked for: what the provider is without the key is news, not an
            // error.
            let status = test_flash(t, &test, None).text;
            ok_flash(format!("{text} {status}"))
        }
        Err(error) => error_flash(&error),
    };
    done(&state, &change, &back_to(&id), flash)
}

/// The flash of a probe: `ok` when ready, else the status as an error with what to do;
/// `before` (what was changed) leads the text.
fn test_flash(t: Tr, test: &ProviderTest, before: Option<String>) -> Flash {
    let lead = before.map(|b| format!("{b} ")).unwrap_or_default();
    match test.status {
        ProviderStatus::Ready => ok_flash(format!(
            "{lead}{}",
            t.with2(
                "settings.providers.test_ready",
                ("id", &test.id),
                ("ms", &test.elapsed_ms)
            )
        )),
        status => {
            let (code, key, remediation) = match status {
                ProviderStatus::NotConfigured => (
                    codes::PROVIDER_NOT_CONFIGURED,
                    "settings.providers.test_not_configured",
                    "settings.providers.fix_not_configured",
                ),
                _ => (
                    codes::PROVIDER_UNAVAILABLE,
                    "settings.providers.test_unavailable",
                    "settings.providers.fix_unavailable",
                ),
            };
            error_flash(&GatewayError::new(
                code,
                format!("{lead}{}", t.with(key, "id", &test.id)),
                t.get(remediation).to_owned(),
            ))
        }
    }
}
