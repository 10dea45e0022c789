//! Model review and chat through the daemon: the real `serve` on a free port, a real git
//! repository mapped in its config, and the scripted fake provider (`common::fake_provider`, a
//! real HTTP server speaking OpenAI's and Anthropic's streaming formats) as the model.
//! Reviews stream rule and model findings and resume by cursor; a slow model is cancelled
//! mid-stream (the provider connection is closed at once); a failing provider fails the run
//! after the rule findings and resume finishes it without repeating one; chat runs over SSE
//! and `/v1/ws`; health probes providers; the review cache keys on provider and model.

mod common;

use std::collections::HashSet;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::fake_provider::{
    AnthropicStream, FAKE_MODEL, FakeProvider, OpenAiStream, Outcome, Reply, closed_port,
};
use common::http::{self, Response, SseEvent, SseStream};
use common::{git, read_port, token};
use review_agent_gateway::config::ProviderKind;
use serde_json::{Value, json};

const ORIGIN: &str = "https://gitlab.example.com";
const PROJECT: &str = "group/project";
/// The key the daemon reads from `FAKE_KEY`.
const KEY: &str = "sk-fake-0123456789abcdef";
/// The head side of `app.py`: a rule finding on line 2 (`eval`), an off-by-one on line 5.
const APP: &str = "import os\na = eval(x)\ndef total(items):\n    t = 0\n    for i in range(1, len(items)):\n        t += items[i]\n    return t\n";

/// A running `serve` whose config maps [`PROJECT`] to a fixture repository and lists the
/// given providers.
struct Gateway {
    child: Child,
    port: u16,
    token: String,
    home: tempfile::TempDir,
    repo: tempfile::TempDir,
    base: String,
    head: String,
}

impl Gateway {
    /// The repository: the base commit has `app.py` (one line), `lib.py`, and
    /// `deploy/settings.ini`, which holds the repository's absolute path and [`KEY`] (what a
    /// tool's `outputPreview` must never show); the head commit makes `app.py` [`APP`].
    /// `providers`: `[[providers]]` entries, appended to the config.
    fn start(providers: &str) -> Gateway {
        let repo = tempfile::tempdir().expect("temp dir");
        let dir = repo.path();
        git(dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("app.py"), "import os\n").expect("write");
        std::fs::write(dir.join("lib.py"), "def helper():\n    return 1\n").expect("write");
        std::fs::create_dir_all(dir.join("deploy")).expect("mkdir");
        std::fs::write(
            dir.join("deploy/settings.ini"),
            format!(
                "[build]\nroot = {}/build\napi_key = \"{KEY}\"\nworkers = 4\n",
                dir.display()
            ),
        )
        .expect("write");
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", "base"]);
        let base = git(dir, &["rev-parse", "HEAD"]);
        std::fs::write(dir.join("app.py"), APP).expect("write");
        git(dir, &["commit", "-q", "-am", "head"]);
        let head = git(dir, &["rev-parse", "HEAD"]);

        let home = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(home.path().join("config")).expect("mkdir");
        std::fs::write(
            home.path().join("config/config.toml"),
            format!(
                "allowed_origins = [\"{ORIGIN}\"]\n\n[limits]\nmax_concurrent_reviews = 3\n\n\
                 [[mappings]]\ngitlab_origin = \"{ORIGIN}\"\nproject_path = \"{PROJECT}\"\n\
                 local_path = \"{}\"\n\n{providers}\n",
                dir.display()
            ),
        )
        .expect("write config");
        let (child, port) = Gateway::serve(home.path());
        let token = token(home.path());
        Gateway {
            child,
            port,
            token,
            home,
            repo,
            base,
            head,
        }
    }

    /// A `serve` child on a free port for gateway home `home`, and its port.
    fn serve(home: &Path) -> (Child, u16) {
        let no_bus = format!("unix:path={}/no-bus", home.display());
        let mut child = http::spawn_serve(
            home,
            &[
                ("FAKE_KEY", KEY),
                // No key from the test's own environment or the user's keyring.
                ("OPENAI_API_KEY", ""),
                ("ANTHROPIC_API_KEY", ""),
                ("DBUS_SESSION_BUS_ADDRESS", &no_bus),
            ],
        );
        let port = read_port(&mut child);
        (child, port)
    }

    /// SIGTERM the daemon and wait for it to exit; how long that took.
    fn terminate(&mut self) -> Duration {
        let asked = Instant::now();
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        let _ = self.child.wait();
        asked.elapsed()
    }

    /// Start the daemon again on the same home (a new port).
    fn restart(&mut self) {
        let (child, port) = Gateway::serve(self.home.path());
        self.child = child;
        self.port = port;
    }

    /// [`Gateway::start`] with the fake as provider `fake` of `kind` (key from `FAKE_KEY`, a
    /// 32k context window).
    fn with_fake(fake: &FakeProvider, kind: ProviderKind) -> Gateway {
        Gateway::start(&format!(
            "{}context_window = 32768\n",
            fake.toml("fake", kind, Some("FAKE_KEY"))
        ))
    }

    fn review_body(&self, request_id: &str) -> Value {
        json!({
            "requestId": request_id,
            "providerId": "fake",
            "mode": "merge-request",
            "target": {
                "gitlabOrigin": ORIGIN,
                "projectPath": PROJECT,
                "mergeRequestIid": 7,
                "diffRefs": { "baseSha": self.base, "startSha": self.base, "headSha": self.head }
            },
            "scope": { "filePaths": null, "selection": null },
            "policy": { "minConfidence": "low" }
        })
    }

