//! The Gateway engine (DESIGN §2, §3, §5): runs, their durable event logs, idempotency,
//! concurrency limits, cancellation and resume. Transports call it; it knows no transport.
//!
//! **Invariant:** an event is committed to the store before any subscriber can see it.
//! Subscribers never receive events from memory: they read the store by cursor and are woken
//! by a per-run `watch` channel carrying the last committed `seq`, so a slow subscriber costs
//! the daemon nothing but its cursor (no unbounded buffers).
//!
//! Decisions:
//! - **Excess reviews queue.** Over `maxConcurrentReviews`, a new run emits
//!   `stage.changed {stage: "queued"}` and waits for a slot (it can be cancelled while it
//!   waits); nothing is refused, so a page that fires several reviews gets them all.
//! - **Resume re-runs the deterministic stages** from `resolve` with the run's own sequence
//!   continuing, and never re-emits a finding whose fingerprint the run already emitted.
//! - **Shutdown** waits a few seconds for running reviews to finish (rules reviews take well
//!   under a second); what still runs then is marked `interrupted`, resumable after restart.
//! - **Dismissals mark, they do not hide** (issue 17, `engine/dismissals.rs`): a review
//!   reads its project's dismissed fingerprints when its task starts, and a finding with one
//!   is emitted with `status: dismissed` (the client hides it) and counted in
//!   `run.completed`'s `dismissedCount`; a cache replay marks by the dismissals at replay
//!   time. A dismissal made while a run goes applies from the next run.
//! - **Incremental reviews are checked up front** (`engine/incremental.rs`):
//!   `scope.sinceCommit` must resolve and `scope.previousRunId` name a completed review of the
//!   same project at that commit before the run is created, so a wrong field is the request's
//!   400/404.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use futures_util::Stream;
use serde::Serialize;
use tokio::sync::{Notify, Semaphore, watch};

use crate::chat::ChatOptions;
use crate::config::ProviderConfig;
use crate::config::{Config, LoadedConfig};
use crate::conversation::Budget as RunBudget;
use crate::error::{GatewayError, codes};
use crate::protocol::{
    AgentEvent, Capabilities, CommandCapabilities, ConfigHealth, ConfigStatus, ErrorObject,
    EventPayload, Health, InterruptReason, Limits, ProviderHealth, ProviderStatus,
    RepositoryMappingRequest, ReviewFinding, ReviewRequest, RuleCapabilities, RunCreated, RunKind,
    RunState, Stage, StageChanged, StoreHealth, StoreStatus,
};
use crate::review::model::ModelReview;
use crate::review::{self, ReviewOptions, RunControl, new_id};
use crate::store::{IdempotencyRecord, MappingProposal, RunRecord, Store, payload_hash};
use crate::tools::Registry;

mod agent_calls;
mod agent_settings;
mod dismissals;
mod incremental;
mod provider_settings;
mod rule_settings;
mod settings_calls;
mod tool_calls;
mod workspace_calls;

pub use agent_calls::{
    AGENT_CALLS, AgentCallSpec, AgentContinueInput, AgentDiff, AgentMessages, AgentMessagesInput,
    AgentPermissions, AgentReplied, AgentReplyInput, AgentSessionInput, AgentSessionSummary,
    AgentStartTaskInput, AgentStatus, AgentTask, Caller, MAX_TASK_BYTES, agent_input_schema,
    agent_output_schema,
};
pub use agent_settings::{
    AgentsView, AuditRow, AuditTail, PermissionRow, RootRow, SessionRow, Snippet, WorkspaceRow,
};
pub use dismissals::{DismissalList, Dismissed, MAX_DISMISSAL_TEXT_CHARS, Undismissed};
pub use provider_settings::{ProviderSettings, ProviderTest, ProvidersView};
pub use rule_settings::{RepositoryRules, RuleRow, RuleSetRow, RulesView, SnippetTried};
pub use settings_calls::{MappingsView, NativeHostRow, ProposalRow, ProviderRow, SettingsStatus};
pub use workspace_calls::{WORKSPACE_OPEN, WorkspaceInfo, WorkspaceOpenInput};

/// How long a provider's health probe is reused.
pub const PROBE_TTL: Duration = Duration::from_secs(10);

/// Protocol version this gateway speaks (draft §14).
pub const PROTOCOL_VERSION: &str = "1.0";

/// Events are committed in groups of at most this many (plus at every stage change and at
/// the end): a group commit, DESIGN §5.
const FLUSH_EVERY: usize = 64;

/// What a transport gets back when it starts a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Started {
    /// The run's id.
    pub run_id: String,
    /// True when the same `requestId` and payload were seen before: this is the existing run
    /// (draft §12), and its events replay from the start.
    pub existing: bool,
}

/// The state of a run, enough to rebuild a UI after a page refresh (draft §9 `GET
/// /v1/runs/:runId`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    /// The run's id.
    pub run_id: String,
    /// The client's `requestId`.
    pub request_id: Option<String>,
    /// `review` or `chat`.
    pub kind: RunKind,
    /// `queued`, `running`, `completed`, `failed`, `cancelled` or `interrupted`.
    pub state: RunState,
    /// The stage the run is in (or ended in).
    pub stage: Option<Stage>,
    /// Stages it finished, in order.
    pub completed_stages: Vec<Stage>,
    /// Every finding emitted so far, in order.
    pub findings: Vec<ReviewFinding>,
    /// Budget used: tool calls and model output tokens (0 without a model provider).
    pub budget: Budget,
    /// The run's error, when it failed.
    pub error: Option<ErrorObject>,
    /// The `seq` of its last stored event: the cursor to resume the event stream from.
    pub last_seq: u64,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// RFC 3339 time of the last change.
    pub updated_at: String,
}

/// Budget used by a run (draft §8 policy limits): tool calls counted from its `tool.started`
/// events, output tokens from its `run.completed` usage (0 until the run completes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// Tool calls made.
    pub tool_calls: u32,
    /// Model output tokens used.
    pub output_tokens: u64,
}

/// A proposal's answer: it waits for local confirmation (DESIGN §6) and never says whether the
/// path exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MappingProposed {
    /// `mapping_<ULID>`, for `review-agent-gateway mappings confirm <id>`.
    pub id: String,
    /// Always `pending`.
    pub status: &'static str,
}

/// The engine. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

struct Inner {
    config: ConfigCell,
    store: Arc<Store>,
    // MCP workspaces (DESIGN §12), their roots those of the config last seen by
    // `Gateway::workspaces` (the `Arc` of that config).
    workspaces: crate::workspace::Workspaces,
    workspace_roots_of: Mutex<Option<Arc<Config>>>,
    live: Mutex<HashMap<String, Arc<LiveRun>>>,
    slots: Arc<Semaphore>,
    started: Instant,
    gateway_version: String,
    accepting: AtomicBool,
    // Invariant: once true, no event is committed any more (shutdown has marked the runs
    // still going `interrupted`); held while committing so the two never interleave.
    halted: Mutex<bool>,
    tools: Registry,
    symbols: std::sync::OnceLock<Arc<crate::tools::SymbolIndex>>,
    // Repository + revision keys of background symbol-indexing jobs running now.
    indexing: Mutex<HashSet<String>>,
    // Provider health by the provider's config (as JSON): the last answer and the probe in
    // flight. Invariant: at most one probe per key runs at a time (`ProbeSlot::in_flight`).
    probes: Mutex<HashMap<String, ProbeSlot>>,
    // The providers' HTTP clients, shared by every run of this process (one runtime).
    clients: crate::providers::ClientPool,
    // Terminal `run.failed` events of runs the store failed under (disk full), by run id,
    // until the store takes them (`settle_pending`). Invariant: each one's seq is its run's
    // stored `lastSeq` + 1 when it was made; subscribers deliver it after the stored events.
    pending: Mutex<HashMap<String, AgentEvent>>,
    // The commands MCP clients started (`process_run`, issue 14 §3): one table per process, so
    // a handle outlives the call that started it; every command is asked to stop at shutdown.
    processes: crate::process::ProcessTable,
    // The delegated agents' executors (issue 15), made on first use; stopped at shutdown.
    executors: crate::delegation::pool::Executors,
    // Replies to agents' permission requests, by request id, until the run's watcher writes
    // its `permission.replied` (who answered, how, and the request itself, for a request the
    // watcher never saw pending).
    agent_replies: Mutex<HashMap<String, agent_calls::AgentReply>>,
}

/// The health probes of one provider configuration (single flight, see [`Gateway::health`]).
#[derive(Default)]
struct ProbeSlot {
    /// When the last probe finished, and its answer.
    last: Option<(Instant, ProviderStatus)>,
    /// The probe running now: its answer is sent here (`None` until it finishes).
    in_flight: Option<watch::Receiver<Option<ProviderStatus>>>,
}

