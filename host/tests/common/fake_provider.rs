//! A scripted model provider: a real HTTP/1.1 server on `127.0.0.1:<free port>` that answers
//! each request with the next reply of its script, speaking the streaming wire formats of
//! OpenAI's Chat Completions (`data: JSON\n\n` chunks, `data: [DONE]`) and Anthropic's Messages
//! API (`event: NAME\ndata: JSON\n\n`) byte for byte.
//!
//! ```ignore
//! let fake = FakeProvider::start();
//! fake.push(Reply::openai_error(429, "rate_limit_exceeded", "slow down").header("retry-after", "1"));
//! fake.push(OpenAiStream::new().text("Hel").text("lo").end("stop", 12, 3));
//! fake.push_with(|request| {
//!     let prompt = request.json()["messages"][1]["content"].as_str().unwrap().to_owned();
//!     AnthropicStream::new().message_start(10).text_block(&[&prompt]).end("end_turn", 5).into()
//! });
//! let config = fake.config("fake", ProviderKind::OpenaiCompatible); // or `fake.toml(..)`
//! // … run the client or a daemon against it …
//! assert_eq!(fake.requests()[1].header("authorization"), Some("Bearer sk-test"));
//! ```
//!
//! Rules of the script:
//! - Every request except a models listing (`GET /models`, `GET /v1/models`) takes the next
//!   reply, in arrival order. A request with none left gets a 400 saying so (not retried).
//! - A request with no reply left goes to the responder when one is set
//!   ([`FakeProvider::set_responder`]).
//! - Models listings answer 200 with one model, or what [`FakeProvider::set_models`] says.
//! - Streams go out with `Transfer-Encoding: chunked`, one HTTP chunk per SSE event (or per
//!   [`OpenAiStream::split_writes`] bytes). `drop_after(n)` closes the socket after `n` events
//!   without the final zero-size chunk: what a client sees when a server dies mid-answer, unlike
//!   a body that ends cleanly but without its terminator (a stream without `.done()`).
//! - Connections are kept alive between complete answers, as the real providers' are.
//! - Every request is recorded ([`RecordedRequest`]), and how its answer ended ([`Outcome`]):
//!   a client that goes away mid-stream is seen while the fake waits between events.
//!
//! The server runs on its own thread and runtime, so it serves `#[tokio::test]`s, plain
//! `#[test]`s and spawned daemons alike, and keeps answering while a test blocks. Dropping the
//! [`FakeProvider`] stops it and closes its connections.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use review_agent_gateway::config::{ProviderConfig, ProviderKind};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{oneshot, watch};

/// Model name the fake's streams and listing report.
pub const FAKE_MODEL: &str = "fake-model";
/// How long the `wait_*` methods wait before panicking.
const WAIT: Duration = Duration::from_secs(10);
/// Largest request head and body the fake reads.
const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 32 * 1024 * 1024;

// === impl FakeProvider ===

/// The running fake (see the module docs).
pub struct FakeProvider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    // Bumped on every change of `state`, for the `wait_*` methods.
    changed: watch::Sender<u64>,
}

#[derive(Default)]
struct State {
    script: VecDeque<Step>,
    responder: Option<Responder>,
    models: Option<Reply>,
    requests: Vec<RecordedRequest>,
    outcomes: Vec<Outcome>,
}

/// Answers every request the script has no reply for ([`FakeProvider::set_responder`]).
type Responder = Arc<dyn Fn(&RecordedRequest) -> Reply + Send + Sync>;

enum Step {
    Reply(Reply),
    With(Box<dyn FnOnce(&RecordedRequest) -> Reply + Send>),
}

