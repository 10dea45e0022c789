//! Dismissals (issue 17; this gateway's addition to the draft, additive per draft §14): the
//! user dismisses a finding's fingerprint for a GitLab project, and later reviews of that
//! project mark a finding with that fingerprint `"status": "dismissed"` (a client hides it).
//!
//! `GET|POST|DELETE /v1/dismissals` call [`Gateway::dismissals`], [`Gateway::dismiss`] and
//! [`Gateway::undismiss`] on every transport. A dismissal is keyed by the project's mapping
//! (its normalized origin and project path, so `https://GitLab.example.com/` and
//! `https://gitlab.example.com` are one project) and the fingerprint; a project that is not
//! mapped has none (`repository.not_mapped`), like a review of it.

use std::collections::HashSet;

use serde::Serialize;

use super::{Gateway, invalid, not_mapped};
use crate::error::{GatewayError, codes};
use crate::protocol::{DismissRequest, Dismissal, UndismissRequest};
use crate::store::{DismissalPut, MAX_DISMISSALS_PER_PROJECT};

/// Most characters of a dismissal's `reason` (and of its `ruleId`, `path` and `title`).
pub const MAX_DISMISSAL_TEXT_CHARS: usize = 500;

/// `data` of `GET /v1/dismissals`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DismissalList {
    /// The project's dismissals, newest first.
    pub dismissals: Vec<Dismissal>,
}

/// `data` of `POST /v1/dismissals`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Dismissed {
    /// The stored dismissal (the earlier one when `created` is false).
    pub dismissal: Dismissal,
    /// False when the fingerprint was already dismissed for the project.
    pub created: bool,
}

/// `data` of `DELETE /v1/dismissals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Undismissed {
    /// Whether a dismissal was removed (false: there was none).
    pub removed: bool,
}

/// The project a dismissal belongs to: the mapping's normalized origin and project path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct ProjectKey {
    pub(super) origin: String,
    pub(super) project: String,
}

impl Gateway {
    /// `GET /v1/dismissals?gitlabOrigin=…&projectPath=…`: the project's dismissals, newest
    /// first (at most [`MAX_DISMISSALS_PER_PROJECT`]).
    ///
    /// # Errors
    /// `request.invalid` for an empty origin or project path; `repository.not_mapped` when the
    /// project is not mapped for that origin; `store.unavailable`.
    pub fn dismissals(
        &self,
        gitlab_origin: &str,
        project_path: &str,
    ) -> Result<DismissalList, GatewayError> {
        let key = self.project_key(gitlab_origin, project_path)?;
        Ok(DismissalList {
            dismissals: self.inner.store.dismissals(&key.origin, &key.project)?,
        })
    }

    /// `POST /v1/dismissals`: remember that the finding with `request.fingerprint` is dismissed
    /// for the project. Idempotent: a fingerprint already dismissed answers the stored row
    /// with `created: false` (its reason is not replaced).
    ///
    /// # Errors
    /// `request.invalid` for a fingerprint that is not `sha256:` + 64 lower-case hex digits, a
    /// `reason`, `ruleId`, `path` or `title` over 500 characters, an empty origin or project;
    /// `repository.not_mapped`; `dismissal.limit_reached` when the project holds 10 000
    /// dismissals; `store.unavailable`.
    pub fn dismiss(&self, request: DismissRequest) -> Result<Dismissed, GatewayError> {
        check_fingerprint(&request.fingerprint)?;
        for (name, value) in [
            ("reason", &request.reason),
            ("ruleId", &request.rule_id),
            ("path", &request.path),
            ("title", &request.title),
        ] {
            if let Some(value) = value
                && value.chars().count() > MAX_DISMISSAL_TEXT_CHARS
            {
                return Err(invalid(format!(
                    "`{name}` is {} characters long; at most {MAX_DISMISSAL_TEXT_CHARS} are kept",
                    value.chars().count()
                )));
            }
        }
        let key = self.project_key(&request.gitlab_origin, &request.project_path)?;
        self.store_writable()?;
        let dismissal = Dismissal {
            fingerprint: request.fingerprint,
            reason: request.reason,
            rule_id: request.rule_id,
            path: request.path,
            title: request.title,
            dismissed_at: crate::review::now_rfc3339(),
        };
        match self.inner.store.put_dismissal(
            &key.origin,
            &key.project,
            &dismissal,
            MAX_DISMISSALS_PER_PROJECT,
        )? {
            DismissalPut::Created(dismissal) => Ok(Dismissed {
                dismissal,
                created: true,
            }),
            DismissalPut::Existing(dismissal) => Ok(Dismissed {
                dismissal,
                created: false,
            }),
            DismissalPut::Full => Err(GatewayError::new(
                codes::DISMISSAL_LIMIT_REACHED,
                format!(
                    "the project {} {} already has {MAX_DISMISSALS_PER_PROJECT} dismissed \
                     findings, the most the gateway keeps per project",
                    key.origin, key.project
                ),
                "Remove dismissals that no longer matter (DELETE /v1/dismissals; GET \
                 /v1/dismissals lists them, newest first), then dismiss again.",
            )),
        }
    }

