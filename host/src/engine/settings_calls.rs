//! What the settings page (issue 18, `crate::settings`) reads and changes, as engine calls: the
//! Status page's facts, mappings and their proposals, runs with their events. The command line
//! reaches the same changes through the same library functions (`config::confirm_proposal`,
//! `config::remove_mapping`, `config::set_default_ref`).

use std::path::PathBuf;

use tokio::sync::watch;

use super::Gateway;
use crate::config::{Confirmed, Mapping};
use crate::error::{GatewayError, codes};
use crate::protocol::AgentEvent;
use crate::protocol::capability::{ProviderStatus, StoreStatus};
use crate::store::{MappingProposal, RunRecord, StoreError};

/// The Status page (issue 18 §2): what the gateway is and whether its parts work. Plain
/// strings, as shown.
#[derive(Debug, Clone)]
pub struct SettingsStatus {
    /// This gateway's version.
    pub gateway_version: String,
    /// The protocol version it speaks (draft §14).
    pub protocol_version: String,
    /// Seconds since the daemon started.
    pub uptime_seconds: u64,
    /// Where the daemon listens, e.g. `http://127.0.0.1:4317`.
    pub listening: Vec<String>,
    /// The config file in force.
    pub config_path: String,
    /// `config.invalid`'s message when the file on disk does not check (the daemon runs on
    /// the last valid one); empty when it is fine.
    pub config_error: String,
    /// What to do about `config_error`.
    pub config_remediation: String,
    /// The store's state directory.
    pub state_dir: String,
    /// The store's failure (disk full, …); empty when it works.
    pub store_error: String,
    /// Each provider's health.
    pub providers: Vec<ProviderRow>,
    /// The sandbox mode in force: `landlock` or `unconfined`.
    pub sandbox_mode: String,
    /// The Landlock ABI, when confined; what the kernel lacks, when it cannot confine.
    pub sandbox_detail: String,
    /// Every installed host manifest, as `doctor` inspects it (without starting the host).
    pub native_hosts: Vec<NativeHostRow>,
    /// The tools enabled (`/v1/tools`).
    pub tools: Vec<String>,
}

/// One provider on the Status and Providers pages.
#[derive(Debug, Clone)]
pub struct ProviderRow {
    /// The `[[providers]]` id.
    pub id: String,
    /// `openai-compatible` or `anthropic`.
    pub kind: String,
    /// `ready`, `unavailable` or `not_configured`.
    pub status: String,
    /// What to do when it is not ready.
    pub remediation: String,
}

/// One installed host manifest.
#[derive(Debug, Clone)]
pub struct NativeHostRow {
    /// Browser and scope, e.g. `Chromium (user)`.
    pub label: String,
    /// The manifest file.
    pub path: String,
    /// What `doctor` found wrong (`code: message`); empty when it is valid.
    pub problems: Vec<String>,
}

/// The Mappings page (issue 18 §2).
#[derive(Debug, Clone)]
pub struct MappingsView {
    /// The config file the mappings are in.
    pub config_path: String,
    /// The confirmed mappings.
    pub mappings: Vec<Mapping>,
    /// Proposals from pages not confirmed yet, oldest first.
    pub proposals: Vec<ProposalRow>,
    /// The config's `allowed_origins` (removable on the page).
    pub configured_origins: Vec<String>,
    /// The origins of confirmed mappings not in `allowed_origins` (allowed by their mapping).
    pub mapping_origins: Vec<String>,
}

/// A pending proposal, with what stands in its way.
#[derive(Debug, Clone)]
pub struct ProposalRow {
    /// As stored.
    pub proposal: MappingProposal,
    /// The local path of a confirmed mapping of the same project to another path (it must be
    /// removed first); empty when there is none.
    pub conflict: String,
}

impl Gateway {
    /// The facts of the Status page; `listening` as the server bound them.
    pub async fn settings_status(&self, listening: &[String]) -> SettingsStatus {
        let health = self.health().await;
        let config = self.config();
        let sandbox = crate::sandbox::Sandbox::current(config.sandbox.mode).status();
        let native_hosts = tokio::task::spawn_blocking(native_hosts)
            .await
            .unwrap_or_default();
        SettingsStatus {
            gateway_version: health.gateway_version,
            protocol_version: health.protocol_version,
            uptime_seconds: health.uptime_seconds,
            listening: listening.to_vec(),
            config_path: self.config_path().display().to_string(),
            config_error: health
                .config
                .as_ref()
                .and_then(|c| c.error.as_ref())
                .map(|e| format!("{}: {}", e.code, e.message))
                .unwrap_or_default(),
            config_remediation: health
                .config
                .and_then(|c| c.error)
                .map(|e| e.remediation)
                .unwrap_or_default(),
            state_dir: self.inner.store.dir().display().to_string(),
            store_error: match health.store {
                Some(store) if store.status != StoreStatus::Ok => store
                    .error
                    .map(|e| format!("{}: {}", e.code, e.message))
                    .unwrap_or_else(|| "unavailable".into()),
                _ => String::new(),
            },
            providers: health
                .providers
                .into_iter()
                .map(|p| ProviderRow {
                    id: p.id,
                    kind: p.kind,
                    status: crate::report::wire_name(&p.status),
                    remediation: p.remediation.unwrap_or_else(|| match p.status {
                        ProviderStatus::Ready => String::new(),
                        _ => "Open the Providers page: Test it, or set its key there.".into(),
                    }),
                })
                .collect(),
            sandbox_mode: sandbox.mode.to_owned(),
            sandbox_detail: match (sandbox.landlock_abi, sandbox.missing) {
                (_, Some(missing)) => missing,
                (Some(abi), None) => format!("Landlock ABI {abi}"),
                (None, None) => String::new(),
            },
            native_hosts,
            tools: self.tools().into_iter().map(|t| t.name).collect(),
        }
    }