impl FakeProvider {
    /// Bind `127.0.0.1:0` and serve an empty script.
    ///
    /// # Panics
    /// When no loopback port can be bound or the server thread cannot start.
    pub fn start() -> FakeProvider {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let addr = listener.local_addr().expect("local address");
        let (changed, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed,
        });
        let (stop, stopped) = oneshot::channel();
        let server = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("fake-provider-{}", addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake provider runtime");
                runtime.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                    tokio::select! {
                        () = accept_loop(listener, server) => {}
                        _ = stopped => {}
                    }
                });
                // Dropping the runtime cancels the connection tasks and closes their sockets.
            })
            .expect("spawn the fake provider thread");
        FakeProvider {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// [`FakeProvider::start`] with `replies` queued.
    pub fn with_script(replies: impl IntoIterator<Item = Reply>) -> FakeProvider {
        let fake = FakeProvider::start();
        for reply in replies {
            fake.push(reply);
        }
        fake
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The `base_url` of an `openai-compatible` provider served here: `http://127.0.0.1:<port>/v1`.
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.url())
    }

    /// The `base_url` of an `anthropic` provider served here: `http://127.0.0.1:<port>`.
    pub fn anthropic_base_url(&self) -> String {
        self.url()
    }

    /// The `base_url` for `kind`.
    pub fn base_url(&self, kind: ProviderKind) -> String {
        match kind {
            ProviderKind::OpenaiCompatible => self.openai_base_url(),
            ProviderKind::Anthropic => self.anthropic_base_url(),
        }
    }

    /// A `[[providers]]` entry of `kind` pointing here: model [`FAKE_MODEL`], a 5 s timeout,
    /// the other settings at their defaults. Parsed from [`FakeProvider::toml`], so it is
    /// exactly what a daemon given that TOML would use; tests change its fields as they need.
    pub fn config(&self, id: &str, kind: ProviderKind) -> ProviderConfig {
        let toml = self.toml(id, kind, None);
        let entry = toml.strip_prefix("[[providers]]\n").expect("an entry");
        toml::from_str(entry).expect("the fake's [[providers]] entry parses")
    }

    /// The `[[providers]]` entry as TOML, for a daemon's `config.toml`; `api_key_env` names the
    /// variable the spawned daemon should read the key from (set it in the child's environment).
    pub fn toml(&self, id: &str, kind: ProviderKind, api_key_env: Option<&str>) -> String {
        let mut entry = format!(
            "[[providers]]\nid = \"{id}\"\nkind = \"{}\"\nbase_url = \"{}\"\nmodel = \"{FAKE_MODEL}\"\nrequest_timeout_secs = 5\n",
            kind.as_str(),
            self.base_url(kind),
        );
        if let Some(name) = api_key_env {
            entry.push_str(&format!("api_key_env = \"{name}\"\n"));
        }
        entry
    }

    /// Queue `reply` for the next request.
    pub fn push(&self, reply: impl Into<Reply>) {
        self.shared
            .update(|state| state.script.push_back(Step::Reply(reply.into())));
    }

    /// Queue a reply built from the request it answers (called on the server thread).
    pub fn push_with(&self, build: impl FnOnce(&RecordedRequest) -> Reply + Send + 'static) {
        self.shared
            .update(|state| state.script.push_back(Step::With(Box::new(build))));
    }

    /// Answer every request the script has no reply left for with `respond` (called on the
    /// server thread, outside the lock): a model driven by what it is asked rather than by
    /// arrival order, for clients that send requests of their own (an agent's title request)
    /// at unpredictable times.
    pub fn set_responder(
        &self,
        respond: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    ) {
        let respond: Responder = Arc::new(respond);
        self.shared.update(|state| state.responder = Some(respond));
    }

    /// What models listings answer from now on (default: 200 with [`FAKE_MODEL`]).
    pub fn set_models(&self, reply: impl Into<Reply>) {
        let reply = reply.into();
        self.shared.update(|state| state.models = Some(reply));
    }

    /// Replies not yet taken.
    pub fn remaining(&self) -> usize {
        self.shared.lock().script.len()
    }

    /// Every request received so far, models listings included, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// The requests that took a script reply (models listings left out).
    pub fn scripted_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| !r.is_models_listing())
            .collect()
    }

    /// How the answer to request `index` (of [`FakeProvider::requests`]) has ended so far.
    pub fn outcome(&self, index: usize) -> Outcome {
        self.shared
            .lock()
            .outcomes
            .get(index)
            .copied()
            .unwrap_or(Outcome::Pending)
    }

    /// Wait until at least `n` requests arrived; returns all of them.
    ///
    /// # Panics
    /// After 10 s.
    pub async fn wait_requests(&self, n: usize) -> Vec<RecordedRequest> {
        self.wait_until(&format!("{n} requests"), |s| {
            (s.requests.len() >= n).then(|| s.requests.clone())
        })
        .await
    }

    /// [`FakeProvider::wait_requests`] for synchronous tests.
    pub fn wait_requests_blocking(&self, n: usize) -> Vec<RecordedRequest> {
        self.wait_until_blocking(&format!("{n} requests"), |s| {
            (s.requests.len() >= n).then(|| s.requests.clone())
        })
    }

    /// Wait until the answer to request `index` has ended; returns how.
    ///
    /// # Panics
    /// After 10 s.
    pub async fn wait_outcome(&self, index: usize) -> Outcome {
        self.wait_until(&format!("the end of answer {index}"), |s| ended(s, index))
            .await
    }

    /// [`FakeProvider::wait_outcome`] for synchronous tests.
    pub fn wait_outcome_blocking(&self, index: usize) -> Outcome {
        self.wait_until_blocking(&format!("the end of answer {index}"), |s| ended(s, index))
    }

    async fn wait_until<T>(&self, what: &str, check: impl Fn(&State) -> Option<T>) -> T {
        let mut changes = self.shared.changed.subscribe();
        let wait = async {
            loop {
                if let Some(found) = check(&self.shared.lock()) {
                    return found;
                }
                changes.changed().await.expect("the fake provider is alive");
            }
        };
        match tokio::time::timeout(WAIT, wait).await {
            Ok(found) => found,
            Err(_) => panic!("fake provider: no {what} within {WAIT:?}"),
        }
    }

    fn wait_until_blocking<T>(&self, what: &str, check: impl Fn(&State) -> Option<T>) -> T {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(found) = check(&self.shared.lock()) {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "fake provider: no {what} within {WAIT:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn ended(state: &State, index: usize) -> Option<Outcome> {
    state
        .outcomes
        .get(index)
        .copied()
        .filter(|o| *o != Outcome::Pending)
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn update<T>(&self, change: impl FnOnce(&mut State) -> T) -> T {
        let out = change(&mut self.lock());
        self.changed.send_modify(|v| *v += 1);
        out
    }

    fn set_outcome(&self, index: usize, outcome: Outcome) {
        self.update(|state| state.outcomes[index] = outcome);
    }
}

/// A port on 127.0.0.1 that nothing listens on (bound, then released).
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local address").port()
}