/// Ends a probe: records its answer (`Unavailable` if the probe task died without one), clears
/// the slot's `in_flight` and wakes its waiters — on drop, so no path leaves a slot stuck.
struct ProbeDone {
    gateway: Gateway,
    key: String,
    status: Option<ProviderStatus>,
    tx: watch::Sender<Option<ProviderStatus>>,
    // When the probe started: an answer recorded since (a fresh probe of the settings page's
    // Test button, after a key change) is newer and is kept.
    started: Instant,
}

impl ProbeDone {
    /// Record the probe's answer; dropping `self` then publishes it.
    fn finish(mut self, status: ProviderStatus) {
        self.status = Some(status);
    }
}

impl Drop for ProbeDone {
    fn drop(&mut self) {
        let status = self.status.unwrap_or(ProviderStatus::Unavailable);
        if let Ok(mut probes) = self.gateway.inner.probes.lock() {
            let slot = probes.entry(std::mem::take(&mut self.key)).or_default();
            if slot.last.is_none_or(|(at, _)| at < self.started) {
                slot.last = Some((Instant::now(), status));
            }
            slot.in_flight = None;
        }
        self.tx.send_replace(Some(status));
    }
}

/// A run that has a task: its cancel flag and the channel that announces committed events.
struct LiveRun {
    cancel: Arc<AtomicBool>,
    cancel_token: tokio_util::sync::CancellationToken,
    cancel_reason: Arc<Mutex<Option<String>>>,
    cancelled: Notify,
    // Invariant: holds the seq of the last event committed to the store for this run.
    committed: watch::Sender<u64>,
    // Whether it follows a delegated agent's task (shutdown does not wait for it).
    agent: bool,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").finish_non_exhaustive()
    }
}

impl Gateway {
    /// The engine over `store` with `config`. Runs left `queued`/`running` by a previous
    /// process become `interrupted` (resumable), and event logs older than the retention are
    /// purged.
    ///
    /// # Errors
    /// `store.unavailable` when the store cannot be updated.
    pub fn open(
        config: LoadedConfig,
        store: Store,
        gateway_version: &str,
    ) -> Result<Gateway, GatewayError> {
        let interrupted = store.mark_running_interrupted()?;
        if !interrupted.is_empty() {
            tracing::info!(
                count = interrupted.len(),
                "runs left running by the last process are now interrupted"
            );
        }
        let store = Arc::new(store);
        let roots = crate::workspace::Roots::from_config(config.config());
        // The gateway's own config and state dirs are never a workspace nor inside one.
        let mut private: Vec<std::path::PathBuf> = crate::config::Paths::discover()
            .map(|p| vec![p.config_dir().to_owned(), p.state_dir().to_owned()])
            .unwrap_or_default();
        if let Some(dir) = config.path().parent().filter(|d| !d.as_os_str().is_empty()) {
            private.push(dir.to_owned());
        }
        let workspaces =
            crate::workspace::Workspaces::new(Arc::clone(&store), roots).with_private(&private);
        let gateway = Gateway {
            inner: Arc::new(Inner {
                slots: Arc::new(Semaphore::new(
                    config.config().limits.max_concurrent_reviews.max(1) as usize,
                )),
                config: ConfigCell::new(config),
                store,
                workspaces,
                workspace_roots_of: Mutex::new(None),
                live: Mutex::new(HashMap::new()),
                started: Instant::now(),
                gateway_version: gateway_version.to_owned(),
                accepting: AtomicBool::new(true),
                halted: Mutex::new(false),
                tools: Registry::builtin(),
                symbols: std::sync::OnceLock::new(),
                indexing: Mutex::new(HashSet::new()),
                probes: Mutex::new(HashMap::new()),
                clients: crate::providers::ClientPool::new(),
                pending: Mutex::new(HashMap::new()),
                processes: crate::process::ProcessTable::new(),
                executors: crate::delegation::pool::Executors::new(),
                agent_replies: Mutex::new(HashMap::new()),
            }),
        };
        gateway.purge()?;
        Ok(gateway)
    }

    /// Drop event logs older than the configured retention (24 h by default).
    ///
    /// # Errors
    /// `store.unavailable`.
    pub fn purge(&self) -> Result<usize, GatewayError> {
        let hours = self.config().event_retention_hours;
        let cutoff = time::OffsetDateTime::now_utc() - time::Duration::hours(i64::from(hours));
        let cutoff = cutoff
            .format(&time::format_description::well_known::Rfc3339)
            .map_err(|e| {
                GatewayError::new(
                    codes::INTERNAL,
                    format!("cannot format the retention cutoff: {e}"),
                    "Report this bug.",
                )
            })?;
        Ok(self.inner.store.purge_events_older_than(&cutoff)?)
    }

    /// `GET /v1/health` data (draft §5). Each provider's `status` is real: `not_configured`
    /// when it has no `model` (with a `remediation` naming the key; not probed) or needs a key
    /// it does not have (or its key is refused), else the result of a models listing
    /// (`GET …/models`, 2 s timeout) — `ready` or `unavailable`. Probes of different providers
    /// run concurrently and their results are kept for [`PROBE_TTL`].
    ///
    /// Single flight (issue 12: every request that found the answer stale started its own
    /// probe, 41 in 10 s under load): at most one probe per provider runs at a time, in its own
    /// task. Before a provider's first answer, concurrent callers wait for that one probe; after
    /// it, a caller that finds the answer stale gets it at once while one probe refreshes it in
    /// the background. So health never waits on a provider once it has answered, and polling it
    /// — from any page, health needs no token — costs each provider at most one request (which
    /// carries the user's key) per 10 s.
    ///
    /// `store` says whether the run store can be written (issue 12 §2).
    pub async fn health(&self) -> Health {
        let config = self.config();
        let probes = config.providers.iter().map(|p| {
            let gateway = self.clone();
            let p = p.clone();
            async move {
                // A provider without a model can serve only requests that name one: not
                // ready as configured, and the fix is in config.toml.
                let (status, remediation) = if p.model.is_none() {
                    (
                        ProviderStatus::NotConfigured,
                        Some(format!(
                            "Set `model = \"...\"` in the [[providers]] entry `{}` of \
                             config.toml (the model it serves), or name the model in each \
                             request.",
                            p.id
                        )),
                    )
                } else {
                    (gateway.provider_status(&p).await, None)
                };
                ProviderHealth {
                    id: p.id.clone(),
                    kind: p.kind.as_str().to_owned(),
                    status,
                    remediation,
                }
            }
        });
        // The store: while it is failing, each health request retries a small write (and
        // stores the terminal events kept in memory once it works again).
        let gateway = self.clone();
        let failure = tokio::task::spawn_blocking(move || {
            let failure = gateway.inner.store.probe();
            gateway.settle_pending();
            failure
        })
        .await
        .unwrap_or(None);
        let store = match failure {
            None => StoreHealth {
                status: StoreStatus::Ok,
                error: None,
                since: None,
            },
            Some(failure) => StoreHealth {
                status: StoreStatus::Unavailable,
                error: Some(failure.error.into()),
                since: Some(failure.since),
            },
        };
        Health {
            service: "review-agent-gateway".into(),
            protocol_version: PROTOCOL_VERSION.into(),
            gateway_version: self.inner.gateway_version.clone(),
            uptime_seconds: self.inner.started.elapsed().as_secs(),
            providers: futures_util::future::join_all(probes).await,
            // After `self.config()` above, which re-read a changed file.
            config: Some(self.inner.config.health()),
            store: Some(store),
        }
    }

    /// This gateway's version, e.g. `0.1.0`.
    pub fn gateway_version(&self) -> &str {
        &self.inner.gateway_version
    }

    /// The provider's health: the cached answer while fresh; else the answer of the one probe
    /// in flight (waited for only when there is no earlier answer). See [`Gateway::health`].
    async fn provider_status(&self, config: &ProviderConfig) -> ProviderStatus {
        let key = serde_json::to_string(config).unwrap_or_default();
        let mut wait = {
            let Ok(mut probes) = self.inner.probes.lock() else {
                return ProviderStatus::Unavailable;
            };
            // The hot path (a fresh answer) allocates nothing more.
            if let Some(ProbeSlot {
                last: Some((at, status)),
                ..
            }) = probes.get(&key)
                && at.elapsed() < PROBE_TTL
            {
                return *status;
            }
            let slot = probes.entry(key.clone()).or_default();
            let wait = match &slot.in_flight {
                Some(in_flight) => in_flight.clone(),
                None => {
                    let (tx, rx) = watch::channel(None);
                    slot.in_flight = Some(rx.clone());
                    self.start_probe(config.clone(), key, tx);
                    rx
                }
            };
            if let Some((_, stale)) = slot.last {
                return stale;
            }
            wait
        };
        match wait.wait_for(Option::is_some).await {
            Ok(status) => status.unwrap_or(ProviderStatus::Unavailable),
            Err(_) => ProviderStatus::Unavailable,
        }
    }

