//! Speaking to a spawned `serve` over raw HTTP/1.1: every header, `Host` included, is exactly
//! what the test says. [`request`] reads a whole answer (`Connection: close`); [`SseStream`]
//! reads an event stream as it arrives, so a test can act mid-run (cancel, kill).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{bin, dechunk};

/// One SSE event as (id = seq, event type, data JSON).
pub type SseEvent = (u64, String, Value);

/// Start `review-agent-gateway serve --port 0` with gateway home `home` and `env` added; its
/// stderr (the log) is appended to `<home>/serve.log`, its stdout piped (for
/// [`super::read_port`]).
pub fn spawn_serve(home: &Path, env: &[(&str, &str)]) -> Child {
    Command::new(bin())
        .args(["serve", "--port", "0"])
        .envs(env.iter().copied())
        .env("REVIEW_AGENT_GATEWAY_HOME", home)
        .stdout(Stdio::piped())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(home.join("serve.log"))
                .map(Stdio::from)
                .unwrap_or_else(|_| Stdio::null()),
        )
        .spawn()
        .expect("serve starts")
}

/// The bytes of a request: `Connection: close`, `Host: 127.0.0.1:<port>` unless `headers`
/// has one, and a JSON body with its length.
fn request_bytes(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Vec<u8> {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() {
        request.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    request.into_bytes()
}

/// A raw HTTP/1.1 request to `127.0.0.1:port`, read to its end.
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Response {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .write_all(&request_bytes(port, method, path, headers, body))
        .expect("write request");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read response");
    Response::parse(&raw)
}

/// Raw bytes to `127.0.0.1:port` (a whole request, exactly as given: a request line in absolute
/// form, two `Host` headers, a body with a duplicate key), the answer read to its end.
pub fn request_bytes_raw(port: u16, raw: &[u8]) -> Response {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout");
    stream.write_all(raw).expect("write request");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("read response");
    Response::parse(&answer)
}

/// A request whose JSON body is `body` as written (so it may hold what a `Value` cannot, such
/// as a key twice), with `Connection: close` and `Host: 127.0.0.1:<port>`.
pub fn request_text(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nHost: 127.0.0.1:{port}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    request_bytes_raw(port, request.as_bytes())
}

/// A parsed HTTP response; chunked bodies are de-chunked.
pub struct Response {
    /// The status code (0 when the answer had no status line).
    pub status: u16,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    /// The body as text.
    pub body: String,
}

impl Response {
    /// Parse a whole raw answer.
    pub fn parse(raw: &[u8]) -> Response {
        let text = String::from_utf8_lossy(raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let chunked = headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
        let body = if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        };
        Response {
            status,
            headers,
            body,
        }
    }

    /// The first header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON; panics with the body when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// `error.code` of a common error object, or "".
    pub fn error_code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Asserts an error answer: HTTP `status`, `error.code` = `code`, `needle` in the message
    /// and a non-empty remediation (the common error object of draft §4); `context` goes into
    /// the failure message.
    pub fn assert_refused(&self, status: u16, code: &str, needle: &str, context: &str) {
        assert_eq!(
            (self.status, self.error_code().as_str()),
            (status, code),
            "{context}: {}",
            self.body
        );
        let error = &self.json()["error"];
        assert!(
            error["message"]
                .as_str()
                .is_some_and(|m| m.contains(needle)),
            "{context}: {needle:?} not in {error}"
        );
        assert!(
            error["remediation"].as_str().is_some_and(|r| !r.is_empty()),
            "{context}: no remediation in {error}"
        );
    }

    /// The body's SSE events.
    pub fn sse(&self) -> Vec<SseEvent> {
        parse_sse(&self.body)
    }

    /// The JSON-RPC message of an MCP answer: the body, or the last JSON `data:` line of an
    /// SSE body (Streamable HTTP answers either way).
    #[allow(dead_code)]
    pub fn rpc(&self) -> Value {
        if self
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
        {
            let data = self
                .body
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .rfind(|d| d.starts_with('{'))
                .unwrap_or_else(|| panic!("no message in the stream: {}", self.body));
            serde_json::from_str(data).expect("JSON-RPC message")
        } else {
            self.json()
        }
    }
}

/// SSE events of `body` (blocks separated by a blank line; blocks without `id`, `event` and a
/// JSON `data`, such as keep-alive comments, are skipped).
pub fn parse_sse(body: &str) -> Vec<SseEvent> {
    body.split("\n\n").filter_map(parse_block).collect()
}

fn parse_block(block: &str) -> Option<SseEvent> {
    let (mut id, mut kind, mut data) = (None, None, None);
    for line in block.lines() {
        if let Some(v) = line.strip_prefix("id:") {
            id = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("event:") {
            kind = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("data:") {
            data = serde_json::from_str(v.trim()).ok();
        }
    }
    Some((id?, kind?, data?))
}

/// An SSE answer read event by event as the daemon sends it (chunked transfer decoded on the
/// way). Dropping it closes the connection.
pub struct SseStream {
    reader: BufReader<TcpStream>,
    /// The answer's status code.
    pub status: u16,
    chunked: bool,
    // Decoded body bytes not yet split into events.
    text: Vec<u8>,
    ended: bool,
}

impl SseStream {
    /// Send the request and read the answer's head. Reads wait at most 30 s.
    pub fn open(
        port: u16,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> SseStream {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("read timeout");
        stream
            .write_all(&request_bytes(port, method, path, headers, body))
            .expect("write request");
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).expect("status line");
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut chunked = false;
        loop {
            line.clear();
            if reader.read_line(&mut line).expect("header line") == 0 || line.trim().is_empty() {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                chunked = true;
            }
        }
        SseStream {
            reader,
            status,
            chunked,
            text: Vec::new(),
            ended: false,
        }
    }

    /// The next event, or `None` when the stream ended.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        loop {
            while let Some(at) = self.text.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.text.drain(..at + 2).collect();
                if let Some(event) = parse_block(&String::from_utf8_lossy(&block)) {
                    return Some(event);
                }
            }
            if self.ended || !self.read_more() {
                self.ended = true;
                return None;
            }
        }
    }

    /// Every remaining event, to the end of the stream.
    pub fn rest(&mut self) -> Vec<SseEvent> {
        std::iter::from_fn(|| self.next_event()).collect()
    }

    /// Read the next piece of the body into `text`; false at its end.
    fn read_more(&mut self) -> bool {
        let mut piece = Vec::new();
        if self.chunked {
            let mut size = String::new();
            if self.reader.read_line(&mut size).unwrap_or(0) == 0 {
                return false;
            }
            let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
                return false;
            };
            if n == 0 {
                return false;
            }
            piece.resize(n + 2, 0); // the chunk and its CRLF
            if self.reader.read_exact(&mut piece).is_err() {
                return false;
            }
            piece.truncate(n);
        } else {
            let mut buf = [0u8; 8192];
            match self.reader.read(&mut buf) {
                Ok(0) | Err(_) => return false,
                Ok(n) => piece.extend_from_slice(&buf[..n]),
            }
        }
        // The daemon ends lines with `\n` (SSE allows `\r\n` too; the tests' servers do not).
        self.text.extend_from_slice(&piece);
        true
    }
}