// === impl RecordedRequest ===

/// A request as the fake received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// Its position in [`FakeProvider::requests`].
    pub index: usize,
    /// Which TCP connection carried it (numbered from 0 in accept order).
    pub connection: u64,
    /// When its last byte arrived.
    pub at: Instant,
    /// `GET`, `POST`, …
    pub method: String,
    /// The request target, query included.
    pub path: String,
    /// The headers in order, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body (chunked bodies decoded).
    pub body: Vec<u8>,
}

impl RecordedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    ///
    /// # Panics
    /// When it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "request {} body is not JSON ({e}): {}",
                self.index,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// Whether this is `GET /models` or `GET /v1/models`.
    pub fn is_models_listing(&self) -> bool {
        let path = self.path.split('?').next().unwrap_or_default();
        self.method == "GET" && (path == "/models" || path == "/v1/models")
    }
}

/// How the answer to a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Still being answered.
    Pending,
    /// All of it was written.
    Completed,
    /// The script closed the connection (`drop_after`, [`Reply::hang_up`]) after `events`
    /// events.
    Dropped {
        /// SSE events written before.
        events: usize,
    },
    /// The client closed the connection after `events` events had been written.
    ClientClosed {
        /// SSE events written before.
        events: usize,
    },
}

// === impl Reply ===

