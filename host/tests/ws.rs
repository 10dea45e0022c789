//! End-to-end tests of `GET /v1/ws`: the real daemon binary, a real WebSocket client
//! (tokio-tungstenite), frames of DESIGN §4.

mod common;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{bin, read_port, token};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const ORIGIN: &str = "https://gitlab.example.com";
const PROJECT: &str = "group/project";

/// A running `serve` with its own home and a repository whose head commit has five findings.
struct Daemon {
    child: Child,
    port: u16,
    token: String,
    _home: tempfile::TempDir,
    _repo: tempfile::TempDir,
    base: String,
    head: String,
}

impl Daemon {
    /// `env`: extra environment, e.g. the finding delay that keeps reviews running a while.
    fn start(env: &[(&str, &str)]) -> Daemon {
        let lines: String = (0..5).map(|i| format!("v{i} = eval(x{i})\n")).collect();
        let (repo, base, head) =
            common::app_repository("import os\n", &format!("import os\n{lines}"));

        let home = tempfile::tempdir().expect("temp dir");
        let config_dir = home.path().join("config");
        std::fs::create_dir_all(&config_dir).expect("mkdir");
        let config = format!(
            "allowed_origins = [\"{ORIGIN}\"]\n\n[limits]\nmax_concurrent_reviews = 4\n\n\
             [[mappings]]\ngitlab_origin = \"{ORIGIN}\"\nproject_path = \"{PROJECT}\"\nlocal_path = \"{}\"\n",
            repo.path().display()
        );
        std::fs::write(config_dir.join("config.toml"), config).expect("write config");
        let mut child = Command::new(bin())
            .args(["serve", "--port", "0"])
            .envs(env.iter().copied())
            .env("REVIEW_AGENT_GATEWAY_HOME", home.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("serve starts");
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

    /// A review request; each `iid` is a distinct request (so not answered from the cache).
    fn review_body(&self, request_id: &str, project: &str, iid: u64) -> Value {
        json!({
            "requestId": request_id,
            "mode": "merge-request",
            "target": {
                "gitlabOrigin": ORIGIN,
                "projectPath": project,
                "mergeRequestIid": iid,
                "diffRefs": { "baseSha": self.base, "startSha": self.base, "headSha": self.head }
            },
            "scope": { "filePaths": null, "selection": null },
            "policy": { "minConfidence": "low" }
        })
    }

    fn url(&self) -> String {
        format!("ws://127.0.0.1:{}/v1/ws", self.port)
    }

    /// Connect with `headers` (none of them added implicitly).
    async fn connect_with(&self, headers: &[(&str, &str)]) -> Result<Client, tungstenite::Error> {
        let mut request = self.url().into_client_request()?;
        for (name, value) in headers {
            request.headers_mut().insert(
                tungstenite::http::HeaderName::from_bytes(name.as_bytes()).expect("header name"),
                HeaderValue::from_str(value).expect("header value"),
            );
        }
        let (ws, response) = tokio_tungstenite::connect_async(request).await?;
        let protocol = response
            .headers()
            .get("sec-websocket-protocol")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        Ok(Client { ws, protocol })
    }

    async fn connect(&self) -> Client {
        let auth = format!("Bearer {}", self.token);
        self.connect_with(&[("Authorization", &auth)])
            .await
            .expect("connects")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    protocol: Option<String>,
}

impl Client {
    async fn send(&mut self, frame: Value) {
        self.ws
            .send(Message::text(frame.to_string()))
            .await
            .expect("send");
    }

    /// The next frame (pings and pongs skipped), within 30 s.
    async fn recv(&mut self) -> Value {
        loop {
            let message = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                .await
                .expect("a frame within 30 s")
                .expect("connection open")
                .expect("readable");
            match message {
                Message::Text(text) => {
                    return serde_json::from_str(text.as_str()).expect("frames are JSON");
                }
                Message::Ping(_) | Message::Pong(_) => {}
                other => panic!("unexpected message {other:?}"),
            }
        }
    }

    /// Send a request frame and read frames until its `response`.
    async fn call(&mut self, id: Value, method: &str, path: &str, body: Option<Value>) -> Value {
        let mut frame = json!({"type": "request", "id": id, "method": method, "path": path});
        if let Some(body) = body {
            frame["body"] = body;
        }
        self.send(frame).await;
        let reply = self.recv().await;
        assert_eq!(
            (reply["type"].as_str(), &reply["id"]),
            (Some("response"), &id),
            "{reply}"
        );
        reply
    }
}

/// The HTTP status and body the daemon gave an upgrade it refused.
fn refused(result: Result<Client, tungstenite::Error>) -> (u16, Value) {
    match result {
        Err(tungstenite::Error::Http(response)) => {
            let body = response.body().clone().unwrap_or_default();
            (
                response.status().as_u16(),
                serde_json::from_slice(&body).unwrap_or(Value::Null),
            )
        }
        Err(other) => panic!("not an HTTP refusal: {other}"),
        Ok(_) => panic!("the upgrade was accepted"),
    }
}

#[tokio::test]
async fn hello_health_and_route_errors_match_http() {
    let d = Daemon::start(&[]);
    let mut c = d.connect().await;
    assert_eq!(c.protocol, None, "no subprotocol offered, none selected");

    c.send(json!({"type": "hello", "protocolVersions": ["0.9"]}))
        .await;
    let refused = c.recv().await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["error"]["code"], "protocol.version_unsupported");
    assert!(
        refused["error"]["remediation"]
            .as_str()
            .is_some_and(|r| !r.is_empty())
    );

    c.send(json!({"type": "hello", "protocolVersions": ["2.0", "1.0"]}))
        .await;
    let hello = c.recv().await;
    assert_eq!(hello["type"], "hello", "{hello}");
    assert_eq!(hello["protocolVersion"], "1.0");
    assert_eq!(hello["gatewayVersion"], env!("CARGO_PKG_VERSION"));
    assert!(hello["capabilities"]["tools"].is_array(), "{hello}");

    let health = c.call(json!(1), "GET", "/v1/health", None).await;
    assert_eq!(health["status"], 200);
    assert_eq!(health["body"]["data"]["service"], "review-agent-gateway");

    // A route error: the same status and body as over HTTP.
    let body = d.review_body("unmapped", "other/project", 1);
    let over_ws = c
        .call(json!("r"), "POST", "/v1/reviews", Some(body.clone()))
        .await;
    let http = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{}/v1/reviews", d.port))
        .bearer_auth(&d.token)
        .json(&body)
        .send()
        .await
        .expect("http");
    let status = http.status().as_u16();
    let http_body: Value = http.json().await.expect("json");
    assert_eq!(over_ws["status"], status);
    assert_eq!(status, 404);
    assert_eq!(over_ws["body"], http_body);
    assert_eq!(over_ws["body"]["error"]["code"], "repository.not_mapped");

    let missing = c
        .call(json!(2), "GET", "/v1/runs/run_nope/events?after=0", None)
        .await;
    assert_eq!(
        (&missing["status"], &missing["body"]["error"]["code"]),
        (&json!(404), &json!("run.not_found"))
    );
    let nowhere = c.call(json!(3), "GET", "/v1/ws", None).await;
    assert_eq!(
        nowhere["status"], 404,
        "frames cannot open a socket in a socket"
    );
}

/// Read frames until every id in `ids` has ended; returns all frames in order of arrival.
async fn until_ended(c: &mut Client, ids: &[Value]) -> Vec<Value> {
    let mut frames = Vec::new();
    let mut open: Vec<Value> = ids.to_vec();
    while !open.is_empty() {
        let frame = c.recv().await;
        assert!(
            ids.contains(&frame["id"]),
            "a frame for an unknown id: {frame}"
        );
        assert!(
            open.contains(&frame["id"]),
            "a frame after its id ended: {frame}"
        );
        if frame["type"] == "end" {
            open.retain(|id| *id != frame["id"]);
        } else {
            assert_eq!(frame["type"], "event", "{frame}");
        }
        frames.push(frame);
    }
    frames
}

#[tokio::test]
async fn concurrent_streams_are_multiplexed_and_one_can_be_cancelled() {
    let d = Daemon::start(&[("REVIEW_AGENT_GATEWAY_FAULT_FINDING_DELAY_MS", "200")]);
    let mut c = d.connect().await;
    let ids = [json!("a"), json!(7)];
    for (id, (request_id, iid)) in ids.iter().zip([("one", 1), ("two", 2)]) {
        c.send(
            json!({"type": "request", "id": id, "method": "POST", "path": "/v1/reviews",
                      "body": d.review_body(request_id, PROJECT, iid)}),
        )
        .await;
    }
    let frames = until_ended(&mut c, &ids).await;
    let mut by_id: HashMap<String, Vec<&Value>> = HashMap::new();
    for frame in frames.iter().filter(|f| f["type"] == "event") {
        by_id
            .entry(frame["id"].to_string())
            .or_default()
            .push(&frame["event"]);
    }
    let mut runs = Vec::new();
    for id in &ids {
        let events = &by_id[&id.to_string()];
        let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
        assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>(), "{id}");
        assert_eq!(events[0]["type"], "run.created");
        assert_eq!(
            events.last().map(|e| &e["type"]),
            Some(&json!("run.completed"))
        );
        let findings = events
            .iter()
            .filter(|e| e["type"] == "finding.created")
            .count();
        assert_eq!(findings, 5, "{id}");
        let run = events[0]["runId"].clone();
        assert!(events.iter().all(|e| e["runId"] == run), "one run per id");
        runs.push(run);
    }
    assert_ne!(runs[0], runs[1]);
    let order: Vec<&Value> = frames.iter().map(|f| &f["id"]).collect();
    let switches = order.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(switches >= 3, "the two streams interleave: {order:?}");

    // Cancel one stream; the other goes on to its end; the cancelled run itself goes on.
    let ids = [json!("c"), json!("d")];
    for (id, (request_id, iid)) in ids.iter().zip([("three", 3), ("four", 4)]) {
        c.send(
            json!({"type": "request", "id": id, "method": "POST", "path": "/v1/reviews",
                      "body": d.review_body(request_id, PROJECT, iid)}),
        )
        .await;
    }
    let mut cancelled_run = None;
    let mut frames = Vec::new();
    loop {
        let frame = c.recv().await;
        if frame["id"] == "c" && frame["event"]["type"] == "run.created" {
            cancelled_run = frame["event"]["runId"].as_str().map(str::to_owned);
        }
        let first_finding = frame["id"] == "c" && frame["event"]["type"] == "finding.created";
        frames.push(frame);
        if first_finding {
            break;
        }
    }
    c.send(json!({"type": "cancel", "id": "c"})).await;
    frames.extend(until_ended(&mut c, &ids).await);
    let c_findings = frames
        .iter()
        .filter(|f| f["id"] == "c" && f["event"]["type"] == "finding.created")
        .count();
    assert!(
        c_findings < 5,
        "the stream stopped early: {c_findings} {frames:#?}"
    );
    let d_events: Vec<&Value> = frames
        .iter()
        .filter(|f| f["id"] == "d" && f["type"] == "event")
        .collect();
    assert_eq!(
        d_events.last().map(|f| &f["event"]["type"]),
        Some(&json!("run.completed")),
        "the other stream went on"
    );
    // Nothing more for "c" after its end, and its id can be used again at once.
    let run = cancelled_run.expect("run.created for c");
    let view = c
        .call(json!("c"), "GET", &format!("/v1/runs/{run}"), None)
        .await;
    let state = view["body"]["data"]["state"].clone();
    assert!(
        state == "running" || state == "completed",
        "cancelling the stream does not cancel the run: {view}"
    );
    // Cancelling what is not open is a no-op: the next frame answers the next request.
    c.send(json!({"type": "cancel", "id": "c"})).await;
    let health = c.call(json!("h"), "GET", "/v1/health", None).await;
    assert_eq!(health["status"], 200);
}

#[tokio::test]
async fn the_upgrade_needs_the_token_host_and_origin() {
    let d = Daemon::start(&[]);
    let (status, body) = refused(d.connect_with(&[]).await);
    assert_eq!(
        (status, &body["error"]["code"]),
        (401, &json!("auth.token_missing"))
    );
    let (status, body) = refused(
        d.connect_with(&[("Authorization", "Bearer 0000000000000000000000000000000000")])
            .await,
    );
    assert_eq!(
        (status, &body["error"]["code"]),
        (401, &json!("auth.token_invalid"))
    );
    let (status, body) = refused(
        d.connect_with(&[(
            "Sec-WebSocket-Protocol",
            "review-agent-gateway.v1, bearer.00000000000000000000000000000000",
        )])
        .await,
    );
    assert_eq!(
        (status, &body["error"]["code"]),
        (401, &json!("auth.token_invalid"))
    );

    // The browser way: the token as a subprotocol entry, never echoed.
    let offered = format!("review-agent-gateway.v1, bearer.{}", d.token);
    let mut c = d
        .connect_with(&[("Sec-WebSocket-Protocol", &offered), ("Origin", ORIGIN)])
        .await
        .expect("subprotocol token accepted");
    assert_eq!(c.protocol.as_deref(), Some("review-agent-gateway.v1"));
    let caps = c.call(json!(1), "GET", "/v1/capabilities", None).await;
    assert_eq!(caps["status"], 200, "{caps}");

    let lone = format!("bearer.{}", d.token);
    let (status, body) = refused(d.connect_with(&[("Sec-WebSocket-Protocol", &lone)]).await);
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("request.invalid"))
    );

    let auth = format!("Bearer {}", d.token);
    let (status, body) = refused(
        d.connect_with(&[("Authorization", &auth), ("Origin", "https://evil.example")])
            .await,
    );
    assert_eq!(
        (status, &body["error"]["code"]),
        (403, &json!("origin.not_allowed"))
    );
    let (status, body) = refused(
        d.connect_with(&[("Authorization", &auth), ("Host", "evil.example:80")])
            .await,
    );
    assert_eq!(
        (status, &body["error"]["code"]),
        (403, &json!("request.host_not_allowed"))
    );

    // Not a WebSocket handshake at all.
    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{}/v1/ws", d.port))
        .bearer_auth(&d.token)
        .send()
        .await
        .expect("http");
    assert!(plain.status().is_client_error(), "{}", plain.status());
    let body: Value = plain.json().await.expect("json");
    assert_eq!(body["error"]["code"], "request.invalid");
}