    /// Probe `config` in a task of its own (so a caller that goes away does not stop it),
    /// sending the answer to `tx` and into the cache through [`ProbeDone`].
    fn start_probe(
        &self,
        config: ProviderConfig,
        key: String,
        tx: watch::Sender<Option<ProviderStatus>>,
    ) {
        let done = ProbeDone {
            gateway: self.clone(),
            key,
            status: None,
            tx,
            started: Instant::now(),
        };
        tokio::spawn(async move {
            let status = provider_settings::probe_once(&done.gateway, &config).await;
            done.finish(status);
        });
    }

    /// The browser origins allowed to call the gateway (DESIGN §9): the configured
    /// `allowed_origins` plus the GitLab origin of every confirmed mapping (the user named those
    /// explicitly too). Read from the current configuration, so edits apply without a restart.
    pub fn allowed_origins(&self) -> Vec<String> {
        let config = self.config();
        let mut origins = config.allowed_origins.clone();
        origins.extend(config.mappings.iter().map(|m| m.gitlab_origin.clone()));
        origins.sort();
        origins.dedup();
        origins
    }

    /// The host names `/mcp` accepts besides the loopback names (`[mcp] public_hosts`, a
    /// tunnel's; issue 14 §5), from the current configuration (a change needs no restart).
    pub fn mcp_public_hosts(&self) -> Vec<String> {
        self.config().mcp.public_hosts.clone()
    }

    /// `GET /v1/capabilities` data (draft §5), from the real configuration.
    pub fn capabilities(&self) -> Capabilities {
        let config = self.config();
        let limits = &config.limits;
        let mut providers: Vec<String> = config
            .providers
            .iter()
            .map(|p| p.kind.as_str().to_owned())
            .collect();
        providers.sort();
        providers.dedup();
        Capabilities {
            // `dismissals` and `incremental` (issue 17): `/v1/dismissals` and
            // `scope.sinceCommit`/`previousRunId`, for clients to detect.
            runtime: (!config.providers.is_empty())
                .then_some("chat")
                .into_iter()
                .chain(["review", "cancel", "resume", "dismissals", "incremental"])
                .map(str::to_owned)
                .collect(),
            tools: self.enabled_tool_names(&config),
            providers,
            rules: RuleCapabilities {
                custom: true,
                versioning: true,
            },
            commands: CommandCapabilities {
                enabled: config.tools.run_check.enabled,
            },
            limits: Limits {
                max_context_tokens: limits.max_context_tokens,
                max_concurrent_reviews: limits.max_concurrent_reviews,
                max_tool_calls_per_run: limits.max_tool_calls_per_run,
            },
        }
    }

    /// `POST /v1/repository-mappings` (draft §6, DESIGN §6): record a proposal that becomes
    /// active only when the user confirms it locally.
    ///
    /// # Errors
    /// `request.invalid` for empty fields; `store.unavailable`.
    pub fn propose_mapping(
        &self,
        req: RepositoryMappingRequest,
        origin: Option<String>,
    ) -> Result<MappingProposed, GatewayError> {
        for (name, value) in [
            ("gitlabOrigin", &req.gitlab_origin),
            ("projectPath", &req.project_path),
            ("localPath", &req.local_path),
        ] {
            if value.trim().is_empty() {
                return Err(invalid(format!("`{name}` is empty")));
            }
        }
        // Cheap shape checks only: the reply never reveals whether the path exists (DESIGN §6).
        let gitlab_origin = crate::config::normalize_origin(
            req.gitlab_origin
                .strip_suffix('/')
                .unwrap_or(&req.gitlab_origin),
        )
        .map_err(|why| {
            invalid(format!(
                "`gitlabOrigin` is not an origin such as https://gitlab.example.com: {why}"
            ))
        })?;
        if !std::path::Path::new(&req.local_path).is_absolute() {
            return Err(invalid("`localPath` must be an absolute path".into()));
        }
        let project_path = req.project_path.trim_matches('/').to_owned();
        let duplicate = self.inner.store.mapping_proposals()?.into_iter().find(|p| {
            p.gitlab_origin == gitlab_origin
                && p.project_path == project_path
                && p.local_path == req.local_path
        });
        if let Some(existing) = duplicate {
            return Ok(MappingProposed {
                id: existing.id,
                status: "pending",
            });
        }
        let req = RepositoryMappingRequest {
            gitlab_origin,
            project_path,
            ..req
        };
        let proposal = MappingProposal {
            id: new_id("mapping"),
            gitlab_origin: req.gitlab_origin,
            project_path: req.project_path,
            local_path: req.local_path,
            default_ref: req.default_ref,
            proposed_at: review::now_rfc3339(),
            origin,
        };
        self.inner.store.put_mapping_proposal(&proposal)?;
        Ok(MappingProposed {
            id: proposal.id,
            status: "pending",
        })
    }

    /// `POST /v1/reviews` (draft §8): validate, map the project to a local repository, apply
    /// idempotency (draft §12), persist the run, and start it. Stream its events with
    /// [`Gateway::subscribe`].
    ///
    /// # Errors
    /// `request.invalid`, `repository.not_mapped`, `request.id_conflict` (HTTP 409),
    /// `provider.not_configured`, `store.unavailable`, `gateway.shutting_down`.
    pub fn start_review(&self, body: serde_json::Value) -> Result<Started, GatewayError> {
        if !self.inner.accepting.load(Ordering::Relaxed) {
            return Err(shutting_down());
        }
        let request: ReviewRequest = crate::protocol::json::decode("review request", &body)?;
        validate_review(&request)?;
        let options = self.review_options(&request)?;
        let project =
            self.project_key(&request.target.gitlab_origin, &request.target.project_path)?;
        self.store_writable()?;

        let hash = payload_hash(&body);
        let run_id = new_id("run");
        if let Some(existing) = self.idempotency(&request.request_id, &body, &run_id)? {
            return Ok(existing);
        }
        // The review cache (draft §12): same provider, model, commits, normalized request and
        // rule sets → replay the findings of the completed run. A key that cannot be computed
        // (a missing commit, a broken rule file) means no cache: the run reports the error.
        let (provider, model) = match &options.model {
            Some(m) => (m.provider.id().to_owned(), m.model.clone()),
            None => ("builtin".to_owned(), String::new()),
        };
        let cache_key = review::cache_key(&options, &provider, &model, &hash).ok();
        let cached = match &cache_key {
            Some(key) => self.inner.store.cache_get(key)?,
            None => None,
        };
        self.inner.store.create_run(&RunRecord::new(
            run_id.clone(),
            Some(request.request_id.clone()),
            RunKind::Review,
            RunState::Queued,
            body,
            review::now_rfc3339(),
        ))?;
        if let Some(source) = cached
            && self.replay_from_cache(&run_id, &request.request_id, &source, &project)?
        {
            return Ok(Started {
                run_id,
                existing: false,
            });
        }
        let mut control = RunControl::new(run_id.clone());
        control.announce = false;
        self.spawn(
            Job::Review(Box::new(options), project),
            control,
            Some(request.request_id),
            true,
            cache_key,
        );
        Ok(Started {
            run_id,
            existing: false,
        })
    }

    /// Record `body`'s `requestId` (draft §12): `Ok(None)` for a new request (its run gets
    /// `run_id`), `Ok(Some(started))` for the same request seen before.
    ///
    /// # Errors
    /// `request.id_conflict` for the same `requestId` with another payload; `store.unavailable`.
    fn idempotency(
        &self,
        request_id: &str,
        body: &serde_json::Value,
        run_id: &str,
    ) -> Result<Option<Started>, GatewayError> {
        let hash = payload_hash(body);
        let record = IdempotencyRecord {
            request_id: request_id.to_owned(),
            payload_hash: hash.clone(),
            run_id: run_id.to_owned(),
            created_at: review::now_rfc3339(),
        };
        match self.inner.store.idempotency_put_if_absent(&record)? {
            None => Ok(None),
            Some(existing) if existing.payload_hash == hash => Ok(Some(Started {
                run_id: existing.run_id,
                existing: true,
            })),
            Some(_) => Err(GatewayError::new(
                codes::REQUEST_ID_CONFLICT,
                format!("requestId `{request_id}` was already used with a different payload"),
                "Use a new requestId for a different request: a requestId names one request, and \
                 sending it again returns that request's run.",
            )),
        }
    }