/// One scripted answer. Streams are built with [`OpenAiStream`] and [`AnthropicStream`].
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Body,
    head_delay: Duration,
}

#[derive(Debug, Clone)]
enum Body {
    Fixed(Vec<u8>),
    Events(Events),
    HangUp,
}

/// SSE events, each already framed, and how to send them.
#[derive(Debug, Clone, Default)]
struct Events {
    items: Vec<Vec<u8>>,
    delay: Duration,
    drop_after: Option<usize>,
    split: Option<usize>,
}

impl Reply {
    /// `status` with an empty body.
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Body::Fixed(Vec::new()),
            head_delay: Duration::ZERO,
        }
    }

    /// `status` with a JSON body.
    pub fn json(status: u16, body: Value) -> Reply {
        Reply::status(status)
            .header("content-type", "application/json")
            .body(body.to_string())
    }

    /// OpenAI's error object: `{"error": {"message", "type", "param", "code"}}`.
    pub fn openai_error(status: u16, kind: &str, message: &str) -> Reply {
        Reply::json(
            status,
            json!({"error": {"message": message, "type": kind, "param": null, "code": null}}),
        )
    }

    /// Anthropic's error object: `{"type": "error", "error": {"type", "message"}}`.
    pub fn anthropic_error(status: u16, kind: &str, message: &str) -> Reply {
        Reply::json(
            status,
            json!({"type": "error", "error": {"type": kind, "message": message}}),
        )
    }

    /// Close the connection once the request is read, answering nothing.
    pub fn hang_up() -> Reply {
        Reply {
            body: Body::HangUp,
            ..Reply::status(200)
        }
    }

    /// Add a response header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Replace the body of a non-stream reply.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Reply {
        self.body = Body::Fixed(body.into());
        self
    }

    /// Wait `delay` before sending the status line (a model slow to start).
    pub fn delay_head(mut self, delay: Duration) -> Reply {
        self.head_delay = delay;
        self
    }

    fn stream(events: Events, content_type: &str) -> Reply {
        Reply {
            body: Body::Events(events),
            ..Reply::status(200)
                .header("content-type", content_type)
                .header("cache-control", "no-cache")
        }
    }
}

/// Options shared by both stream builders.
macro_rules! stream_options {
    ($builder:ty) => {
        impl $builder {
            /// Wait `delay` before each event after the first (a slow model).
            pub fn delay(mut self, delay: Duration) -> Self {
                self.events.delay = delay;
                self
            }

            /// Close the connection after the first `n` events, without ending the chunked
            /// body (a server that died mid-answer).
            pub fn drop_after(mut self, n: usize) -> Self {
                self.events.drop_after = Some(n);
                self
            }

            /// Write the body in pieces of at most `bytes` bytes, one HTTP chunk and one
            /// socket write each, so events and UTF-8 characters arrive split.
            pub fn split_writes(mut self, bytes: usize) -> Self {
                assert!(bytes > 0, "split_writes needs at least 1 byte");
                self.events.split = Some(bytes);
                self
            }

            /// Bytes sent verbatim, counted as one event.
            pub fn raw(mut self, bytes: impl Into<Vec<u8>>) -> Self {
                self.events.items.push(bytes.into());
                self
            }

            /// Wait `delay` before the status line.
            pub fn delay_head(self, delay: Duration) -> Reply {
                Reply::from(self).delay_head(delay)
            }

            /// Add a response header.
            pub fn header(self, name: &str, value: &str) -> Reply {
                Reply::from(self).header(name, value)
            }
        }
    };
}

// === impl OpenAiStream ===

/// An OpenAI Chat Completions stream: `data: <chat.completion.chunk>\n\n` per step, as OpenAI
/// sends it with `stream_options.include_usage` (`"usage": null` on every chunk but the last).
/// [`OpenAiStream::new`] starts with the usual role chunk (`delta: {role, content: ""}`).
#[derive(Debug, Clone)]
pub struct OpenAiStream {
    events: Events,
}