    fn chat_body(&self, request_id: &str, question: &str) -> Value {
        json!({
            "requestId": request_id,
            "providerId": "fake",
            "messages": [{ "role": "user", "content": question }],
            "context": {
                "kind": "selection",
                "gitlabOrigin": ORIGIN,
                "projectPath": PROJECT,
                "mergeRequestIid": 7,
                "filePath": "app.py",
                "startLine": 2,
                "endLine": 2,
                "text": "a = eval(x)",
                "headSha": self.head
            },
            "toolsEnabled": true
        })
    }

    fn authed(&self, method: &str, path: &str, body: Option<&Value>) -> Response {
        let auth = format!("Bearer {}", self.token);
        http::request(self.port, method, path, &[("Authorization", &auth)], body)
    }

    /// An SSE answer read as it arrives.
    fn stream(&self, method: &str, path: &str, body: Option<&Value>) -> SseStream {
        let auth = format!("Bearer {}", self.token);
        let stream = SseStream::open(self.port, method, path, &[("Authorization", &auth)], body);
        assert_eq!(stream.status, 200, "{method} {path}");
        stream
    }

    /// Every event of run `run_id` so far, following it to its end.
    fn all_events(&self, run_id: &str) -> Vec<SseEvent> {
        self.authed("GET", &format!("/v1/runs/{run_id}/events?after=0"), None)
            .sse()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("serve.log")).unwrap_or_default()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// === helpers ===

fn of_type<'a>(events: &'a [SseEvent], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e.1 == kind)
        .map(|e| &e.2)
        .collect()
}

fn types(events: &[SseEvent]) -> Vec<&str> {
    events.iter().map(|e| e.1.as_str()).collect()
}

fn run_id(events: &[SseEvent]) -> String {
    events[0].2["runId"].as_str().expect("runId").to_owned()
}

/// The findings of `finding.created` events from `source` (`rule`, `model`).
fn findings<'a>(events: &'a [SseEvent], source: &str) -> Vec<&'a Value> {
    of_type(events, "finding.created")
        .into_iter()
        .map(|e| &e["finding"])
        .filter(|f| f["source"] == source)
        .collect()
}

