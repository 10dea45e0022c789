//! Issue 15 part 1: the OpenCode executor against a REAL `opencode serve` (OpenCode 1.18.33's
//! x86_64 Linux binary, the optional dependency `opencode-linux-x64` of extension-bridge,
//! installed by `npm ci` in `.ci/run`; `rg` on PATH), started and
//! supervised by [`OpenCodeServer`] in the real sandbox (the gateway's binary as the helper,
//! Landlock), driven by a scripted fake OpenAI-compatible model
//! (`common::fake_provider` with the responder `common::agent_model::respond`): the model reads `README.txt` with OpenCode's
//! `read` tool, then (edit tasks) changes it with `edit` — which asks permission — then
//! stops. Each test has its own repository, server and fake model.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::agent_model::{opencode_binary, respond, work_tree};
use common::fake_provider::{FAKE_MODEL, FakeProvider};
use review_agent_gateway::delegation::opencode::{
    OpenCode, OpenCodeOptions, OpenCodeServer, ServerSpec,
};
use review_agent_gateway::delegation::{
    Executor, MessagePart, Page, PermissionReply, Role, SessionId, SessionState, Status,
};
use review_agent_gateway::error::codes;
use review_agent_gateway::sandbox::{Sandbox, SandboxMode};
use serde_json::json;

const README: &str = "hello from the fixture\nsecond line\n";

/// The `opencode` of extension-bridge's node_modules: the platform package
/// `opencode-linux-x64` itself (the `opencode-ai` wrapper cannot be locked for `npm ci` where
/// A repository with `README.txt`, a fake model, and an OpenCode server serving the
/// repository, with its client.
struct Fixture {
    repo: tempfile::TempDir,
    _state: tempfile::TempDir,
    fake: FakeProvider,
    executor: OpenCode,
    runtime: tokio::runtime::Runtime,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture::with_options(OpenCodeOptions::default())
    }

    fn with_options(options: OpenCodeOptions) -> Fixture {
        let repo = tempfile::tempdir().expect("repo");
        common::git(repo.path(), &["init", "-q", "-b", "main"]);
        std::fs::write(repo.path().join("README.txt"), README).expect("write");
        common::git(repo.path(), &["add", "-A"]);
        common::git(repo.path(), &["commit", "-q", "-m", "first"]);
        let state = tempfile::tempdir().expect("state");
        let fake = FakeProvider::start();
        fake.set_responder(respond);
        let config = json!({
            "$schema": "https://opencode.ai/config.json",
            "model": format!("fake/{FAKE_MODEL}"),
            "small_model": format!("fake/{FAKE_MODEL}"),
            "autoupdate": false,
            "share": "disabled",
            "lsp": false,
            "formatter": false,
            "permission": {"edit": "ask", "bash": "ask", "webfetch": "ask"},
            "provider": {"fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": fake.openai_base_url(), "apiKey": "sk-test"},
                "models": {FAKE_MODEL: {"name": "Fake", "tool_call": true}},
            }},
        });
        let mut spec = ServerSpec::new(
            Sandbox::new(PathBuf::from(common::bin()), SandboxMode::Landlock),
            opencode_binary(),
            state.path().join("delegation/opencode"),
            vec![repo.path().to_owned()],
        );
        spec.private = vec![state.path().to_owned()];
        spec.env = vec![("OPENCODE_CONFIG_CONTENT".to_owned(), config.to_string())];
        let server = OpenCodeServer::start(spec).expect("the OpenCode server starts");
        let executor = OpenCode::managed(server, options).expect("client");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        Fixture {
            repo,
            _state: state,
            fake,
            executor,
            runtime,
        }
    }

    fn block<T>(&self, future: impl std::future::Future<Output = T>) -> T {
        self.runtime.block_on(future)
    }

    fn readme(&self) -> PathBuf {
        std::fs::canonicalize(self.repo.path().join("README.txt")).expect("readme")
    }

    /// A session in the repository with `task` on `README.txt` sent.
    fn start(&self, task: &str) -> SessionId {
        self.start_on(task, &self.readme())
    }

    /// A session in the repository with `task` on `file` sent.
    fn start_on(&self, task: &str, file: &Path) -> SessionId {
        let session = self
            .block(self.executor.create_session(self.repo.path()))
            .expect("session");
        let prompt = format!("TASK:{task} FILE:{} please", file.display());
        self.block(self.executor.prompt_async(&session, &prompt))
            .expect("prompt accepted");
        session
    }

    /// Wait (on the event stream, half a second at a time: an event between two calls is not
    /// seen) until `done` holds for the status, 30 s at most.
    fn wait_until(
        &self,
        session: &SessionId,
        what: &str,
        done: impl Fn(&Status) -> bool,
    ) -> Status {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let status = self
                .block(
                    self.executor
                        .wait_change(session, Duration::from_millis(500)),
                )
                .expect("status");
            if done(&status) {
                return status;
            }
            assert!(
                Instant::now() < until,
                "{what}: still {status:?}; model requests: {}",
                self.fake.requests().len()
            );
        }
    }

    /// The pending permission of `session`, once there is one.
    fn pending(&self, session: &SessionId) -> String {
        let status = self.wait_until(session, "a permission request", |s| {
            s.pending_permissions > 0
        });
        assert!(!status.completed, "{status:?}");
        let pending = self
            .block(self.executor.pending_permissions(session))
            .expect("pending");
        assert_eq!(pending.len(), 1, "{pending:?}");
        assert_eq!(pending[0].permission, "edit", "{pending:?}");
        assert_eq!(&pending[0].session, session);
        pending[0].id.clone()
    }
}