stream_options!(OpenAiStream);

impl Default for OpenAiStream {
    fn default() -> Self {
        OpenAiStream::new()
    }
}

impl OpenAiStream {
    /// A stream whose first event is the role chunk.
    pub fn new() -> OpenAiStream {
        OpenAiStream::bare().delta(json!({"role": "assistant", "content": ""}))
    }

    /// A stream with no events yet (no role chunk).
    pub fn bare() -> OpenAiStream {
        OpenAiStream {
            events: Events::default(),
        }
    }

    /// A chunk of `choices[0]` = `{index: 0, delta, logprobs: null, finish_reason}`.
    fn choice(self, delta: Value, finish_reason: Option<&str>) -> OpenAiStream {
        self.chunk(json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": FAKE_MODEL,
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
            "usage": null,
        }))
    }

    /// A chunk with this `delta` (anything, e.g. `reasoning_content` or a repeated name).
    pub fn delta(self, delta: Value) -> OpenAiStream {
        self.choice(delta, None)
    }

    /// A `content` piece.
    pub fn text(self, piece: &str) -> OpenAiStream {
        self.delta(json!({"content": piece}))
    }

    /// The first fragment of tool call `index`: its id, name and empty arguments.
    pub fn tool_call_start(self, index: u64, id: &str, name: &str) -> OpenAiStream {
        self.delta(json!({"tool_calls": [{
            "index": index, "id": id, "type": "function",
            "function": {"name": name, "arguments": ""},
        }]}))
    }

    /// A piece of the `arguments` of tool call `index`.
    pub fn tool_arguments(self, index: u64, piece: &str) -> OpenAiStream {
        self.delta(json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    }

    /// Tool call `index`: its start, then one chunk per argument piece.
    pub fn tool_call(mut self, index: u64, id: &str, name: &str, pieces: &[&str]) -> OpenAiStream {
        self = self.tool_call_start(index, id, name);
        for piece in pieces {
            self = self.tool_arguments(index, piece);
        }
        self
    }

    /// One chunk carrying argument pieces of several tool calls: `(index, piece)` each.
    pub fn tool_fragments(self, fragments: &[(u64, &str)]) -> OpenAiStream {
        let calls: Vec<Value> = fragments
            .iter()
            .map(|(index, piece)| json!({"index": index, "function": {"arguments": piece}}))
            .collect();
        self.delta(json!({"tool_calls": calls}))
    }

    /// The chunk closing the choice: empty delta, `finish_reason`.
    pub fn finish(self, reason: &str) -> OpenAiStream {
        self.choice(json!({}), Some(reason))
    }

    /// The usage chunk: `choices: []` and `usage`.
    pub fn usage(self, prompt_tokens: u64, completion_tokens: u64) -> OpenAiStream {
        self.chunk(json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": FAKE_MODEL,
            "system_fingerprint": "fp_fake",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }))
    }

    /// `data: [DONE]`.
    pub fn done(self) -> OpenAiStream {
        self.data("[DONE]")
    }

    /// [`finish`](Self::finish), [`usage`](Self::usage), [`done`](Self::done).
    pub fn end(self, reason: &str, prompt_tokens: u64, completion_tokens: u64) -> OpenAiStream {
        self.finish(reason)
            .usage(prompt_tokens, completion_tokens)
            .done()
    }

    /// An error chunk, as OpenAI-compatible servers send one mid-stream.
    pub fn error(self, message: &str) -> OpenAiStream {
        self.chunk(json!({"error": {"message": message, "type": "server_error", "param": null, "code": null}}))
    }

    /// `data: <chunk>\n\n`.
    pub fn chunk(self, chunk: Value) -> OpenAiStream {
        self.data(&chunk.to_string())
    }

    /// `data: <text>\n\n`, `text` verbatim (e.g. broken JSON).
    pub fn data(mut self, text: &str) -> OpenAiStream {
        self.events
            .items
            .push(format!("data: {text}\n\n").into_bytes());
        self
    }
}

