//! Incremental review (issue 17, "review new commits only"): `scope.sinceCommit` and
//! `scope.previousRunId` on a real git repository — through the library's pipeline and through
//! the real daemon over HTTP.
//!
//! The repository: `base`; `head1` adds findings A, B and E to `app.py` and D to `util.py`;
//! `head2` adds two lines above A, changes B's line (still flagged: B is found again, under a
//! new fingerprint), fixes E (gone), adds C, and leaves `util.py` alone.

mod common;

use common::git;
use common::http::{self, Response as Reply, SseEvent};
use common::{read_port, token};
use serde_json::{Value, json};

use review_agent_gateway::protocol::{AgentEvent, EventPayload, ReviewFinding};
use review_agent_gateway::review::{ReviewOptions, RunControl, new_id, run_with};

const ORIGIN: &str = "https://gitlab.example.com";
const PROJECT: &str = "group/project";
const OTHER: &str = "group/other";

/// The repository and its three commits.
struct Repo {
    dir: tempfile::TempDir,
    base: String,
    head1: String,
    head2: String,
}

fn commit(dir: &std::path::Path, files: &[(&str, &str)], message: &str) -> String {
    for (path, text) in files {
        std::fs::write(dir.join(path), text).expect("write");
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
    git(dir, &["rev-parse", "HEAD"])
}

fn repo() -> Repo {
    let dir = tempfile::tempdir().expect("temp dir");
    git(dir.path(), &["init", "-q", "-b", "main"]);
    let base = commit(
        dir.path(),
        &[
            ("app.py", "import os\n"),
            ("util.py", "def f():\n    return 1\n"),
        ],
        "base",
    );
    git(dir.path(), &["checkout", "-q", "-b", "feature"]);
    let head1 = commit(
        dir.path(),
        &[
            (
                "app.py",
                "import os\na = eval(x)\nb = eval(y)\ne = eval(q)\n",
            ),
            ("util.py", "def f():\n    return 1\nd = eval(z)\n"),
        ],
        "head1",
    );
    let head2 = commit(
        dir.path(),
        &[(
            "app.py",
            "import os\n# one\n# two\na = eval(x)\nb = eval(y2)\ne = q\nc = eval(w)\n",
        )],
        "head2",
    );
    Repo {
        dir,
        base,
        head1,
        head2,
    }
}

/// (path, startLine, quote of the flagged line, carriedOver) of each finding, in order.
type Seen = (String, u32, String, bool);

fn seen(finding: &ReviewFinding) -> Seen {
    (
        finding.path.clone(),
        finding.start_line,
        finding.existing_code.clone().unwrap_or_default(),
        finding.carried_over == Some(true),
    )
}

fn collect(options: &ReviewOptions) -> (Vec<AgentEvent>, bool) {
    let mut events = Vec::new();
    let ok = run_with(options, &RunControl::new(new_id("run")), &mut |e| {
        events.push(e.clone())
    })
    .is_ok();
    (events, ok)
}

fn findings(events: &[AgentEvent]) -> Vec<ReviewFinding> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::FindingCreated(f) => Some(f.finding.clone()),
            _ => None,
        })
        .collect()
}

fn owned(path: &str, line: u32, code: &str, carried: bool) -> Seen {
    (path.to_owned(), line, code.to_owned(), carried)
}