#[tokio::test]
async fn bad_frames_get_error_frames_and_the_connection_goes_on() {
    let d = Daemon::start(&[("REVIEW_AGENT_GATEWAY_FAULT_FINDING_DELAY_MS", "300")]);
    let mut c = d.connect().await;
    let mut n = 0;
    let mut still_works = async |c: &mut Client| {
        n += 1;
        let reply = c.call(json!(n), "GET", "/v1/health", None).await;
        assert_eq!(reply["status"], 200);
    };

    c.ws.send(Message::binary(vec![1u8, 2, 3]))
        .await
        .expect("send");
    let e = c.recv().await;
    assert_eq!(
        (&e["type"], &e["id"], &e["error"]["code"]),
        (&json!("error"), &Value::Null, &json!("request.invalid")),
        "{e}"
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("binary")
    );
    still_works(&mut c).await;

    c.ws.send(Message::text("{not json")).await.expect("send");
    let e = c.recv().await;
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("not JSON"),
        "{e}"
    );
    still_works(&mut c).await;

    c.send(json!({"type": "subscribe", "id": "s"})).await;
    let e = c.recv().await;
    assert_eq!(
        (&e["type"], &e["id"]),
        (&json!("error"), &json!("s")),
        "{e}"
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("subscribe")
    );
    still_works(&mut c).await;

    c.send(json!({"type": "request", "method": "GET", "path": "/v1/health"}))
        .await;
    let e = c.recv().await;
    assert_eq!(e["error"]["code"], "request.invalid", "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("`id`"),
        "{e}"
    );
    still_works(&mut c).await;

    c.send(json!({"type": "response", "id": 1, "status": 200, "body": {}}))
        .await;
    let e = c.recv().await;
    assert_eq!((&e["type"], &e["id"]), (&json!("error"), &json!(1)), "{e}");
    still_works(&mut c).await;

    c.send(json!({"type": "request", "id": "p", "method": "GET", "path": "v1/health"}))
        .await;
    let e = c.recv().await;
    assert_eq!(
        (&e["id"], &e["error"]["code"]),
        (&json!("p"), &json!("request.invalid"))
    );
    still_works(&mut c).await;

    // A second request under the id of an open stream.
    c.send(
        json!({"type": "request", "id": "dup", "method": "POST", "path": "/v1/reviews",
                  "body": d.review_body("dup", PROJECT, 5)}),
    )
    .await;
    let first = c.recv().await;
    assert_eq!(
        (&first["type"], &first["id"]),
        (&json!("event"), &json!("dup"))
    );
    c.send(json!({"type": "request", "id": "dup", "method": "GET", "path": "/v1/health"}))
        .await;
    loop {
        let frame = c.recv().await;
        if frame["type"] == "error" {
            assert_eq!(
                (&frame["id"], &frame["error"]["code"]),
                (&json!("dup"), &json!("frame.id_in_use")),
                "{frame}"
            );
            break;
        }
        assert_eq!(frame["type"], "event", "{frame}");
    }
    c.send(json!({"type": "cancel", "id": "dup"})).await;
    loop {
        let frame = c.recv().await;
        if frame["type"] == "end" {
            assert_eq!(frame["id"], "dup");
            break;
        }
    }
    still_works(&mut c).await;

    // Over the 64 MiB frame cap: refused, the connection stays.
    let big = format!("{{\"type\":\"hello\",\"x\":\"{}\"}}", "x".repeat(64 << 20));
    c.ws.send(Message::text(big)).await.expect("send");
    let e = c.recv().await;
    assert_eq!(e["error"]["code"], "frame.too_large", "{e}");
    still_works(&mut c).await;
}