fn fingerprints(events: &[SseEvent]) -> Vec<String> {
    of_type(events, "finding.created")
        .iter()
        .map(|e| {
            e["finding"]["fingerprint"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// Each seq once, from 1, in order.
fn assert_gap_free(events: &[SseEvent]) {
    let seqs: Vec<u64> = events.iter().map(|e| e.0).collect();
    assert_eq!(
        seqs,
        (1..=events.len() as u64).collect::<Vec<_>>(),
        "{:?}",
        types(events)
    );
}

fn assert_each_fingerprint_once(events: &[SseEvent]) {
    let all = fingerprints(events);
    let unique: HashSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), all.len(), "a finding emitted twice: {all:?}");
}

fn text(events: &[SseEvent]) -> String {
    of_type(events, "text.delta")
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect()
}

fn off_by_one() -> String {
    json!({
        "path": "app.py", "startLine": 5, "endLine": 5, "category": "bug",
        "severity": "medium", "confidence": "high",
        "title": "The loop skips the first item",
        "content": "range(1, len(items)) starts at 1, so items[0] is never added.",
        "evidence": [{"path": "app.py", "startLine": 5, "endLine": 5,
                      "quote": "for i in range(1, len(items)):"}],
        "suggestionCode": "    for i in range(len(items)):",
    })
    .to_string()
}

/// An OpenAI turn that reports [`off_by_one`] (its arguments split in two pieces).
fn report_turn() -> Reply {
    let report = off_by_one();
    let (a, b) = report.split_at(report.len() / 2);
    OpenAiStream::new()
        .text("Checking the loop. ")
        .tool_call(0, "call_report", "report_finding", &[a, b])
        .end("tool_calls", 700, 60)
        .into()
}

fn summary_turn() -> Reply {
    OpenAiStream::new()
        .text("One problem found.")
        .end("stop", 800, 8)
        .into()
}

/// The script of a model that reads `lib.py`, reports the off-by-one, and sums up: input
/// 2000 tokens, output 88 (OpenAI) or 113 (Anthropic).
fn reading_reviewer(fake: &FakeProvider, kind: ProviderKind) {
    let report = off_by_one();
    match kind {
        ProviderKind::OpenaiCompatible => {
            fake.push(
                OpenAiStream::new()
                    .text("Let me read ")
                    .text("lib.py. ")
                    .tool_call(0, "call_read", "file_read", &["{\"path\":", " \"lib.py\"}"])
                    .end("tool_calls", 500, 20),
            );
            fake.push(report_turn());
            fake.push(summary_turn());
        }
        ProviderKind::Anthropic => {
            fake.push(
                AnthropicStream::new()
                    .message_start(500)
                    .text_block(&["Let me read ", "lib.py. "])
                    .tool_use_block("toolu_read", "file_read", &["{\"path\":", " \"lib.py\"}"])
                    .end("tool_use", 30),
            );
            fake.push(
                AnthropicStream::new()
                    .message_start(700)
                    .ping()
                    .text_block(&["Checking the loop. "])
                    .tool_use_block(
                        "toolu_report",
                        "report_finding",
                        &[&report[..20], &report[20..]],
                    )
                    .end("tool_use", 80),
            );
            fake.push(
                AnthropicStream::new()
                    .message_start(800)
                    .text_block(&["One problem found."])
                    .end("end_turn", 3),
            );
        }
    }
}

// === 1. review with a model, streamed and resumable ===

fn a_model_review_streams_and_resumes(kind: ProviderKind) {
    let fake = FakeProvider::start();
    reading_reviewer(&fake, kind);
    let gw = Gateway::with_fake(&fake, kind);
    let reply = gw.authed("POST", "/v1/reviews", Some(&gw.review_body("review-1")));
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(
        reply
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"))
    );
    let events = reply.sse();
    assert_gap_free(&events);
    assert_eq!(events[0].1, "run.created");
    assert_eq!(events[0].2["kind"], "review");
    let stages: Vec<&str> = of_type(&events, "stage.changed")
        .iter()
        .filter_map(|e| e["stage"].as_str())
        .collect();
    assert_eq!(
        stages,
        ["resolve", "diff", "rules", "model", "validate", "done"]
    );
    let rule = findings(&events, "rule");
    assert!(
        rule.iter()
            .any(|f| f["path"] == "app.py" && f["startLine"] == 2),
        "the eval rule: {rule:?}"
    );
    let model = findings(&events, "model");
    assert_eq!(model.len(), 1, "{:?}", types(&events));
    assert_eq!(
        (&model[0]["path"], &model[0]["startLine"]),
        (&json!("app.py"), &json!(5))
    );
    assert_eq!(
        model[0]["existingCode"],
        "    for i in range(1, len(items)):"
    );
    assert_each_fingerprint_once(&events);

    // The model's repository tool, as events: redacted input, a preview of the answer.
    let started = of_type(&events, "tool.started");
    assert_eq!(started.len(), 1, "report_finding is no tool event");
    assert_eq!(started[0]["tool"], "file_read");
    assert_eq!(started[0]["input"]["path"], "lib.py");
    let completed = of_type(&events, "tool.completed");
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["callId"], started[0]["callId"]);
    assert_eq!(completed[0]["ok"], true);
    assert!(
        completed[0]["outputPreview"]
            .as_str()
            .is_some_and(|p| p.contains("def helper")),
        "{}",
        completed[0]
    );
    // Events in the order they happened: the tool ran during the model stage, findings after.
    let at = |kind: &str| types(&events).iter().position(|t| *t == kind);
    assert!(at("tool.started") < at("finding.created"));
    assert_eq!(
        text(&events),
        "Let me read lib.py. Checking the loop. One problem found."
    );
    let done = events.last().expect("events");
    assert_eq!(done.1, "run.completed");
    let output_tokens = match kind {
        ProviderKind::OpenaiCompatible => 88,
        ProviderKind::Anthropic => 113,
    };
    assert_eq!(
        done.2["usage"],
        json!({"inputTokens": 2000, "outputTokens": output_tokens})
    );

    // Resumable: a reconnect after seq N gets exactly the rest, by `?after=` and by
    // `Last-Event-ID`.
    let run = run_id(&events);
    let n = events.len() / 2;
    let suffix = gw
        .authed("GET", &format!("/v1/runs/{run}/events?after={n}"), None)
        .sse();
    assert_eq!(suffix, events[n..].to_vec());
    let auth = format!("Bearer {}", gw.token);
    let last = n + 3;
    let by_header = http::request(
        gw.port,
        "GET",
        &format!("/v1/runs/{run}/events"),
        &[
            ("Authorization", &auth),
            ("Last-Event-ID", &last.to_string()),
        ],
        None,
    )
    .sse();
    assert_eq!(by_header, events[last..].to_vec());

    // The run's view: findings of both sources, the budget used.
    let view = gw.authed("GET", &format!("/v1/runs/{run}"), None).json();
    let data = &view["data"];
    assert_eq!(data["state"], "completed");
    assert_eq!(data["kind"], "review");
    assert_eq!(data["lastSeq"], events.len());
    let stored: Vec<&Value> = data["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .collect();
    let streamed: Vec<&Value> = of_type(&events, "finding.created")
        .iter()
        .map(|e| &e["finding"])
        .collect();
    assert_eq!(stored, streamed);
    let sources: HashSet<&str> = stored.iter().filter_map(|f| f["source"].as_str()).collect();
    assert_eq!(sources, HashSet::from(["rule", "model"]));
    assert_eq!(
        data["budget"],
        json!({"toolCalls": 1, "outputTokens": output_tokens})
    );

    // What the model got: the key in its header, the diff, never the local path.
    let requests = fake.scripted_requests();
    assert_eq!(requests.len(), 3);
    match kind {
        ProviderKind::OpenaiCompatible => {
            assert_eq!(
                requests[0].header("authorization"),
                Some(format!("Bearer {KEY}").as_str())
            );
            assert_eq!(requests[0].path, "/v1/chat/completions");
        }
        ProviderKind::Anthropic => {
            assert_eq!(requests[0].header("x-api-key"), Some(KEY));
            assert_eq!(requests[0].path, "/v1/messages");
        }
    }
    let repo_path = gw.repo.path().display().to_string();
    for request in &requests {
        let body = String::from_utf8_lossy(&request.body);
        assert_eq!(request.json()["model"], FAKE_MODEL);
        assert!(body.contains("for i in range(1, len(items)):"), "the diff");
        assert!(
            !body.contains(&repo_path),
            "the local path reached the model"
        );
    }
    assert!(
        String::from_utf8_lossy(&requests[1].body).contains("def helper"),
        "the tool result"
    );
    assert!(!gw.log().contains(KEY), "the key reached the log");
}

#[test]
fn an_openai_model_review_through_the_daemon_streams_both_sources_and_resumes() {
    a_model_review_streams_and_resumes(ProviderKind::OpenaiCompatible);
}

#[test]
fn an_anthropic_model_review_through_the_daemon_streams_both_sources_and_resumes() {
    a_model_review_streams_and_resumes(ProviderKind::Anthropic);
}

// === 2. a slow model cancelled mid-review ===

#[test]
fn a_slow_model_is_cancelled_at_once_and_resume_finishes_the_review() {
    let fake = FakeProvider::start();
    let mut slow = OpenAiStream::new();
    for i in 0..50 {
        slow = slow.text(&format!("thinking {i}. "));
    }
    fake.push(slow.end("stop", 100, 50).delay(Duration::from_millis(300)));
    let gw = Gateway::with_fake(&fake, ProviderKind::OpenaiCompatible);
    let mut stream = gw.stream("POST", "/v1/reviews", Some(&gw.review_body("slow")));
    let mut before = Vec::new();
    while let Some(event) = stream.next_event() {
        let delta = event.1 == "text.delta";
        before.push(event);
        if delta {
            break;
        }
    }
    assert_eq!(
        before.last().map(|e| e.1.as_str()),
        Some("text.delta"),
        "{before:?}"
    );
    let run = run_id(&before);

    let asked = Instant::now();
    let cancel = gw.authed(
        "POST",
        &format!("/v1/runs/{run}/cancel"),
        Some(&json!({"reason": "user_cancelled"})),
    );
    assert_eq!(cancel.status, 200, "{}", cancel.body);
    let after = stream.rest();
    let took = asked.elapsed();
    assert_eq!(
        after.last().map(|e| (e.1.as_str(), e.2["reason"].clone())),
        Some(("run.cancelled", json!("user_cancelled"))),
        "{:?}",
        types(&after)
    );
    assert!(
        took < Duration::from_secs(2),
        "run.cancelled after {took:?}"
    );
    // The rule findings computed before the cancel are not lost: they come before
    // run.cancelled (and resume below never repeats them).
    assert!(!findings(&after, "rule").is_empty(), "{:?}", types(&after));
    // The model's HTTP stream was dropped, not read to its end.
    let index = fake.scripted_requests()[0].index;
    match fake.wait_outcome_blocking(index) {
        Outcome::ClientClosed { events } => assert!(events < 20, "{events} events sent"),
        other => panic!("the provider stream was not closed by the gateway: {other:?}"),
    }
    let deltas = before
        .iter()
        .chain(&after)
        .filter(|e| e.1 == "text.delta")
        .count();
    assert!(deltas < 10, "{deltas} deltas after cancel");
    assert_eq!(
        gw.authed("GET", &format!("/v1/runs/{run}"), None).json()["data"]["state"],
        "cancelled"
    );

    // Resume with a model that answers at once: the run completes in the same sequence.
    fake.push(report_turn());
    fake.push(summary_turn());
    let resumed = gw.authed("POST", &format!("/v1/runs/{run}/resume"), None);
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    let all = gw.all_events(&run);
    assert_gap_free(&all);
    assert_eq!(all.last().map(|e| e.1.as_str()), Some("run.completed"));
    assert_eq!(of_type(&all, "run.cancelled").len(), 1);
    assert_each_fingerprint_once(&all);
    assert_eq!(findings(&all, "model").len(), 1);
    assert!(!findings(&all, "rule").is_empty());
    assert_eq!(fake.scripted_requests().len(), 3);
}

#[test]
fn sigterm_interrupts_a_long_model_review_after_the_grace_and_resume_finishes_it() {
    let fake = FakeProvider::start();
    let mut slow = OpenAiStream::new();
    for i in 0..100 {
        slow = slow.text(&format!("thinking {i}. "));
    }
    // 30 s of streaming: far longer than the shutdown grace.
    fake.push(slow.end("stop", 100, 50).delay(Duration::from_millis(300)));
    let mut gw = Gateway::with_fake(&fake, ProviderKind::OpenaiCompatible);
    let mut stream = gw.stream("POST", "/v1/reviews", Some(&gw.review_body("long")));
    let mut seen = Vec::new();
    while let Some(event) = stream.next_event() {
        let delta = event.1 == "text.delta";
        seen.push(event);
        if delta {
            break;
        }
    }
    let run = run_id(&seen);
    let took = gw.terminate();
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(9),
        "the daemon exited after {took:?}: it gives running reviews 5 s, then interrupts them"
    );
    // The client's stream ended with `run.interrupted` (issue 12: not a bare end a client
    // cannot tell from a network drop), and the gateway closed the model's stream.
    let rest = stream.rest();
    assert_eq!(
        rest.last().map(|e| (e.1.as_str(), e.2["reason"].clone())),
        Some(("run.interrupted", json!("shutdown"))),
        "{rest:?}"
    );
    let index = fake.scripted_requests()[0].index;
    assert!(
        matches!(
            fake.wait_outcome_blocking(index),
            Outcome::ClientClosed { .. }
        ),
        "the provider stream was not closed by the gateway"
    );

    gw.restart();
    let view = gw.authed("GET", &format!("/v1/runs/{run}"), None).json();
    assert_eq!(view["data"]["state"], "interrupted", "{view}");
    fake.push(report_turn());
    fake.push(summary_turn());
    let resumed = gw.authed("POST", &format!("/v1/runs/{run}/resume"), None);
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    let all = gw.all_events(&run);
    assert_gap_free(&all);
    assert_eq!(all.last().map(|e| e.1.as_str()), Some("run.completed"));
    assert_each_fingerprint_once(&all);
    assert_eq!(findings(&all, "model").len(), 1);
}

// === 3. a provider that fails mid-review ===

#[test]
fn a_failing_provider_fails_the_run_after_the_rule_findings_and_resume_adds_none_twice() {
    let fake = FakeProvider::start();
    // The model reports a finding, then its server breaks: 500 on the request and on both
    // retries (Retry-After: 0 keeps the test quick).
    fake.push(report_turn());
    for _ in 0..3 {
        fake.push(
            Reply::openai_error(500, "server_error", "the GPU fell over")
                .header("retry-after", "0"),
        );
    }
    let gw = Gateway::with_fake(&fake, ProviderKind::OpenaiCompatible);
    let events = gw
        .authed("POST", "/v1/reviews", Some(&gw.review_body("breaks")))
        .sse();
    assert_gap_free(&events);
    let failed = events.last().expect("events");
    assert_eq!(failed.1, "run.failed", "{:?}", types(&events));
    assert_eq!(failed.2["error"]["code"], "provider.unavailable");
    assert_eq!(failed.2["error"]["retryable"], true);
    assert!(
        !findings(&events, "rule").is_empty(),
        "rule findings are delivered"
    );
    assert_eq!(
        findings(&events, "model").len(),
        1,
        "and the model's so far"
    );
    assert_eq!(fake.scripted_requests().len(), 4);
    let run = run_id(&events);
    let view = gw.authed("GET", &format!("/v1/runs/{run}"), None).json();
    assert_eq!(view["data"]["state"], "failed");
    assert_eq!(view["data"]["error"]["code"], "provider.unavailable");

    // The server is back: resume redoes the model stage; the model reports the same finding,
    // which the run already emitted.
    fake.push(report_turn());
    fake.push(summary_turn());
    let resumed = gw.authed("POST", &format!("/v1/runs/{run}/resume"), None);
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    let all = gw.all_events(&run);
    assert_gap_free(&all);
    assert_eq!(
        all[..events.len()],
        events[..],
        "the log before resume is kept"
    );
    let later = &all[events.len()..];
    assert_eq!(later.last().map(|e| e.1.as_str()), Some("run.completed"));
    assert_eq!(
        of_type(later, "finding.created").len(),
        0,
        "nothing re-emitted"
    );
    assert_each_fingerprint_once(&all);
    assert_eq!(
        fake.scripted_requests().len(),
        6,
        "the model was asked again"
    );
    let view = gw.authed("GET", &format!("/v1/runs/{run}"), None).json();
    assert_eq!(view["data"]["state"], "completed");
    assert_eq!(view["data"]["error"], Value::Null);
    assert_eq!(
        view["data"]["findings"].as_array().map(Vec::len),
        Some(of_type(&all, "finding.created").len())
    );
}

// === 4. chat ===

#[test]
fn chat_with_tools_streams_events_and_keeps_secrets_and_paths_out() {
    let fake = FakeProvider::start();
    fake.push(
        OpenAiStream::new()
            .tool_call(
                0,
                "call_read",
                "file_read",
                &["{\"path\": \"deploy/", "settings.ini\"}"],
            )
            .end("tool_calls", 300, 12),
    );
    fake.push(
        OpenAiStream::new()
            .text("It sets the build ")
            .text("root and 4 workers.")
            .end("stop", 400, 9),
    );
    let gw = Gateway::with_fake(&fake, ProviderKind::OpenaiCompatible);
    let body = gw.chat_body("chat-1", "What does deploy/settings.ini configure?");
    let reply = gw.authed("POST", "/v1/chat", Some(&body));
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(
        reply
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"))
    );
    let events = reply.sse();
    assert_gap_free(&events);
    let kinds: Vec<&str> = types(&events)
        .into_iter()
        .filter(|t| *t != "text.delta")
        .collect();
    assert_eq!(
        kinds,
        [
            "run.created",
            "stage.changed",
            "context.added",
            "context.added",
            "tool.started",
            "tool.completed",
            "run.completed"
        ]
    );
    assert_eq!(events[0].2["kind"], "chat");
    assert_eq!(events[0].2["requestId"], "chat-1");
    assert_eq!(events[1].2["stage"], "model");
    assert_eq!(
        events[2].2["context"],
        json!({"kind": "model", "providerId": "fake", "providerKind": "openai-compatible",
            "model": "fake-model", "maxContextTokens": 32768, "maxToolCalls": 60, "tools": true})
    );
    assert_eq!(
        events[3].2["context"],
        json!({"kind": "file", "path": "app.py", "startLine": 2, "endLine": 2})
    );
    assert_eq!(of_type(&events, "tool.started")[0]["tool"], "file_read");
    let completed = of_type(&events, "tool.completed")[0];
    assert_eq!(completed["ok"], true, "{completed}");
    let preview = completed["outputPreview"].as_str().unwrap_or_default();
    assert!(preview.contains("workers = 4"), "{preview}");
    // The lines are there, with the path and the key replaced.
    assert!(
        preview.contains("/build") && preview.contains("REDACTED"),
        "{preview}"
    );
    let repo_path = gw.repo.path().display().to_string();
    assert!(!preview.contains(&repo_path), "the local path: {preview}");
    assert!(!preview.contains(KEY), "the key: {preview}");
    assert!(!reply.body.contains(&repo_path) && !reply.body.contains(KEY));
    assert_eq!(text(&events), "It sets the build root and 4 workers.");
    assert_eq!(
        events.last().map(|e| e.2["usage"].clone()),
        Some(json!({"inputTokens": 700, "outputTokens": 21}))
    );
    // The model got the selection and, in its second request, the file.
    let requests = fake.scripted_requests();
    assert_eq!(requests.len(), 2);
    let first = String::from_utf8_lossy(&requests[0].body).into_owned();
    assert!(
        first.contains("app.py:2-2") && first.contains("a = eval(x)"),
        "{first}"
    );
    assert!(String::from_utf8_lossy(&requests[1].body).contains("workers = 4"));
    let run = run_id(&events);
    let view = gw.authed("GET", &format!("/v1/runs/{run}"), None).json();
    assert_eq!(view["data"]["kind"], "chat");
    assert_eq!(view["data"]["state"], "completed");
    assert_eq!(
        view["data"]["budget"],
        json!({"toolCalls": 1, "outputTokens": 21})
    );

    // The same requestId and payload: the same run, replayed; the model is not asked again.
    let again = gw.authed("POST", "/v1/chat", Some(&body)).sse();
    assert_eq!(again, events);
    assert_eq!(fake.scripted_requests().len(), 2);
    // Another payload under that requestId: a conflict.
    let other = gw.chat_body("chat-1", "Something else?");
    let conflict = gw.authed("POST", "/v1/chat", Some(&other));
    assert_eq!(
        (conflict.status, conflict.error_code().as_str()),
        (409, "request.id_conflict")
    );
    // A completed chat is returned as it is by resume, like a completed review.
    let resumed = gw.authed("POST", &format!("/v1/runs/{run}/resume"), None);
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    assert_eq!(resumed.json()["data"]["state"], "completed");
}

#[test]
fn chat_requests_the_gateway_refuses_and_failed_or_cancelled_chats_are_not_resumed() {
    let fake = FakeProvider::start();
    let gw = Gateway::with_fake(&fake, ProviderKind::OpenaiCompatible);

    let mut unknown = gw.chat_body("chat-unknown", "Hi?");
    unknown["providerId"] = json!("nope");
    let reply = gw.authed("POST", "/v1/chat", Some(&unknown));
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (422, "provider.not_configured"),
        "{}",
        reply.body
    );
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("fake"))
    );

    let mut no_context = gw.chat_body("chat-no-context", "Hi?");
    no_context
        .as_object_mut()
        .expect("object")
        .remove("context");
    let reply = gw.authed("POST", "/v1/chat", Some(&no_context));
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (400, "request.invalid"),
        "{}",
        reply.body
    );

    let mut unmapped = gw.chat_body("chat-unmapped", "Hi?");
    unmapped["context"]["projectPath"] = json!("other/project");
    let reply = gw.authed("POST", "/v1/chat", Some(&unmapped));
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (404, "repository.not_mapped")
    );

    let mut empty = gw.chat_body("chat-empty", "Hi?");
    empty["messages"] = json!([]);
    let reply = gw.authed("POST", "/v1/chat", Some(&empty));
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (400, "request.invalid"),
        "{}",
        reply.body
    );
    assert_eq!(
        fake.scripted_requests().len(),
        0,
        "no refused request reached the model"
    );

    // Without tools, a context needs no head commit and no tools are offered; the provider
    // refuses the request: the chat fails, and a chat is not resumed.
    fake.push(Reply::openai_error(
        400,
        "invalid_request_error",
        "model not loaded",
    ));
    let mut plain = gw.chat_body("chat-fails", "Hi?");
    plain["toolsEnabled"] = json!(false);
    plain["context"]
        .as_object_mut()
        .expect("object")
        .remove("headSha");
    let events = gw.authed("POST", "/v1/chat", Some(&plain)).sse();
    assert_eq!(
        types(&events),
        [
            "run.created",
            "stage.changed",
            "context.added",
            "context.added",
            "run.failed"
        ],
        "{events:?}"
    );
    assert_eq!(events[4].2["error"]["code"], "provider.request_rejected");
    assert_eq!(fake.scripted_requests()[0].json().get("tools"), None);
    let run = run_id(&events);
    let resumed = gw.authed("POST", &format!("/v1/runs/{run}/resume"), None);
    assert_eq!(
        (resumed.status, resumed.error_code().as_str()),
        (409, "run.not_resumable"),
        "{}",
        resumed.body
    );

    // A slow chat cancelled mid-answer: the provider stream is closed at once; no resume.
    let mut slow = OpenAiStream::new();
    for i in 0..30 {
        slow = slow.text(&format!("word {i} "));
    }
    fake.push(slow.end("stop", 10, 30).delay(Duration::from_millis(300)));
    let mut stream = gw.stream(
        "POST",
        "/v1/chat",
        Some(&gw.chat_body("chat-slow", "Explain it at length.")),
    );
    let mut events = Vec::new();
    while let Some(event) = stream.next_event() {
        let delta = event.1 == "text.delta";
        events.push(event);
        if delta {
            break;
        }
    }
    let run = run_id(&events);
    // While the model answers, the chat is running (not queued).
    let view = gw.authed("GET", &format!("/v1/runs/{run}"), None).json();
    assert_eq!(
        (
            view["data"]["state"].as_str(),
            view["data"]["stage"].as_str()
        ),
        (Some("running"), Some("model"))
    );
    let asked = Instant::now();
    let cancel = gw.authed("POST", &format!("/v1/runs/{run}/cancel"), None);
    assert_eq!(cancel.status, 200, "{}", cancel.body);
    events.extend(stream.rest());
    let took = asked.elapsed();
    assert_eq!(events.last().map(|e| e.1.as_str()), Some("run.cancelled"));
    assert!(
        took < Duration::from_secs(2),
        "run.cancelled after {took:?}"
    );
    let index = fake.scripted_requests()[1].index;
    assert!(
        matches!(
            fake.wait_outcome_blocking(index),
            Outcome::ClientClosed { .. }
        ),
        "{:?}",
        fake.outcome(index)
    );
    let resumed = gw.authed("POST", &format!("/v1/runs/{run}/resume"), None);
    assert_eq!(
        (resumed.status, resumed.error_code().as_str()),
        (409, "run.not_resumable")
    );
}