    /// `DELETE /v1/dismissals`: forget the dismissal of `request.fingerprint` for the project;
    /// `removed: false` when there was none (not an error: the end state is the one asked for).
    ///
    /// # Errors
    /// `request.invalid` for a malformed fingerprint or an empty origin or project;
    /// `repository.not_mapped`; `store.unavailable`.
    pub fn undismiss(&self, request: UndismissRequest) -> Result<Undismissed, GatewayError> {
        check_fingerprint(&request.fingerprint)?;
        let key = self.project_key(&request.gitlab_origin, &request.project_path)?;
        self.store_writable()?;
        let removed =
            self.inner
                .store
                .remove_dismissal(&key.origin, &key.project, &request.fingerprint)?;
        Ok(Undismissed { removed })
    }

    /// The mapped project named by `gitlab_origin` and `project_path`, as its mapping spells
    /// them.
    ///
    /// # Errors
    /// `request.invalid` for an empty field; `repository.not_mapped`.
    pub(super) fn project_key(
        &self,
        gitlab_origin: &str,
        project_path: &str,
    ) -> Result<ProjectKey, GatewayError> {
        for (name, value) in [
            ("gitlabOrigin", gitlab_origin),
            ("projectPath", project_path),
        ] {
            if value.trim().is_empty() {
                return Err(invalid(format!("`{name}` is empty")));
            }
        }
        let config = self.config();
        let mapping = config
            .find_mapping(gitlab_origin, project_path)
            .ok_or_else(|| not_mapped(gitlab_origin, project_path))?;
        Ok(ProjectKey {
            origin: mapping.gitlab_origin.clone(),
            project: mapping.project_path.clone(),
        })
    }

    /// The fingerprints dismissed for `key`, for marking a run's findings. A store that
    /// cannot be read gives none (logged): the findings are then shown, not lost.
    pub(super) fn dismissed_set(&self, key: &ProjectKey) -> HashSet<String> {
        match self.inner.store.dismissals(&key.origin, &key.project) {
            Ok(rows) => rows.into_iter().map(|d| d.fingerprint).collect(),
            Err(error) => {
                tracing::warn!(%error, "could not read the dismissals; findings are not marked");
                HashSet::new()
            }
        }
    }
}

/// `Ok` for `sha256:` followed by 64 lower-case hex digits, the form of every finding's
/// fingerprint (DESIGN §5).
///
/// # Errors
/// `request.invalid` naming the expected form.
pub(super) fn check_fingerprint(fingerprint: &str) -> Result<(), GatewayError> {
    let ok = fingerprint.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    });
    if ok {
        Ok(())
    } else {
        Err(GatewayError::new(
            codes::REQUEST_INVALID,
            format!(
                "`fingerprint` must be `sha256:` followed by 64 lower-case hex digits (a \
                 finding's `fingerprint`), got `{}`",
                fingerprint.chars().take(80).collect::<String>()
            ),
            "Send the `fingerprint` of the finding.created event unchanged.",
        ))
    }
}
