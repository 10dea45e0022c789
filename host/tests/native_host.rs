//! End-to-end tests of `review-agent-gateway native-host`: the real binary started the way a
//! browser starts it (Chrome's `chrome-extension://ID/` or Firefox's manifest path + add-on id,
//! stdin/stdout pipes), speaking native-messaging frames (32-bit native-endian length + UTF-8
//! JSON, DESIGN §4) to a real daemon over `/v1/ws`, with a temporary home and a real git
//! repository.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{bin, git};
use review_agent_gateway::protocol::codec::Reassembler;
use review_agent_gateway::protocol::frame::Frame;
use serde_json::{Value, json};

const ORIGIN: &str = "https://gitlab.example.com";
const PROJECT: &str = "group/project";
/// A Chrome extension id the test config allows.
const CHROME_ID: &str = "knldjmfmopnpolahpmmgbagdohdnhkik";
/// The companion's Firefox add-on id (allowed without any config).
const FIREFOX_ID: &str = "companion@review-agent-gateway";
const MIB: usize = 1024 * 1024;

/// A free loopback port (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A home (config with a port, a mapping and an allowed Chrome id) and a repository whose head
/// commit has five findings and a `big.txt` whose search answers about 1 MB.
struct Setup {
    home: tempfile::TempDir,
    repo: tempfile::TempDir,
    port: u16,
    base: String,
    head: String,
}

impl Setup {
    fn new() -> Setup {
        let repo = tempfile::tempdir().expect("temp dir");
        git(repo.path(), &["init", "-q", "-b", "main"]);
        std::fs::write(repo.path().join("app.py"), "import os\n").expect("write");
        git(repo.path(), &["add", "-A"]);
        git(repo.path(), &["commit", "-q", "-m", "base"]);
        let base = git(repo.path(), &["rev-parse", "HEAD"]);
        let lines: String = (0..5).map(|i| format!("v{i} = eval(x{i})\n")).collect();
        std::fs::write(repo.path().join("app.py"), format!("import os\n{lines}")).expect("write");
        // 2000 lines of ~450 bytes with non-ASCII text: a search for `needle` answers ~1.1 MB.
        let big: String = (0..2000)
            .map(|i| format!("needle {i:05} héllo 日本 😀 \"q\" {}\n", "x".repeat(420)))
            .collect();
        std::fs::write(repo.path().join("big.txt"), big).expect("write");
        std::fs::write(repo.path().join("notes.md"), "héllo wörld — 日本語 ✓ 😀\n").expect("write");
        git(repo.path(), &["add", "-A"]);
        git(repo.path(), &["commit", "-q", "-m", "five findings"]);
        let head = git(repo.path(), &["rev-parse", "HEAD"]);

        let home = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        std::fs::create_dir_all(home.path().join("config")).expect("mkdir");
        let setup = Setup {
            home,
            repo,
            port,
            base,
            head,
        };
        setup.write_config("");
        setup
    }

    /// Write the config file, `extra` appended.
    fn write_config(&self, extra: &str) {
        let config = format!(
            "port = {}\nallowed_origins = [\"{ORIGIN}\"]\n\n[limits]\nmax_concurrent_reviews = 4\n\n\
             [native_messaging]\nallowed_extensions = [\"{CHROME_ID}\"]\n\n\
             [[mappings]]\ngitlab_origin = \"{ORIGIN}\"\nproject_path = \"{PROJECT}\"\nlocal_path = \"{}\"\n{extra}",
            self.port,
            self.repo.path().display()
        );
        std::fs::write(self.home.path().join("config/config.toml"), config).expect("write config");
    }

