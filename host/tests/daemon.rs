//! End-to-end tests of the daemon: the real binary on a free loopback port, real HTTP.

mod common;

use common::http::{self, Response as Reply};
use common::{bin, git, read_port, token};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command};

use serde_json::{Value, json};

/// A running `review-agent-gateway serve` with its own home, config and fixture repository.
struct Daemon {
    child: Child,
    port: u16,
    token: String,
    home: tempfile::TempDir,
    repo: tempfile::TempDir,
    base: String,
    head: String,
}

const ORIGIN: &str = "https://gitlab.example.com";
const PROJECT: &str = "group/project";

impl Daemon {
    fn start() -> Daemon {
        Daemon::start_with("")
    }

    /// A daemon whose config file ends with `extra` (TOML).
    fn start_with(extra: &str) -> Daemon {
        let (repo, base, head) =
            common::app_repository("import os\n", "import os\na = eval(x)\nb = eval(y)\n");

        let home = tempfile::tempdir().expect("temp dir");
        let config_dir = home.path().join("config");
        std::fs::create_dir_all(&config_dir).expect("mkdir");
        let config = format!(
            "allowed_origins = [\"{ORIGIN}\"]\n\n[limits]\nmax_concurrent_reviews = 3\n\n\
             [[mappings]]\ngitlab_origin = \"{ORIGIN}\"\nproject_path = \"{PROJECT}\"\nlocal_path = \"{}\"\n",
            repo.path().display()
        ) + extra;
        std::fs::write(config_dir.join("config.toml"), config).expect("write config");
        let mut daemon = Daemon {
            child: spawn(home.path()),
            port: 0,
            token: String::new(),
            home,
            repo,
            base,
            head,
        };
        daemon.port = read_port(&mut daemon.child);
        daemon.token = token(daemon.home.path());
        daemon
    }

    fn restart(&mut self) {
        self.child = spawn(self.home.path());
        self.port = read_port(&mut self.child);
    }

