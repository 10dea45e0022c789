//! The engine's side of an incremental review (issue 17; `scope.sinceCommit` and
//! `scope.previousRunId`, this gateway's additions to the draft, additive per draft §14): the
//! request's fields checked against the repository and the store before the run starts, so a
//! wrong one is the request's error (400/404), not a failed run. The review itself is
//! [`crate::review::incremental`].

use super::{Gateway, invalid};
use crate::config::Mapping;
use crate::error::GatewayError;
use crate::protocol::{EventPayload, ReviewFinding, ReviewRequest, RunKind, RunState};
use crate::repo::Repository;
use crate::review::ReviewOptions;

impl Gateway {
    /// Fills `options.since` and `options.carry_over` from `request.scope`.
    ///
    /// # Errors
    /// `request.invalid`: `sinceCommit` not 40 or 64 hex digits; `previousRunId` without
    /// `sinceCommit`; a previous run that is not a completed review, is of another project,
    /// or reviewed another head than `sinceCommit`. `repository.revision_missing` when the
    /// repository lacks `sinceCommit` (or the previous run's head); `repository.not_found`;
    /// `run.not_found` for a previous run that is not stored (purged after the retention).
    pub(super) fn incremental_options(
        &self,
        request: &ReviewRequest,
        mapping: &Mapping,
        options: &mut ReviewOptions,
    ) -> Result<(), GatewayError> {
        let Some(scope) = &request.scope else {
            return Ok(());
        };
        let since = match (&scope.since_commit, &scope.previous_run_id) {
            (None, None) => return Ok(()),
            (None, Some(_)) => {
                return Err(invalid(
                    "`scope.previousRunId` needs `scope.sinceCommit`: the head the previous \
                     run reviewed"
                        .into(),
                ));
            }
            (Some(since), _) => since,
        };
        let hex = since.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex || !(since.len() == 40 || since.len() == 64) {
            return Err(invalid(format!(
                "`scope.sinceCommit` must be a full commit SHA (40 or 64 hex digits), got `{}`",
                since.chars().take(80).collect::<String>()
            )));
        }
        let repo = Repository::open(&mapping.local_path)?;
        let since_id = repo
            .resolve(since)
            .map_err(|e| in_field("scope.sinceCommit", e.into()))?
            .id;
        options.since = Some(since.to_ascii_lowercase());
        let Some(previous_id) = &scope.previous_run_id else {
            return Ok(());
        };
        let record = self.record(previous_id)?;
        if record.kind != RunKind::Review || record.state != RunState::Completed {
            return Err(invalid(format!(
                "`scope.previousRunId`: run {previous_id} is a {} run that is {}; name a \
                 completed review",
                serde_json::to_value(record.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                serde_json::to_value(record.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            )));
        }
        let previous: ReviewRequest =
            serde_json::from_value(record.request.clone()).map_err(|e| {
                invalid(format!(
                    "the stored request of {previous_id} is not valid: {e}"
                ))
            })?;
        let config = self.config();
        let same_project = config
            .find_mapping(
                &previous.target.gitlab_origin,
                &previous.target.project_path,
            )
            .is_some_and(|m| {
                m.gitlab_origin == mapping.gitlab_origin && m.project_path == mapping.project_path
            });
        if !same_project {
            return Err(invalid(format!(
                "`scope.previousRunId`: run {previous_id} reviewed another project ({} {})",
                previous.target.gitlab_origin, previous.target.project_path
            )));
        }
        let previous_head = &previous.target.diff_refs.head_sha;
        let previous_head_id = repo
            .resolve(previous_head)
            .map_err(|e| in_field("scope.previousRunId", e.into()))?
            .id;
        if previous_head_id != since_id {
            return Err(invalid(format!(
                "`scope.previousRunId`: run {previous_id} reviewed head {previous_head}, not \
                 `scope.sinceCommit` {since}"
            )));
        }
        options.carry_over = self.findings_of(previous_id)?;
        Ok(())
    }

    /// Every finding `run_id` emitted, in order.
    ///
    /// # Errors
    /// `store.unavailable`.
    fn findings_of(&self, run_id: &str) -> Result<Vec<ReviewFinding>, GatewayError> {
        let mut findings = Vec::new();
        let mut cursor = 0;
        loop {
            let batch = self.inner.store.events_after(run_id, cursor, 1024)?;
            let Some(last) = batch.last() else {
                return Ok(findings);
            };
            cursor = last.seq;
            findings.extend(batch.into_iter().filter_map(|e| match e.payload {
                EventPayload::FindingCreated(created) => Some(created.finding),
                _ => None,
            }));
        }
    }
}

/// `error` with its message prefixed by the request field it is about.
fn in_field(field: &str, error: GatewayError) -> GatewayError {
    GatewayError::new(
        error.code,
        format!("`{field}`: {}", error.message),
        error.remediation,
    )
}