#[test]
fn the_pipeline_reviews_lines_changed_since_and_carries_the_rest_over() {
    let r = repo();
    let (first, ok) = collect(&ReviewOptions::new(r.dir.path(), &r.base, &r.head1));
    assert!(ok, "{first:?}");
    let previous = findings(&first);
    assert_eq!(
        previous.iter().map(seen).collect::<Vec<_>>(),
        vec![
            owned("app.py", 2, "a = eval(x)", false),
            owned("app.py", 3, "b = eval(y)", false),
            owned("app.py", 4, "e = eval(q)", false),
            owned("util.py", 3, "d = eval(z)", false),
        ]
    );

    let mut options = ReviewOptions::new(r.dir.path(), &r.base, &r.head2);
    options.since = Some(r.head1.clone());
    options.carry_over = previous.clone();
    let (events, ok) = collect(&options);
    assert!(ok, "{events:?}");
    let now = findings(&events);
    // Carried over first (A shifted by the two lines above it, D where it was), then the new
    // ones: B found again on its changed line, C; E is fixed, so gone.
    assert_eq!(
        now.iter().map(seen).collect::<Vec<_>>(),
        vec![
            owned("app.py", 4, "a = eval(x)", true),
            owned("util.py", 3, "d = eval(z)", true),
            owned("app.py", 5, "b = eval(y2)", false),
            owned("app.py", 7, "c = eval(w)", false),
        ]
    );
    // A carried finding keeps its fingerprint, gets a new id, and its evidence moved with it.
    assert_eq!(now[0].fingerprint, previous[0].fingerprint);
    assert_ne!(now[0].id, previous[0].id);
    assert_eq!(now[0].evidence[0].start_line, 4);
    assert_eq!(now[0].evidence[0].quote, "a = eval(x)");
    assert!(
        previous.iter().all(|p| p.fingerprint != now[2].fingerprint),
        "B's line changed: a new fingerprint"
    );

    let Some(EventPayload::RunCompleted(completed)) = events.last().map(|e| &e.payload) else {
        panic!("no run.completed: {events:?}");
    };
    assert_eq!(completed.finding_count, Some(4));
    assert_eq!(completed.reviewed_files, Some(vec!["app.py".to_owned()]));
    let skipped = completed.skipped_files.clone().unwrap_or_default();
    assert_eq!(
        skipped
            .iter()
            .map(|s| (s.path.as_str(), s.reason.as_str()))
            .collect::<Vec<_>>(),
        vec![("util.py", "unchanged_since")]
    );
    assert!(
        events.iter().any(|e| matches!(&e.payload,
            EventPayload::Warning(w) if w.code == "diff.unchanged_since_skipped"
                && w.path.as_deref() == Some("util.py"))),
        "{events:?}"
    );

    // Without the previous findings only the lines changed since are reviewed.
    options.carry_over = Vec::new();
    let (alone, ok) = collect(&options);
    assert!(ok);
    assert_eq!(
        findings(&alone).iter().map(seen).collect::<Vec<_>>(),
        vec![
            owned("app.py", 5, "b = eval(y2)", false),
            owned("app.py", 7, "c = eval(w)", false),
        ]
    );
    // And the whole merge request at head2 has A, B, C and D.
    let (full, ok) = collect(&ReviewOptions::new(r.dir.path(), &r.base, &r.head2));
    assert!(ok);
    assert_eq!(findings(&full).len(), 4);
}

#[test]
fn nothing_changed_since_says_so_and_a_missing_commit_fails_the_run() {
    let r = repo();
    let mut options = ReviewOptions::new(r.dir.path(), &r.base, &r.head2);
    options.since = Some(r.head2.clone());
    let (events, ok) = collect(&options);
    assert!(ok, "{events:?}");
    assert!(findings(&events).is_empty());
    assert!(
        events.iter().any(|e| matches!(&e.payload,
            EventPayload::Warning(w) if w.code == "review.nothing_changed_since")),
        "{events:?}"
    );

    options.since = Some("0".repeat(40));
    let (events, ok) = collect(&options);
    assert!(!ok);
    let Some(EventPayload::RunFailed(failed)) = events.last().map(|e| &e.payload) else {
        panic!("no run.failed: {events:?}");
    };
    assert_eq!(failed.error.code, "repository.revision_missing");
    assert!(
        failed.error.message.contains("scope.sinceCommit"),
        "{}",
        failed.error.message
    );
}

// === through the daemon ===

struct Daemon {
    child: std::process::Child,
    port: u16,
    token: String,
    _home: tempfile::TempDir,
    repo: Repo,
}

impl Daemon {
    fn start() -> Daemon {
        let repo = repo();
        let home = tempfile::tempdir().expect("temp dir");
        let config_dir = home.path().join("config");
        std::fs::create_dir_all(&config_dir).expect("mkdir");
        let mapping = |project: &str| {
            format!(
                "[[mappings]]\ngitlab_origin = \"{ORIGIN}\"\nproject_path = \"{project}\"\n\
                 local_path = \"{}\"\n\n",
                repo.dir.path().display()
            )
        };
        let config = format!(
            "allowed_origins = [\"{ORIGIN}\"]\n\n{}{}",
            mapping(PROJECT),
            mapping(OTHER)
        );
        std::fs::write(config_dir.join("config.toml"), config).expect("write config");
        let mut child = http::spawn_serve(home.path(), &[]);
        let port = read_port(&mut child);
        let token = token(home.path());
        Daemon {
            child,
            port,
            token,
            _home: home,
            repo,
        }
    }