    fn review_body(&self, request_id: &str) -> Value {
        json!({
            "requestId": request_id,
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

    /// A raw HTTP/1.1 request (so every header, `Host` included, is exactly what we say).
    fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Reply {
        http::request(self.port, method, path, headers, body)
    }

    fn authed(&self, method: &str, path: &str, body: Option<&Value>) -> Reply {
        let auth = format!("Bearer {}", self.token);
        self.raw(method, path, &[("Authorization", &auth)], body)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(home: &Path) -> Child {
    spawn_with(home, &[])
}

fn spawn_with(home: &Path, env: &[(&str, &str)]) -> Child {
    http::spawn_serve(home, env)
}

#[test]
fn health_is_public_and_everything_else_needs_the_token() {
    let d = Daemon::start();
    let health = d.raw("GET", "/v1/health", &[], None);
    assert_eq!(health.status, 200, "{}", health.body);
    assert_eq!(health.json()["data"]["protocolVersion"], "1.0");
    assert_eq!(health.json()["ok"], true);

    let missing = d.raw("GET", "/v1/capabilities", &[], None);
    assert_eq!(
        (missing.status, missing.error_code().as_str()),
        (401, "auth.token_missing")
    );
    let wrong = d.raw(
        "GET",
        "/v1/capabilities",
        &[("Authorization", "Bearer nope")],
        None,
    );
    assert_eq!(
        (wrong.status, wrong.error_code().as_str()),
        (401, "auth.token_invalid")
    );
    let caps = d.authed("GET", "/v1/capabilities", None);
    assert_eq!(caps.status, 200, "{}", caps.body);
    assert_eq!(
        caps.json()["data"]["limits"]["maxConcurrentReviews"],
        3,
        "from config.toml"
    );
}

#[test]
fn host_and_origin_policy() {
    let d = Daemon::start();
    let evil = d.raw(
        "GET",
        "/v1/health",
        &[("Host", &format!("evil.example:{}", d.port))],
        None,
    );
    assert_eq!(
        (evil.status, evil.error_code().as_str()),
        (403, "request.host_not_allowed")
    );

    let preflight = |origin: &str| {
        d.raw(
            "OPTIONS",
            "/v1/reviews",
            &[
                ("Origin", origin),
                ("Access-Control-Request-Method", "POST"),
                ("Access-Control-Request-Private-Network", "true"),
            ],
            None,
        )
    };
    let good = preflight(ORIGIN);
    assert_eq!(good.status, 204);
    assert_eq!(good.header("access-control-allow-origin"), Some(ORIGIN));
    assert_eq!(
        good.header("access-control-allow-private-network"),
        Some("true")
    );
    let bad = preflight("https://evil.example");
    assert_eq!(bad.header("access-control-allow-origin"), None);
    assert_eq!(bad.status, 403);

    // A request from another origin has no side effect: no run is created.
    let auth = format!("Bearer {}", d.token);
    let body = d.review_body("from-evil");
    let refused = d.raw(
        "POST",
        "/v1/reviews",
        &[("Authorization", &auth), ("Origin", "https://evil.example")],
        Some(&body),
    );
    assert_eq!(
        (refused.status, refused.error_code().as_str()),
        (403, "origin.not_allowed")
    );
    // Had it created a run, the same requestId with another payload would now be a 409.
    let mut other = body.clone();
    other["policy"]["minConfidence"] = json!("high");
    let accepted = d.authed("POST", "/v1/reviews", Some(&other));
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    assert_eq!(accepted.sse()[0].1, "run.created");
}

#[test]
fn a_review_streams_over_sse_and_resumes_by_cursor() {
    let d = Daemon::start();
    let reply = d.authed("POST", "/v1/reviews", Some(&d.review_body("r1")));
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(
        reply
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"))
    );
    let events = reply.sse();
    let ids: Vec<u64> = events.iter().map(|e| e.0).collect();
    assert_eq!(
        ids,
        (1..=events.len() as u64).collect::<Vec<_>>(),
        "id: is the gap-free seq"
    );
    for (id, kind, data) in &events {
        assert_eq!(data["seq"], *id);
        assert_eq!(data["type"], kind.as_str());
    }
    assert_eq!(events.first().map(|e| e.1.as_str()), Some("run.created"));
    assert_eq!(events.last().map(|e| e.1.as_str()), Some("run.completed"));
    let findings: Vec<&Value> = events
        .iter()
        .filter(|e| e.1 == "finding.created")
        .map(|e| &e.2)
        .collect();
    assert_eq!(findings.len(), 2);
    let run_id = events[0].2["runId"].as_str().expect("runId").to_owned();

    // Reconnect after seq 3, by query and by Last-Event-ID: exactly the missed events.
    let after = d
        .authed("GET", &format!("/v1/runs/{run_id}/events?after=3"), None)
        .sse();
    assert_eq!(
        after.iter().map(|e| e.0).collect::<Vec<_>>(),
        ids[3..].to_vec()
    );
    let auth = format!("Bearer {}", d.token);
    let by_header = d
        .raw(
            "GET",
            &format!("/v1/runs/{run_id}/events"),
            &[("Authorization", &auth), ("Last-Event-ID", "3")],
            None,
        )
        .sse();
    assert_eq!(
        by_header.iter().map(|e| e.0).collect::<Vec<_>>(),
        ids[3..].to_vec()
    );

    let view = d.authed("GET", &format!("/v1/runs/{run_id}"), None).json();
    assert_eq!(view["data"]["state"], "completed");
    assert_eq!(view["data"]["findings"].as_array().map(Vec::len), Some(2));
    assert_eq!(view["data"]["lastSeq"], events.len());
}

#[test]
fn idempotency_and_errors() {
    let d = Daemon::start();
    let body = d.review_body("same");
    let first = d.authed("POST", "/v1/reviews", Some(&body)).sse();
    let again = d.authed("POST", "/v1/reviews", Some(&body)).sse();
    assert_eq!(
        first[0].2["runId"], again[0].2["runId"],
        "same requestId + payload = same run"
    );
    assert_eq!(first.len(), again.len());
    let mut changed = body.clone();
    changed["policy"]["minConfidence"] = json!("high");
    let conflict = d.authed("POST", "/v1/reviews", Some(&changed));
    assert_eq!(
        (conflict.status, conflict.error_code().as_str()),
        (409, "request.id_conflict")
    );

    let mut unmapped = d.review_body("unmapped");
    unmapped["target"]["projectPath"] = json!("other/project");
    let reply = d.authed("POST", "/v1/reviews", Some(&unmapped));
    assert_eq!(
        (reply.status, reply.error_code().as_str()),
        (404, "repository.not_mapped")
    );
    assert_eq!(
        reply.json()["error"]["remediation"],
        "Open Gateway settings and add a repository mapping."
    );

    let bad = d.authed("POST", "/v1/reviews", Some(&json!({"requestId": "x"})));
    assert_eq!(
        (bad.status, bad.error_code().as_str()),
        (400, "request.invalid")
    );
    let missing = d.authed("GET", "/v1/runs/run_nope", None);
    assert_eq!(
        (missing.status, missing.error_code().as_str()),
        (404, "run.not_found")
    );
    let cursor = d.authed("GET", "/v1/runs/run_nope/events?after=abc", None);
    assert_eq!(
        (cursor.status, cursor.error_code().as_str()),
        (400, "request.invalid")
    );
    let chat = d.authed(
        "POST",
        "/v1/chat",
        Some(&json!({"requestId": "c", "messages": [{"role": "user", "content": "hi"}]})),
    );
    assert_eq!(
        (chat.status, chat.error_code().as_str()),
        (422, "provider.not_configured")
    );
    let mapping = d.authed(
        "POST",
        "/v1/repository-mappings",
        Some(&json!({"gitlabOrigin": ORIGIN, "projectPath": "a/b", "localPath": "/nowhere", "defaultRef": "main"})),
    );
    assert_eq!(mapping.status, 202, "{}", mapping.body);
    assert_eq!(mapping.json()["data"]["status"], "pending");
}

#[test]
fn fifty_subscribers_see_the_same_sequence() {
    let d = Daemon::start();
    let first = d
        .authed("POST", "/v1/reviews", Some(&d.review_body("many")))
        .sse();
    let run_id = first[0].2["runId"].as_str().expect("runId").to_owned();
    let expected: Vec<u64> = first.iter().map(|e| e.0).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..50)
            .map(|_| {
                s.spawn(|| {
                    d.authed("GET", &format!("/v1/runs/{run_id}/events?after=0"), None)
                        .sse()
                })
            })
            .collect();
        for h in handles {
            let got: Vec<u64> = h.join().expect("subscriber").iter().map(|e| e.0).collect();
            assert_eq!(got, expected);
        }
    });
}

#[test]
fn restart_keeps_runs_and_resume_completes_an_interrupted_run() {
    let mut d = Daemon::start();
    let events = d
        .authed("POST", "/v1/reviews", Some(&d.review_body("keep")))
        .sse();
    let run_id = events[0].2["runId"].as_str().expect("runId").to_owned();
    // kill -9: no graceful shutdown.
    let _ = d.child.kill();
    let _ = d.child.wait();
    d.restart();
    let view = d.authed("GET", &format!("/v1/runs/{run_id}"), None).json();
    assert_eq!(
        view["data"]["state"], "completed",
        "a finished run survives a crash"
    );
    let cancel = d.authed("POST", &format!("/v1/runs/{run_id}/cancel"), None);
    assert_eq!(
        cancel.json()["data"]["state"],
        "completed",
        "cancelling a finished run changes nothing"
    );
    let resumed = d.authed("POST", &format!("/v1/runs/{run_id}/resume"), None);
    assert_eq!(resumed.json()["data"]["state"], "completed");
}

/// Read an SSE response incrementally until `n` events of type `kind` arrived; returns every
/// event seen so far. The connection is then dropped.
fn read_until(d: &Daemon, body: &Value, kind: &str, n: usize) -> Vec<(u64, String, Value)> {
    let mut stream = TcpStream::connect(("127.0.0.1", d.port)).expect("connect");
    let body = body.to_string();
    let request = format!(
        "POST /v1/reviews HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        d.port,
        d.token,
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("write");
    let mut reader = BufReader::new(stream);
    let (mut seen, mut text, mut line) = (0, String::new(), String::new());
    while seen < n {
        line.clear();
        if reader.read_line(&mut line).expect("read") == 0 {
            break;
        }
        if line.trim() == format!("event: {kind}") {
            seen += 1;
        }
        text.push_str(&line);
    }
    // Finish the block of the last event (its data line and the blank line).
    while !text.ends_with("\n\n") && !text.ends_with("\r\n\r\n") {
        line.clear();
        if reader.read_line(&mut line).expect("read") == 0 {
            break;
        }
        text.push_str(&line);
    }
    http::parse_sse(&text.replace("\r\n", "\n"))
}

#[test]
fn kill_9_mid_review_then_resume_finishes_without_duplicates() {
    // Five flagged lines, with a fault-injection pause so the crash falls between findings.
    let mut d = slow_daemon(3, "400");

    let before = read_until(&d, &d.review_body("crash"), "finding.created", 2);
    let run_id = before[0].2["runId"].as_str().expect("runId").to_owned();
    let _ = d.child.kill(); // SIGKILL: no graceful shutdown, no flush
    let _ = d.child.wait();
    d.restart();

    let view = d.authed("GET", &format!("/v1/runs/{run_id}"), None).json();
    assert_eq!(view["data"]["state"], "interrupted", "{view}");
    let committed = view["data"]["findings"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    assert!(
        (2..5).contains(&committed),
        "the crash fell between findings: {committed} stored"
    );
    // Issue 12: following the interrupted run ends with a durable `run.interrupted` (not a
    // bare end of stream a client cannot tell from a network drop), the last event.
    let followed = d
        .authed("GET", &format!("/v1/runs/{run_id}/events?after=0"), None)
        .sse();
    let last = followed.last().expect("events");
    assert_eq!(last.1, "run.interrupted", "{followed:?}");
    assert_eq!(last.2["reason"], "crash", "{last:?}");
    assert_eq!(last.2["resumable"], true, "{last:?}");
    assert_eq!(last.0, view["data"]["lastSeq"].as_u64().expect("lastSeq"));
    let interrupted_seq = last.0;

    let resumed = d.authed("POST", &format!("/v1/runs/{run_id}/resume"), None);
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    // Follow the run to its end, from the start: one gap-free sequence, each finding once.
    let all = d
        .authed("GET", &format!("/v1/runs/{run_id}/events?after=0"), None)
        .sse();
    let seqs: Vec<u64> = all.iter().map(|e| e.0).collect();
    assert_eq!(
        seqs,
        (1..=all.len() as u64).collect::<Vec<_>>(),
        "gap-free across the crash"
    );
    assert_eq!(all.last().map(|e| e.1.as_str()), Some("run.completed"));
    assert_eq!(
        all.iter()
            .filter(|e| e.1 == "run.interrupted")
            .map(|e| e.0)
            .collect::<Vec<_>>(),
        [interrupted_seq],
        "the interruption stays in the log; resume continues after it"
    );
    let mut fingerprints: Vec<String> = all
        .iter()
        .filter(|e| e.1 == "finding.created")
        .map(|e| {
            e.2["finding"]["fingerprint"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(fingerprints.len(), 5, "every finding exactly once");
    fingerprints.sort();
    fingerprints.dedup();
    assert_eq!(fingerprints.len(), 5);
    let view = d.authed("GET", &format!("/v1/runs/{run_id}"), None).json();
    assert_eq!(view["data"]["state"], "completed");
    assert_eq!(view["data"]["findings"].as_array().map(Vec::len), Some(5));
}

#[test]
fn a_review_runs_the_configured_analyzers() {
    let ruff = common::test_venv().join("bin/ruff");
    assert!(
        ruff.is_file(),
        "{} is missing: run `bash .ci/run` once (it installs ruff into target/test-venv)",
        ruff.display()
    );
    let d = Daemon::start_with(&format!(
        "\n[[analyzers]]\nname = \"ruff\"\ncommand = [{}, \"check\", \"--no-cache\", \
         \"--exit-zero\", \"--select\", \"F821\", \"--output-format\", \"sarif\", \"{{files}}\"]\n",
        serde_json::to_string(&ruff.display().to_string()).expect("json")
    ));
    let events = d
        .authed("POST", "/v1/reviews", Some(&d.review_body("with-ruff")))
        .sse();
    assert_eq!(events.last().map(|e| e.1.as_str()), Some("run.completed"));
    // F821 (undefined name) on both added lines, beside the rules' eval findings.
    let from_ruff: Vec<(u64, String)> = events
        .iter()
        .filter(|e| e.1 == "finding.created" && e.2["finding"]["source"] == "analyzer")
        .map(|e| {
            let f = &e.2["finding"];
            assert_eq!(f["analyzer"], "ruff");
            (
                f["startLine"].as_u64().unwrap_or_default(),
                f["ruleId"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        from_ruff,
        [(2, "F821".to_owned()), (3, "F821".to_owned())],
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.1 == "tool.completed" && e.2["tool"] == "analyzer" && e.2["ok"] == true),
        "{events:?}"
    );
}

#[test]
fn the_same_review_again_replays_from_the_cache() {
    let d = Daemon::start();
    let first = d
        .authed("POST", "/v1/reviews", Some(&d.review_body("cache-1")))
        .sse();
    let second = d
        .authed("POST", "/v1/reviews", Some(&d.review_body("cache-2")))
        .sse();
    assert_ne!(first[0].2["runId"], second[0].2["runId"], "a new run");
    assert_eq!(second[0].1, "run.created");
    assert_eq!(second[0].2["fromCache"], true);
    assert_eq!(second[0].2["requestId"], "cache-2");
    assert_eq!(second.last().map(|e| e.1.as_str()), Some("run.completed"));
    assert_eq!(
        second.last().map(|e| e.2["fromCache"].clone()),
        Some(json!(true))
    );
    let findings = |events: &[(u64, String, Value)]| -> Vec<(String, String)> {
        events
            .iter()
            .filter(|e| e.1 == "finding.created")
            .map(|e| {
                let f = &e.2["finding"];
                (
                    f["fingerprint"].as_str().unwrap_or_default().to_owned(),
                    f["id"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    let (a, b) = (findings(&first), findings(&second));
    assert_eq!(a.len(), 2);
    assert_eq!(
        a.iter().map(|f| &f.0).collect::<Vec<_>>(),
        b.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    assert!(a.iter().zip(&b).all(|(x, y)| x.1 != y.1), "new finding ids");
    let ids: Vec<u64> = second.iter().map(|e| e.0).collect();
    assert_eq!(ids, (1..=second.len() as u64).collect::<Vec<_>>());

    // Another policy is another key: a fresh run.
    let mut other = d.review_body("cache-3");
    other["policy"]["minConfidence"] = json!("high");
    let third = d.authed("POST", "/v1/reviews", Some(&other)).sse();
    assert_eq!(third[0].2.get("fromCache"), None);
}

#[test]
fn sigterm_marks_a_run_still_going_interrupted() {
    // 3 s between findings: the run outlasts the 5 s shutdown grace.
    let mut d = slow_daemon(3, "3000");
    let before = read_until(&d, &d.review_body("term"), "finding.created", 1);
    let run_id = before[0].2["runId"].as_str().expect("runId").to_owned();
    // A client following the run while the daemon stops (issue 12: its stream used to end
    // with no terminal event).
    let follower = {
        let (port, auth, path) = (
            d.port,
            format!("Bearer {}", d.token),
            format!("/v1/runs/{run_id}/events?after=0"),
        );
        std::thread::spawn(move || {
            http::request(port, "GET", &path, &[("Authorization", &auth)], None).sse()
        })
    };
    // Let the follower catch up to the live end before the signal.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid = d.child.id().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let exit = d.child.wait().expect("daemon exits");
    assert!(exit.success(), "graceful shutdown exits 0: {exit:?}");
    let followed = follower.join().expect("follower");
    let last = followed.last().expect("events");
    assert_eq!(
        (last.1.as_str(), last.2["reason"].as_str()),
        ("run.interrupted", Some("shutdown")),
        "the follower's stream ends with run.interrupted: {followed:?}"
    );
    let seqs: Vec<u64> = followed.iter().map(|e| e.0).collect();
    assert_eq!(seqs, (1..=followed.len() as u64).collect::<Vec<_>>());
    // The review thread still going holds the store when the process exits: the daemon closes
    // the file anyway, so the command line reads it without a restart.
    let listed = runs_list(d.home.path()).expect("runs list after SIGTERM");
    assert_eq!(listed, vec![run_id.clone()]);
    d.restart();
    let view = d.authed("GET", &format!("/v1/runs/{run_id}"), None).json();
    assert_eq!(view["data"]["state"], "interrupted", "{view}");
    assert!(
        view["data"]["findings"]
            .as_array()
            .is_some_and(|f| !f.is_empty()),
        "flushed findings kept"
    );
    assert_eq!(view["data"]["lastSeq"].as_u64(), Some(last.0), "{view}");
    // Resume continues after the `run.interrupted`: next seq, no finding twice, completed.
    let resumed = d.authed("POST", &format!("/v1/runs/{run_id}/resume"), None);
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    let after = d
        .authed(
            "GET",
            &format!("/v1/runs/{run_id}/events?after={}", last.0),
            None,
        )
        .sse();
    assert_eq!(after.first().map(|e| e.0), Some(last.0 + 1), "{after:?}");
    assert_eq!(after.last().map(|e| e.1.as_str()), Some("run.completed"));
    let all = d
        .authed("GET", &format!("/v1/runs/{run_id}/events?after=0"), None)
        .sse();
    let mut fingerprints: Vec<&str> = all
        .iter()
        .filter(|e| e.1 == "finding.created")
        .filter_map(|e| e.2["finding"]["fingerprint"].as_str())
        .collect();
    assert_eq!(fingerprints.len(), 5, "{all:?}");
    fingerprints.sort_unstable();
    fingerprints.dedup();
    assert_eq!(fingerprints.len(), 5, "no finding twice");
}

/// `review-agent-gateway runs list --format json` in `home` (the CLI's read-only store, beside
/// the daemon or after it): on success the listed run ids, else the error printed.
fn runs_list(home: &Path) -> Result<Vec<String>, String> {
    let out = Command::new(bin())
        .args(["runs", "list", "--format", "json"])
        .env("REVIEW_AGENT_GATEWAY_HOME", home)
        .output()
        .expect("runs list runs");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let run: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            run["runId"].as_str().expect("runId").to_owned()
        })
        .collect())
}

/// Send `signal` (`TERM`, `INT`) to the daemon and wait for its graceful exit (status 0).
fn stop_with(d: &mut Daemon, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &d.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let exit = d.child.wait().expect("daemon exits");
    assert!(exit.success(), "SIG{signal} exits 0: {exit:?}");
}

/// A review run to completion; its run id.
fn completed_review(d: &Daemon, request_id: &str) -> String {
    let events = d
        .authed("POST", "/v1/reviews", Some(&d.review_body(request_id)))
        .sse();
    assert_eq!(
        events.last().map(|e| e.1.as_str()),
        Some("run.completed"),
        "{events:?}"
    );
    events[0].2["runId"].as_str().expect("runId").to_owned()
}

#[test]
fn runs_list_reads_the_store_after_a_graceful_stop() {
    // The trial's steps: serve on a fresh home; `runs list` beside it; SIGTERM (or SIGINT);
    // `runs list` again. The daemon used to exit with its store still open (its tasks hold it),
    // which left the file marked unclean: the reader then refused it (`Database repair
    // aborted`) until the next `serve`. Whether it did depended on a race, so each signal gets
    // a few stop/start rounds on its home.
    for signal in ["TERM", "INT"] {
        let mut d = Daemon::start();
        let mut written = Vec::new();
        for round in 0..3 {
            written.push(completed_review(&d, &format!("{signal}-{round}-before")));
            let beside = runs_list(d.home.path()).expect("runs list beside the daemon");
            assert!(beside.contains(&written[written.len() - 1]), "{beside:?}");
            // A run written after the reader came and went is kept too.
            written.push(completed_review(&d, &format!("{signal}-{round}-after")));
            stop_with(&mut d, signal);
            let after = runs_list(d.home.path()).unwrap_or_else(|error| {
                panic!("runs list after SIG{signal} (round {round}) failed: {error}")
            });
            for run_id in &written {
                assert!(
                    after.contains(run_id),
                    "{run_id} written before SIG{signal} is listed: {after:?}"
                );
            }
            d.restart();
        }
    }
}

#[test]
fn runs_list_after_kill_9_says_to_start_serve_once() {
    let mut d = Daemon::start();
    let run_id = completed_review(&d, "crash");
    runs_list(d.home.path()).expect("runs list beside the daemon");
    // kill -9: the store is left marked unclean, which only a writer (`serve`) may repair.
    let _ = d.child.kill();
    let _ = d.child.wait();
    let error = runs_list(d.home.path()).expect_err("an unclean store is refused");
    assert!(error.contains("error[store.unavailable]"), "{error}");
    assert!(
        error.contains("start `review-agent-gateway serve` once so it repairs"),
        "the error says what to do: {error}"
    );
    // Doing what it says: `serve` repairs the file, and after a graceful stop it is readable.
    d.restart();
    stop_with(&mut d, "TERM");
    let after = runs_list(d.home.path()).expect("runs list after the repair");
    assert_eq!(after, vec![run_id]);
}

#[test]
fn logs_never_contain_the_token_or_code() {
    let d = Daemon::start();
    let events = d
        .authed("POST", "/v1/reviews", Some(&d.review_body("logs")))
        .sse();
    assert_eq!(events.last().map(|e| e.1.as_str()), Some("run.completed"));
    let log = std::fs::read_to_string(d.home.path().join("serve.log")).unwrap_or_default();
    assert!(log.contains("listening"), "the log is captured: {log}");
    assert!(!log.contains(&d.token), "the token leaked into the log");
    assert!(
        !log.contains("eval(x)"),
        "file contents leaked into the log"
    );
}

#[test]
fn bad_startup_inputs_exit_2_with_a_clear_error() {
    let home = tempfile::tempdir().expect("temp dir");
    let run = |args: &[&str]| {
        Command::new(bin())
            .args(args)
            .env("REVIEW_AGENT_GATEWAY_HOME", home.path())
            .output()
            .expect("runs")
    };
    let remote = run(&["serve", "--port", "0", "--bind", "0.0.0.0"]);
    assert_eq!(remote.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&remote.stderr);
    assert!(
        stderr.contains("error[request.invalid]") && stderr.contains("--allow-remote"),
        "{stderr}"
    );

    // The config file's `bind` is held to the same rule as --bind (issue 14 §5): no
    // non-loopback listener without --allow-remote, and never one without the token (every
    // route but /v1/health needs it; `serve` creates the token before it listens).
    std::fs::create_dir_all(home.path().join("config")).expect("mkdir");
    std::fs::write(
        home.path().join("config/config.toml"),
        "bind = \"0.0.0.0\"\n",
    )
    .expect("write");
    let remote = run(&["serve", "--port", "0"]);
    assert_eq!(remote.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&remote.stderr);
    assert!(
        stderr.contains("error[request.invalid]") && stderr.contains("0.0.0.0"),
        "{stderr}"
    );
    for v6 in ["::", "::ffff:127.0.0.1"] {
        let remote = run(&["serve", "--port", "0", "--bind", v6]);
        assert_eq!(remote.status.code(), Some(2), "{v6}");
    }

    std::fs::write(
        home.path().join("config/config.toml"),
        "port = 4317\n[limits]\nmax_concurrent_reviews = \"two\"\n",
    )
    .expect("write");
    let invalid = run(&["serve", "--port", "0"]);
    assert_eq!(invalid.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&invalid.stderr);
    assert!(stderr.contains("error[config.invalid]"), "{stderr}");
    assert!(
        stderr.contains(":3") && stderr.contains("limits.max_concurrent_reviews"),
        "names line and key: {stderr}"
    );
}

/// Restart `d` with five findings in its head commit, `slots` review slots and a pause of
/// `delay_ms` after each finding.
fn slow_daemon(slots: u32, delay_ms: &str) -> Daemon {
    let mut d = Daemon::start();
    let lines: String = (0..5).map(|i| format!("v{i} = eval(x{i})\n")).collect();
    std::fs::write(d.repo.path().join("app.py"), format!("import os\n{lines}")).expect("write");
    git(d.repo.path(), &["commit", "-q", "-am", "five findings"]);
    d.head = git(d.repo.path(), &["rev-parse", "HEAD"]);
    let config = d.home.path().join("config/config.toml");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        text.replace(
            "max_concurrent_reviews = 3",
            &format!("max_concurrent_reviews = {slots}"),
        ),
    )
    .expect("write config");
    let _ = d.child.kill();
    let _ = d.child.wait();
    d.child = spawn_with(
        d.home.path(),
        &[("REVIEW_AGENT_GATEWAY_FAULT_FINDING_DELAY_MS", delay_ms)],
    );
    d.port = read_port(&mut d.child);
    d
}

#[test]
fn cancel_stops_a_running_review_and_resume_finishes_it() {
    let d = slow_daemon(3, "500");
    let before = read_until(&d, &d.review_body("cancel-me"), "finding.created", 1);
    let run_id = before[0].2["runId"].as_str().expect("runId").to_owned();
    let cancel = d.authed(
        "POST",
        &format!("/v1/runs/{run_id}/cancel"),
        Some(&json!({"reason": "user_cancelled"})),
    );
    assert_eq!(cancel.status, 200, "{}", cancel.body);
    let events = d
        .authed("GET", &format!("/v1/runs/{run_id}/events?after=0"), None)
        .sse();
    assert_eq!(
        events.last().map(|e| e.1.as_str()),
        Some("run.cancelled"),
        "promptly, not after all findings"
    );
    assert_eq!(
        events.last().map(|e| e.2["reason"].clone()),
        Some(json!("user_cancelled")),
        "the caller's reason"
    );
    let bad = d.authed(
        "POST",
        &format!("/v1/runs/{run_id}/cancel"),
        Some(&json!(["not", "an", "object"])),
    );
    assert_eq!(
        (bad.status, bad.error_code().as_str()),
        (400, "request.invalid")
    );
    let found = events.iter().filter(|e| e.1 == "finding.created").count();
    assert!(found < 5, "stopped early: {found} findings");
    assert_eq!(
        d.authed("GET", &format!("/v1/runs/{run_id}"), None).json()["data"]["state"],
        "cancelled"
    );

    let resumed = d.authed("POST", &format!("/v1/runs/{run_id}/resume"), None);
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    let all = d
        .authed("GET", &format!("/v1/runs/{run_id}/events?after=0"), None)
        .sse();
    assert_eq!(all.last().map(|e| e.1.as_str()), Some("run.completed"));
    assert_eq!(
        all.iter().filter(|e| e.1 == "finding.created").count(),
        5,
        "each finding once"
    );
    let seqs: Vec<u64> = all.iter().map(|e| e.0).collect();
    assert_eq!(seqs, (1..=all.len() as u64).collect::<Vec<_>>());
}

#[test]
fn reviews_over_the_limit_queue_visibly_and_can_be_cancelled_while_queued() {
    let d = slow_daemon(1, "400");
    let busy = read_until(&d, &d.review_body("busy"), "finding.created", 1);
    assert_eq!(busy[0].1, "run.created");
    let queued = read_until(&d, &d.review_body("waiting"), "stage.changed", 1);
    let run_id = queued[0].2["runId"].as_str().expect("runId").to_owned();
    assert_eq!(
        queued.last().map(|e| e.2["stage"].clone()),
        Some(json!("queued")),
        "{queued:?}"
    );
    assert_eq!(
        d.authed("GET", &format!("/v1/runs/{run_id}"), None).json()["data"]["state"],
        "queued"
    );
    d.authed("POST", &format!("/v1/runs/{run_id}/cancel"), None);
    let events = d
        .authed("GET", &format!("/v1/runs/{run_id}/events?after=0"), None)
        .sse();
    let types: Vec<&str> = events.iter().map(|e| e.1.as_str()).collect();
    assert_eq!(types, ["run.created", "stage.changed", "run.cancelled"]);
}

#[test]
fn browser_facing_edges() {
    let d = Daemon::start();
    // Every answer is the common response object, even for a wrong method or a huge body.
    let wrong_method = d.authed("DELETE", "/v1/reviews", None);
    assert_eq!(wrong_method.status, 405);
    assert_eq!(wrong_method.json()["ok"], false);
    let huge = json!({ "requestId": "x".repeat(3 * 1024 * 1024) });
    let too_large = d.authed("POST", "/v1/reviews", Some(&huge));
    assert_eq!(
        (too_large.status, too_large.error_code().as_str()),
        (413, "request.invalid")
    );

    // The not-mapped error names the project and the command that maps it.
    let mut unmapped = d.review_body("edges-unmapped");
    unmapped["target"]["projectPath"] = json!("other/thing");
    let reply = d.authed("POST", "/v1/reviews", Some(&unmapped));
    let message = reply.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("other/thing") && message.contains("mappings add"),
        "{message}"
    );

    // Proposals: shape-checked, duplicates return the same id.
    let propose = |origin: &str, path: &str| {
        d.authed(
            "POST",
            "/v1/repository-mappings",
            Some(&json!({"gitlabOrigin": origin, "projectPath": "a/b", "localPath": path})),
        )
    };
    assert_eq!(
        propose("gitlab.example.com", "/srv/a").error_code(),
        "request.invalid"
    );
    assert_eq!(
        propose(ORIGIN, "relative/path").error_code(),
        "request.invalid"
    );
    let first = propose(ORIGIN, "/srv/a").json();
    let again = propose(&format!("{ORIGIN}/"), "/srv/a").json();
    assert_eq!(first["data"]["id"], again["data"]["id"]);

    // The origin of a mapping is allowed without listing it in allowed_origins, and config
    // edits apply without a restart.
    let other = "https://gitlab.other.example";
    let config = d.home.path().join("config/config.toml");
    let text = std::fs::read_to_string(&config).expect("config");
    let preflight = || {
        d.raw(
            "OPTIONS",
            "/v1/reviews",
            &[("Origin", other), ("Access-Control-Request-Method", "POST")],
            None,
        )
    };
    assert_eq!(preflight().status, 403);
    let extra = format!(
        "{text}\n[[mappings]]\ngitlab_origin = \"{other}\"\nproject_path = \"x/y\"\nlocal_path = \"{}\"\n",
        d.repo.path().display()
    );
    std::thread::sleep(std::time::Duration::from_millis(20)); // a new mtime
    std::fs::write(&config, extra).expect("write config");
    let allowed = preflight();
    assert_eq!(allowed.status, 204);
    assert_eq!(allowed.header("access-control-allow-origin"), Some(other));
}

#[test]
fn a_rotated_token_applies_without_a_restart() {
    let mut d = Daemon::start();
    assert_eq!(d.authed("GET", "/v1/capabilities", None).status, 200);
    let old = d.token.clone();
    std::thread::sleep(std::time::Duration::from_millis(20)); // a new mtime
    let out = Command::new(bin())
        .args(["token", "rotate"])
        .env("REVIEW_AGENT_GATEWAY_HOME", d.home.path())
        .output()
        .expect("token rotate runs");
    assert!(out.status.success());
    d.token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_ne!(d.token, old);
    assert_eq!(
        d.authed("GET", "/v1/capabilities", None).status,
        200,
        "the new token works"
    );
    let stale = d.raw(
        "GET",
        "/v1/capabilities",
        &[("Authorization", &format!("Bearer {old}"))],
        None,
    );
    assert_eq!(
        (stale.status, stale.error_code().as_str()),
        (401, "auth.token_invalid")
    );
}

/// `GET /v1/tools` and `POST /v1/tools/:name` (issue 4): the userscript runs a repository tool
/// on a mapped project; every refusal is a clear error object with the right status.
#[test]
fn tools_over_http() {
    let d = Daemon::start();
    let tools = d.authed("GET", "/v1/tools", None);
    assert_eq!(tools.status, 200, "{}", tools.body);
    let list = tools.json()["data"].as_array().expect("tool list").clone();
    let names: Vec<&str> = list.iter().filter_map(|t| t["name"].as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
    for expected in [
        "code_search",
        "file_read",
        "file_read_diff",
        "file_search",
        "git_history",
        "run_check",
        "symbol_search",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    for tool in &list {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        let enabled = tool["name"] != "run_check";
        assert_eq!(tool["enabled"], enabled, "{tool}");
    }
    let caps = d.authed("GET", "/v1/capabilities", None).json();
    let cap_tools = caps["data"]["tools"].as_array().expect("tools");
    assert!(cap_tools.iter().any(|t| t == "file_read"));
    assert!(!cap_tools.iter().any(|t| t == "run_check"), "{caps}");
    assert_eq!(caps["data"]["commands"]["enabled"], false);

    let call =
        |tool: &str, body: Value| d.authed("POST", &format!("/v1/tools/{tool}"), Some(&body));
    let target =
        |input: Value| json!({ "gitlabOrigin": ORIGIN, "projectPath": PROJECT, "input": input });

    // The mapping's default ref (main = head) unless the request names one.
    let head = call("file_read", target(json!({ "path": "app.py" })));
    assert_eq!(head.status, 200, "{}", head.body);
    let data = &head.json()["data"];
    assert_eq!(data["tool"], "file_read");
    assert_eq!(data["ref"], "main");
    assert_eq!(data["commit"], d.head.as_str());
    assert!(data["callId"].as_str().unwrap_or("").starts_with("call_"));
    assert_eq!(
        data["output"]["text"],
        "import os\na = eval(x)\nb = eval(y)\n"
    );
    assert_eq!(data["output"]["totalLines"], 3);
    assert_eq!(data["truncated"], false);
    let mut at_base = target(json!({ "path": "app.py" }));
    at_base["ref"] = json!(d.base);
    at_base["requestId"] = json!("req-1");
    let base = call("file_read", at_base);
    assert_eq!(base.status, 200, "{}", base.body);
    assert_eq!(base.json()["requestId"], "req-1");
    assert_eq!(base.json()["data"]["output"]["text"], "import os\n");
    let found = call("code_search", target(json!({ "query": "eval(" })));
    assert_eq!(found.status, 200, "{}", found.body);
    assert_eq!(found.json()["data"]["output"]["matchCount"], 2);
    let log = call("git_history", target(json!({ "action": "log" })));
    assert_eq!(log.status, 200, "{}", log.body);
    assert_eq!(
        log.json()["data"]["output"]["commits"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );

    // Refusals: (tool, body, status, code).
    let unmapped = json!({ "gitlabOrigin": ORIGIN, "projectPath": "other/project", "input": { "path": "app.py" } });
    let mut dash_ref = target(json!({ "path": "app.py" }));
    dash_ref["ref"] = json!("--output=/tmp/x");
    let mut missing_ref = target(json!({ "path": "app.py" }));
    missing_ref["ref"] = json!("0123456789abcdef0123456789abcdef01234567");
    let cases = [
        ("nope", target(json!({})), 404, "tool.not_found"),
        ("file_read", unmapped, 404, "repository.not_mapped"),
        (
            "file_read",
            target(json!({ "path": "../etc/passwd" })),
            400,
            "tool.path_outside_repository",
        ),
        (
            "file_read",
            target(json!({ "path": "/etc/passwd" })),
            400,
            "tool.path_outside_repository",
        ),
        (
            "file_read",
            target(json!({ "path": ".git/config" })),
            400,
            "tool.path_outside_repository",
        ),
        (
            "file_read",
            target(json!({ "path": "missing.py" })),
            404,
            "tool.path_not_found",
        ),
        (
            "file_read",
            target(json!({ "path": 7 })),
            400,
            "request.invalid",
        ),
        (
            "file_read",
            target(json!({ "path": "app.py", "bogus": 1 })),
            400,
            "request.invalid",
        ),
        ("file_read", dash_ref, 400, "request.invalid"),
        ("file_read", missing_ref, 400, "repository.revision_missing"),
        ("file_read", json!({ "input": {} }), 400, "request.invalid"),
        (
            "run_check",
            target(json!({ "argv": ["ls"] })),
            403,
            "tool.disabled",
        ),
    ];
    for (tool, body, status, code) in cases {
        let reply = call(tool, body.clone());
        assert_eq!(reply.status, status, "{tool} {body}: {}", reply.body);
        assert_eq!(reply.error_code(), code, "{tool} {body}: {}", reply.body);
        assert!(
            !reply.body.contains(&d.repo.path().display().to_string()),
            "a local path leaked: {}",
            reply.body
        );
    }
    let not_json = d.raw(
        "POST",
        "/v1/tools/file_read",
        &[("Authorization", &format!("Bearer {}", d.token))],
        None,
    );
    assert_eq!(not_json.status, 400, "{}", not_json.body);
    let anonymous = d.raw(
        "POST",
        "/v1/tools/file_read",
        &[],
        Some(&target(json!({ "path": "app.py" }))),
    );
    assert_eq!(anonymous.status, 401);
}

/// `run_check` through the daemon once the config enables it: allowlisted commands run in the
/// repository with redacted output, others are refused, every call is audited, and a client
/// that goes away mid-command takes the command (and its process group) with it.
#[test]
fn run_check_over_http_runs_allowlisted_commands_and_dies_with_its_client() {
    let mut d = Daemon::start();
    let config = d.home.path().join("config/config.toml");
    let mut text = std::fs::read_to_string(&config).expect("config");
    text.push_str(
        "\n[tools.run_check]\nenabled = true\ntimeout_seconds = 60\n\n\
         [[tools.run_check.commands]]\nargv = [\"git\", \"rev-parse\", \"--show-toplevel\"]\n\n\
         [[tools.run_check.commands]]\nargv = [\"sleep\", \"*\"]\n\n\
         [[tools.run_check.commands]]\nargv = [\"echo\", \"*\"]\n",
    );
    std::fs::write(&config, text).expect("write config");
    let _ = d.child.kill();
    let _ = d.child.wait();
    d.restart();

    let caps = d.authed("GET", "/v1/capabilities", None).json();
    assert_eq!(caps["data"]["commands"]["enabled"], true, "{caps}");
    assert!(
        caps["data"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .any(|t| t == "run_check")
    );
    let body = |argv: Value| json!({ "gitlabOrigin": ORIGIN, "projectPath": PROJECT, "ref": "WORKTREE", "input": { "argv": argv } });
    let ok = d.authed(
        "POST",
        "/v1/tools/run_check",
        Some(&body(json!(["git", "rev-parse", "--show-toplevel"]))),
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    let output = &ok.json()["data"]["output"];
    assert_eq!(output["exitCode"], 0, "{output}");
    assert_eq!(
        output["stdout"], "<repo>\n",
        "the repository's path is redacted: {output}"
    );
    // The gateway's own token never comes back, nor reaches the log or the audit file.
    let echoed = d.authed(
        "POST",
        "/v1/tools/run_check",
        Some(&body(json!(["echo", d.token.clone()]))),
    );
    assert_eq!(echoed.status, 200, "{}", echoed.body);
    assert!(!echoed.body.contains(&d.token), "{}", echoed.body);
    assert!(echoed.body.contains("[REDACTED"), "{}", echoed.body);
    let refused = d.authed(
        "POST",
        "/v1/tools/run_check",
        Some(&body(json!(["rm", "-rf", "."]))),
    );
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(refused.error_code(), "tool.command_not_allowed");

    // A client that disconnects mid-command: the command is killed, not left running.
    // Unique to this process, so no other test run's command is mistaken for ours.
    let marker = format!("41.{}", std::process::id());
    let mut stream = TcpStream::connect(("127.0.0.1", d.port)).expect("connect");
    let payload = body(json!(["sleep", marker])).to_string();
    let request = format!(
        "POST /v1/tools/run_check HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{payload}",
        d.port,
        d.token,
        payload.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let tail = format!("sleep\0{marker}\0").into_bytes();
    let running = |want: bool| common::wait_process_running(&tail, want);
    assert!(running(true), "the command started");
    drop(stream);
    assert!(running(false), "the command died with its client");

    // The audit line is written once the sandbox helper has reaped everything and exited,
    // a moment after the command itself is gone.
    let audit_path = d.home.path().join("state/audit/run_check.jsonl");
    let mut audit = String::new();
    for _ in 0..100 {
        audit = std::fs::read_to_string(&audit_path).expect("audit log");
        if audit.lines().count() >= 4 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let lines: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), 4, "{audit}");
    assert_eq!(lines[2]["outcome"], "refused", "{audit}");
    assert_eq!(lines[3]["cancelled"], true, "{audit}");
    assert!(!audit.contains(&d.token), "{audit}");
    let log = std::fs::read_to_string(d.home.path().join("serve.log")).expect("serve.log");
    assert!(!log.contains(&d.token), "{log}");
}

/// A cold `symbol_search` parses only the files that contain the name; the daemon then
/// completes the index in the background, so a later query for another name parses nothing.
#[test]
fn symbol_index_completes_in_the_background() {
    let d = Daemon::start();
    for i in 0..20 {
        std::fs::write(
            d.repo.path().join(format!("mod{i}.py")),
            format!("def helper_{i}():\n    return {i}\n"),
        )
        .expect("write");
    }
    git(d.repo.path(), &["add", "-A"]);
    git(d.repo.path(), &["commit", "-q", "-m", "modules"]);
    let search = |query: &str| {
        let body =
            json!({ "gitlabOrigin": ORIGIN, "projectPath": PROJECT, "input": { "query": query } });
        let reply = d.authed("POST", "/v1/tools/symbol_search", Some(&body));
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.json()["data"]["output"].clone()
    };
    let first = search("helper_3");
    assert_eq!(first["symbols"][0]["path"], "mod3.py", "{first}");
    assert_eq!(first["parsedFiles"], 1, "{first}");
    assert!(first["unindexedFiles"].as_u64().unwrap_or(0) > 0, "{first}");
    let mut last = Value::Null;
    for _ in 0..100 {
        last = search("helper_17");
        if last["unindexedFiles"] == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(last["unindexedFiles"], 0, "{last}");
    assert_eq!(last["parsedFiles"], 0, "{last}");
    assert_eq!(last["symbols"][0]["path"], "mod17.py", "{last}");
}

/// Issue 12 §1: one 30 KB `scope.filePaths` entry burned 20 CPU-seconds in the review slot.
/// Entries over the tools' caps (64 entries, 1024 bytes each) are refused with a 400 before any
/// run exists, as is a glob that does not parse.
#[test]
fn scope_file_paths_over_the_caps_are_refused_at_once() {
    let d = Daemon::start();
    let with_paths = |id: &str, paths: Value| {
        let mut body = d.review_body(id);
        body["scope"]["filePaths"] = paths;
        d.authed("POST", "/v1/reviews", Some(&body))
    };
    for (id, paths, needle) in [
        ("huge", json!(["a".repeat(30 * 1024)]), "30720 bytes"),
        (
            "many",
            json!((0..65).map(|i| format!("f{i}.py")).collect::<Vec<_>>()),
            "more than 64 paths",
        ),
        ("bad-glob", json!(["src/[a"]), "src/[a"),
        ("empty", json!([""]), "empty"),
    ] {
        let reply = with_paths(id, paths);
        assert_eq!(
            (reply.status, reply.error_code().as_str()),
            (400, "request.invalid"),
            "{id}: {}",
            reply.body
        );
        let error = &reply.json()["error"];
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("`scope.filePaths`") && message.contains(needle),
            "{id}: {message}"
        );
        assert!(
            !error["remediation"].as_str().unwrap_or_default().is_empty(),
            "{id}"
        );
        assert!(message.len() < 2048, "the entry is not echoed whole: {id}");
    }
    assert_eq!(
        runs_list(d.home.path()),
        Ok(Vec::new()),
        "no run was created"
    );
}

/// Issue 12 §1: 18 entries of 100 KB ran 102 s. At the caps — 64 entries of 1024 bytes, in
/// the shapes that were quadratic (a plain path, `dir/**`, a `*` suffix) — the review runs and
/// reviews exactly the file the one short entry names.
#[test]
fn max_size_scope_entries_review_the_requested_file() {
    let d = Daemon::start();
    let mut paths: Vec<String> = (0..63)
        .map(|i| {
            let stem = format!("{i:02}{}", "a".repeat(1022));
            match i % 3 {
                0 => stem,
                1 => format!("{}/**", &stem[..1021]),
                _ => format!("{}*", &stem[..1023]),
            }
        })
        .collect();
    paths.push("app.py".into());
    let mut body = d.review_body("max-scope");
    body["scope"]["filePaths"] = json!(paths);
    let events = d.authed("POST", "/v1/reviews", Some(&body)).sse();
    assert_eq!(
        events.last().map(|e| e.1.as_str()),
        Some("run.completed"),
        "{events:?}"
    );
    let findings: Vec<&Value> = events
        .iter()
        .filter(|e| e.1 == "finding.created")
        .map(|e| &e.2["finding"]["path"])
        .collect();
    assert_eq!(findings, [&json!("app.py"), &json!("app.py")]);

    // Without the one short entry nothing matches: said, not silently empty.
    paths.pop();
    let mut body = d.review_body("max-scope-none");
    body["scope"]["filePaths"] = json!(paths);
    let events = d.authed("POST", "/v1/reviews", Some(&body)).sse();
    assert_eq!(events.last().map(|e| e.1.as_str()), Some("run.completed"));
    assert!(
        events
            .iter()
            .any(|e| e.1 == "warning" && e.2["code"] == "review.no_file_in_scope"),
        "{events:?}"
    );
    assert!(!events.iter().any(|e| e.1 == "finding.created"));
}

/// Issue 12 §1: cancel did not stop a review busy in `resolve`. With every step of resolve,
/// diff and rules slowed by the fault hook, a cancel sent as soon as a stage starts ends the
/// run with `run.cancelled` in that stage, within about one step — not after the stage's
/// remaining steps (at least 5.6 s of resolve, 4.8 s of diff or rules).
#[test]
fn cancel_during_resolve_diff_or_rules_ends_the_run_in_that_stage() {
    let mut d = Daemon::start();
    for i in 0..6 {
        std::fs::write(d.repo.path().join(format!("m{i}.py")), "x = eval(y)\n").expect("write");
    }
    git(d.repo.path(), &["add", "-A"]);
    git(d.repo.path(), &["commit", "-q", "-m", "six files"]);
    d.head = git(d.repo.path(), &["rev-parse", "HEAD"]);
    let _ = d.child.kill();
    let _ = d.child.wait();
    d.child = spawn_with(
        d.home.path(),
        &[("REVIEW_AGENT_GATEWAY_FAULT_STEP_DELAY_MS", "800")],
    );
    d.port = read_port(&mut d.child);

    let auth = format!("Bearer {}", d.token);
    for stage in ["resolve", "diff", "rules"] {
        let body = d.review_body(&format!("cancel-in-{stage}"));
        let mut stream = http::SseStream::open(
            d.port,
            "POST",
            "/v1/reviews",
            &[("Authorization", &auth)],
            Some(&body),
        );
        assert_eq!(stream.status, 200);
        let mut run_id = String::new();
        loop {
            let event = stream.next_event().expect("the stage starts");
            if event.1 == "run.created" {
                run_id = event.2["runId"].as_str().expect("runId").to_owned();
            }
            if event.1 == "stage.changed" && event.2["stage"] == stage {
                break;
            }
        }
        let asked = std::time::Instant::now();
        let cancel = d.authed("POST", &format!("/v1/runs/{run_id}/cancel"), None);
        assert_eq!(cancel.status, 200, "{}", cancel.body);
        let rest = stream.rest();
        let took = asked.elapsed();
        assert_eq!(
            rest.last().map(|e| e.1.as_str()),
            Some("run.cancelled"),
            "{stage}: {rest:?}"
        );
        assert!(
            !rest.iter().any(|e| e.1 == "stage.changed"),
            "{stage}: cancelled in that stage: {rest:?}"
        );
        assert!(
            took < std::time::Duration::from_secs(3),
            "{stage}: cancelled within about one 0.8 s step, not after the stage: {took:?}"
        );
    }
}

/// Issue 12 §5: `config.toml` turned invalid under a running daemon is visible to clients:
/// `GET /v1/health` reports `config.status: "invalid"` with the `config.invalid` error (key and
/// line) while the daemon keeps serving with the last valid configuration; fixing the file
/// clears it.
#[test]
fn health_reports_an_invalid_config_until_it_is_fixed() {
    let d = Daemon::start();
    let health = d.raw("GET", "/v1/health", &[], None);
    assert_eq!(health.status, 200, "{}", health.body);
    assert_eq!(health.json()["data"]["config"], json!({"status": "ok"}));

    let config = d.home.path().join("config/config.toml");
    let good = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        format!("{good}\n[limits]\nmax_concurrent_reviews = \"two\"\n"),
    )
    .expect("write config");
    let health = d.raw("GET", "/v1/health", &[], None);
    assert_eq!(health.status, 200, "{}", health.body);
    let state = &health.json()["data"]["config"];
    assert_eq!(state["status"], "invalid", "{state}");
    assert_eq!(state["error"]["code"], "config.invalid", "{state}");
    let message = state["error"]["message"].as_str().expect("message");
    assert!(message.contains("config.toml:"), "{message}");
    assert!(
        !state["error"]["remediation"]
            .as_str()
            .unwrap_or("")
            .is_empty(),
        "{state}"
    );
    // Still serving with the last valid configuration: the mapping works.
    let tools = d.authed(
        "POST",
        "/v1/tools/file_read",
        Some(&json!({"gitlabOrigin": ORIGIN, "projectPath": PROJECT, "input": {"path": "app.py"}})),
    );
    assert_eq!(tools.status, 200, "{}", tools.body);
    let log = std::fs::read_to_string(d.home.path().join("serve.log")).unwrap_or_default();
    assert!(log.contains("config.invalid"), "{log}");

    std::fs::write(&config, good).expect("write config");
    let health = d.raw("GET", "/v1/health", &[], None);
    assert_eq!(
        health.json()["data"]["config"],
        json!({"status": "ok"}),
        "{}",
        health.body
    );
}

// === protocol consistency (issue 12 §4) ===

/// The `requestId` of an answer, checked against its `X-Request-Id` header.
fn request_id_of(reply: &Reply) -> String {
    let header = reply.header("x-request-id").unwrap_or_default().to_owned();
    if reply
        .header("content-type")
        .is_some_and(|t| t.starts_with("application/json"))
    {
        assert_eq!(
            reply.json()["requestId"].as_str(),
            Some(header.as_str()),
            "{}",
            reply.body
        );
    }
    header
}

#[test]
fn every_answer_carries_a_request_id_and_the_log_names_it() {
    let d = Daemon::start();
    let auth = format!("Bearer {}", d.token);
    let minted = |reply: &Reply, status: u16| {
        assert_eq!(reply.status, status, "{}", reply.body);
        let id = request_id_of(reply);
        assert!(
            id.starts_with("req_") && id.len() == 30,
            "a minted id: {id:?} {}",
            reply.body
        );
        id
    };
    let mut ids = vec![
        // Successes and every kind of refusal, minted where the request names no id.
        minted(&d.raw("GET", "/v1/health", &[], None), 200),
        minted(&d.authed("GET", "/v1/capabilities", None), 200),
        minted(&d.authed("GET", "/v1/tools", None), 200),
        minted(&d.raw("GET", "/v1/capabilities", &[], None), 401),
        minted(
            &d.raw(
                "GET",
                "/v1/capabilities",
                &[("Authorization", "Bearer no")],
                None,
            ),
            401,
        ),
        minted(
            &d.raw("GET", "/v1/health", &[("Host", "evil.example:80")], None),
            403,
        ),
        minted(
            &d.raw(
                "GET",
                "/v1/health",
                &[("Origin", "https://evil.example")],
                None,
            ),
            403,
        ),
        minted(&d.authed("GET", "/v1/nothing-here", None), 404),
        minted(&d.authed("DELETE", "/v1/health", None), 405),
        minted(&d.authed("GET", "/v1/runs/run_missing", None), 404),
        minted(&d.authed("POST", "/v1/runs/run_missing/resume", None), 404),
        minted(
            &http::request_text(
                d.port,
                "POST",
                "/v1/reviews",
                &[("Authorization", &auth)],
                "{",
            ),
            400,
        ),
    ];
    let unique: std::collections::HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "every request gets its own id");

    // The client's id is echoed: a body's `requestId` on every route that takes a body.
    let echoed = |reply: &Reply, id: &str, status: u16| {
        assert_eq!(reply.status, status, "{}", reply.body);
        assert_eq!(request_id_of(reply), id, "{}", reply.body);
    };
    let review = d.authed("POST", "/v1/reviews", Some(&d.review_body("rid-review")));
    echoed(&review, "rid-review", 200);
    let events = review.sse();
    assert_eq!(events[0].2["requestId"], "rid-review");
    let run_id = events[0].2["runId"].as_str().expect("runId").to_owned();
    let mut unmapped = d.review_body("rid-unmapped");
    unmapped["target"]["projectPath"] = json!("group/other");
    echoed(
        &d.authed("POST", "/v1/reviews", Some(&unmapped)),
        "rid-unmapped",
        404,
    );
    let chat = json!({"requestId": "rid-chat", "messages": []});
    echoed(&d.authed("POST", "/v1/chat", Some(&chat)), "rid-chat", 400);
    let tool = json!({"requestId": "rid-tool", "gitlabOrigin": ORIGIN, "projectPath": PROJECT,
                      "input": {"path": "app.py"}});
    echoed(
        &d.authed("POST", "/v1/tools/file_read", Some(&tool)),
        "rid-tool",
        200,
    );
    echoed(
        &d.authed("POST", "/v1/tools/no_such_tool", Some(&tool)),
        "rid-tool",
        404,
    );
    let mapping = json!({"requestId": "rid-map", "gitlabOrigin": ORIGIN,
                         "projectPath": "group/new", "localPath": "/tmp/x"});
    echoed(
        &d.authed("POST", "/v1/repository-mappings", Some(&mapping)),
        "rid-map",
        202,
    );
    let empty_path = json!({"requestId": "rid-map-bad", "gitlabOrigin": ORIGIN,
                            "projectPath": "group/new", "localPath": ""});
    echoed(
        &d.authed("POST", "/v1/repository-mappings", Some(&empty_path)),
        "rid-map-bad",
        400,
    );
    minted(&d.authed("GET", &format!("/v1/runs/{run_id}"), None), 200);
    minted(&d.authed("GET", "/v1/runs/run_missing/events", None), 404);
    echoed(
        &d.authed(
            "POST",
            "/v1/runs/run_missing/resume",
            Some(&json!({"requestId": "rid-resume"})),
        ),
        "rid-resume",
        404,
    );
    let cancel = json!({"requestId": "rid-cancel", "reason": "user_cancelled"});
    let path = format!("/v1/runs/{run_id}/cancel");
    echoed(&d.authed("POST", &path, Some(&cancel)), "rid-cancel", 200);
    echoed(
        &d.authed("POST", "/v1/runs/run_missing/cancel", Some(&cancel)),
        "rid-cancel",
        404,
    );
    // An `X-Request-Id` header where the body has none; the body's id wins where it has one.
    let traced = |method: &str, path: &str, body: Option<&Value>| {
        let headers = [
            ("Authorization", auth.as_str()),
            ("X-Request-Id", "trace-42"),
        ];
        d.raw(method, path, &headers, body)
    };
    echoed(&traced("GET", "/v1/health", None), "trace-42", 200);
    echoed(
        &traced("GET", "/v1/runs/run_missing", None),
        "trace-42",
        404,
    );
    echoed(
        &d.raw(
            "GET",
            "/v1/capabilities",
            &[("X-Request-Id", "trace-43")],
            None,
        ),
        "trace-43",
        401,
    );
    echoed(
        &traced("POST", "/v1/reviews", Some(&d.review_body("rid-review"))),
        "rid-review",
        200,
    );
    let events_path = format!("/v1/runs/{run_id}/events");
    echoed(&traced("GET", &events_path, None), "trace-42", 200);

    // The log line of each refused request names its id, so a UI error can be found in it.
    let wanted = d.authed("GET", "/v1/nothing-here", None);
    ids.push(request_id_of(&wanted));
    let log_file = d.home.path().join("serve.log");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(&log_file).unwrap_or_default();
        let last = ids.last().expect("an id");
        if let Some(line) = log.lines().find(|l| l.contains(last.as_str())) {
            assert!(line.contains("request.not_found"), "{line}");
            assert!(
                line.contains("/v1/nothing-here") && line.contains("404"),
                "{line}"
            );
            assert!(!log.contains(&d.token), "the token is never logged");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no log line for {last}: {log}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn one_cap_for_every_request_id() {
    let d = Daemon::start();
    let auth = format!("Bearer {}", d.token);
    let huge = "i".repeat(1_000_000);
    let long = "i".repeat(201);
    let at_cap = "i".repeat(200);
    let tool = |id: &str| {
        json!({"requestId": id, "gitlabOrigin": ORIGIN, "projectPath": PROJECT,
               "input": {"path": "app.py"}})
    };
    let refused = |reply: Reply, what: &str| {
        assert_eq!(
            (reply.status, reply.error_code().as_str()),
            (400, "request.invalid"),
            "{what}: {}",
            &reply.body[..reply.body.len().min(300)]
        );
        assert!(reply.body.len() < 2_000, "{what}: the id is not echoed");
        assert!(
            reply.json()["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("longer than 200 characters")),
            "{what}: {}",
            reply.body
        );
        assert!(request_id_of(&reply).starts_with("req_"), "{what}");
    };
    for id in [&huge, &long] {
        refused(
            d.authed("POST", "/v1/tools/file_read", Some(&tool(id))),
            "tool call",
        );
        refused(
            d.authed("POST", "/v1/reviews", Some(&d.review_body(id))),
            "review",
        );
        let chat = json!({"requestId": id, "messages": [{"role": "user", "content": "hi"}]});
        refused(d.authed("POST", "/v1/chat", Some(&chat)), "chat");
        let mapping = json!({"requestId": id, "gitlabOrigin": ORIGIN, "projectPath": "g/p",
                             "localPath": "/tmp/x"});
        refused(
            d.authed("POST", "/v1/repository-mappings", Some(&mapping)),
            "mapping",
        );
        refused(
            d.authed(
                "POST",
                "/v1/runs/run_x/cancel",
                Some(&json!({"requestId": id})),
            ),
            "cancel",
        );
    }
    refused(
        d.raw("GET", "/v1/health", &[("X-Request-Id", &long)], None),
        "X-Request-Id",
    );
    let _ = &auth;
    // 200 characters is fine everywhere.
    let ok = d.authed("POST", "/v1/tools/file_read", Some(&tool(&at_cap)));
    assert_eq!((ok.status, request_id_of(&ok)), (200, at_cap.clone()));
    let ok = d.raw("GET", "/v1/health", &[("X-Request-Id", &at_cap)], None);
    assert_eq!((ok.status, request_id_of(&ok)), (200, at_cap));
}

#[test]
fn a_duplicate_key_is_refused_on_every_route() {
    let d = Daemon::start();
    let auth = format!("Bearer {}", d.token);
    let review = d.review_body("dup-review").to_string();
    let chat =
        r#"{"requestId":"dup-chat","messages":[{"role":"user","content":"a","content":"b"}]}"#;
    let tool = format!(
        r#"{{"gitlabOrigin":"{ORIGIN}","projectPath":"{PROJECT}","input":{{"path":"app.py","path":"../../etc/passwd"}}}}"#
    );
    let mapping = format!(
        r#"{{"gitlabOrigin":"{ORIGIN}","projectPath":"g/p","localPath":"/tmp/a","localPath":"/tmp/b"}}"#
    );
    let run_id = completed_review(&d, "dup-run");
    let cases = [
        // The review's head commit given twice: before, the last one won.
        (
            "/v1/reviews".to_owned(),
            review.replacen(
                "\"headSha\":",
                &format!("\"headSha\":\"{}\",\"headSha\":", d.base),
                1,
            ),
            "target.diffRefs.headSha",
        ),
        (
            "/v1/chat".to_owned(),
            chat.to_owned(),
            "messages[0].content",
        ),
        ("/v1/tools/file_read".to_owned(), tool, "input.path"),
        ("/v1/repository-mappings".to_owned(), mapping, "localPath"),
        (
            format!("/v1/runs/{run_id}/cancel"),
            r#"{"reason":"a","reason":"b"}"#.to_owned(),
            "reason",
        ),
        (
            format!("/v1/runs/{run_id}/resume"),
            r#"{"requestId":"a","requestId":"b"}"#.to_owned(),
            "requestId",
        ),
    ];
    for (path, body, key) in cases {
        let reply = http::request_text(d.port, "POST", &path, &[("Authorization", &auth)], &body);
        assert_eq!(
            (reply.status, reply.error_code().as_str()),
            (400, "request.invalid"),
            "{path}: {}",
            reply.body
        );
        let message = reply.json()["error"]["message"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        assert!(
            message.contains(&format!("duplicate key `{key}`")),
            "{path}: {message}"
        );
    }
    // Nothing was started or proposed by the refused bodies.
    let view = d.authed("GET", &format!("/v1/runs/{run_id}"), None).json();
    assert_eq!(view["data"]["state"], "completed", "{view}");
}

#[test]
fn two_host_headers_or_a_foreign_absolute_target_are_400() {
    let d = Daemon::start();
    let port = d.port;
    let auth = format!("Bearer {}", d.token);
    let ask = |head: String| {
        http::request_bytes_raw(port, format!("{head}Connection: close\r\n\r\n").as_bytes())
    };
    let ours = format!("127.0.0.1:{port}");
    let cases = [
        // Two Host headers, the first ours: before, the first was used and the request answered.
        (
            format!(
                "GET /v1/capabilities HTTP/1.1\r\nHost: {ours}\r\nHost: evil.example\r\nAuthorization: {auth}\r\n"
            ),
            400,
            "request.host_invalid",
        ),
        (
            format!("GET /v1/health HTTP/1.1\r\nHost: {ours}\r\nHost: {ours}\r\n"),
            400,
            "request.host_invalid",
        ),
        // An absolute-form target naming another authority: before, answered by Host alone.
        (
            format!(
                "GET http://evil.example/v1/capabilities HTTP/1.1\r\nHost: {ours}\r\nAuthorization: {auth}\r\n"
            ),
            400,
            "request.host_invalid",
        ),
        (
            format!(
                "GET http://evil.example:{port}/v1/health HTTP/1.1\r\nHost: evil.example:{port}\r\n"
            ),
            403,
            "request.host_not_allowed",
        ),
        // The WebSocket upgrade passes the same check.
        (
            format!(
                "GET /v1/ws HTTP/1.1\r\nHost: {ours}\r\nHost: evil.example\r\nAuthorization: {auth}\r\n\
                 Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
                 Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            ),
            400,
            "request.host_invalid",
        ),
        (
            format!(
                "GET http://evil.example/v1/ws HTTP/1.1\r\nHost: {ours}\r\nAuthorization: {auth}\r\n\
                 Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
                 Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            ),
            400,
            "request.host_invalid",
        ),
    ];
    for (head, status, code) in cases {
        let reply = ask(head.clone());
        assert_eq!(
            (reply.status, reply.error_code().as_str()),
            (status, code),
            "{head}: {}",
            reply.body
        );
        assert!(request_id_of(&reply).starts_with("req_"));
        let remediation = reply.json()["error"]["remediation"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        assert!(
            remediation.contains(&format!("http://127.0.0.1:{port}")),
            "{remediation}"
        );
    }
    // An absolute-form target that agrees with Host is fine (RFC 9112 §3.2.2).
    let reply = ask(format!(
        "GET http://{ours}/v1/capabilities HTTP/1.1\r\nHost: {ours}\r\nAuthorization: {auth}\r\n"
    ));
    assert_eq!(reply.status, 200, "{}", reply.body);
}

#[test]
fn messages_name_what_an_http_client_has() {
    let d = Daemon::start();
    let auth = format!("Bearer {}", d.token);
    let remediation = |reply: &Reply| {
        reply.json()["error"]["remediation"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    // No "protocol draft" (not shipped): the README's section instead.
    for reply in [
        d.authed("GET", "/v1/nothing-here", None),
        d.authed("DELETE", "/v1/health", None),
    ] {
        let text = remediation(&reply);
        assert!(!text.to_lowercase().contains("draft"), "{text}");
        assert!(text.contains("README"), "{text}");
    }
    // A field spelled another way is named, not reported as missing.
    let mut body = d.review_body("x");
    let id = body["requestId"].take();
    body.as_object_mut().expect("object").remove("requestId");
    body["requestID"] = id;
    let reply = d.authed("POST", "/v1/reviews", Some(&body));
    assert_eq!(reply.status, 400, "{}", reply.body);
    let message = reply.json()["error"]["message"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(
        message.contains("unknown field `requestID`; did you mean `requestId`?"),
        "{message}"
    );
    let chat = json!({"requestID": "c", "messages": [{"role": "user", "content": "hi"}]});
    let reply = d.authed("POST", "/v1/chat", Some(&chat));
    assert!(
        reply
            .body
            .contains("unknown field `requestID`; did you mean `requestId`?"),
        "{}",
        reply.body
    );
    let tool = json!({"request_id": "t", "gitlabOrigin": ORIGIN, "projectPath": PROJECT,
                      "input": {"path": "app.py"}});
    let reply = d.authed("POST", "/v1/tools/file_read", Some(&tool));
    assert!(
        reply
            .body
            .contains("unknown field `request_id`; did you mean `requestId`?"),
        "{}",
        reply.body
    );
    // Request fields, not command-line flags, in an HTTP answer and in a run's warnings.
    let no_flags = |text: &str| {
        [
            "--paths",
            "--exclude",
            "--base",
            "--head",
            "--language",
            "--max-",
            "--lines",
        ]
        .iter()
        .all(|flag| !text.contains(flag))
    };
    let mut body = d.review_body("lang");
    body["policy"]["language"] = json!("not a tag");
    let text = remediation(&d.authed("POST", "/v1/reviews", Some(&body)));
    assert!(
        text.contains("policy.language") && no_flags(&text),
        "{text}"
    );
    let mut body = d.review_body("scope");
    body["scope"]["filePaths"] = json!(["nothing/matches/*.rs"]);
    let events = d.authed("POST", "/v1/reviews", Some(&body)).sse();
    let warning = events
        .iter()
        .find(|e| e.1 == "warning" && e.2["code"] == "review.no_file_in_scope")
        .unwrap_or_else(|| panic!("{events:?}"));
    let text = warning.2["remediation"].as_str().unwrap_or_default();
    assert!(text.contains("scope.filePaths") && no_flags(text), "{text}");
    let _ = auth;
}