impl From<OpenAiStream> for Reply {
    fn from(stream: OpenAiStream) -> Reply {
        Reply::stream(stream.events, "text/event-stream; charset=utf-8")
    }
}

// === impl AnthropicStream ===

/// An Anthropic Messages stream: `event: <type>\ndata: <JSON>\n\n` per event. Blocks made with
/// [`text_block`](Self::text_block) and [`tool_use_block`](Self::tool_use_block) are numbered
/// in order; the `block_*` methods take an explicit index.
#[derive(Debug, Clone, Default)]
pub struct AnthropicStream {
    events: Events,
    next_index: u64,
}

stream_options!(AnthropicStream);

impl AnthropicStream {
    /// A stream with no events yet.
    pub fn new() -> AnthropicStream {
        AnthropicStream::default()
    }

    /// `message_start` with this input usage (and `output_tokens: 1`, as the API reports).
    pub fn message_start(self, input_tokens: u64) -> AnthropicStream {
        self.event(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": "msg_fake", "type": "message", "role": "assistant", "model": FAKE_MODEL,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1},
            }}),
        )
    }

    /// `content_block_start` of block `index`.
    pub fn block_start(mut self, index: u64, content_block: Value) -> AnthropicStream {
        self.next_index = self.next_index.max(index + 1);
        self.event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": content_block}),
        )
    }

    /// `content_block_delta` of block `index`.
    pub fn block_delta(self, index: u64, delta: Value) -> AnthropicStream {
        self.event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        )
    }

    /// `content_block_stop` of block `index`.
    pub fn block_stop(self, index: u64) -> AnthropicStream {
        self.event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        )
    }

    /// The next block: `text`, one `text_delta` per piece, stop.
    pub fn text_block(mut self, pieces: &[&str]) -> AnthropicStream {
        let index = self.next_index;
        self = self.block_start(index, json!({"type": "text", "text": ""}));
        for piece in pieces {
            self = self.block_delta(index, json!({"type": "text_delta", "text": piece}));
        }
        self.block_stop(index)
    }

    /// The next block: `tool_use` with `input: {}`, one `input_json_delta` per piece, stop.
    pub fn tool_use_block(mut self, id: &str, name: &str, pieces: &[&str]) -> AnthropicStream {
        let index = self.next_index;
        self = self.block_start(
            index,
            json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
        );
        for piece in pieces {
            self = self.block_delta(
                index,
                json!({"type": "input_json_delta", "partial_json": piece}),
            );
        }
        self.block_stop(index)
    }

    /// `ping`.
    pub fn ping(self) -> AnthropicStream {
        self.event("ping", json!({"type": "ping"}))
    }

    /// `message_delta` with `stop_reason` and the cumulative output usage.
    pub fn message_delta(self, stop_reason: &str, output_tokens: u64) -> AnthropicStream {
        self.event(
            "message_delta",
            json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                "usage": {"output_tokens": output_tokens}}),
        )
    }

    /// `message_stop`.
    pub fn message_stop(self) -> AnthropicStream {
        self.event("message_stop", json!({"type": "message_stop"}))
    }

    /// [`message_delta`](Self::message_delta), [`message_stop`](Self::message_stop).
    pub fn end(self, stop_reason: &str, output_tokens: u64) -> AnthropicStream {
        self.message_delta(stop_reason, output_tokens)
            .message_stop()
    }

    /// An `error` event, e.g. `overloaded_error`.
    pub fn error(self, kind: &str, message: &str) -> AnthropicStream {
        self.event(
            "error",
            json!({"type": "error", "error": {"type": kind, "message": message}}),
        )
    }

    /// `event: <name>\ndata: <data>\n\n`.
    pub fn event(self, name: &str, data: Value) -> AnthropicStream {
        self.data(name, &data.to_string())
    }

    /// `event: <name>\ndata: <text>\n\n`, `text` verbatim (e.g. broken JSON).
    pub fn data(mut self, name: &str, text: &str) -> AnthropicStream {
        self.events
            .items
            .push(format!("event: {name}\ndata: {text}\n\n").into_bytes());
        self
    }
}