    /// `POST /v1/chat` (draft §7): validate, resolve the provider (and, with `toolsEnabled`,
    /// the selection's mapped repository), apply idempotency, persist the run and start it.
    /// Stream its events with [`Gateway::subscribe`].
    ///
    /// # Errors
    /// `request.invalid` (no messages, bad roles), `provider.not_configured` (no such provider,
    /// none given and no `default_provider`, no model name, a provider that needs a key without
    /// one), `repository.not_mapped` (tools enabled on an unmapped project, or no selection to
    /// name one), `repository.revision_missing`, `request.id_conflict`, `store.unavailable`,
    /// `gateway.shutting_down`.
    pub fn start_chat(&self, body: serde_json::Value) -> Result<Started, GatewayError> {
        if !self.inner.accepting.load(Ordering::Relaxed) {
            return Err(shutting_down());
        }
        let request: crate::protocol::ChatRequest =
            crate::protocol::json::decode("chat request", &body)?;
        let options = self.chat_options(&request)?;
        self.store_writable()?;
        let run_id = new_id("run");
        if let Some(existing) = self.idempotency(&request.request_id, &body, &run_id)? {
            return Ok(existing);
        }
        self.inner.store.create_run(&RunRecord::new(
            run_id.clone(),
            Some(request.request_id.clone()),
            RunKind::Chat,
            RunState::Queued,
            body,
            review::now_rfc3339(),
        ))?;
        let mut control = RunControl::new(run_id.clone());
        control.announce = false;
        self.spawn(
            Job::Chat(Box::new(options)),
            control,
            Some(request.request_id),
            true,
            None,
        );
        Ok(Started {
            run_id,
            existing: false,
        })
    }

    fn chat_options(
        &self,
        request: &crate::protocol::ChatRequest,
    ) -> Result<ChatOptions, GatewayError> {
        use crate::protocol::{ChatContext, ChatRole};
        crate::protocol::check_request_id("`requestId`", &request.request_id)?;
        if !request.messages.iter().any(|m| m.role == ChatRole::User) {
            return Err(invalid(
                "`messages` has no user message; send at least one \
                 `{\"role\": \"user\", \"content\": …}`"
                    .into(),
            ));
        }
        if request.messages.last().map(|m| m.role) != Some(ChatRole::User) {
            return Err(invalid(
                "the last of `messages` must be the user's (role `user`)".into(),
            ));
        }
        let config = self.config();
        let (provider, model) = crate::providers::select(
            &config,
            request.provider_id.as_deref(),
            request.model.as_deref(),
            Some(&self.inner.clients),
            crate::error::Surface::Request,
        )?
            .ok_or_else(|| {
                GatewayError::new(
                    codes::PROVIDER_NOT_CONFIGURED,
                    "chat needs a model provider, and the request names none (and the config sets no `default_provider`)",
                    "Send `providerId` (see GET /v1/health for the configured providers), or set `default_provider` in config.toml.",
                )
            })?;
        let selection = request.context.as_ref().map(|c| match c {
            ChatContext::Selection(s) => s.clone(),
        });
        let tools = if request.tools_enabled == Some(true) {
            let selection = selection.as_ref().ok_or_else(|| {
                GatewayError::new(
                    codes::REQUEST_INVALID,
                    "`toolsEnabled` needs a `context` naming the GitLab project whose repository the tools read",
                    "Send `context` with `gitlabOrigin` and `projectPath`, or set `toolsEnabled` to false.",
                )
            })?;
            let mapping = config
                .find_mapping(&selection.gitlab_origin, &selection.project_path)
                .ok_or_else(|| not_mapped(&selection.gitlab_origin, &selection.project_path))?;
            let rev = selection
                .head_sha
                .clone()
                .unwrap_or_else(|| mapping.default_ref.clone());
            // Opened here so a missing revision is the request's error, not the run's.
            crate::tools::ToolContext::open(&mapping.local_path, Some(&rev))?;
            Some(crate::chat::ChatRepository {
                path: mapping.local_path.clone(),
                rev,
                symbols: self.symbol_index(),
            })
        } else {
            None
        };
        Ok(ChatOptions {
            budget: RunBudget::within(
                &config.limits,
                request.max_tool_calls,
                None,
                None,
                provider.as_ref(),
            ),
            provider,
            model,
            messages: request.messages.clone(),
            selection,
            tools,
            runtime: runtime()?,
            request_id: Some(request.request_id.clone()),
            surface: crate::error::Surface::Request,
        })
    }

    /// `POST /v1/runs/:runId/resume` (draft §9): continue an `interrupted`, `cancelled` or
    /// `failed` run with its own event sequence; findings it already emitted are not emitted
    /// again. A run that is still going or completed is returned as it is.
    ///
    /// # Errors
    /// `run.not_found`; `repository.not_mapped` when its mapping was removed meanwhile.
    pub fn resume(&self, run_id: &str) -> Result<RunView, GatewayError> {
        if !self.inner.accepting.load(Ordering::Relaxed) {
            return Err(shutting_down());
        }
        self.store_writable()?;
        if let Some(failed) = self.pending_terminal(run_id) {
            // Its `run.failed` is not stored yet: resuming now would reuse its seq.
            let remediation = match failed.payload {
                EventPayload::RunFailed(failed) => failed.error.remediation,
                _ => "Retry in a moment.".to_owned(),
            };
            return Err(GatewayError::new(
                codes::STORE_UNAVAILABLE,
                format!(
                    "run {run_id} failed because the store could not write, and the store \
                     cannot record that yet"
                ),
                remediation,
            )
            .retryable());
        }
        let record = self.record(run_id)?;
        let resumable = matches!(
            record.state,
            RunState::Interrupted | RunState::Cancelled | RunState::Failed
        );
        if !resumable || self.is_live(run_id) {
            return self.run_view(run_id);
        }
        if record.kind == RunKind::Chat {
            return Err(GatewayError::new(
                codes::RUN_NOT_RESUMABLE,
                format!("run {run_id} is a chat, and chats are not resumed"),
                "Send the chat again (POST /v1/chat) with a new requestId.",
            ));
        }
        if record.kind == RunKind::Tool {
            return Err(GatewayError::new(
                codes::RUN_NOT_RESUMABLE,
                format!("run {run_id} is one MCP tool call, and tool calls are not resumed"),
                "Call the tool again through MCP.",
            ));
        }
        if record.kind == RunKind::Agent {
            // Watch the agent's session again (blocking: transports call this off the
            // runtime's workers).
            runtime()?.block_on(self.resume_agent(&record))?;
            return self.run_view(run_id);
        }
        let request: ReviewRequest = serde_json::from_value(record.request.clone())
            .map_err(|e| invalid(format!("the stored request of {run_id} is not valid: {e}")))?;
        let options = self.review_options(&request)?;
        let project =
            self.project_key(&request.target.gitlab_origin, &request.target.project_path)?;
        self.inner.store.update_run(run_id, |r| {
            r.state = RunState::Queued;
            r.error = None;
            r.finished_at = None;
            r.updated_at = review::now_rfc3339();
        })?;
        let mut control = RunControl::new(run_id.to_owned());
        control.last_seq = record.last_seq;
        control.announce = false;
        control.already_emitted = record
            .emitted_fingerprints
            .iter()
            .cloned()
            .collect::<HashSet<_>>();
        self.spawn(
            Job::Review(Box::new(options), project),
            control,
            record.request_id.clone(),
            false,
            None,
        );
        self.run_view(run_id)
    }

    /// `POST /v1/runs/:runId/cancel` (draft §9): stop the run's work promptly; it ends with
    /// `run.cancelled`. Cancelling a finished run changes nothing.
    ///
    /// # Errors
    /// `run.not_found`.
    pub fn cancel(&self, run_id: &str, reason: Option<String>) -> Result<RunView, GatewayError> {
        self.record(run_id)?;
        if let Some(live) = self.live(run_id) {
            if let Ok(mut slot) = live.cancel_reason.lock() {
                *slot = Some(reason.unwrap_or_else(|| "cancelled".into()));
            }
            live.cancel.store(true, Ordering::Relaxed);
            live.cancel_token.cancel();
            live.cancelled.notify_waiters();
        }
        self.run_view(run_id)
    }