    /// The gateway's state directory (the store's directory: token, login codes, logs).
    pub fn state_dir(&self) -> PathBuf {
        self.inner.store.dir().to_owned()
    }

    /// The config file the daemon follows (edits there apply without a restart).
    pub fn config_path(&self) -> PathBuf {
        self.inner.config.path.clone()
    }

    /// The Mappings page's data.
    ///
    /// # Errors
    /// `store.unavailable` when the proposals cannot be read.
    pub fn mappings_view(&self) -> Result<MappingsView, GatewayError> {
        let config = self.config();
        let proposals = self
            .inner
            .store
            .mapping_proposals()?
            .into_iter()
            .filter_map(|p| {
                let existing = config.find_mapping(&p.gitlab_origin, &p.project_path);
                match existing {
                    Some(m) if crate::config::same_path(&m.local_path, &p.local_path) => None,
                    Some(m) => Some(ProposalRow {
                        conflict: m.local_path.display().to_string(),
                        proposal: p,
                    }),
                    None => Some(ProposalRow {
                        proposal: p,
                        conflict: String::new(),
                    }),
                }
            })
            .collect();
        Ok(MappingsView {
            config_path: self.config_path().display().to_string(),
            mappings: config.mappings.clone(),
            proposals,
            mapping_origins: self
                .allowed_origins()
                .into_iter()
                .filter(|o| !config.allowed_origins.contains(o))
                .collect(),
            configured_origins: config.allowed_origins.clone(),
        })
    }

    /// Confirm proposal `id` into the config file (DESIGN §6: the user confirms locally), then
    /// forget the proposal.
    ///
    /// # Errors
    /// `request.invalid` for an unknown id; what [`crate::config::confirm_proposal`] returns.
    pub fn confirm_proposal(&self, id: &str) -> Result<Confirmed, GatewayError> {
        let proposal = self.proposal(id)?;
        let confirmed = crate::config::confirm_proposal(&self.config_path(), &proposal)?;
        self.inner.store.remove_mapping_proposal(id)?;
        Ok(confirmed)
    }

    /// Forget proposal `id` without mapping anything.
    ///
    /// # Errors
    /// `request.invalid` for an unknown id; `store.unavailable`.
    pub fn reject_proposal(&self, id: &str) -> Result<(), GatewayError> {
        if self.inner.store.remove_mapping_proposal(id)? {
            Ok(())
        } else {
            Err(unknown_proposal(id))
        }
    }

    /// Remove the confirmed mapping of `origin` + `project` from the config file.
    ///
    /// # Errors
    /// `repository.not_mapped` when there is none; `config.*`.
    pub fn remove_mapping(&self, origin: &str, project: &str) -> Result<(), GatewayError> {
        let path = self.config_path();
        if crate::config::remove_mapping(&path, origin, project)? {
            Ok(())
        } else {
            Err(not_mapped(origin, project))
        }
    }

    /// Set the default ref of the mapping of `origin` + `project`, checked to resolve in its
    /// repository.
    ///
    /// # Errors
    /// `repository.not_mapped`; `repository.revision_missing` when the ref does not resolve;
    /// `config.*`.
    pub fn set_default_ref(
        &self,
        origin: &str,
        project: &str,
        default_ref: &str,
    ) -> Result<(), GatewayError> {
        let config = self.config();
        let mapping = config
            .find_mapping(origin, project)
            .ok_or_else(|| not_mapped(origin, project))?;
        crate::config::checked_default_ref(
            &mapping.local_path,
            Some(default_ref),
            "the default ref",
        )
        .map_err(|mut error| {
            if error.code == codes::REPOSITORY_REVISION_MISSING {
                error.remediation = format!(
                    "Give a branch, tag or commit that exists in {} (fetch it there first), then \
                     save again; the mapping keeps `{}` meanwhile.",
                    mapping.local_path.display(),
                    mapping.default_ref
                );
            }
            error
        })?;
        let path = self.config_path();
        if crate::config::set_default_ref(&path, origin, project, default_ref)? {
            Ok(())
        } else {
            Err(not_mapped(origin, project))
        }
    }