#[tokio::test]
async fn a_silent_client_is_closed_after_a_missed_ping() {
    let d = Daemon::start(&[("REVIEW_AGENT_GATEWAY_WS_PING_MS", "150")]);
    let mut silent = d.connect().await;
    let mut alive = d.connect().await;
    // `alive` reads (tungstenite answers pings while reading); `silent` does not.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(900);
    let mut pings = 0;
    while let Ok(Some(message)) = tokio::time::timeout_at(deadline, alive.ws.next()).await {
        if matches!(message, Ok(Message::Ping(_))) {
            pings += 1;
        }
    }
    assert!(pings >= 3, "pinged every 150 ms: {pings}");
    let health = alive.call(json!(1), "GET", "/v1/health", None).await;
    assert_eq!(health["status"], 200);

    let close = loop {
        let message = tokio::time::timeout(Duration::from_secs(10), silent.ws.next())
            .await
            .expect("closed in time");
        match message {
            Some(Ok(Message::Close(frame))) => break frame,
            Some(Ok(Message::Ping(_))) => {}
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(close.map(|f| f.code), Some(CloseCode::Away));
}

/// The daemon's open sockets (its listener and connections), from `/proc/<pid>/fd`.
#[cfg(target_os = "linux")]
fn sockets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the daemon's fd table")
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with("socket:"))
        .count()
}