#[test]
fn chat_over_the_websocket_streams_the_same_events() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    let fake = FakeProvider::start();
    fake.push(
        AnthropicStream::new()
            .message_start(40)
            .tool_use_block("toolu_1", "file_read", &["{\"path\": \"lib.py\"}"])
            .end("tool_use", 7),
    );
    fake.push(
        AnthropicStream::new()
            .message_start(60)
            .text_block(&["It returns ", "1."])
            .end("end_turn", 4),
    );
    let gw = Gateway::with_fake(&fake, ProviderKind::Anthropic);
    let mut body = gw.chat_body("chat-ws", "What does helper return?");
    body["context"]
        .as_object_mut()
        .expect("object")
        .remove("headSha");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let frames: Vec<Value> = runtime.block_on(async {
        let mut request = format!("ws://127.0.0.1:{}/v1/ws", gw.port)
            .into_client_request()
            .expect("request");
        request.headers_mut().insert(
            "authorization",
            format!("Bearer {}", gw.token).parse().expect("header"),
        );
        let (mut ws, _) = tokio_tungstenite::connect_async(request)
            .await
            .expect("connects");
        let frame = json!({"type": "request", "id": "c1", "method": "POST", "path": "/v1/chat", "body": body});
        ws.send(Message::text(frame.to_string())).await.expect("send");
        let mut frames = Vec::new();
        loop {
            let message = tokio::time::timeout(Duration::from_secs(10), ws.next())
                .await
                .expect("a frame within 10 s")
                .expect("open")
                .expect("readable");
            let Message::Text(text) = message else { continue };
            let frame: Value = serde_json::from_str(text.as_str()).expect("JSON frame");
            let end = frame["type"] == "end";
            frames.push(frame);
            if end {
                break frames;
            }
        }
    });
    assert!(frames.iter().all(|f| f["id"] == "c1"), "{frames:?}");
    let events: Vec<SseEvent> = frames
        .iter()
        .filter(|f| f["type"] == "event")
        .map(|f| {
            let e = f["event"].clone();
            (
                e["seq"].as_u64().unwrap_or(0),
                e["type"].as_str().unwrap_or("").to_owned(),
                e,
            )
        })
        .collect();
    assert_gap_free(&events);
    let kinds: Vec<&str> = types(&events)
        .into_iter()
        .filter(|t| *t != "text.delta")
        .collect();
    assert_eq!(
        kinds,
        [
            "run.created",
            "stage.changed",
            "context.added",
            "context.added",
            "tool.started",
            "tool.completed",
            "run.completed"
        ]
    );
    assert_eq!(text(&events), "It returns 1.");
    assert_eq!(
        events.last().map(|e| e.2["usage"].clone()),
        Some(json!({"inputTokens": 100, "outputTokens": 11}))
    );
    // The same run over HTTP: the same events.
    let over_http = gw.all_events(&run_id(&events));
    let strip =
        |events: &[SseEvent]| -> Vec<Value> { events.iter().map(|e| e.2.clone()).collect() };
    assert_eq!(strip(&over_http), strip(&events));
    assert_eq!(
        fake.scripted_requests()[1].json()["messages"][2]["content"][0]["tool_use_id"],
        "toolu_1"
    );
}