fn idle(status: &Status) -> bool {
    status.state == SessionState::Idle
}

#[test]
fn health_answers_with_the_version_and_refuses_a_wrong_password() {
    let fixture = Fixture::new();
    let health = fixture.block(fixture.executor.health()).expect("health");
    assert!(health.healthy, "{health:?}");
    assert!(health.version.starts_with("1."), "{health:?}");

    let server = fixture.executor.server().expect("managed");
    assert!(server.is_healthy());
    let stranger =
        OpenCode::connect(&server.url(), "wrong", OpenCodeOptions::default()).expect("client");
    let error = fixture
        .block(stranger.health())
        .expect_err("wrong password");
    assert_eq!(error.code, codes::DELEGATION_AUTH_FAILED, "{error:?}");
    // Without a password no client is even built.
    let error =
        OpenCode::connect(&server.url(), "", OpenCodeOptions::default()).expect_err("no password");
    assert_eq!(error.code, codes::DELEGATION_AUTH_FAILED, "{error:?}");
}

#[test]
fn a_read_only_task_completes_and_leaves_the_repository_unchanged() {
    let fixture = Fixture::new();
    let before = work_tree(fixture.repo.path());
    let session = fixture.start("read");
    let status = fixture.wait_until(&session, "completion", |s| s.completed);
    assert_eq!(status.state, SessionState::Idle);
    assert_eq!(status.finish.as_deref(), Some("stop"));
    assert_eq!(
        work_tree(fixture.repo.path()),
        before,
        "the repository changed"
    );

    let messages = fixture
        .block(fixture.executor.messages(&session, Page::default()))
        .expect("messages");
    assert_eq!(messages.first().map(|m| m.role), Some(Role::User));
    let tools: Vec<(&str, &str)> = messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            MessagePart::Tool { tool, status, .. } => Some((tool.as_str(), status.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(tools, [("read", "completed")], "{messages:#?}");
    let diff = fixture
        .block(fixture.executor.diff(&session))
        .expect("diff");
    assert!(diff.is_empty(), "{diff:?}");
    // The model saw the file through the read tool.
    assert!(
        fixture
            .fake
            .requests()
            .iter()
            .any(|r| String::from_utf8_lossy(&r.body).contains("hello from the fixture")),
        "no request carried the file's text"
    );
}

#[test]
fn an_approved_edit_changes_the_file_and_shows_in_the_diff() {
    let fixture = Fixture::new();
    let session = fixture.start("edit");
    let request = fixture.pending(&session);
    // Not changed while the permission is pending.
    assert_eq!(
        std::fs::read_to_string(fixture.readme()).expect("read"),
        README
    );
    fixture
        .block(
            fixture
                .executor
                .reply_permission(&session, &request, PermissionReply::Once),
        )
        .expect("reply once");
    let status = fixture.wait_until(&session, "completion", |s| s.completed);
    assert_eq!(status.pending_permissions, 0);
    assert_eq!(
        std::fs::read_to_string(fixture.readme()).expect("read"),
        README.replace("hello", "goodbye")
    );
    // OpenCode computes a session's diff from its snapshots after the turn, asynchronously: on
    // a busy machine it can be empty for a moment after the session went idle.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let diff = loop {
        let diff = fixture
            .block(fixture.executor.diff(&session))
            .expect("diff");
        if !diff.is_empty() || std::time::Instant::now() > deadline {
            break diff;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(diff.len(), 1, "{diff:?}");
    assert!(diff[0].file.ends_with("README.txt"), "{diff:?}");
    assert!(
        diff[0].patch.contains("+goodbye from the fixture"),
        "{diff:?}"
    );
    assert!(
        diff[0].patch.contains("-hello from the fixture"),
        "{diff:?}"
    );
    // Answered once: a second reply to the same id is refused before reaching OpenCode.
    let error = fixture
        .block(
            fixture
                .executor
                .reply_permission(&session, &request, PermissionReply::Once),
        )
        .expect_err("stale id");
    assert_eq!(error.code, codes::DELEGATION_PERMISSION_NOT_PENDING);
}

#[test]
fn a_rejected_edit_leaves_the_file_unchanged() {
    let fixture = Fixture::new();
    let before = work_tree(fixture.repo.path());
    let session = fixture.start("edit");
    let request = fixture.pending(&session);
    fixture
        .block(
            fixture
                .executor
                .reply_permission(&session, &request, PermissionReply::Reject),
        )
        .expect("reject");
    let status = fixture.wait_until(&session, "the end of the turn", idle);
    assert_eq!(status.pending_permissions, 0);
    // The edit tool call failed with the refusal.
    let messages = fixture
        .block(fixture.executor.messages(&session, Page::default()))
        .expect("messages");
    let edits: Vec<&str> = messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            MessagePart::Tool { tool, status, .. } if tool == "edit" => Some(status.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(edits, ["error"], "{messages:#?}");
    // OpenCode ends the turn on a refusal: idle, but the task is not completed.
    assert!(!status.completed, "{status:?}");
    assert_eq!(status.finish.as_deref(), Some("tool-calls"), "{status:?}");
    assert_eq!(
        work_tree(fixture.repo.path()),
        before,
        "the repository changed"
    );
    let diff = fixture
        .block(fixture.executor.diff(&session))
        .expect("diff");
    assert!(diff.is_empty(), "{diff:?}");
}

#[test]
fn unknown_foreign_and_always_replies_are_refused() {
    let fixture = Fixture::new();
    let session = fixture.start("edit");
    let request = fixture.pending(&session);
    let reply = |session: &SessionId, id: &str, reply| {
        fixture
            .block(fixture.executor.reply_permission(session, id, reply))
            .expect_err("refused")
    };
    // An id OpenCode would answer 200 to.
    let error = reply(
        &session,
        "per_0000000000000000000000",
        PermissionReply::Once,
    );
    assert_eq!(error.code, codes::DELEGATION_PERMISSION_NOT_PENDING);
    // The right id through another session.
    let other = fixture
        .block(fixture.executor.create_session(fixture.repo.path()))
        .expect("other session");
    let error = reply(&other, &request, PermissionReply::Once);
    assert_eq!(error.code, codes::DELEGATION_PERMISSION_NOT_PENDING);
    // `always` is off by default.
    let error = reply(&session, &request, PermissionReply::Always);
    assert_eq!(error.code, codes::DELEGATION_ALWAYS_NOT_ALLOWED);
    assert!(error.remediation.contains("allow_always"), "{error:?}");
    // An unknown session.
    let error = reply(
        &SessionId::new("ses_unknown"),
        &request,
        PermissionReply::Once,
    );
    assert_eq!(error.code, codes::DELEGATION_SESSION_NOT_FOUND);
    // Still pending, the file untouched.
    let pending = fixture
        .block(fixture.executor.pending_permissions(&session))
        .expect("pending");
    assert_eq!(pending.len(), 1);
    assert_eq!(
        std::fs::read_to_string(fixture.readme()).expect("read"),
        README
    );
    fixture
        .block(fixture.executor.abort(&session))
        .expect("abort");
}

#[test]
fn abort_stops_a_task_mid_answer() {
    let fixture = Fixture::new();
    let session = fixture.start("slow");
    fixture.wait_until(&session, "busy", |s| s.state == SessionState::Busy);
    // The model is streaming its slow answer.
    let until = Instant::now() + Duration::from_secs(20);
    while !fixture.fake.requests().iter().any(|r| {
        String::from_utf8_lossy(&r.body).contains("TASK:slow")
            && r.body.windows(6).any(|w| w == b"\"tools")
    }) {
        assert!(Instant::now() < until, "the model was never asked");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    fixture
        .block(fixture.executor.abort(&session))
        .expect("abort");
    let status = fixture.wait_until(&session, "idle after abort", idle);
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(!status.completed, "{status:?}");
    assert!(
        status.error.as_deref().is_some_and(|e| e.contains("Abort")),
        "{status:?}"
    );
}

/// The pids of processes whose command line holds `--port <port>` (the server's).
fn server_pids(port: u16) -> Vec<i32> {
    let needle = format!("--port\0{port}\0");
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.windows(needle.len()).any(|w| w == needle.as_bytes()))
        })
        .collect()
}

#[test]
fn a_dead_server_is_restarted_and_a_dropped_one_stopped() {
    let fixture = Fixture::new();
    let server = fixture.executor.server().expect("managed");
    let port = server.port();
    let session = fixture
        .block(fixture.executor.create_session(fixture.repo.path()))
        .expect("session");
    let pids = server_pids(port);
    assert!(!pids.is_empty(), "no process serves port {port}");
    for pid in &pids {
        let status = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    }
    let until = Instant::now() + Duration::from_secs(30);
    while server.restarts() == 0 {
        assert!(Instant::now() < until, "not restarted");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(server.is_healthy());
    assert_eq!(server.port(), port, "the port changed");
    assert!(!server_pids(port).iter().any(|p| pids.contains(p)));
    // Sessions are on disk: the restarted server still knows this one.
    let status = fixture
        .block(fixture.executor.status(&session))
        .expect("status after the restart");
    assert_eq!(status.state, SessionState::Idle);
    assert!(!status.completed);

    drop(fixture);
    assert!(
        server_pids(port).is_empty(),
        "the server outlived its owner"
    );
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "port {port} still answers"
    );
}

/// The kernel, not only the permission prompts, confines the agent: even with every
/// permission approved, a write outside its workspace fails.
#[test]
fn an_approved_write_outside_the_workspace_is_stopped_by_the_sandbox() {
    let fixture = Fixture::new();
    let outside = tempfile::tempdir().expect("outside");
    let target = std::fs::canonicalize(outside.path())
        .expect("canonical")
        .join("escaped.txt");
    let session = fixture.start_on("escape", &target);
    let mut approved = Vec::new();
    let status = loop {
        let status = fixture.wait_until(&session, "a permission or the end", |s| {
            s.pending_permissions > 0 || idle(s)
        });
        if status.pending_permissions == 0 {
            break status;
        }
        for request in fixture
            .block(fixture.executor.pending_permissions(&session))
            .expect("pending")
        {
            fixture
                .block(fixture.executor.reply_permission(
                    &session,
                    &request.id,
                    PermissionReply::Once,
                ))
                .expect("approve");
            approved.push(request.permission);
        }
    };
    assert!(!approved.is_empty(), "nothing was asked: {status:?}");
    assert!(!target.exists(), "the agent wrote outside its workspace");
    let messages = fixture
        .block(fixture.executor.messages(&session, Page::default()))
        .expect("messages");
    let writes: Vec<(&str, &str)> = messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            MessagePart::Tool {
                tool,
                status,
                error,
                call_id,
                ..
            } if tool == "write" => {
                assert_eq!(call_id, "call_write", "the call id is the model's");
                Some((status.as_str(), error.as_deref().unwrap_or("")))
            }
            _ => None,
        })
        .collect();
    assert_eq!(writes.len(), 1, "{messages:#?}");
    assert_eq!(writes[0].0, "error", "{messages:#?}");
    // The kernel's EACCES, after OpenCode's own prompts (`external_directory`, `edit`) said yes.
    assert!(writes[0].1.contains("PermissionDenied"), "{writes:?}");
    assert!(approved.iter().any(|p| p == "edit"), "{approved:?}");
}
