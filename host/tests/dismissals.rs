//! `GET|POST|DELETE /v1/dismissals` (issue 17) end to end: the real daemon on a loopback port,
//! real HTTP and a real WebSocket client; reviews of a real git repository whose dismissed
//! findings come back `"status": "dismissed"`, live and from the review cache.

mod common;

use common::http::{self, Response as Reply, SseEvent};
use common::{read_port, token};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

const ORIGIN: &str = "https://gitlab.example.com";
const PROJECT: &str = "group/project";

/// A running `serve` whose config maps [`PROJECT`] to a repository with two findings.
struct Daemon {
    child: std::process::Child,
    port: u16,
    token: String,
    _home: tempfile::TempDir,
    _repo: tempfile::TempDir,
    base: String,
    head: String,
}

impl Daemon {
    fn start() -> Daemon {
        Daemon::start_with(&[])
    }

    /// With `env` added to the daemon's environment (fault injection).
    fn start_with(env: &[(&str, &str)]) -> Daemon {
        let (repo, base, head) =
            common::app_repository("import os\n", "import os\na = eval(x)\nb = eval(y)\n");
        let home = tempfile::tempdir().expect("temp dir");
        let config_dir = home.path().join("config");
        std::fs::create_dir_all(&config_dir).expect("mkdir");
        let config = format!(
            "allowed_origins = [\"{ORIGIN}\"]\n\n[[mappings]]\ngitlab_origin = \"{ORIGIN}\"\n\
             project_path = \"{PROJECT}\"\nlocal_path = \"{}\"\n",
            repo.path().display()
        );
        std::fs::write(config_dir.join("config.toml"), config).expect("write config");
        let mut child = http::spawn_serve(home.path(), env);
        let port = read_port(&mut child);
        let token = token(home.path());
        Daemon {
            child,
            port,
            token,
            _home: home,
            _repo: repo,
            base,
            head,
        }
    }

    fn authed(&self, method: &str, path: &str, body: Option<&Value>) -> Reply {
        let auth = format!("Bearer {}", self.token);
        http::request(self.port, method, path, &[("Authorization", &auth)], body)
    }

    /// A review of the merge request; `min_confidence` varies the payload (a new cache key).
    fn review(&self, request_id: &str, min_confidence: &str) -> Vec<SseEvent> {
        let body = self.review_body(request_id, min_confidence);
        let reply = self.authed("POST", "/v1/reviews", Some(&body));
        assert_eq!(reply.status, 200, "{}", reply.body);
        let events = reply.sse();
        assert_eq!(
            events.last().map(|e| e.1.as_str()),
            Some("run.completed"),
            "{events:?}"
        );
        events
    }

    fn review_body(&self, request_id: &str, min_confidence: &str) -> Value {
        json!({
            "requestId": request_id,
            "mode": "merge-request",
            "target": {
                "gitlabOrigin": ORIGIN,
                "projectPath": PROJECT,
                "mergeRequestIid": 7,
                "diffRefs": { "baseSha": self.base, "startSha": self.base, "headSha": self.head }
            },
            "policy": { "minConfidence": min_confidence }
        })
    }