// === 5. health and capabilities ===

#[test]
fn health_probes_each_provider_and_capabilities_offer_chat() {
    let fake = FakeProvider::start();
    let providers = format!(
        "{}\n[[providers]]\nid = \"down\"\nkind = \"openai-compatible\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"m\"\n\n\
         [[providers]]\nid = \"claude\"\nkind = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"claude-x\"\n",
        fake.toml("fake", ProviderKind::OpenaiCompatible, Some("FAKE_KEY")),
        closed_port(),
        fake.anthropic_base_url(),
    );
    let gw = Gateway::start(&providers);
    let health = http::request(gw.port, "GET", "/v1/health", &[], None);
    assert_eq!(health.status, 200, "{}", health.body);
    assert_eq!(
        health.json()["data"]["providers"],
        json!([
            {"id": "fake", "kind": "openai-compatible", "status": "ready"},
            {"id": "down", "kind": "openai-compatible", "status": "unavailable"},
            {"id": "claude", "kind": "anthropic", "status": "not_configured"},
        ])
    );
    let probes = fake.requests();
    assert_eq!(
        probes.len(),
        1,
        "one models listing, nothing for the keyless provider"
    );
    assert!(probes[0].is_models_listing(), "{}", probes[0].path);
    assert_eq!(
        probes[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    // Probes are reused for a while: polling health does not hammer the providers.
    let again = http::request(gw.port, "GET", "/v1/health", &[], None);
    assert_eq!(again.json()["data"]["providers"][0]["status"], "ready");
    assert_eq!(fake.requests().len(), 1);
    assert!(!health.body.contains(KEY));

    let caps = gw.authed("GET", "/v1/capabilities", None).json();
    let runtime = &caps["data"]["runtime"];
    assert!(
        runtime
            .as_array()
            .is_some_and(|r| r.contains(&json!("chat"))),
        "{caps}"
    );
    assert_eq!(
        caps["data"]["providers"],
        json!(["anthropic", "openai-compatible"])
    );
}

/// Issue 12 §1: every health request that found the cached probe stale started its own probe
/// (41 in 10 s under wrk), each carrying the user's key. 50 concurrent requests cause one
/// probe; after the cache period they get the last answer at once while one probe refreshes
/// it. Issue 12: a provider without `model` read `ready`; it is `not_configured`, with a
/// remediation naming the key, and never probed.
#[test]
fn health_probes_a_provider_once_however_many_ask_and_never_one_without_a_model() {
    let fake = FakeProvider::start();
    fake.set_models(
        Reply::json(
            200,
            json!({"object": "list", "data": [{"id": FAKE_MODEL, "object": "model"}]}),
        )
        .delay_head(Duration::from_millis(600)),
    );
    let providers = format!(
        "{}\n[[providers]]\nid = \"nomodel\"\nkind = \"openai-compatible\"\nbase_url = \"{}\"\n",
        fake.toml("fake", ProviderKind::OpenaiCompatible, Some("FAKE_KEY")),
        fake.openai_base_url(),
    );
    let gw = Gateway::start(&providers);
    let burst = || -> Vec<Value> {
        let threads: Vec<_> = (0..50)
            .map(|_| {
                let port = gw.port;
                std::thread::spawn(move || {
                    let health = http::request(port, "GET", "/v1/health", &[], None);
                    assert_eq!(health.status, 200, "{}", health.body);
                    health.json()["data"]["providers"].clone()
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("health thread"))
            .collect()
    };
    let check = |answers: &[Value]| {
        for providers in answers {
            assert_eq!(providers[0]["status"], "ready", "{providers}");
            assert_eq!(providers[1]["id"], "nomodel");
            assert_eq!(providers[1]["status"], "not_configured", "{providers}");
            let remediation = providers[1]["remediation"].as_str().unwrap_or_default();
            assert!(
                remediation.contains("`model = ") && remediation.contains("`nomodel`"),
                "{remediation}"
            );
            assert!(providers[0].get("remediation").is_none(), "{providers}");
        }
    };
    let first = burst();
    check(&first);
    assert_eq!(
        fake.requests().len(),
        1,
        "one probe for 50 concurrent health requests, none for the provider without a model"
    );

    // Past the cache period: the last answer at once, one probe refreshing it.
    std::thread::sleep(Duration::from_millis(10_500));
    check(&burst());
    fake.wait_requests_blocking(2);
    check(&burst());
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(fake.requests().len(), 2, "one refresh per cache period");
}

// === 6. the review cache ===

#[test]
fn the_same_model_review_again_comes_from_the_cache_and_another_model_is_a_miss() {
    let fake = FakeProvider::with_script([report_turn(), summary_turn()]);
    let gw = Gateway::with_fake(&fake, ProviderKind::OpenaiCompatible);
    let first = gw
        .authed("POST", "/v1/reviews", Some(&gw.review_body("cache-1")))
        .sse();
    assert_eq!(first.last().map(|e| e.1.as_str()), Some("run.completed"));
    assert_eq!(fake.scripted_requests().len(), 2);

    let second = gw
        .authed("POST", "/v1/reviews", Some(&gw.review_body("cache-2")))
        .sse();
    assert_ne!(run_id(&first), run_id(&second), "a new run");
    assert_eq!(second[0].2["fromCache"], true, "{:?}", second[0]);
    assert_eq!(second[0].2["requestId"], "cache-2");
    assert_eq!(
        second.last().map(|e| e.2["fromCache"].clone()),
        Some(json!(true))
    );
    assert_eq!(fingerprints(&second), fingerprints(&first));
    assert_eq!(findings(&second, "model").len(), 1);
    assert_eq!(
        fake.scripted_requests().len(),
        2,
        "no provider request for a cache hit"
    );

    // Another model is another key.
    fake.push(report_turn());
    fake.push(summary_turn());
    let mut other = gw.review_body("cache-3");
    other["model"] = json!("fake-model-large");
    let third = gw.authed("POST", "/v1/reviews", Some(&other)).sse();
    assert_eq!(third[0].2.get("fromCache"), None);
    assert_eq!(third.last().map(|e| e.1.as_str()), Some("run.completed"));
    let requests = fake.scripted_requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[2].json()["model"], "fake-model-large");
    // Runs share the daemon's HTTP client: the third run's requests reuse the first run's
    // kept-alive connection.
    assert_eq!(requests[2].connection, requests[0].connection);
    // So is the rules-only review of the same range (the `builtin` provider).
    let mut builtin = gw.review_body("cache-4");
    builtin["providerId"] = json!("builtin");
    let fourth = gw.authed("POST", "/v1/reviews", Some(&builtin)).sse();
    assert_eq!(fourth[0].2.get("fromCache"), None);
    assert!(findings(&fourth, "model").is_empty());
    assert!(
        !of_type(&fourth, "stage.changed")
            .iter()
            .any(|e| e["stage"] == "model")
    );
    assert_eq!(fake.scripted_requests().len(), 4);
}

/// Issue 12 §5: an HTTP answer speaks of request fields, not of command-line flags.
#[test]
fn a_provider_without_a_model_is_explained_in_request_words() {
    let providers = "[[providers]]\nid = \"nomodel\"\nkind = \"openai-compatible\"\n\
                     base_url = \"http://127.0.0.1:9/v1\"\n";
    let gw = Gateway::start(providers);
    let mut body = gw.review_body("no-model");
    body["providerId"] = json!("nomodel");
    body.as_object_mut().expect("object").remove("model");
    let reply = gw.authed("POST", "/v1/reviews", Some(&body));
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (422, "provider.not_configured"),
        "{}",
        reply.body
    );
    let remediation = reply.json()["error"]["remediation"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        remediation.contains("`model` in the request") && !remediation.contains("--model"),
        "{remediation}"
    );
    assert_eq!(reply.json()["requestId"], "no-model");
}