impl From<AnthropicStream> for Reply {
    fn from(stream: AnthropicStream) -> Reply {
        Reply::stream(stream.events, "text/event-stream; charset=utf-8")
            .header("request-id", "req_fake")
    }
}

// === The server ===

async fn accept_loop(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    let mut connection = 0u64;
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(serve(Arc::clone(&shared), socket, connection));
        connection += 1;
    }
}

/// One connection: requests answered in turn until either side closes it.
async fn serve(shared: Arc<Shared>, socket: TcpStream, connection: u64) {
    let _ = socket.set_nodelay(true);
    let (read, write) = socket.into_split();
    let mut conn = Conn {
        read,
        write,
        buf: Vec::new(),
    };
    loop {
        let Some(request) = conn.read_request().await else {
            return;
        };
        let close_asked = request
            .headers
            .iter()
            .any(|(n, v)| n == "connection" && v.eq_ignore_ascii_case("close"));
        let (index, reply) = take_reply(&shared, request, connection);
        let outcome = conn.answer(&reply).await;
        shared.set_outcome(index, outcome);
        if outcome != Outcome::Completed || close_asked {
            return;
        }
    }
}

/// Record `request` and find its reply.
fn take_reply(shared: &Shared, mut request: RecordedRequest, connection: u64) -> (usize, Reply) {
    let (index, step, responder) = shared.update(|state| {
        let index = state.requests.len();
        request.index = index;
        request.connection = connection;
        let step = if request.is_models_listing() {
            Some(Step::Reply(
                state.models.clone().unwrap_or_else(default_models),
            ))
        } else {
            state.script.pop_front()
        };
        state.requests.push(request.clone());
        state.outcomes.push(Outcome::Pending);
        (index, step, state.responder.clone())
    });
    let reply = match step {
        Some(Step::Reply(reply)) => reply,
        // Called outside the lock: a panicking closure only closes this connection.
        Some(Step::With(build)) => build(&request),
        None if responder.is_some() => responder.expect("checked")(&request),
        None => Reply::openai_error(
            400,
            "fake_script_exhausted",
            &format!(
                "fake provider: no scripted reply left for {} {} (request {index})",
                request.method, request.path
            ),
        ),
    };
    (index, reply)
}

fn default_models() -> Reply {
    // Both listings' shapes at once: OpenAI's `object`/`owned_by`, Anthropic's
    // `type`/`display_name`/`has_more`.
    Reply::json(
        200,
        json!({
            "object": "list",
            "data": [{
                "id": FAKE_MODEL, "object": "model", "created": 1_700_000_000, "owned_by": "fake",
                "type": "model", "display_name": "Fake model", "created_at": "2024-01-01T00:00:00Z",
            }],
            "has_more": false, "first_id": FAKE_MODEL, "last_id": FAKE_MODEL,
        }),
    )
}

struct Conn {
    read: OwnedReadHalf,
    write: OwnedWriteHalf,
    // Bytes read and not yet consumed.
    buf: Vec<u8>,
}