/// Send `GET /v1/tools` requests (about 10 KB answers; ids from 0, padded to 4 KB) until one
/// send has not completed within 3 s — the daemon stopped reading — or `max` went out;
/// returns how many went out.
async fn flood(c: &mut Client, max: u64) -> u64 {
    let pad = "p".repeat(4 * 1024);
    for n in 0..max {
        let frame = json!({"type": "request", "id": n, "method": "GET", "path": "/v1/tools",
                           "body": {"pad": pad}});
        let send = c.ws.send(Message::text(frame.to_string()));
        match tokio::time::timeout(Duration::from_secs(3), send).await {
            Ok(result) => result.expect("send"),
            Err(_) => return n,
        }
    }
    max
}

/// Issue 12 §1: a client that sent requests and never read grew the daemon without bound
/// (62 MB → 718 MB after 60,000 requests) and kept it after closing. The daemon stops reading
/// once the connection's outbound side is full, refuses requests over the open-request cap
/// with a retryable `request.too_many_open` carrying the id, serves other connections
/// meanwhile, answers every request the flooding client sent once it reads, and ends the
/// connection's tasks (its socket closes) when the client goes away without reading.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_client_that_never_reads_is_held_back_and_others_are_served() {
    let d = Daemon::start(&[]);
    let pid = d.child.id();
    let baseline = sockets(pid);

    let mut flooding = d.connect().await;
    let sent = flood(&mut flooding, 5000).await;
    assert!(
        sent < 5000,
        "the daemon stopped reading a client that does not read (20 MB of requests went through)"
    );

    // Another connection is served meanwhile.
    let mut other = d.connect().await;
    let health = other.call(json!("other"), "GET", "/v1/health", None).await;
    assert_eq!(health["status"], 200, "{health}");

    // Reading now: each request sent is answered exactly once — a response, or the cap's error.
    let mut answered: HashMap<u64, Value> = HashMap::new();
    while (0..sent).any(|n| !answered.contains_key(&n)) {
        let frame = flooding.recv().await;
        let id = frame["id"].as_u64().expect("every answer carries its id");
        assert!(
            answered.insert(id, frame.clone()).is_none(),
            "answered twice: {frame}"
        );
    }
    let refused: Vec<&Value> = answered.values().filter(|f| f["type"] == "error").collect();
    assert!(!refused.is_empty(), "over the cap, requests are refused");
    for frame in &refused {
        assert_eq!(frame["error"]["code"], "request.too_many_open", "{frame}");
        assert_eq!(frame["error"]["retryable"], true, "{frame}");
        assert!(
            frame["error"]["remediation"]
                .as_str()
                .is_some_and(|r| !r.is_empty())
        );
    }
    assert!(
        answered
            .values()
            .all(|f| f["type"] == "error" || (f["type"] == "response" && f["status"] == 200)),
        "the rest are answered"
    );
    // The connection stays usable. The send that timed out (id `sent`) may still have gone out
    // once the socket drained — tungstenite keeps a frame it started — so its answer may come
    // first; nothing else may.
    flooding
        .send(json!({"type": "request", "id": "again", "method": "GET", "path": "/v1/health"}))
        .await;
    let again = loop {
        let frame = flooding.recv().await;
        if frame["id"] == json!(sent) {
            continue;
        }
        break frame;
    };
    assert_eq!(
        (&again["id"], &again["status"]),
        (&json!("again"), &json!(200)),
        "{again}"
    );

    // A client that floods and goes away without reading: its tasks end, its socket closes.
    let mut gone = d.connect().await;
    assert!(flood(&mut gone, 5000).await < 5000);
    drop(gone);
    drop(flooding);
    drop(other);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while sockets(pid) > baseline {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the connections' tasks ended: {} sockets, {baseline} before",
            sockets(pid)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 12 §4 over `/v1/ws`: every `response` body carries a `requestId` (the body's, else a
/// minted one), and a frame the gateway cannot take is answered with its id when it has a
/// readable one — the same rule as the native host.
#[tokio::test]
async fn responses_carry_request_ids_and_bad_frames_keep_their_id() {
    let d = Daemon::start(&[]);
    let mut c = d.connect().await;
    let minted = |reply: &Value| {
        let id = reply["body"]["requestId"].as_str().unwrap_or_default();
        assert!(id.starts_with("req_") && id.len() == 30, "{reply}");
        id.to_owned()
    };
    let a = minted(&c.call(json!(1), "GET", "/v1/health", None).await);
    let b = minted(&c.call(json!(2), "GET", "/v1/capabilities", None).await);
    assert_ne!(a, b);
    let missing = c.call(json!(3), "GET", "/v1/runs/run_nope", None).await;
    assert_eq!(missing["status"], 404);
    minted(&missing);
    let nowhere = c.call(json!(4), "GET", "/v1/nowhere", None).await;
    assert_eq!(nowhere["status"], 404);
    minted(&nowhere);
    let bad_body = c
        .call(json!(5), "POST", "/v1/reviews", Some(json!([1])))
        .await;
    assert_eq!(bad_body["status"], 400);
    minted(&bad_body);
    let tool = json!({"requestId": "ws-tool", "gitlabOrigin": ORIGIN, "projectPath": PROJECT,
                      "input": {"path": "app.py"}});
    let read = c
        .call(json!(6), "POST", "/v1/tools/file_read", Some(tool.clone()))
        .await;
    assert_eq!(
        (&read["status"], &read["body"]["requestId"]),
        (&json!(200), &json!("ws-tool"))
    );
    let unknown = c.call(json!(7), "POST", "/v1/tools/nope", Some(tool)).await;
    assert_eq!(
        (&unknown["status"], &unknown["body"]["requestId"]),
        (&json!(404), &json!("ws-tool"))
    );
    let unmapped = d.review_body("ws-review", "other/project", 1);
    let refused = c
        .call(json!(8), "POST", "/v1/reviews", Some(unmapped))
        .await;
    assert_eq!(refused["body"]["requestId"], "ws-review");

    // Bad frames: the id comes back whenever it can be read.
    let cases = [
        (r#"{"type":"subscribe","id":"u"}"#.to_owned(), json!("u"), "unknown frame type"),
        (r#"{"type":"request","id":11,"path":"/v1/health"}"#.to_owned(), json!(11), "missing field `method`"),
        (r#"{"type":"request","id":"t","method":5,"path":"/v1/health"}"#.to_owned(), json!("t"), "invalid type"),
        (
            r#"{"type":"request","id":"d","method":"POST","path":"/v1/chat","body":{"requestId":"a","requestId":"b"}}"#.to_owned(),
            json!("d"),
            "duplicate key `body.requestId`",
        ),
        (
            // Issue 12 trial: a key twice outside `body` (here in a field the frame does not
            // know) was taken, last value winning.
            r#"{"type":"request","id":"x","method":"GET","path":"/v1/health","extra":{"a":1,"a":2}}"#.to_owned(),
            json!("x"),
            "duplicate key `extra.a`",
        ),
        (
            format!(r#"{{"type":"request","id":"{}","method":"GET","path":"/v1/health"}}"#, "i".repeat(201)),
            Value::Null,
            "longer than 200 characters",
        ),
    ];
    for (text, id, needle) in cases {
        c.ws.send(Message::text(text.clone())).await.expect("send");
        let e = c.recv().await;
        assert_eq!(
            (&e["type"], &e["id"], &e["error"]["code"]),
            (&json!("error"), &id, &json!("request.invalid")),
            "{text}: {e}"
        );
        let message = e["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{text}: {message}");
        assert!(e.to_string().len() < 2_000, "nothing long is echoed: {e}");
    }
    c.call(json!("after"), "GET", "/v1/health", None).await;
}