    fn body(&self, request_id: &str, project: &str, head: &str, scope: Value) -> Value {
        json!({
            "requestId": request_id,
            "mode": "merge-request",
            "target": {
                "gitlabOrigin": ORIGIN,
                "projectPath": project,
                "mergeRequestIid": 3,
                "diffRefs": { "baseSha": self.repo.base, "startSha": self.repo.base, "headSha": head }
            },
            "scope": scope,
            "policy": { "minConfidence": "low" }
        })
    }

    fn post(&self, body: &Value) -> Reply {
        let auth = format!("Bearer {}", self.token);
        http::request(
            self.port,
            "POST",
            "/v1/reviews",
            &[("Authorization", &auth)],
            Some(body),
        )
    }

    /// A review that completes; its events.
    fn review(&self, body: &Value) -> Vec<SseEvent> {
        let reply = self.post(body);
        assert_eq!(reply.status, 200, "{}", reply.body);
        let events = reply.sse();
        assert_eq!(
            events.last().map(|e| e.1.as_str()),
            Some("run.completed"),
            "{events:?}"
        );
        events
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wire_findings(events: &[SseEvent]) -> Vec<(String, u64, bool)> {
    events
        .iter()
        .filter(|e| e.1 == "finding.created")
        .map(|e| {
            let f = &e.2["finding"];
            (
                f["existingCode"].as_str().unwrap_or("").to_owned(),
                f["startLine"].as_u64().unwrap_or(0),
                f["carriedOver"] == true,
            )
        })
        .collect()
}

fn run_id(events: &[SseEvent]) -> String {
    events[0].2["runId"].as_str().expect("run id").to_owned()
}

#[test]
fn the_daemon_reviews_new_commits_only_and_checks_the_fields() {
    let d = Daemon::start();
    let (head1, head2) = (d.repo.head1.clone(), d.repo.head2.clone());
    let first = d.review(&d.body("full-1", PROJECT, &head1, json!(null)));
    assert_eq!(wire_findings(&first).len(), 4, "{first:?}");
    let previous = run_id(&first);

    let scope = json!({ "sinceCommit": head1, "previousRunId": previous });
    let body = d.body("since-1", PROJECT, &head2, scope.clone());
    let events = d.review(&body);
    assert_eq!(
        wire_findings(&events),
        vec![
            ("a = eval(x)".to_owned(), 4, true),
            ("d = eval(z)".to_owned(), 3, true),
            ("b = eval(y2)".to_owned(), 5, false),
            ("c = eval(w)".to_owned(), 7, false),
        ]
    );
    let completed = &events.last().expect("events").2;
    assert_eq!(completed["skippedFiles"][0]["path"], "util.py");
    assert_eq!(completed["skippedFiles"][0]["reason"], "unchanged_since");
    // A finding that is not carried over has no `carriedOver` at all (additive field).
    let new_one = events
        .iter()
        .filter(|e| e.1 == "finding.created")
        .nth(2)
        .expect("a third finding");
    assert_eq!(new_one.2["finding"].get("carriedOver"), None);

    // The scope is part of the request: the same requestId with another sinceCommit is a
    // conflict, and the same request under a new id is a cache hit that replays the same.
    let mut changed = body.clone();
    changed["scope"]["sinceCommit"] = json!(d.repo.base);
    changed["scope"]["previousRunId"] = Value::Null;
    let conflict = d.post(&changed);
    assert_eq!(
        (conflict.status, conflict.error_code().as_str()),
        (409, "request.id_conflict"),
        "{}",
        conflict.body
    );
    let mut again = body.clone();
    again["requestId"] = json!("since-2");
    let replayed = d.review(&again);
    assert_eq!(replayed.last().expect("events").2["fromCache"], true);
    assert_eq!(wire_findings(&replayed), wire_findings(&events));
    // Without sinceCommit the same head is another review (not the incremental one's cache).
    let whole = d.review(&d.body("full-2", PROJECT, &head2, json!(null)));
    assert_eq!(whole.last().expect("events").2.get("fromCache"), None);
    assert_eq!(wire_findings(&whole).len(), 4);

    // Refused requests: each with its code, naming the field, and with a remediation.
    let other_project = run_id(&d.review(&d.body("other-1", OTHER, &head1, json!(null))));
    for (i, (scope, status, code, needle)) in [
        (
            json!({ "previousRunId": previous }),
            400,
            "request.invalid",
            "sinceCommit",
        ),
        (
            json!({ "sinceCommit": "abc123" }),
            400,
            "request.invalid",
            "sinceCommit",
        ),
        (
            json!({ "sinceCommit": "0".repeat(40) }),
            400,
            "repository.revision_missing",
            "sinceCommit",
        ),
        (
            json!({ "sinceCommit": head1, "previousRunId": "run_nope" }),
            404,
            "run.not_found",
            "run_nope",
        ),
        (
            json!({ "sinceCommit": d.repo.base, "previousRunId": previous }),
            400,
            "request.invalid",
            "reviewed head",
        ),
        (
            json!({ "sinceCommit": head1, "previousRunId": other_project }),
            400,
            "request.invalid",
            "another project",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let reply = d.post(&d.body(&format!("bad-{i}"), PROJECT, &head2, scope.clone()));
        reply.assert_refused(status, code, needle, &scope.to_string());
    }
}

#[test]
fn the_model_sees_only_files_changed_since_and_reports_only_on_changed_lines() {
    use common::fake_provider::{FakeProvider, OpenAiStream, Reply};
    use review_agent_gateway::config::ProviderKind;

    let report = |id: &str, line: u32, quote: &str| {
        let arguments = json!({
            "path": "app.py", "startLine": line, "endLine": line, "category": "bug",
            "severity": "medium", "confidence": "high", "title": format!("Line {line}"),
            "content": "Untrusted input reaches eval.",
            "evidence": [{"path": "app.py", "startLine": line, "endLine": line, "quote": quote}],
        })
        .to_string();
        Reply::from(
            OpenAiStream::new()
                .tool_call(0, id, "report_finding", &[&arguments])
                .end("tool_calls", 100, 10),
        )
    };
    let fake = FakeProvider::with_script([
        // Line 4 (A) is added by the merge request but did not change since head1: not this
        // review's. Line 7 (C) is new since.
        report("call_1", 4, "a = eval(x)"),
        report("call_2", 7, "c = eval(w)"),
        Reply::from(OpenAiStream::new().text("Done.").end("stop", 100, 2)),
    ]);
    let repo = repo();
    let home = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(home.path().join("config")).expect("mkdir");
    std::fs::write(
        home.path().join("config/config.toml"),
        format!(
            "allowed_origins = [\"{ORIGIN}\"]\n\n[[mappings]]\ngitlab_origin = \"{ORIGIN}\"\n\
             project_path = \"{PROJECT}\"\nlocal_path = \"{}\"\n\n{}context_window = 32768\n",
            repo.dir.path().display(),
            fake.toml("fake", ProviderKind::OpenaiCompatible, Some("FAKE_KEY"))
        ),
    )
    .expect("write config");
    let mut child = http::spawn_serve(home.path(), &[("FAKE_KEY", "sk-fake-0123456789abcdef")]);
    let port = read_port(&mut child);
    let auth = format!("Bearer {}", token(home.path()));
    let body = json!({
        "requestId": "model-since",
        "mode": "merge-request",
        "providerId": "fake",
        "target": {
            "gitlabOrigin": ORIGIN, "projectPath": PROJECT, "mergeRequestIid": 3,
            "diffRefs": { "baseSha": repo.base, "startSha": repo.base, "headSha": repo.head2 }
        },
        "scope": { "sinceCommit": repo.head1 },
        "policy": { "minConfidence": "low" }
    });
    let reply = http::request(
        port,
        "POST",
        "/v1/reviews",
        &[("Authorization", &auth)],
        Some(&body),
    );
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(reply.status, 200, "{}", reply.body);
    let events = reply.sse();
    assert_eq!(
        events.last().map(|e| e.1.as_str()),
        Some("run.completed"),
        "{events:?}"
    );
    let model: Vec<u64> = events
        .iter()
        .filter(|e| e.1 == "finding.created" && e.2["finding"]["source"] == "model")
        .filter_map(|e| e.2["finding"]["startLine"].as_u64())
        .collect();
    assert_eq!(model, vec![7], "{events:?}");

    let requests = fake.scripted_requests();
    assert!(!requests.is_empty());
    let prompt = requests[0].json()["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(prompt.contains("### app.py"), "{prompt}");
    assert!(prompt.contains("c = eval(w)"), "{prompt}");
    assert!(
        !prompt.contains("util.py") && !prompt.contains("d = eval(z)"),
        "a file unchanged since is not shown to the model: {prompt}"
    );
}

#[test]
fn a_new_copy_of_a_carried_over_line_is_reported_too() {
    let dir = tempfile::tempdir().expect("temp dir");
    git(dir.path(), &["init", "-q", "-b", "main"]);
    let base = commit(dir.path(), &[("app.py", "import os\n")], "base");
    let head1 = commit(
        dir.path(),
        &[("app.py", "import os\na = eval(x)\n")],
        "head1",
    );
    let head2 = commit(
        dir.path(),
        &[("app.py", "import os\na = eval(x)\nb = 1\na = eval(x)\n")],
        "head2",
    );
    let (first, ok) = collect(&ReviewOptions::new(dir.path(), &base, &head1));
    assert!(ok);
    let mut options = ReviewOptions::new(dir.path(), &base, &head2);
    options.since = Some(head1);
    options.carry_over = findings(&first);
    let (events, ok) = collect(&options);
    assert!(ok, "{events:?}");
    let now = findings(&events);
    assert_eq!(
        now.iter().map(seen).collect::<Vec<_>>(),
        vec![
            owned("app.py", 2, "a = eval(x)", true),
            owned("app.py", 4, "a = eval(x)", false),
        ]
    );
    assert_ne!(now[0].fingerprint, now[1].fingerprint);
    // The whole review of head2 gives the same two fingerprints.
    let (full, ok) = collect(&ReviewOptions::new(dir.path(), &base, &head2));
    assert!(ok);
    let mut all: Vec<String> = findings(&full).into_iter().map(|f| f.fingerprint).collect();
    let mut incremental: Vec<String> = now.into_iter().map(|f| f.fingerprint).collect();
    all.sort();
    incremental.sort();
    assert_eq!(all, incremental);
}

#[test]
fn a_file_renamed_since_keeps_its_carried_findings_under_its_new_path() {
    let r = repo();
    git(r.dir.path(), &["checkout", "-q", &r.head1]);
    git(r.dir.path(), &["mv", "util.py", "helpers.py"]);
    git(r.dir.path(), &["commit", "-q", "-m", "rename"]);
    let renamed = git(r.dir.path(), &["rev-parse", "HEAD"]);
    let (first, ok) = collect(&ReviewOptions::new(r.dir.path(), &r.base, &r.head1));
    assert!(ok);
    let mut options = ReviewOptions::new(r.dir.path(), &r.base, &renamed);
    options.since = Some(r.head1.clone());
    options.carry_over = findings(&first);
    let (events, ok) = collect(&options);
    assert!(ok, "{events:?}");
    assert_eq!(
        findings(&events).iter().map(seen).collect::<Vec<_>>(),
        vec![
            owned("app.py", 2, "a = eval(x)", true),
            owned("app.py", 3, "b = eval(y)", true),
            owned("app.py", 4, "e = eval(q)", true),
            owned("helpers.py", 3, "d = eval(z)", true),
        ]
    );
    let Some(EventPayload::RunCompleted(completed)) = events.last().map(|e| &e.payload) else {
        panic!("no run.completed: {events:?}");
    };
    let skipped: Vec<(String, String)> = completed
        .skipped_files
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|s| (s.path, s.reason))
        .collect();
    assert_eq!(
        skipped,
        vec![
            ("app.py".to_owned(), "unchanged_since".to_owned()),
            ("helpers.py".to_owned(), "unchanged_since".to_owned())
        ]
    );
}