impl Conn {
    /// Read more bytes into `buf`; `false` at end of stream or error.
    async fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 16 * 1024];
        match self.read.read(&mut chunk).await {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    /// Read until `buf` holds `needle`; the bytes before and including it are taken.
    async fn take_through(&mut self, needle: &[u8], limit: usize) -> Option<Vec<u8>> {
        loop {
            if let Some(at) = find(&self.buf, needle) {
                let rest = self.buf.split_off(at + needle.len());
                return Some(std::mem::replace(&mut self.buf, rest));
            }
            if self.buf.len() > limit || !self.fill().await {
                return None;
            }
        }
    }

    async fn take_exact(&mut self, n: usize) -> Option<Vec<u8>> {
        while self.buf.len() < n {
            if !self.fill().await {
                return None;
            }
        }
        let rest = self.buf.split_off(n);
        Some(std::mem::replace(&mut self.buf, rest))
    }

    /// The next request, or `None` when the client closed the connection or sent nonsense.
    async fn read_request(&mut self) -> Option<RecordedRequest> {
        let head = self.take_through(b"\r\n\r\n", MAX_HEAD).await?;
        let head = String::from_utf8(head).ok()?;
        let mut lines = head.split("\r\n");
        let mut request_line = lines.next()?.split(' ');
        let method = request_line.next()?.to_owned();
        let path = request_line.next()?.to_owned();
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let value = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let body = if value("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            let mut body = Vec::new();
            loop {
                let size = self.take_through(b"\r\n", MAX_HEAD).await?;
                let size = String::from_utf8_lossy(&size[..size.len() - 2]).to_string();
                let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
                if size == 0 {
                    self.take_through(b"\r\n", MAX_HEAD).await?;
                    break;
                }
                if body.len() + size > MAX_BODY {
                    return None;
                }
                body.extend(self.take_exact(size).await?);
                self.take_exact(2).await?;
            }
            body
        } else {
            let length: usize = value("content-length").map_or(Some(0), |v| v.parse().ok())?;
            if length > MAX_BODY {
                return None;
            }
            self.take_exact(length).await?
        };
        Some(RecordedRequest {
            index: 0,
            connection: 0,
            at: Instant::now(),
            method,
            path,
            headers,
            body,
        })
    }

    /// Wait `delay`, or less if the client closes the connection: `false` then.
    async fn pause(&mut self, delay: Duration) -> bool {
        if delay.is_zero() {
            return true;
        }
        let sleep = tokio::time::sleep(delay);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                () = &mut sleep => return true,
                open = self.fill() => if !open { return false },
            }
        }
    }

    async fn send(&mut self, bytes: &[u8]) -> bool {
        self.write.write_all(bytes).await.is_ok() && self.write.flush().await.is_ok()
    }

    async fn answer(&mut self, reply: &Reply) -> Outcome {
        if !self.pause(reply.head_delay).await {
            return Outcome::ClientClosed { events: 0 };
        }
        let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
        for (name, value) in &reply.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        match &reply.body {
            Body::HangUp => Outcome::Dropped { events: 0 },
            Body::Fixed(body) => {
                head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
                let mut bytes = head.into_bytes();
                bytes.extend_from_slice(body);
                if self.send(&bytes).await {
                    Outcome::Completed
                } else {
                    Outcome::ClientClosed { events: 0 }
                }
            }
            Body::Events(events) => self.stream(head, events).await,
        }
    }

    async fn stream(&mut self, mut head: String, events: &Events) -> Outcome {
        head.push_str("transfer-encoding: chunked\r\n\r\n");
        if !self.send(head.as_bytes()).await {
            return Outcome::ClientClosed { events: 0 };
        }
        for (sent, event) in events.items.iter().enumerate() {
            if events.drop_after == Some(sent) {
                return Outcome::Dropped { events: sent };
            }
            if sent > 0 && !self.pause(events.delay).await {
                return Outcome::ClientClosed { events: sent };
            }
            let piece_len = events.split.unwrap_or(event.len()).max(1);
            for (i, piece) in event.chunks(piece_len).enumerate() {
                if i > 0 {
                    // Let the client read the previous piece on its own.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
                chunk.extend_from_slice(piece);
                chunk.extend_from_slice(b"\r\n");
                if !self.send(&chunk).await {
                    return Outcome::ClientClosed { events: sent };
                }
            }
        }
        if events.drop_after == Some(events.items.len()) {
            return Outcome::Dropped {
                events: events.items.len(),
            };
        }
        if self.send(b"0\r\n\r\n").await {
            Outcome::Completed
        } else {
            Outcome::ClientClosed {
                events: events.items.len(),
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}