    /// `GET /v1/runs/:runId` (draft §9).
    ///
    /// # Errors
    /// `run.not_found`; `store.unavailable`.
    pub fn run_view(&self, run_id: &str) -> Result<RunView, GatewayError> {
        let record = self.record(run_id)?;
        let mut findings = Vec::new();
        let mut budget = Budget::default();
        let mut cursor = 0;
        loop {
            let batch = self.inner.store.events_after(run_id, cursor, 1024)?;
            let Some(last) = batch.last() else { break };
            cursor = last.seq;
            for event in batch {
                match event.payload {
                    EventPayload::FindingCreated(f) => findings.push(f.finding),
                    EventPayload::ToolStarted(_) => budget.tool_calls += 1,
                    EventPayload::RunCompleted(c) => {
                        if let Some(usage) = c.usage {
                            budget.output_tokens = usage.output_tokens;
                        }
                    }
                    _ => {}
                }
            }
        }
        // A `run.failed` the store could not take yet (disk full) is the run's end already.
        let (mut state, mut error, mut last_seq) = (record.state, record.error, record.last_seq);
        if let Some(pending) = self.pending_terminal(run_id)
            && pending.seq > last_seq
            && let EventPayload::RunFailed(failed) = pending.payload
        {
            state = RunState::Failed;
            error = Some(failed.error);
            last_seq = pending.seq;
        }
        Ok(RunView {
            run_id: record.run_id,
            request_id: record.request_id,
            kind: record.kind,
            state,
            stage: record.stage,
            completed_stages: record.completed_stages,
            findings,
            budget,
            error,
            last_seq,
            created_at: record.created_at,
            updated_at: record.updated_at,
        })
    }