    fn list(&self) -> Vec<Value> {
        let reply = self.authed("GET", &list_path(ORIGIN, PROJECT), None);
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.json()["data"]["dismissals"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `/v1/dismissals?gitlabOrigin=…&projectPath=…`, URL-encoded.
fn list_path(origin: &str, project: &str) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    format!(
        "/v1/dismissals?gitlabOrigin={}&projectPath={}",
        enc(origin),
        enc(project)
    )
}

/// `(fingerprint, status)` of each finding of `events`, in order.
fn findings(events: &[SseEvent]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e.1 == "finding.created")
        .map(|e| {
            (
                e.2["finding"]["fingerprint"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
                e.2["finding"]["status"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn completed(events: &[SseEvent]) -> &Value {
    &events.last().expect("events").2
}

#[test]
fn a_dismissed_finding_is_marked_in_later_reviews_live_and_from_the_cache() {
    let d = Daemon::start();
    let first = d.review("r1", "low");
    let found = findings(&first);
    assert_eq!(found.len(), 2, "{first:?}");
    assert!(found.iter().all(|(_, status)| status == "draft"));
    assert_eq!(completed(&first).get("dismissedCount"), None);
    let (dismissed, kept) = (found[0].0.clone(), found[1].0.clone());

    // Dismiss, with the origin spelled otherwise (a trailing slash): the same project.
    let body = json!({
        "gitlabOrigin": format!("{ORIGIN}/"), "projectPath": PROJECT, "fingerprint": dismissed,
        "reason": "a test fixture", "ruleId": "python.eval", "path": "app.py", "title": "eval"
    });
    let created = d.authed("POST", "/v1/dismissals", Some(&body));
    assert_eq!(created.status, 200, "{}", created.body);
    let data = &created.json()["data"];
    assert_eq!(data["created"], true);
    assert_eq!(data["dismissal"]["fingerprint"], dismissed.as_str());
    assert_eq!(data["dismissal"]["reason"], "a test fixture");
    let at = data["dismissal"]["dismissedAt"].clone();
    assert!(at.as_str().is_some_and(|t| t.ends_with('Z')), "{at}");

    // Idempotent: the stored row, unchanged (its reason is not replaced).
    let mut again = body.clone();
    again["reason"] = json!("another reason");
    let again = d.authed("POST", "/v1/dismissals", Some(&again));
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.json()["data"]["created"], false);
    assert_eq!(
        again.json()["data"]["dismissal"]["reason"],
        "a test fixture"
    );
    assert_eq!(again.json()["data"]["dismissal"]["dismissedAt"], at);
    let listed = d.list();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["fingerprint"], dismissed.as_str());
    assert_eq!(listed[0]["path"], "app.py");

    // The same request again is a cache hit: replayed findings are marked as of now.
    let cached = d.review("r2", "low");
    assert_eq!(completed(&cached)["fromCache"], true, "{cached:?}");
    assert_eq!(
        findings(&cached),
        vec![
            (dismissed.clone(), "dismissed".to_owned()),
            (kept.clone(), "draft".to_owned())
        ]
    );
    assert_eq!(completed(&cached)["dismissedCount"], 1);
    assert_eq!(completed(&cached)["findingCount"], 2);

    // A review that runs afresh marks it too, and GET /v1/runs/:id shows the status.
    let fresh = d.review("r3", "medium");
    assert_eq!(completed(&fresh).get("fromCache"), None, "{fresh:?}");
    assert_eq!(
        findings(&fresh),
        vec![
            (dismissed.clone(), "dismissed".to_owned()),
            (kept.clone(), "draft".to_owned())
        ]
    );
    assert_eq!(completed(&fresh)["dismissedCount"], 1);
    let run_id = fresh[0].2["runId"].as_str().expect("run id").to_owned();
    let view = d.authed("GET", &format!("/v1/runs/{run_id}"), None);
    assert_eq!(view.json()["data"]["findings"][0]["status"], "dismissed");

    // Undismiss: removed once, then there is nothing to remove.
    let key = json!({ "gitlabOrigin": ORIGIN, "projectPath": PROJECT, "fingerprint": dismissed });
    let removed = d.authed("DELETE", "/v1/dismissals", Some(&key));
    assert_eq!(removed.status, 200, "{}", removed.body);
    assert_eq!(removed.json()["data"]["removed"], true);
    let missing = d.authed("DELETE", "/v1/dismissals", Some(&key));
    assert_eq!(missing.status, 200, "{}", missing.body);
    assert_eq!(missing.json()["data"]["removed"], false);
    assert!(d.list().is_empty());
    let after = d.review("r4", "low");
    assert!(
        findings(&after).iter().all(|(_, s)| s == "draft"),
        "{after:?}"
    );
    assert_eq!(completed(&after).get("dismissedCount"), None);
}

#[test]
fn bad_dismissals_are_refused_with_codes_and_remediations() {
    let d = Daemon::start();
    let good = format!("sha256:{}", "a".repeat(64));
    let post = |body: Value| d.authed("POST", "/v1/dismissals", Some(&body));
    let refused = |reply: Reply, status: u16, code: &str, needle: &str| {
        reply.assert_refused(status, code, needle, "dismissal");
    };
    for bad in [
        format!("sha256:{}", "A".repeat(64)),
        format!("sha256:{}", "a".repeat(63)),
        format!("sha1:{}", "a".repeat(64)),
        "a".repeat(71),
        String::new(),
    ] {
        let body = json!({ "gitlabOrigin": ORIGIN, "projectPath": PROJECT, "fingerprint": bad });
        refused(post(body.clone()), 400, "request.invalid", "fingerprint");
        refused(
            d.authed("DELETE", "/v1/dismissals", Some(&body)),
            400,
            "request.invalid",
            "fingerprint",
        );
    }
    refused(
        post(
            json!({ "gitlabOrigin": ORIGIN, "projectPath": "other/project", "fingerprint": good }),
        ),
        404,
        "repository.not_mapped",
        "other/project",
    );
    refused(
        d.authed(
            "GET",
            &list_path("https://elsewhere.example", PROJECT),
            None,
        ),
        404,
        "repository.not_mapped",
        "elsewhere",
    );
    refused(
        post(json!({
            "gitlabOrigin": ORIGIN, "projectPath": PROJECT, "fingerprint": good, "severity": "low"
        })),
        400,
        "request.invalid",
        "severity",
    );
    refused(
        d.authed(
            "DELETE",
            "/v1/dismissals",
            Some(&json!({
                "gitlabOrigin": ORIGIN, "projectPath": PROJECT, "fingerprint": good, "reason": "x"
            })),
        ),
        400,
        "request.invalid",
        "reason",
    );
    refused(
        post(json!({
            "gitlabOrigin": ORIGIN, "projectPath": PROJECT, "fingerprint": good,
            "reason": "é".repeat(501)
        })),
        400,
        "request.invalid",
        "reason",
    );
    refused(
        post(json!({ "gitlabOrigin": ORIGIN, "projectPath": "", "fingerprint": good })),
        400,
        "request.invalid",
        "projectPath",
    );
    refused(
        d.authed("POST", "/v1/dismissals", None),
        400,
        "request.invalid",
        "body",
    );
    refused(
        d.authed("GET", "/v1/dismissals?gitlabOrigin=x", None),
        400,
        "request.invalid",
        "projectPath",
    );
    refused(
        d.authed(
            "GET",
            &format!("{}&fingerprint=x", list_path(ORIGIN, PROJECT)),
            None,
        ),
        400,
        "request.invalid",
        "fingerprint",
    );
    // Nothing of the refused calls was stored; 500 characters (not bytes) are accepted.
    assert!(d.list().is_empty());
    let longest = post(json!({
        "gitlabOrigin": ORIGIN, "projectPath": PROJECT, "fingerprint": good,
        "reason": "é".repeat(500)
    }));
    assert_eq!(longest.status, 200, "{}", longest.body);
    assert_eq!(d.list().len(), 1);

    // Clients can tell the gateway has the routes.
    let caps = d.authed("GET", "/v1/capabilities", None);
    let runtime = caps.json()["data"]["runtime"].clone();
    for feature in ["review", "dismissals", "incremental"] {
        assert!(
            runtime
                .as_array()
                .is_some_and(|r| r.contains(&json!(feature))),
            "{feature} not in {runtime}"
        );
    }

    // The token is needed, as on every route but health.
    let anonymous = http::request(d.port, "GET", &list_path(ORIGIN, PROJECT), &[], None);
    assert_eq!(
        (anonymous.status, anonymous.error_code().as_str()),
        (401, "auth.token_missing")
    );
}

#[test]
fn a_gitlab_page_may_delete_and_the_routes_answer_over_the_websocket_alike() {
    let d = Daemon::start();
    // The preflight of a cross-origin DELETE from the GitLab page.
    let preflight = http::request(
        d.port,
        "OPTIONS",
        "/v1/dismissals",
        &[
            ("Origin", ORIGIN),
            ("Access-Control-Request-Method", "DELETE"),
        ],
        None,
    );
    assert_eq!(preflight.status, 204);
    assert!(
        preflight
            .header("access-control-allow-methods")
            .is_some_and(|m| m.split(", ").any(|m| m == "DELETE")),
        "{:?}",
        preflight.headers
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut request = format!("ws://127.0.0.1:{}/v1/ws", d.port)
            .into_client_request()
            .expect("request");
        request.headers_mut().insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {}", d.token)).expect("header"),
        );
        let (mut ws, _) = tokio_tungstenite::connect_async(request)
            .await
            .expect("connects");
        let mut call = async |id: u64, method: &str, path: &str, body: Option<Value>| {
            let mut frame = json!({"type": "request", "id": id, "method": method, "path": path});
            if let Some(body) = body {
                frame["body"] = body;
            }
            ws.send(Message::text(frame.to_string()))
                .await
                .expect("send");
            loop {
                let message = tokio::time::timeout(std::time::Duration::from_secs(30), ws.next())
                    .await
                    .expect("a frame within 30 s")
                    .expect("open")
                    .expect("readable");
                if let Message::Text(text) = message {
                    let reply: Value = serde_json::from_str(text.as_str()).expect("JSON");
                    if reply["type"] == "response" && reply["id"] == id {
                        return reply;
                    }
                }
            }
        };
        let fingerprint = format!("sha256:{}", "b".repeat(64));
        let key =
            json!({ "gitlabOrigin": ORIGIN, "projectPath": PROJECT, "fingerprint": fingerprint });
        let created = call(1, "POST", "/v1/dismissals", Some(key.clone())).await;
        assert_eq!(created["status"], 200, "{created}");
        assert_eq!(created["body"]["data"]["created"], true);
        let listed = call(2, "GET", &list_path(ORIGIN, PROJECT), None).await;
        assert_eq!(
            listed["body"]["data"]["dismissals"][0]["fingerprint"],
            fingerprint.as_str()
        );
        let bad = call(
            3,
            "POST",
            "/v1/dismissals",
            Some(json!({ "gitlabOrigin": ORIGIN, "projectPath": PROJECT, "fingerprint": "x" })),
        )
        .await;
        assert_eq!(
            (&bad["status"], &bad["body"]["error"]["code"]),
            (&json!(400), &json!("request.invalid"))
        );
        let removed = call(4, "DELETE", "/v1/dismissals", Some(key)).await;
        assert_eq!(removed["body"]["data"]["removed"], true, "{removed}");
    });
    // What the WebSocket did, HTTP sees.
    assert!(d.list().is_empty());
}

#[test]
fn a_resumed_review_counts_the_dismissed_findings_it_emitted_before() {
    // Each finding is committed on its own and followed by a pause, so the run can be
    // cancelled between its two findings.
    let d = Daemon::start_with(&[("REVIEW_AGENT_GATEWAY_FAULT_FINDING_DELAY_MS", "400")]);
    let found = findings(&d.review("r1", "low"));
    assert_eq!(found.len(), 2);
    let body = json!({ "gitlabOrigin": ORIGIN, "projectPath": PROJECT, "fingerprint": found[0].0 });
    assert_eq!(d.authed("POST", "/v1/dismissals", Some(&body)).status, 200);

    let auth = format!("Bearer {}", d.token);
    let mut stream = http::SseStream::open(
        d.port,
        "POST",
        "/v1/reviews",
        &[("Authorization", &auth)],
        Some(&d.review_body("r2", "medium")),
    );
    assert_eq!(stream.status, 200);
    let mut before = Vec::new();
    while let Some(event) = stream.next_event() {
        let first_finding = event.1 == "finding.created";
        before.push(event);
        if first_finding {
            break;
        }
    }
    let run_id = before[0].2["runId"].as_str().expect("run id").to_owned();
    let cancel = d.authed("POST", &format!("/v1/runs/{run_id}/cancel"), None);
    assert_eq!(cancel.status, 200, "{}", cancel.body);
    before.extend(stream.rest());
    assert_eq!(
        before.last().map(|e| e.1.as_str()),
        Some("run.cancelled"),
        "{before:?}"
    );
    assert_eq!(
        findings(&before),
        vec![(found[0].0.clone(), "dismissed".to_owned())]
    );

    let last_seq = before.last().map_or(0, |e| e.0);
    let resumed = d.authed("POST", &format!("/v1/runs/{run_id}/resume"), None);
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    let after = d.authed(
        "GET",
        &format!("/v1/runs/{run_id}/events?after={last_seq}"),
        None,
    );
    let after = after.sse();
    assert_eq!(
        after.last().map(|e| e.1.as_str()),
        Some("run.completed"),
        "{after:?}"
    );
    assert_eq!(
        findings(&after),
        vec![(found[1].0.clone(), "draft".to_owned())]
    );
    assert_eq!(completed(&after)["findingCount"], 2);
    assert_eq!(completed(&after)["dismissedCount"], 1);
}