    /// Allow pages of `origin` to call the gateway (`allowed_origins` in config.toml); `false`
    /// when it was allowed already (nothing is written).
    ///
    /// # Errors
    /// `config.invalid` for a value that is no origin; `config.*` when the file cannot be read,
    /// checked or written.
    pub fn add_allowed_origin(&self, origin: &str) -> Result<bool, GatewayError> {
        let given = origin.trim().trim_end_matches('/');
        if let Err(why) = crate::config::normalize_origin(given) {
            return Err(GatewayError::new(
                codes::CONFIG_INVALID,
                format!("`{}` is not an origin: {why}", origin.trim()),
                "Give the GitLab instance's origin: scheme, host and an optional port, no path \
                 (https://gitlab.example.com, http://gitlab.local:8080).",
            ));
        }
        Ok(crate::config::add_allowed_origin(
            &self.config_path(),
            given,
        )?)
    }

    /// Stop allowing `origin` through `allowed_origins` (a confirmed mapping of it still
    /// allows it).
    ///
    /// # Errors
    /// `request.invalid` when it is not in `allowed_origins`; `config.*`.
    pub fn remove_allowed_origin(&self, origin: &str) -> Result<(), GatewayError> {
        if crate::config::remove_allowed_origin(&self.config_path(), origin)? {
            Ok(())
        } else {
            Err(GatewayError::new(
                codes::REQUEST_INVALID,
                format!("`{origin}` is not in allowed_origins"),
                "Reload the Mappings page; an origin allowed by a mapping goes with the mapping.",
            ))
        }
    }

    fn proposal(&self, id: &str) -> Result<MappingProposal, GatewayError> {
        self.inner
            .store
            .mapping_proposals()?
            .into_iter()
            .find(|p| p.id == id)
            .ok_or_else(|| unknown_proposal(id))
    }

    /// The newest `limit` runs, newest first.
    ///
    /// # Errors
    /// `store.unavailable`.
    pub fn recent_runs(&self, limit: usize) -> Result<Vec<RunRecord>, GatewayError> {
        Ok(self.inner.store.list_runs(limit)?)
    }

    /// Run `run_id` and its first `limit` stored events.
    ///
    /// # Errors
    /// `run.not_found`; `store.unavailable`.
    pub fn run_with_events(
        &self,
        run_id: &str,
        limit: usize,
    ) -> Result<(RunRecord, Vec<AgentEvent>), GatewayError> {
        let record = self.inner.store.get_run(run_id)?.ok_or_else(|| {
            GatewayError::from(StoreError::NotFound {
                run_id: run_id.to_owned(),
            })
        })?;
        let events = self.inner.store.events_after(run_id, 0, limit)?;
        Ok((record, events))
    }

    /// A receiver that changes whenever a run is created or changed, or events are stored (the
    /// live Runs page).
    pub fn runs_changed(&self) -> watch::Receiver<u64> {
        self.inner.store.changes()
    }
}

/// Every installed host manifest, inspected as `doctor` does but without starting the host.
fn native_hosts() -> Vec<NativeHostRow> {
    use installer::{Browser, Scope};
    let Ok(env) = installer::Environment::detect(None) else {
        return Vec::new();
    };
    let Ok(expected) = installer::ids_with_defaults::<&str>(&[]) else {
        return Vec::new();
    };
    let reports = installer::doctor::inspect(
        &env,
        &installer::doctor::DoctorOptions {
            browsers: &Browser::ALL,
            scopes: &[Scope::User, Scope::System],
            expected: &expected,
            probe_host: false,
            hello_timeout: std::time::Duration::from_secs(1),
        },
    )
    .unwrap_or_default();
    reports
        .into_iter()
        .map(|r| NativeHostRow {
            label: r.location.label(),
            path: r.manifest_path.display().to_string(),
            problems: r
                .problems
                .iter()
                .map(|p| format!("{}: {}", p.code, p.message))
                .collect(),
        })
        .collect()
}

fn unknown_proposal(id: &str) -> GatewayError {
    GatewayError::new(
        codes::REQUEST_INVALID,
        format!("no pending mapping proposal `{id}`"),
        "Reload the Mappings page: the proposal was confirmed or rejected already.",
    )
}

fn not_mapped(origin: &str, project: &str) -> GatewayError {
    GatewayError::new(
        codes::REPOSITORY_NOT_MAPPED,
        format!("there is no mapping of {origin} {project}"),
        "Reload the Mappings page to see the mappings in force.",
    )
}