    /// The run's events with `seq > after`, in order, as they are committed; the stream ends
    /// once the stored events are drained and no task runs the run (it finished, or it was
    /// interrupted) — so a run resumed after its `run.cancelled` streams on. Reconnecting with the last seen `seq` yields exactly the
    /// missed events (draft §9).
    ///
    /// # Errors
    /// `run.not_found`.
    pub fn subscribe(
        &self,
        run_id: &str,
        after: u64,
    ) -> Result<impl Stream<Item = AgentEvent> + Send + 'static, GatewayError> {
        self.record(run_id)?;
        let state = Subscription {
            gateway: self.clone(),
            run_id: run_id.to_owned(),
            cursor: after,
            buffer: VecDeque::new(),
            committed: self.live(run_id).map(|l| l.committed.subscribe()),
            done: false,
            last_word: false,
        };
        Ok(futures_util::stream::unfold(state, Subscription::next))
    }

    /// Stop accepting runs, wait up to `grace` for running ones, then stop committing events,
    /// end what still runs with a durable `run.interrupted` (its committed events stay; resume
    /// continues it after a restart) and cancel it, so model streams close and subscriptions
    /// end with that event. The caller then
    /// ends the process without waiting for review threads.
    pub async fn shutdown(&self, grace: Duration) {
        self.inner.accepting.store(false, Ordering::Relaxed);
        // MCP commands (`process_run`) belong to no run: stop them (with everything they
        // started) now; their threads end within the sandbox's kill grace.
        let commands = self.inner.processes.kill_all();
        if commands > 0 {
            tracing::info!(
                commands,
                "shutting down: stopping the commands MCP clients started"
            );
        }
        // A delegated agent's task (issue 15) does not end in a grace period: its run is
        // interrupted at once, and resumed by the next call on its session.
        let finishing = || {
            self.inner
                .live
                .lock()
                .map(|l| l.values().filter(|run| !run.agent).count())
                .unwrap_or_default()
        };
        let running = finishing();
        if running > 0 {
            tracing::info!(
                runs = running,
                grace_ms = grace.as_millis() as u64,
                "shutting down: waiting for running runs"
            );
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && finishing() > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let still = self.live_ids().len();
        if still > 0 {
            tracing::info!(
                runs = still,
                "shutting down: interrupting the runs still going (resume them after a restart)"
            );
        }
        // A run that failed on a full disk records its `run.failed` if the store works again.
        self.settle_pending();
        // From here on no event of a run's task is committed; what still runs gets a durable
        // `run.interrupted` after its last committed event, under the same lock, so a task's
        // last flush either precedes it or is dropped.
        let live = self.live_ids();
        {
            let mut halted = self
                .inner
                .halted
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            *halted = true;
            if let Err(error) = self
                .inner
                .store
                .interrupt_runs(&live, InterruptReason::Shutdown)
            {
                tracing::error!(runs = live.len(), %error, "could not mark the runs interrupted");
            }
        }
        for run_id in live {
            // Stop its work (a model stream is dropped at once); its task then ends, which
            // ends its subscribers' streams, so the server's connections can close.
            if let Some(live) = self.live(&run_id) {
                live.cancel.store(true, Ordering::Relaxed);
                live.cancel_token.cancel();
                live.cancelled.notify_waiters();
            }
        }
        // The agents' servers the gateway started stop with it (their process trees killed).
        let gateway = self.clone();
        let _ = tokio::task::spawn_blocking(move || gateway.inner.executors.stop_all()).await;
    }

    // === internals ===

    /// The current configuration; re-read when the file changed (so `mappings add` on the
    /// command line takes effect without a restart).
    fn config(&self) -> Arc<Config> {
        self.inner.config.current()
    }

    /// Stores the terminal events kept in memory for runs the store failed under (issue 12
    /// §2), oldest run first; each one stored leaves memory. Stops at the first the store
    /// still refuses. One whose seq was taken meanwhile (the run was interrupted at a
    /// shutdown) is dropped: the store's account wins.
    fn settle_pending(&self) {
        let mut pending = self
            .inner
            .pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if pending.is_empty() {
            return;
        }
        let mut run_ids: Vec<String> = pending.keys().cloned().collect();
        run_ids.sort();
        for run_id in run_ids {
            let Some(event) = pending.get(&run_id) else {
                continue;
            };
            match self.inner.store.append_events(std::slice::from_ref(event)) {
                Ok(()) => {
                    tracing::info!(%run_id, seq = event.seq, "stored the run's run.failed now that the store works");
                    pending.remove(&run_id);
                }
                Err(
                    crate::store::StoreError::SeqGap { .. }
                    | crate::store::StoreError::NotFound { .. },
                ) => {
                    tracing::warn!(%run_id, "dropped a run.failed kept in memory: the run's log moved on");
                    pending.remove(&run_id);
                }
                Err(_) => break,
            }
        }
    }

    /// `Ok` when the store can be written (issue 12 §2): no failure, or a probe write that
    /// succeeds now — then the terminal events kept in memory are stored. While the disk is
    /// full no run starts: a small write may still succeed, but the run would fail at its
    /// first batch of events.
    ///
    /// # Errors
    /// `store.unavailable` (retryable) with the failure's remediation.
    fn store_writable(&self) -> Result<(), GatewayError> {
        if let Some(failure) = self.inner.store.probe() {
            return Err(failure.error);
        }
        self.settle_pending();
        Ok(())
    }

    /// The terminal event kept in memory for `run_id`, if any (see [`Gateway::settle_pending`]).
    fn pending_terminal(&self, run_id: &str) -> Option<AgentEvent> {
        self.inner
            .pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(run_id)
            .cloned()
    }

    fn record(&self, run_id: &str) -> Result<RunRecord, GatewayError> {
        self.inner.store.get_run(run_id)?.ok_or_else(|| {
            GatewayError::new(
                codes::RUN_NOT_FOUND,
                format!("no run `{run_id}`"),
                "Check the runId; event logs are kept for the configured retention (24 h by default).",
            )
        })
    }

    fn live(&self, run_id: &str) -> Option<Arc<LiveRun>> {
        self.inner.live.lock().ok()?.get(run_id).cloned()
    }

    fn is_live(&self, run_id: &str) -> bool {
        self.live(run_id).is_some()
    }

    fn live_ids(&self) -> Vec<String> {
        self.inner
            .live
            .lock()
            .map(|l| l.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn review_options(&self, request: &ReviewRequest) -> Result<ReviewOptions, GatewayError> {
        let target = &request.target;
        let config = self.config();
        let model = crate::providers::select(
            &config,
            request.provider_id.as_deref(),
            request.model.as_deref(),
            Some(&self.inner.clients),
            crate::error::Surface::Request,
        )?;
        let mapping = config
            .find_mapping(&target.gitlab_origin, &target.project_path)
            .ok_or_else(|| not_mapped(&target.gitlab_origin, &target.project_path))?;
        let mut options = ReviewOptions::new(
            mapping.local_path.clone(),
            target.diff_refs.base_sha.clone(),
            target.diff_refs.head_sha.clone(),
        );
        options.request_id = Some(request.request_id.clone());
        // The same catalogue as the command line's `review` (review::RuleDirs), and the same
        // analyzers.
        let paths = crate::config::Paths::discover().ok();
        options.rule_dirs =
            crate::review::RuleDirs::of(paths.as_ref(), config.rules_dirs.clone(), Vec::new());
        options.analyzers = paths.as_ref().and_then(|paths| {
            crate::review::analyzers::Analyzers::from_config(
                &config.analyzers,
                &config.sandbox,
                paths,
            )
        });
        options.surface = crate::error::Surface::Request;
        if let Some(scope) = &request.scope {
            options.paths = scope.file_paths.clone().unwrap_or_default();
            // Refused here (400), not by the run: the caps and the glob syntax of the tools.
            review::PathScope::new(&options.paths, &[]).map_err(|e| {
                GatewayError::new(
                    e.code,
                    format!("`scope.filePaths`: {}", e.message),
                    e.remediation,
                )
            })?;
        }
        self.incremental_options(request, mapping, &mut options)?;
        let policy = request.policy.clone().unwrap_or_default();
        options.rule_set_ids = policy.rule_set_ids.clone();
        if let Some(c) = policy.min_confidence {
            options.min_confidence = c;
        }
        if let Some(language) = &policy.language {
            crate::review::model::check_language(language, crate::error::Surface::Request)?;
        }
        if let Some((provider, model)) = model {
            options.model = Some(ModelReview {
                budget: RunBudget::within(
                    &config.limits,
                    policy.max_tool_calls,
                    policy.max_output_tokens,
                    policy.max_context_tokens,
                    provider.as_ref(),
                ),
                provider,
                model,
                language: policy.language.clone(),
                effort: policy.effort.unwrap_or(crate::protocol::Effort::Balanced),
                runtime: runtime()?,
                symbols: Some(self.symbol_index()),
            });
        }
        Ok(options)
    }

    /// Start the task of a run (new or resumed) and register it as live before returning, so a
    /// subscriber that arrives right after sees it.
    fn spawn(
        &self,
        job: Job,
        mut control: RunControl,
        request_id: Option<String>,
        new_run: bool,
        cache_key: Option<String>,
    ) {
        let (committed, _) = watch::channel(control.last_seq);
        let live = Arc::new(LiveRun {
            cancel: control.cancel.clone(),
            cancel_token: control.cancel_token.clone(),
            cancel_reason: control.cancel_reason.clone(),
            cancelled: Notify::new(),
            committed,
            agent: false,
        });
        if let Ok(mut map) = self.inner.live.lock() {
            map.insert(control.run_id.clone(), live.clone());
        }
        let gateway = self.clone();
        tokio::spawn(async move {
            let run_id = control.run_id.clone();
            let mut writer = EventWriter::new(
                gateway.clone(),
                run_id.clone(),
                live.clone(),
                control.last_seq,
            );
            if let Job::Review(_, project) = &job {
                // Dismissals made from here on apply to the next run (a client hides them
                // meanwhile); a resumed run counts the dismissed findings it emitted before.
                writer.dismissed = gateway.dismissed_set(project);
                if !new_run {
                    writer.dismissed_count = gateway.count_dismissed(&run_id);
                }
            }
            if new_run {
                let kind = match &job {
                    Job::Review(..) => RunKind::Review,
                    Job::Chat(_) => RunKind::Chat,
                };
                writer.emit(
                    RunCreated {
                        request_id,
                        kind: Some(kind),
                        from_cache: None,
                    }
                    .into(),
                );
            }
            // A review takes a slot (`maxConcurrentReviews`), queueing visibly when there is
            // none; a cancel while queued ends it. A chat takes none: a reviewer's question is
            // not stuck behind long model reviews. `None`: cancelled while queued.
            let permit = match gateway.inner.slots.clone().try_acquire_owned() {
                _ if matches!(job, Job::Chat(_)) => Some(None),
                Ok(permit) => Some(Some(permit)),
                Err(_) => {
                    writer.emit(
                        StageChanged {
                            stage: Stage::Queued,
                            message: Some("waiting for a review slot".into()),
                            files: None,
                        }
                        .into(),
                    );
                    writer.flush();
                    tokio::select! {
                        permit = gateway.inner.slots.clone().acquire_owned() => permit.ok().map(Some),
                        () = live.cancelled.notified() => None,
                    }
                }
            };
            writer.flush();
            control.last_seq = writer.last_seq;
            if permit.is_none() || control.cancel.load(Ordering::Relaxed) {
                writer.emit(
                    crate::protocol::RunCancelled {
                        reason: Some(
                            live.cancel_reason
                                .lock()
                                .ok()
                                .and_then(|r| r.clone())
                                .unwrap_or_else(|| "cancelled".into()),
                        ),
                    }
                    .into(),
                );
                writer.flush();
            } else {
                let blocking = tokio::task::spawn_blocking(move || {
                    let mut sink = |event: &AgentEvent| writer.push(event.clone());
                    let ok = match &job {
                        Job::Review(options, _) => {
                            review::run_with(options, &control, &mut sink).is_ok()
                        }
                        Job::Chat(options) => {
                            crate::chat::run_with(options, &control, &mut sink).is_ok()
                        }
                    };
                    writer.flush();
                    ok
                });
                match blocking.await {
                    Ok(true) => {
                        if let Some(key) = cache_key
                            && let Err(error) = gateway.inner.store.cache_put(&key, &run_id)
                        {
                            tracing::warn!(%run_id, %error, "could not record the review in the cache");
                        }
                    }
                    Ok(false) => {}
                    Err(error) => {
                        tracing::error!(%run_id, %error, "review task panicked");
                        gateway.set_state(&run_id, RunState::Failed);
                    }
                }
            }
            drop(permit);
            if let Ok(mut map) = gateway.inner.live.lock() {
                map.remove(&run_id);
            }
        });
    }

    /// Fill run `run_id` with the events of the completed run `source`: `run.created` and
    /// `run.completed` say `fromCache`, findings get new ids (their fingerprints are the same).
    /// Returns false (and writes nothing) when `source` is gone or did not complete.
    ///
    /// Findings whose fingerprint is dismissed for `project` now are marked `dismissed` (and
    /// the others `draft`, whatever they were when cached), and `run.completed` says how many.
    fn replay_from_cache(
        &self,
        run_id: &str,
        request_id: &str,
        source: &str,
        project: &dismissals::ProjectKey,
    ) -> Result<bool, GatewayError> {
        let store = &self.inner.store;
        if store.get_run(source)?.map(|r| r.state) != Some(RunState::Completed) {
            return Ok(false);
        }
        let mut original = Vec::new();
        loop {
            let batch = store.events_after(
                source,
                original.last().map_or(0, |e: &AgentEvent| e.seq),
                1024,
            )?;
            if batch.is_empty() {
                break;
            }
            original.extend(batch);
        }
        let dismissed = self.dismissed_set(project);
        let mut dismissed_count = 0u32;
        let mut payloads: Vec<EventPayload> = vec![
            RunCreated {
                request_id: Some(request_id.to_owned()),
                kind: Some(RunKind::Review),
                from_cache: Some(true),
            }
            .into(),
        ];
        for event in original {
            match event.payload {
                EventPayload::RunCreated(_) => {}
                EventPayload::RunCompleted(mut completed) => {
                    completed.from_cache = Some(true);
                    completed.dismissed_count = (dismissed_count > 0).then_some(dismissed_count);
                    payloads.push(completed.into());
                }
                EventPayload::FindingCreated(mut created) => {
                    created.finding.id = new_id("finding");
                    created.finding.status = if dismissed.contains(&created.finding.fingerprint) {
                        dismissed_count += 1;
                        crate::protocol::FindingStatus::Dismissed
                    } else {
                        crate::protocol::FindingStatus::Draft
                    };
                    payloads.push(created.into());
                }
                other => payloads.push(other),
            }
        }
        let now = review::now_rfc3339();
        let events: Vec<AgentEvent> = payloads
            .into_iter()
            .zip(1..)
            .map(|(payload, seq)| AgentEvent::new(run_id, seq, now.clone(), payload))
            .collect();
        store.append_events(&events)?;
        Ok(true)
    }

    /// How many `finding.created` events of `run_id` stored so far say `dismissed` (for a
    /// resumed run's `run.completed`); 0 when the store cannot be read.
    fn count_dismissed(&self, run_id: &str) -> u32 {
        let mut count = 0;
        let mut cursor = 0;
        loop {
            let Ok(batch) = self.inner.store.events_after(run_id, cursor, 1024) else {
                return count;
            };
            let Some(last) = batch.last() else {
                return count;
            };
            cursor = last.seq;
            count += batch
                .iter()
                .filter(|e| {
                    matches!(&e.payload, EventPayload::FindingCreated(f)
                        if f.finding.status == crate::protocol::FindingStatus::Dismissed)
                })
                .count() as u32;
        }
    }

    fn set_state(&self, run_id: &str, state: RunState) {
        let result = self.inner.store.update_run(run_id, |r| {
            r.state = state;
            r.updated_at = review::now_rfc3339();
        });
        if let Err(error) = result {
            tracing::error!(%run_id, %error, "could not update the run state");
        }
    }
}

/// Buffers a run's events and commits them to the store in groups, then wakes subscribers.
struct EventWriter {
    gateway: Gateway,
    run_id: String,
    live: Arc<LiveRun>,
    pending: Vec<AgentEvent>,
    last_seq: u64,
    // Set when the store failed under this run: the run has ended with `run.failed`, and
    // everything its work still emits is dropped.
    failed: bool,
    // Fingerprints dismissed for the reviewed project (issue 17): such findings are emitted
    // with `status: dismissed`, and `run.completed` counts them.
    dismissed: HashSet<String>,
    // Findings of this run emitted `dismissed` so far (resumed runs included).
    dismissed_count: u32,
}

impl EventWriter {
    fn new(gateway: Gateway, run_id: String, live: Arc<LiveRun>, last_seq: u64) -> Self {
        EventWriter {
            gateway,
            run_id,
            live,
            pending: Vec::new(),
            last_seq,
            failed: false,
            dismissed: HashSet::new(),
            dismissed_count: 0,
        }
    }

    /// An event made by the engine itself (not the pipeline): stamp it with the next seq.
    fn emit(&mut self, payload: EventPayload) {
        let event = AgentEvent::new(
            self.run_id.clone(),
            self.last_seq + 1 + self.pending.len() as u64,
            review::now_rfc3339(),
            payload,
        );
        self.push(event);
    }

    fn push(&mut self, mut event: AgentEvent) {
        match &mut event.payload {
            EventPayload::FindingCreated(created)
                if self.dismissed.contains(&created.finding.fingerprint) =>
            {
                created.finding.status = crate::protocol::FindingStatus::Dismissed;
                self.dismissed_count += 1;
            }
            EventPayload::RunCompleted(completed) if self.dismissed_count > 0 => {
                completed.dismissed_count = Some(self.dismissed_count);
            }
            _ => {}
        }
        // Stage changes and ends close a group; so do a model's events (text pieces, already
        // coalesced by the tool loop, and tool calls), which a reader waits for one by one.
        let boundary = matches!(
            event.payload,
            EventPayload::StageChanged(_)
                | EventPayload::RunCompleted(_)
                | EventPayload::RunFailed(_)
                | EventPayload::RunCancelled(_)
                | EventPayload::RunInterrupted(_)
                | EventPayload::TextDelta(_)
                | EventPayload::ToolStarted(_)
                | EventPayload::ToolCompleted(_)
        );
        let finding = matches!(event.payload, EventPayload::FindingCreated(_));
        self.pending.push(event);
        if boundary || self.pending.len() >= FLUSH_EVERY {
            self.flush();
        }
        if finding && let Some(delay) = fault_finding_delay() {
            self.flush();
            std::thread::sleep(delay);
        }
    }

    /// Commit pending events (the store updates the run record from them in the same
    /// transaction), then announce them.
    fn flush(&mut self) {
        if self.failed {
            self.pending.clear();
        }
        if self.pending.is_empty() {
            return;
        }
        let events = std::mem::take(&mut self.pending);
        let inner = &self.gateway.inner;
        let halted = inner
            .halted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if *halted {
            // The daemon is stopping and has marked this run interrupted: resume redoes it.
            return;
        }
        let committed = inner.store.append_events(&events);
        drop(halted);
        if let Err(error) = committed {
            if error.is_io() {
                self.fail_on_store(error);
            } else {
                tracing::error!(%error, "could not store run events");
            }
            return;
        }
        self.last_seq = events.last().map_or(self.last_seq, |e| e.seq);
        self.live.committed.send_replace(self.last_seq);
    }
}

impl EventWriter {
    /// The store could not take the run's events (disk full, I/O error; issue 12 §2): the
    /// events not stored are lost, so the run cannot go on. Stop its work and end it with
    /// `run.failed` (`store.unavailable`, retryable: resume redoes it once the disk has
    /// space) at the seq after the last stored event — stored now if the store takes it,
    /// else kept in memory, delivered to subscribers from there and stored once the store
    /// works again ([`Gateway::settle_pending`]).
    fn fail_on_store(&mut self, error: crate::store::StoreError) {
        tracing::error!(run_id = %self.run_id, %error, "could not store the run's events; the run fails");
        self.failed = true;
        self.pending.clear();
        self.live.cancel.store(true, Ordering::Relaxed);
        self.live.cancel_token.cancel();
        self.live.cancelled.notify_waiters();
        let event = AgentEvent::new(
            self.run_id.clone(),
            self.last_seq + 1,
            review::now_rfc3339(),
            crate::protocol::RunFailed {
                error: GatewayError::from(error).into(),
                reviewed_files: None,
                skipped_files: None,
            },
        );
        let inner = &self.gateway.inner;
        let halted = inner
            .halted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if *halted {
            return;
        }
        match inner.store.append_events(std::slice::from_ref(&event)) {
            Ok(()) => self.last_seq = event.seq,
            Err(_) => {
                inner
                    .pending
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .insert(self.run_id.clone(), event);
            }
        }
        drop(halted);
        // Wake the subscribers: they read what is stored, then the event kept in memory.
        self.live.committed.send_replace(self.last_seq);
    }
}

/// Fault injection for the crash tests (never set in normal use): with
/// `REVIEW_AGENT_GATEWAY_FAULT_FINDING_DELAY_MS=N`, each finding is committed on its own and
/// followed by an N ms pause, so a test can kill the daemon between two findings and check that
/// resume never emits one twice.
fn fault_finding_delay() -> Option<Duration> {
    static DELAY: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
    *DELAY.get_or_init(|| {
        std::env::var("REVIEW_AGENT_GATEWAY_FAULT_FINDING_DELAY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_millis)
    })
}

/// The state of one subscriber's stream: a cursor into the store.
struct Subscription {
    gateway: Gateway,
    run_id: String,
    cursor: u64,
    buffer: VecDeque<AgentEvent>,
    committed: Option<watch::Receiver<u64>>,
    done: bool,
    // Whether the end of the stream looked for a terminal event kept in memory.
    last_word: bool,
}

impl Subscription {
    async fn next(mut self) -> Option<(AgentEvent, Self)> {
        loop {
            // A terminal event does not end the stream by itself: a resumed run continues
            // after its `run.cancelled`. The stream ends when the stored events are drained
            // and no task runs the run any more.
            if let Some(event) = self.buffer.pop_front() {
                self.cursor = event.seq;
                return Some((event, self));
            }
            if self.done {
                // The run's `run.failed` kept in memory when the store could not take it
                // follows the last stored event; delivered once, then the stream ends.
                if self.last_word {
                    return None;
                }
                self.last_word = true;
                let event = self.gateway.pending_terminal(&self.run_id)?;
                if event.seq != self.cursor + 1 {
                    return None;
                }
                self.cursor = event.seq;
                return Some((event, self));
            }
            if let Some(rx) = self.committed.as_mut() {
                rx.borrow_and_update();
            }
            // Store reads block on disk: keep them off the async workers.
            let (gateway, run_id, cursor) =
                (self.gateway.clone(), self.run_id.clone(), self.cursor);
            let read = tokio::task::spawn_blocking(move || {
                gateway.inner.store.events_after(&run_id, cursor, 256)
            })
            .await
            .unwrap_or_else(|e| Err(crate::store::StoreError::Database(e.to_string())));
            match read {
                Ok(batch) if !batch.is_empty() => {
                    self.buffer.extend(batch);
                    continue;
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::error!(run_id = %self.run_id, %error, "could not read run events");
                    self.done = true;
                    continue;
                }
            }
            match self.committed.as_mut() {
                // Wait for the next commit; when the task ends, its sender is dropped: read
                // once more, then end.
                Some(rx) => {
                    if rx.changed().await.is_err() {
                        self.committed = None;
                    }
                }
                None => {
                    // Not (or no longer) running: re-check once whether a task started.
                    match self.gateway.live(&self.run_id) {
                        Some(live) if !self.done => {
                            self.committed = Some(live.committed.subscribe())
                        }
                        _ => self.done = true,
                    }
                }
            }
        }
    }
}

fn validate_review(request: &ReviewRequest) -> Result<(), GatewayError> {
    crate::protocol::check_request_id("`requestId`", &request.request_id)?;
    let refs = &request.target.diff_refs;
    for (name, sha) in [
        ("baseSha", &refs.base_sha),
        ("startSha", &refs.start_sha),
        ("headSha", &refs.head_sha),
    ] {
        let ok = (4..=64).contains(&sha.len()) && sha.bytes().all(|b| b.is_ascii_hexdigit());
        if !ok {
            return Err(invalid(format!(
                "`target.diffRefs.{name}` must be a commit SHA (hex), got `{sha}`"
            )));
        }
    }
    if request.target.gitlab_origin.is_empty() || request.target.project_path.is_empty() {
        return Err(invalid(
            "`target.gitlabOrigin` and `target.projectPath` are required".into(),
        ));
    }
    Ok(())
}

fn invalid(message: String) -> GatewayError {
    GatewayError::new(
        codes::REQUEST_INVALID,
        message,
        crate::protocol::json::BODY_REMEDIATION,
    )
}

fn shutting_down() -> GatewayError {
    GatewayError::new(
        codes::GATEWAY_SHUTTING_DOWN,
        "the gateway is shutting down",
        "Retry in a moment; the gateway restarts on demand.",
    )
    .retryable()
}

/// The configuration, re-read from its file when the file's modification time changes. A
/// file that no longer parses is logged and the last good configuration stays in force; the
/// error is kept for `GET /v1/health` ([`ConfigCell::health`]) until a valid file replaces it.
struct ConfigCell {
    path: std::path::PathBuf,
    from_file: bool,
    state: RwLock<(Arc<Config>, Option<SystemTime>)>,
    // Invariant: `Some` exactly while the file on disk is invalid (its error, redacted).
    invalid: std::sync::Mutex<Option<ErrorObject>>,
}

impl ConfigCell {
    fn new(loaded: LoadedConfig) -> Self {
        let path = loaded.path().to_owned();
        let from_file = loaded.from_file();
        let mtime = modified(&path);
        ConfigCell {
            path,
            from_file,
            state: RwLock::new((Arc::new(loaded.into_config()), mtime)),
            invalid: std::sync::Mutex::new(None),
        }
    }

    /// Whether the file on disk is the configuration in force, for `GET /v1/health`.
    fn health(&self) -> ConfigHealth {
        let error = self.invalid.lock().map(|e| e.clone()).unwrap_or(None);
        ConfigHealth {
            status: if error.is_some() {
                ConfigStatus::Invalid
            } else {
                ConfigStatus::Ok
            },
            error,
        }
    }

    fn set_invalid(&self, error: Option<ErrorObject>) {
        let mut slot = match self.invalid.lock() {
            Ok(slot) => slot,
            Err(poisoned) => poisoned.into_inner(),
        };
        *slot = error;
    }

    fn current(&self) -> Arc<Config> {
        let mtime = modified(&self.path);
        if let Ok(state) = self.state.read()
            && state.1 == mtime
        {
            return state.0.clone();
        }
        if mtime.is_none() && !self.from_file {
            return self.state.read().map(|s| s.0.clone()).unwrap_or_default();
        }
        match Config::load(Some(&self.path)) {
            Ok(loaded) => {
                let config = Arc::new(loaded.into_config());
                if let Ok(mut state) = self.state.write() {
                    *state = (config.clone(), mtime);
                }
                tracing::info!(path = %self.path.display(), "configuration reloaded");
                self.set_invalid(None);
                config
            }
            Err(error) => {
                let error = GatewayError::from(error);
                tracing::warn!(
                    code = error.code,
                    message = %crate::security::redact::redact(&error.message),
                    remediation = %error.remediation,
                    "the changed configuration is not valid; keeping the previous one \
                     (GET /v1/health reports it until the file is fixed)"
                );
                let mut object = ErrorObject::from(&error);
                object.message = crate::security::redact::redact(&object.message).into_owned();
                self.set_invalid(Some(object));
                let mut state = match self.state.write() {
                    Ok(state) => state,
                    Err(poisoned) => poisoned.into_inner(),
                };
                state.1 = mtime;
                state.0.clone()
            }
        }
    }
}

fn modified(path: &std::path::Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// `repository.not_mapped` for a GitLab project no confirmed mapping names (DESIGN §6): the
/// message gives the commands that map it; the remediation is the draft's, verbatim (§4).
fn not_mapped(gitlab_origin: &str, project_path: &str) -> GatewayError {
    GatewayError::new(
        codes::REPOSITORY_NOT_MAPPED,
        format!(
            "No local repository is mapped to this GitLab project ({gitlab_origin} \
             {project_path}). Map it with `review-agent-gateway mappings add --gitlab-origin \
             {gitlab_origin} --project-path {project_path} --local-path <clone>`, or propose it \
             with POST /v1/repository-mappings and confirm it on the settings page \
             (`review-agent-gateway settings`) or with `review-agent-gateway mappings confirm \
             <id>`."
        ),
        "Open Gateway settings and add a repository mapping.",
    )
}

/// What a run's task does.
enum Job {
    /// A review (`POST /v1/reviews`, resume) of a mapped project (whose dismissals mark its
    /// findings).
    Review(Box<ReviewOptions>, dismissals::ProjectKey),
    /// A chat (`POST /v1/chat`).
    Chat(Box<ChatOptions>),
}

/// The runtime a run's model streams run on: the daemon's own.
fn runtime() -> Result<tokio::runtime::Handle, GatewayError> {
    tokio::runtime::Handle::try_current().map_err(|_| {
        GatewayError::new(
            codes::INTERNAL,
            "a model run was started outside the daemon's async runtime",
            "Report this bug.",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    /// A gateway over a fresh store, with a run of `stored` events and no task.
    fn gateway_with_run(dir: &std::path::Path, stored: u64) -> (Gateway, String) {
        let config = dir.join("config.toml");
        std::fs::write(&config, "").expect("config");
        let loaded = Config::load(Some(&config)).expect("load");
        let store = Store::open(&dir.join("gateway.redb")).expect("store");
        let run_id = "run_01TEST".to_owned();
        store
            .create_run(&RunRecord::new(
                run_id.clone(),
                None,
                RunKind::Review,
                RunState::Running,
                serde_json::json!({}),
                review::now_rfc3339(),
            ))
            .expect("create");
        let events: Vec<AgentEvent> = (1..=stored)
            .map(|seq| {
                AgentEvent::new(
                    run_id.clone(),
                    seq,
                    review::now_rfc3339(),
                    StageChanged {
                        stage: Stage::Rules,
                        message: None,
                        files: None,
                    },
                )
            })
            .collect();
        store.append_events(&events).expect("append");
        let gateway = Gateway::open(loaded, store, "0.0.0").expect("gateway");
        (gateway, run_id)
    }

    /// Issue 12 §2: when a full disk refuses even the run's `run.failed`, it is kept in memory:
    /// a follower's stream ends with it after the stored events, the run reads `failed`, and
    /// once the store takes it (`settle_pending`) it is in the log and leaves memory.
    #[tokio::test]
    async fn a_terminal_event_the_store_refused_is_delivered_then_stored() {
        let dir = tempfile::tempdir().expect("temp dir");
        // Opening the gateway marks the running run interrupted (seq 3): use it as the base.
        let (gateway, run_id) = gateway_with_run(dir.path(), 2);
        let last = gateway.run_view(&run_id).expect("view").last_seq;
        let error = GatewayError::from(crate::store::StoreError::Io {
            path: Some(dir.path().join("gateway.redb")),
            message: "No space left on device (os error 28)".into(),
            previous: false,
        });
        let failed = AgentEvent::new(
            run_id.clone(),
            last + 1,
            review::now_rfc3339(),
            crate::protocol::RunFailed {
                error: error.clone().into(),
                reviewed_files: None,
                skipped_files: None,
            },
        );
        gateway
            .inner
            .pending
            .lock()
            .expect("pending")
            .insert(run_id.clone(), failed.clone());

        let followed: Vec<AgentEvent> = gateway
            .subscribe(&run_id, 0)
            .expect("subscribe")
            .collect()
            .await;
        let seqs: Vec<u64> = followed.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=last + 1).collect::<Vec<_>>());
        assert_eq!(followed.last(), Some(&failed));
        let view = gateway.run_view(&run_id).expect("view");
        assert_eq!((view.state, view.last_seq), (RunState::Failed, last + 1));
        assert_eq!(view.error.map(|e| e.code), Some(error.code.to_owned()));
        assert!(
            error.remediation.contains("no restart"),
            "{}",
            error.remediation
        );
        // A cursor past it gets nothing more.
        let after: Vec<AgentEvent> = gateway
            .subscribe(&run_id, last + 1)
            .expect("subscribe")
            .collect()
            .await;
        assert!(after.is_empty(), "{after:?}");

        gateway.settle_pending();
        assert!(
            gateway.pending_terminal(&run_id).is_none(),
            "stored, so not in memory"
        );
        let stored = gateway
            .inner
            .store
            .events_after(&run_id, last, 10)
            .expect("read");
        assert_eq!(stored, [failed]);
        assert_eq!(
            gateway
                .inner
                .store
                .get_run(&run_id)
                .expect("get")
                .map(|r| r.state),
            Some(RunState::Failed)
        );
    }
}