    fn env<'a>(&'a self, command: &'a mut Command) -> &'a mut Command {
        command
            .env("REVIEW_AGENT_GATEWAY_HOME", self.home.path())
            // The installer's manifest locations (part of the allowlist) live under HOME.
            .env("HOME", self.home.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("REVIEW_AGENT_GATEWAY_PORT")
    }

    /// Start `serve` on the config's port; waits for its listening line.
    fn serve(&self, env: &[(&str, &str)]) -> Daemon {
        let mut command = Command::new(bin());
        self.env(&mut command)
            .arg("serve")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = command.spawn().expect("serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("listening line");
        assert!(line.starts_with("listening on"), "{line}");
        Daemon(child)
    }

    /// Start the host with `args` after `native-host`, as a browser would.
    fn host(&self, args: &[&str]) -> Host {
        self.host_with(args, &[], false)
    }

    /// `own_group`: put the host in a new process group (as browsers do), so a test can kill
    /// the group.
    fn host_with(&self, args: &[&str], env: &[(&str, &str)], own_group: bool) -> Host {
        let mut command = Command::new(bin());
        self.env(&mut command)
            .arg("native-host")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if own_group {
            use std::os::unix::process::CommandExt;
            command.process_group(0);
        }
        let mut child = command.spawn().expect("native-host starts");
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().expect("piped");
        let (tx, frames) = channel();
        std::thread::spawn(move || {
            loop {
                let mut len = [0u8; 4];
                if stdout.read_exact(&mut len).is_err() {
                    return;
                }
                let len = u32::from_ne_bytes(len) as usize;
                let mut body = vec![0u8; len];
                if stdout.read_exact(&mut body).is_err() {
                    let _ = tx.send(Err(format!("stdout ended inside a {len}-byte frame")));
                    return;
                }
                let frame = serde_json::from_slice::<Value>(&body)
                    .map(|v| (len, v))
                    .map_err(|e| format!("a frame that is not JSON: {e}"));
                if tx.send(frame).is_err() {
                    return;
                }
            }
        });
        let log = Arc::new(Mutex::new(String::new()));
        let mut stderr = child.stderr.take().expect("piped");
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .expect("log")
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Host {
            child,
            stdin,
            frames,
            stderr: log,
        }
    }

    fn review_body(&self, request_id: &str, iid: u64) -> Value {
        json!({
            "requestId": request_id,
            "mode": "merge-request",
            "target": {
                "gitlabOrigin": ORIGIN,
                "projectPath": PROJECT,
                "mergeRequestIid": iid,
                "diffRefs": { "baseSha": self.base, "startSha": self.base, "headSha": self.head }
            },
            "scope": { "filePaths": null, "selection": null },
            "policy": { "minConfidence": "low" }
        })
    }

    fn tool_body(&self, input: Value) -> Value {
        json!({"gitlabOrigin": ORIGIN, "projectPath": PROJECT, "ref": "main", "input": input})
    }

    fn log_file(&self) -> PathBuf {
        self.home.path().join("state/logs/native-host.log")
    }
}

struct Daemon(Child);

impl Daemon {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A daemon the host started: killed by pid when dropped.
struct StartedDaemon(i32);

impl StartedDaemon {
    /// Whether the process exists and is not a zombie (an exited daemon whose parent, the
    /// init process it was reparented to, has not reaped it yet).
    fn alive(&self) -> bool {
        rustix::process::test_kill_process(pid(self.0)).is_ok()
            && std::fs::read_to_string(format!("/proc/{}/stat", self.0))
                .ok()
                .and_then(|stat| {
                    let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
                    Some(state != 'Z' && state != 'X')
                })
                .unwrap_or(false)
    }

    fn kill(&self) {
        let _ = rustix::process::kill_process(pid(self.0), rustix::process::Signal::KILL);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for StartedDaemon {
    fn drop(&mut self) {
        self.kill();
    }
}

fn pid(n: i32) -> rustix::process::Pid {
    rustix::process::Pid::from_raw(n).expect("a pid")
}

struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: Receiver<Result<(usize, Value), String>>,
    stderr: Arc<Mutex<String>>,
}

impl Host {
    fn write(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to the host");
        stdin.flush().expect("flush");
    }

    fn send(&mut self, frame: &Value) {
        self.write(&framed(frame.to_string().as_bytes()));
    }

    /// The next frame and its declared length, within 30 s; panics at EOF.
    fn recv_sized(&mut self) -> (usize, Value) {
        match self.frames.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(frame)) => {
                assert!(frame.0 <= MIB, "a frame of {} bytes (over 1 MiB)", frame.0);
                frame
            }
            Ok(Err(e)) => panic!("{e}"),
            Err(RecvTimeoutError::Timeout) => {
                panic!("no frame within 30 s; stderr: {}", self.log())
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!("stdout closed; stderr: {}", self.log())
            }
        }
    }

    fn recv(&mut self) -> Value {
        self.recv_sized().1
    }

    /// Whether stdout ends (within 30 s) with no further frame.
    fn expect_eof(&mut self) {
        match self.frames.recv_timeout(Duration::from_secs(30)) {
            Err(RecvTimeoutError::Disconnected) => {}
            other => panic!("expected end of stdout, got {other:?}"),
        }
    }

    /// Send a request and read frames until its `response`.
    fn call(&mut self, id: Value, method: &str, path: &str, body: Option<Value>) -> Value {
        let mut frame = json!({"type": "request", "id": id, "method": method, "path": path});
        if let Some(body) = body {
            frame["body"] = body;
        }
        self.send(&frame);
        let reply = self.recv();
        assert_eq!(
            (reply["type"].as_str(), &reply["id"]),
            (Some("response"), &id),
            "{reply}"
        );
        reply
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    fn wait(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the host did not exit: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log(&self) -> String {
        self.stderr.lock().expect("log").clone()
    }

    /// The pid of the daemon this host started, from its log (`started the daemon pid=N`).
    fn started_daemon(&self) -> Option<StartedDaemon> {
        let log = self.log();
        let at = log.find("started the daemon pid=")?;
        let digits: String = log[at + "started the daemon pid=".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok().map(StartedDaemon)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `body` behind a native-endian 32-bit length.
fn framed(body: &[u8]) -> Vec<u8> {
    let mut out = u32::try_from(body.len())
        .expect("small")
        .to_ne_bytes()
        .to_vec();
    out.extend_from_slice(body);
    out
}

fn error_code(frame: &Value) -> &str {
    assert_eq!(frame["type"], "error", "{frame}");
    frame["error"]["code"].as_str().unwrap_or("")
}

#[test]
fn hello_health_review_and_byte_level_framing() {
    let s = Setup::new();
    let _daemon = s.serve(&[]);
    let mut h = s.host(&[&format!("chrome-extension://{CHROME_ID}/")]);

    h.send(&json!({"type": "hello", "protocolVersions": ["1.0"]}));
    let hello = h.recv();
    assert_eq!(hello["type"], "hello", "{hello}");
    assert_eq!(hello["protocolVersion"], "1.0");
    assert!(hello["capabilities"].is_object(), "{hello}");

    let health = h.call(json!(1), "GET", "/v1/health", None);
    assert_eq!(health["status"], 200);
    assert_eq!(health["body"]["data"]["service"], "review-agent-gateway");

    // A streamed review: events with gap-free seqs, then end.
    h.send(
        &json!({"type": "request", "id": "r", "method": "POST", "path": "/v1/reviews",
                   "body": s.review_body("rev-1", 1)}),
    );
    let mut events = Vec::new();
    loop {
        let frame = h.recv();
        assert_eq!(frame["id"], "r", "{frame}");
        match frame["type"].as_str() {
            Some("event") => events.push(frame["event"].clone()),
            Some("end") => break,
            _ => panic!("unexpected {frame}"),
        }
    }
    let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    assert_eq!(events[0]["type"], "run.created");
    assert_eq!(events.last().expect("events")["type"], "run.completed");
    let findings = events
        .iter()
        .filter(|e| e["type"] == "finding.created")
        .count();
    assert_eq!(findings, 5);

    // A length prefix split across writes (and the body byte by byte after it).
    let bytes = framed(br#"{"type":"request","id":"split","method":"GET","path":"/v1/health"}"#);
    h.write(&bytes[..2]);
    std::thread::sleep(Duration::from_millis(100));
    h.write(&bytes[2..5]);
    std::thread::sleep(Duration::from_millis(50));
    for byte in &bytes[5..] {
        h.write(std::slice::from_ref(byte));
    }
    let reply = h.recv();
    assert_eq!(
        (&reply["id"], &reply["status"]),
        (&json!("split"), &json!(200))
    );

    // Two frames in one write.
    let mut two = framed(br#"{"type":"request","id":"a","method":"GET","path":"/v1/health"}"#);
    two.extend(framed(
        br#"{"type":"request","id":"b","method":"GET","path":"/v1/capabilities"}"#,
    ));
    h.write(&two);
    let mut ids = vec![h.recv()["id"].clone(), h.recv()["id"].clone()];
    ids.sort_by_key(Value::to_string);
    assert_eq!(ids, [json!("a"), json!("b")]);

    // Non-ASCII text both ways: the length counts bytes.
    let id = "ré-日本-😀";
    let read = h.call(
        json!(id),
        "POST",
        "/v1/tools/file_read",
        Some(s.tool_body(json!({"path": "notes.md"}))),
    );
    let (len, echoed) = {
        h.send(&json!({"type": "request", "id": id, "method": "GET", "path": "/v1/health"}));
        h.recv_sized()
    };
    assert_eq!(echoed["id"], id);
    assert_eq!(len, serde_json::to_string(&echoed).expect("json").len());
    let content = read["body"]["data"]["output"].to_string();
    assert!(content.contains("héllo wörld — 日本語 ✓ 😀"), "{read}");

    // Bad input: each answered by one error frame; the session goes on.
    h.write(&framed(b"{\"type\":\"request\",\"id\":"));
    assert_eq!(error_code(&h.recv()), "request.invalid");
    h.write(&framed(b"\xff\xfe not utf-8"));
    assert_eq!(error_code(&h.recv()), "request.invalid");
    h.write(&framed(br#"{"type":"subscribe","id":3}"#));
    assert_eq!(error_code(&h.recv()), "request.invalid");
    h.write(&[0, 0, 0, 0]); // a zero length
    assert_eq!(error_code(&h.recv()), "request.invalid");
    h.write(&framed(b"ab")); // a garbage length for garbage bytes
    assert_eq!(error_code(&h.recv()), "request.invalid");
    // 64 MiB + 1 declared: refused at once (before the body), the body skipped unbuffered.
    let over = 64 * MIB as u32 + 1;
    h.write(&over.to_ne_bytes());
    let refused = h.recv();
    assert_eq!(error_code(&refused), "frame.too_large");
    assert_eq!(refused["id"], Value::Null);
    let block = vec![b' '; MIB];
    for _ in 0..64 {
        h.write(&block);
    }
    h.write(b" ");
    let after = h.call(json!("after"), "GET", "/v1/health", None);
    assert_eq!(after["status"], 200);

    // EOF: the host closes the connection and exits 0.
    h.close_stdin();
    h.expect_eof();
    assert!(h.wait().success());
    let log = std::fs::read_to_string(s.log_file()).expect("the host's log file");
    assert!(log.contains("stdin closed"), "{log}");
    let token = std::fs::read_to_string(s.home.path().join("state/token")).expect("token");
    assert!(!log.contains(token.trim()), "the token is never logged");
    assert!(!h.log().contains(token.trim()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(s.log_file())
            .expect("log")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

/// A `code_search` whose `response` frame's JSON is exactly `target` bytes; returns the frames
/// received (one whole frame, or chunks). Frame ids are capped at 200 characters, so the answer
/// is padded through the work tree instead: `pad.txt` holds `lines` matching lines of 500
/// characters except the last (`last` characters, 8 to 500), all ASCII (one byte each in the
/// JSON), and the id (1 to 200 characters) gives the last bytes.
fn exact_reply(h: &mut Host, s: &Setup, target: usize) -> Vec<(usize, Value)> {
    const FULL: usize = 500;
    let mut ask = |lines: usize, last: usize, id_len: usize| {
        let line = |len: usize| format!("padline {}\n", "q".repeat(len - 8));
        let text: String = (1..lines).map(|_| line(FULL)).chain([line(last)]).collect();
        std::fs::write(s.repo.path().join("pad.txt"), text).expect("write pad.txt");
        let body = json!({"gitlabOrigin": ORIGIN, "projectPath": PROJECT, "ref": "WORKTREE",
            "input": {"query": "padline", "paths": ["pad.txt"], "maxMatches": 2000}});
        let id = json!("x".repeat(id_len));
        reply_len(h, id, "POST", "/v1/tools/code_search", Some(body))
    };
    // The answer's `durationMs` may gain or lose a digit between calls: adjust until it hits.
    let (mut lines, mut last, mut id_len) = (1, 8, 1);
    for _ in 0..60 {
        let (len, frames) = ask(lines, last, id_len);
        if len == target {
            return frames;
        }
        // Move the padding by the difference: the last line first, then the id, then lines.
        let mut delta = target as isize - len as isize;
        let to_last = delta.clamp(8 - last as isize, (FULL - last) as isize);
        last = (last as isize + to_last) as usize;
        delta -= to_last;
        let to_id = delta.clamp(1 - id_len as isize, 200 - id_len as isize);
        id_len = (id_len as isize + to_id) as usize;
        delta -= to_id;
        if delta > 0 {
            lines += (delta as usize / (FULL + 120)).max(1);
        } else if delta < 0 {
            lines -= ((-delta) as usize).div_ceil(FULL + 60).max(1);
        }
    }
    panic!("could not hit {target} bytes");
}

/// Send the request; read its response (whole or in chunks); the JSON length and the frames.
fn reply_len(
    h: &mut Host,
    id: Value,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (usize, Vec<(usize, Value)>) {
    let mut frame = json!({"type": "request", "id": id, "method": method, "path": path});
    if let Some(body) = body {
        frame["body"] = body;
    }
    h.send(&frame);
    let mut frames = Vec::new();
    let mut text = String::new();
    loop {
        let (len, frame) = h.recv_sized();
        assert_eq!(frame["id"], id, "frames of this request only");
        match frame["type"].as_str() {
            Some("response") => {
                assert!(frames.is_empty(), "a response after chunks");
                frames.push((len, frame));
                return (len, frames);
            }
            Some("chunk") => {
                text.push_str(frame["data"].as_str().expect("data"));
                let last = frame["final"] == true;
                frames.push((len, frame));
                if last {
                    return (text.len(), frames);
                }
            }
            _ => panic!("unexpected {frame}"),
        }
    }
}

/// The frame carried by a run of chunks, through the library's Reassembler.
fn reassemble(frames: &[(usize, Value)]) -> Value {
    let mut reassembler = Reassembler::default();
    let mut out = None;
    for (_, frame) in frames {
        let frame: Frame = serde_json::from_value(frame.clone()).expect("a frame");
        out = reassembler.push(frame).expect("in order");
    }
    serde_json::to_value(out.expect("a final chunk")).expect("json")
}

#[test]
fn replies_over_1_mib_arrive_in_chunks_and_the_boundaries_are_exact() {
    let s = Setup::new();
    let _daemon = s.serve(&[]);
    let mut h = s.host(&[&format!("chrome-extension://{CHROME_ID}/")]);

    // ~1.1 MB: a search with 2000 matches of ~450 characters (non-ASCII and quotes included).
    let search = |max: u64| Some(s.tool_body(json!({"query": "needle", "maxMatches": max})));
    let (len, frames) = reply_len(
        &mut h,
        json!("big"),
        "POST",
        "/v1/tools/code_search",
        search(2000),
    );
    assert!(len > MIB, "{len}");
    assert!(frames.len() >= 2, "chunked: {}", frames.len());
    for (i, (size, frame)) in frames.iter().enumerate() {
        assert!(*size <= MIB);
        assert_eq!(frame["index"], i);
        assert_eq!(frame["final"], i + 1 == frames.len());
    }
    let whole = reassemble(&frames);
    assert_eq!(whole["type"], "response");
    assert_eq!(whole["status"], 200, "{}", &whole.to_string()[..300]);
    let matches = whole["body"]["data"]["output"]["matches"]
        .as_array()
        .expect("matches");
    assert_eq!(matches.len(), 2000);
    assert!(
        matches[1999]["text"]
            .as_str()
            .expect("text")
            .starts_with("needle 01999 héllo 日本 😀 \"q\"")
    );

    // Exactly 65,535 and 65,536 bytes: sent whole.
    for target in [65_535, 65_536] {
        let frames = exact_reply(&mut h, &s, target);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].0, target);
        assert_eq!(frames[0].1["type"], "response");
    }
    // Exactly 1 MiB: the largest frame sent whole; one byte more: chunks.
    let frames = exact_reply(&mut h, &s, MIB);
    assert_eq!(frames.len(), 1, "1,048,576 bytes are sent whole");
    assert_eq!(frames[0].0, MIB);
    assert_eq!(frames[0].1["status"], 200);
    let frames = exact_reply(&mut h, &s, MIB + 1);
    assert_eq!(frames.len(), 2, "1,048,577 bytes arrive as two chunks");
    assert!(
        frames
            .iter()
            .all(|(size, f)| *size <= MIB && f["type"] == "chunk")
    );
    let whole = reassemble(&frames);
    assert_eq!(whole["status"], 200);
    assert_eq!(
        serde_json::to_string(&whole).expect("json").len(),
        MIB + 1,
        "the reassembled frame is the 1,048,577-byte one"
    );

    h.close_stdin();
    assert!(h.wait().success());
}

#[test]
fn callers_outside_the_allowlist_are_refused_and_firefox_argv_is_accepted() {
    let s = Setup::new();
    for args in [
        vec!["chrome-extension://abcdefghijklmnopabcdefghijklmnop/"],
        vec!["chrome-extension://not-an-id/"],
        vec!["/tmp/manifest.json", "someone-else@example.org"],
        vec!["relative.json", FIREFOX_ID],
        vec![],
    ] {
        let mut h = s.host(&args);
        let frame = h.recv();
        assert_eq!(error_code(&frame), "origin.not_allowed", "{args:?}");
        assert_eq!(frame["id"], Value::Null);
        let remediation = frame["error"]["remediation"].as_str().expect("remediation");
        if args.len() == 1 && args[0].ends_with("abcdefghijklmnop/") {
            assert!(
                remediation.contains("allowed_extensions")
                    && remediation.contains("install --extension-id"),
                "{remediation}"
            );
        }
        h.expect_eof();
        assert_eq!(h.wait().code(), Some(1), "{args:?}");
    }

    // A bad id in `[native_messaging] allowed_extensions` is a config error naming the key.
    std::fs::write(
        s.home.path().join("config/config.toml"),
        "[native_messaging]\nallowed_extensions = [\"not an id\"]\n",
    )
    .expect("write config");
    let mut h = s.host(&[FIREFOX_ID, FIREFOX_ID]);
    let mut h2 = s.host(&["/m.json", FIREFOX_ID]);
    assert_eq!(error_code(&h.recv()), "origin.not_allowed", "argv first");
    let frame = h2.recv();
    assert_eq!(error_code(&frame), "config.invalid");
    let message = frame["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("native_messaging.allowed_extensions"),
        "{message}"
    );
    assert_eq!(h2.wait().code(), Some(1));
    s.write_config("");

    // Firefox's argv (manifest path, add-on id) and Chrome's with --parent-window (Windows).
    let _daemon = s.serve(&[]);
    let manifest = s.home.path().join("com.review_agent.gateway.json");
    for args in [
        vec![manifest.to_str().expect("utf-8"), FIREFOX_ID],
        vec![
            &format!("chrome-extension://{CHROME_ID}/"),
            "--parent-window=0",
        ],
    ] {
        let mut h = s.host(&args);
        h.send(&json!({"type": "hello", "protocolVersions": ["1.0"]}));
        assert_eq!(h.recv()["type"], "hello");
        h.close_stdin();
        assert!(h.wait().success());
    }

    // An id allowed only by an installed manifest (`install --extension-id`) is accepted.
    let other = "abcdefghijklmnopabcdefghijklmnop";
    let out = Command::new(bin())
        .args(["install", "--browser", "chromium", "--extension-id", other])
        .env("HOME", s.home.path())
        .env("REVIEW_AGENT_GATEWAY_HOME", s.home.path())
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .expect("install runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut h = s.host(&[&format!("chrome-extension://{other}/")]);
    let health = h.call(json!(1), "GET", "/v1/health", None);
    assert_eq!(health["status"], 200);
}

#[test]
fn a_missing_daemon_is_started_detached_and_survives_the_host() {
    let s = Setup::new();
    let manifest = s.home.path().join("com.review_agent.gateway.json");
    let manifest = manifest.to_str().expect("utf-8");
    let mut h = s.host_with(&[manifest, FIREFOX_ID], &[], true);
    h.send(&json!({"type": "hello", "protocolVersions": ["1.0"]}));
    assert_eq!(h.recv()["type"], "hello");
    let health = h.call(json!("h"), "GET", "/v1/health", None);
    assert_eq!(health["status"], 200);
    let daemon = h
        .started_daemon()
        .unwrap_or_else(|| panic!("the host started the daemon: {}", h.log()));
    assert!(daemon.alive());
    let daemon_pgid = rustix::process::getpgid(Some(pid(daemon.0))).expect("pgid");
    assert_eq!(
        daemon_pgid.as_raw_nonzero().get(),
        daemon.0,
        "its own group"
    );

    // The browser kills the host's whole process group: the daemon lives on.
    let host_pid = h.child.id() as i32;
    rustix::process::kill_process_group(pid(host_pid), rustix::process::Signal::KILL)
        .expect("kill the host's group");
    h.wait();
    std::thread::sleep(Duration::from_millis(200));
    assert!(daemon.alive(), "the daemon survived the host's group");

    // A new host uses it without starting another.
    let mut h2 = s.host(&[manifest, FIREFOX_ID]);
    let health = h2.call(json!(2), "GET", "/v1/health", None);
    assert_eq!(health["status"], 200);
    assert!(h2.started_daemon().is_none(), "{}", h2.log());
    h2.close_stdin();
    assert!(h2.wait().success());
    assert!(daemon.alive(), "the daemon outlives the host's exit");

    // Two hosts starting at once with no daemon: both end up connected to one daemon.
    daemon.kill();
    let mut a = s.host(&[manifest, FIREFOX_ID]);
    let mut b = s.host(&[manifest, FIREFOX_ID]);
    assert_eq!(a.call(json!(1), "GET", "/v1/health", None)["status"], 200);
    assert_eq!(b.call(json!(1), "GET", "/v1/health", None)["status"], 200);
    let started: Vec<StartedDaemon> = [a.started_daemon(), b.started_daemon()]
        .into_iter()
        .flatten()
        .collect();
    assert!(!started.is_empty());
    // The loser exits once it finds the port taken; give it a moment to be gone.
    let deadline = Instant::now() + Duration::from_secs(10);
    while started.iter().filter(|d| d.alive()).count() > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        started.iter().filter(|d| d.alive()).count(),
        1,
        "one daemon won"
    );
    // Hosts first: a host that sees its daemon die restarts it.
    drop((a, b));
}

#[test]
fn a_daemon_killed_mid_session_fails_open_requests_then_is_restarted_or_reported() {
    let s = Setup::new();
    let mut daemon = s.serve(&[("REVIEW_AGENT_GATEWAY_FAULT_FINDING_DELAY_MS", "300")]);
    let mut h = s.host(&[&format!("chrome-extension://{CHROME_ID}/")]);
    h.send(
        &json!({"type": "request", "id": "slow", "method": "POST", "path": "/v1/reviews",
                   "body": s.review_body("rev-slow", 1)}),
    );
    loop {
        let frame = h.recv();
        if frame["event"]["type"] == "finding.created" {
            break;
        }
    }
    daemon.kill();
    // The open request gets an error frame; the frames of the stream before it are fine.
    let failed = loop {
        let frame = h.recv();
        if frame["type"] == "error" {
            break frame;
        }
        assert_eq!(frame["type"], "event", "{frame}");
    };
    assert_eq!(failed["id"], "slow");
    assert_eq!(failed["error"]["code"], "gateway.unavailable");
    assert_eq!(failed["error"]["retryable"], true);
    // The host restarted the daemon and goes on.
    let health = h.call(json!("again"), "GET", "/v1/health", None);
    assert_eq!(health["status"], 200);
    let restarted = h
        .started_daemon()
        .unwrap_or_else(|| panic!("restarted: {}", h.log()));

    // Now the daemon cannot come back (its config is broken): one error frame says why, exit 0.
    s.write_config("unknown_key = 1\n");
    let started = Instant::now();
    restarted.kill();
    let why = h.recv();
    assert_eq!(error_code(&why), "gateway.unavailable");
    assert_eq!(why["id"], Value::Null);
    let message = why["error"]["message"].as_str().expect("message");
    assert!(message.contains("could not be reached"), "{message}");
    h.expect_eof();
    assert!(h.wait().success());
    assert!(started.elapsed() < Duration::from_secs(15));
}

/// `doctor` finds the installed Firefox manifest, starts the host through it and gets `hello`.
#[test]
fn doctor_passes_the_hello_check() {
    let s = Setup::new();
    let _daemon = s.serve(&[]);
    let run = |args: &[&str]| {
        let mut command = Command::new(bin());
        s.env(&mut command).args(args);
        command.output().expect("runs")
    };
    let out = run(&["install", "--browser", "firefox"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["doctor", "--browser", "firefox"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("the host answered hello"), "{text}");
}

/// Something else on the port (no token file of ours): reported at once, no daemon started.
#[test]
fn a_foreign_listener_on_the_port_is_reported() {
    let s = Setup::new();
    let _listener = std::net::TcpListener::bind(("127.0.0.1", s.port)).expect("bind");
    let mut h = s.host(&["/m.json", FIREFOX_ID]);
    let frame = h.recv();
    assert_eq!(error_code(&frame), "gateway.unavailable");
    let message = frame["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("not this user's gateway daemon"),
        "{message}"
    );
    h.expect_eof();
    assert!(h.wait().success());
    assert!(h.started_daemon().is_none(), "{}", h.log());
}

/// Issue 12 §5: `serve --port N` with no `port` in the config. The host, `doctor` and a second
/// `serve` all learn the port from the running daemon's record: the host relays to N and starts
/// no second daemon; a second `serve` says the store is locked by the `serve` on port N.
#[test]
fn a_daemon_on_a_port_the_config_does_not_name_is_the_one_every_process_uses() {
    let s = Setup::new();
    let config = s.home.path().join("config/config.toml");
    let text = std::fs::read_to_string(&config).expect("config");
    let without_port: String = text
        .lines()
        .filter(|l| !l.starts_with("port ="))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&config, without_port).expect("write config");
    let port = s.port.to_string();
    let mut command = Command::new(bin());
    s.env(&mut command)
        .args(["serve", "--port", &port])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = command.spawn().expect("serve starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("listening line");
    assert!(line.contains(&format!(":{port}")), "{line}");
    let _daemon = Daemon(child);
    let record = std::fs::read_to_string(s.home.path().join("state/daemon.json")).expect("record");
    assert!(record.contains(&format!("\"port\":{port}")), "{record}");

    let mut h = s.host(&[&format!("chrome-extension://{CHROME_ID}/")]);
    h.send(&json!({"type": "hello", "protocolVersions": ["1.0"]}));
    assert_eq!(h.recv()["type"], "hello", "{}", h.log());
    let tools = h.call(json!(1), "GET", "/v1/tools", None);
    assert_eq!(tools["status"], 200, "{tools}");
    assert!(h.started_daemon().is_none(), "{}", h.log());
    h.close_stdin();
    assert!(h.wait().success());

    // A second `serve` (the config's default port) cannot take the store and says who has it.
    let mut second = Command::new(bin());
    let out = s
        .env(&mut second)
        .args(["serve", "--port", "0"])
        .output()
        .expect("serve runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("store.locked")
            && stderr.contains(&format!("another `serve` is running on port {port}")),
        "{stderr}"
    );

    // doctor checks that daemon, not 4317.
    let mut install = Command::new(bin());
    let out = s
        .env(&mut install)
        .args(["install", "--browser", "firefox"])
        .output()
        .expect("install runs");
    assert!(out.status.success(), "{out:?}");
    let mut doctor = Command::new(bin());
    let out = s
        .env(&mut doctor)
        .args(["doctor", "--browser", "firefox"])
        .output()
        .expect("doctor runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("daemon http://127.0.0.1:{port}")),
        "{text}"
    );
}

/// Issue 12 §5: `doctor` with a broken config reports the host's own error — `config.invalid`
/// with the file and line — not a generic timeout.
#[test]
fn doctor_reports_the_hosts_own_error() {
    let s = Setup::new();
    let run = |args: &[&str]| {
        let mut command = Command::new(bin());
        s.env(&mut command).args(args);
        command.output().expect("runs")
    };
    let out = run(&["install", "--browser", "firefox"]);
    assert!(out.status.success(), "{out:?}");
    let config = s.home.path().join("config/config.toml");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, format!("colour = \"blue\"\n{text}")).expect("write");
    let out = run(&["doctor", "--browser", "firefox"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("problem[config.invalid]"), "{text}");
    assert!(text.contains("config.toml:1"), "{text}");
    assert!(text.contains("colour"), "{text}");
    assert!(!text.contains("no reply within"), "{text}");
}

/// Issue 12 §3: with `REVIEW_AGENT_GATEWAY_LOG=trace`, tungstenite logged the handshake's
/// `authorization: Bearer <token>` to `native-host.log` and stderr. No level may print the
/// token: neither the host's log file and stderr, nor the daemon's stderr (`serve` at trace).
#[test]
fn trace_logging_never_prints_the_token() {
    let s = Setup::new();
    let token = common::token(s.home.path());
    let daemon_log = s.home.path().join("daemon-stderr.log");
    let mut command = Command::new(bin());
    s.env(&mut command)
        .arg("serve")
        .env("REVIEW_AGENT_GATEWAY_LOG", "trace")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&daemon_log).expect("create the daemon log"));
    let mut child = command.spawn().expect("serve starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("listening line");
    assert!(line.starts_with("listening on"), "{line}");
    let _daemon = Daemon(child);

    let mut h = s.host_with(
        &[&format!("chrome-extension://{CHROME_ID}/")],
        &[("REVIEW_AGENT_GATEWAY_LOG", "trace")],
        false,
    );
    let health = h.call(json!(1), "GET", "/v1/health", None);
    assert_eq!(health["status"], 200, "{health}");
    // A request that needs the token, answered through the authenticated connection.
    let runs = h.call(json!(2), "GET", "/v1/tools", None);
    assert_eq!(runs["status"], 200, "{runs}");
    h.close_stdin();
    h.wait();

    let host_stderr = h.log();
    let host_file = std::fs::read_to_string(s.log_file()).expect("native-host.log");
    let daemon_stderr = std::fs::read_to_string(&daemon_log).expect("daemon log");
    // The trace level is really on: the dependencies' and our own trace output is there.
    assert!(
        host_file.contains("TRACE") || host_file.contains("DEBUG"),
        "trace logging is not on in the host log:\n{host_file}"
    );
    assert!(
        daemon_stderr.contains("DEBUG") || daemon_stderr.contains("TRACE"),
        "trace logging is not on in the daemon log:\n{daemon_stderr}"
    );
    for (what, text) in [
        ("native-host stderr", &host_stderr),
        ("native-host.log", &host_file),
        ("serve stderr", &daemon_stderr),
    ] {
        assert!(
            !text.contains(&token),
            "the token is in the {what}:\n{text}"
        );
    }
}

/// Issue 12 §4: a frame the host cannot take is answered with its id whenever the JSON object
/// has a readable one — as `/v1/ws` does, by the same function — so a caller waiting on that id
/// gets an answer; and `response` bodies carry a `requestId`.
#[test]
fn error_frames_keep_a_readable_id_and_responses_carry_request_ids() {
    let s = Setup::new();
    let _daemon = s.serve(&[]);
    let mut h = s.host(&[&format!("chrome-extension://{CHROME_ID}/")]);
    let cases = [
        (r#"{"type":"subscribe","id":"u"}"#.to_owned(), json!("u"), "subscribe"),
        (r#"{"type":"request","id":7,"path":"/v1/health"}"#.to_owned(), json!(7), "missing field `method`"),
        (r#"{"type":"request","id":"t","method":5,"path":"/v1/health"}"#.to_owned(), json!("t"), "invalid type"),
        (
            r#"{"type":"request","id":"d","method":"POST","path":"/v1/chat","body":{"messages":[],"messages":[]}}"#.to_owned(),
            json!("d"),
            "duplicate key `body.messages`",
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
        h.write(&framed(text.as_bytes()));
        let e = h.recv();
        assert_eq!(error_code(&e), "request.invalid", "{text}: {e}");
        assert_eq!(e["id"], id, "{text}: {e}");
        let message = e["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{text}: {message}");
        assert!(e.to_string().len() < 2_000, "nothing long is echoed: {e}");
    }
    let health = h.call(json!(1), "GET", "/v1/health", None);
    let minted = health["body"]["requestId"].as_str().unwrap_or_default();
    assert!(minted.starts_with("req_"), "{health}");
    let mut body = s.tool_body(json!({"path": "notes.md"}));
    body["requestId"] = json!("native-tool");
    let read = h.call(json!(2), "POST", "/v1/tools/file_read", Some(body));
    assert_eq!(read["body"]["requestId"], "native-tool", "{read}");
}
