//! End-to-end: local administration beside a running daemon (issue 3 part 4): `runs list|show`
//! read the daemon's store while it runs, and `mappings list|confirm` turn a browser's proposal
//! (`POST /v1/repository-mappings`) into a confirmed mapping the daemon uses without a restart.

mod common;

use common::{bin, dechunk, git};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use review_agent_gateway::protocol::event::AgentEvent;
use serde_json::{Value, json};

const ORIGIN: &str = "https://gitlab.example.com";
const PROJECT: &str = "group/project";
const CONFIG_COMMENT: &str = "# my gateway settings, keep this\n";

/// A repository with two commits; the second adds two `eval` calls (two findings).
struct Repo {
    dir: tempfile::TempDir,
    base: String,
    head: String,
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::tempdir().expect("temp dir");
        git(dir.path(), &["init", "-q", "-b", "main"]);
        std::fs::write(dir.path().join("app.py"), "import os\n").expect("write");
        git(dir.path(), &["add", "-A"]);
        git(dir.path(), &["commit", "-q", "-m", "base"]);
        let base = git(dir.path(), &["rev-parse", "HEAD"]);
        std::fs::write(
            dir.path().join("app.py"),
            "import os\na = eval(x)\nb = eval(y)\n",
        )
        .expect("write");
        git(dir.path(), &["commit", "-q", "-am", "head"]);
        let head = git(dir.path(), &["rev-parse", "HEAD"]);
        Repo { dir, base, head }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().canonicalize().expect("canonical")
    }

    fn review_body(&self, request_id: &str, project: &str) -> Value {
        json!({
            "requestId": request_id,
            "mode": "merge-request",
            "target": {
                "gitlabOrigin": ORIGIN,
                "projectPath": project,
                "mergeRequestIid": 7,
                "diffRefs": { "baseSha": self.base, "startSha": self.base, "headSha": self.head }
            },
            "scope": { "filePaths": null, "selection": null },
            "policy": { "minConfidence": "low" }
        })
    }
}

/// A gateway home: config (one mapping, a comment) and state dirs.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new(repo: &Repo) -> Home {
        let dir = tempfile::tempdir().expect("temp dir");
        let config_dir = dir.path().join("config");
        std::fs::create_dir_all(&config_dir).expect("mkdir");
        let config = format!(
            "{CONFIG_COMMENT}allowed_origins = [\"{ORIGIN}\"]\n\n[[mappings]]\n\
             gitlab_origin = \"{ORIGIN}\"\nproject_path = \"{PROJECT}\"\nlocal_path = \"{}\"\n",
            repo.path().display()
        );
        std::fs::write(config_dir.join("config.toml"), config).expect("write config");
        Home { dir }
    }

    fn config_file(&self) -> PathBuf {
        self.dir.path().join("config").join("config.toml")
    }

    /// Runs the binary with this home.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(bin())
            .args(args)
            .env("REVIEW_AGENT_GATEWAY_HOME", self.dir.path())
            .current_dir(self.dir.path())
            .output()
            .expect("run the binary")
    }

    /// Runs the binary and expects success; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs the binary and expects `error[code]` with a remediation, exit 2; returns stderr.
    fn fails(&self, args: &[&str], code: &str) -> String {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error[{code}]: ")),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("\n  remediation: "), "{stderr}");
        stderr
    }
}

/// `serve --port 0` in a home; killed on drop.
struct Daemon {
    child: Child,
    port: u16,
    token: String,
}

impl Daemon {
    fn start(home: &Home) -> Daemon {
        let mut child = Command::new(bin())
            .args(["serve", "--port", "0"])
            .env("REVIEW_AGENT_GATEWAY_HOME", home.dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("read the listening line");
        let port = line
            .trim()
            .strip_prefix("listening on http://127.0.0.1:")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        let token = home.ok(&["token", "show"]).trim().to_owned();
        Daemon { child, port, token }
    }

    /// An authorized HTTP/1.1 request; returns status and (de-chunked) body.
    fn request(&self, method: &str, path: &str, body: &Value) -> (u16, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        let body = body.to_string();
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\
             Authorization: Bearer {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.port,
            self.token,
            body.len()
        );
        stream.write_all(request.as_bytes()).expect("write request");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("read response");
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let chunked = head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked");
        (status, if chunked { dechunk(body) } else { body.into() })
    }

    /// `POST /v1/reviews`: the streamed events (SSE `data:` lines).
    fn review(&self, body: &Value) -> Vec<Value> {
        let (status, text) = self.request("POST", "/v1/reviews", body);
        assert_eq!(status, 200, "{text}");
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| serde_json::from_str(d.trim()).expect("event JSON"))
            .collect()
    }

    /// `POST /v1/repository-mappings`: the proposal's id.
    fn propose(&self, project: &str, local_path: &Path) -> String {
        let body = json!({
            "gitlabOrigin": ORIGIN, "projectPath": project,
            "localPath": local_path.to_str().expect("utf-8"), "defaultRef": "main"
        });
        let (status, text) = self.request("POST", "/v1/repository-mappings", &body);
        assert_eq!(status, 202, "{text}");
        let reply: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(reply["data"]["status"], "pending");
        reply["data"]["id"].as_str().expect("id").to_owned()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn runs_list_and_show_read_the_store_while_the_daemon_runs() {
    let repo = Repo::new();
    let home = Home::new(&repo);
    let daemon = Daemon::start(&home);

    let out = home.run(&["runs", "list"]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "No runs yet.\n");

    let first = daemon.review(&repo.review_body("one", PROJECT));
    let streamed = daemon.review(&repo.review_body("two", PROJECT));
    let run_id = streamed[0]["runId"].as_str().expect("runId").to_owned();
    assert_eq!(
        streamed.last().map(|e| &e["type"]),
        Some(&json!("run.completed"))
    );

    // list, text: a header, then newest first.
    let text = home.ok(&["runs", "list"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("RUN "), "{text}");
    let cols: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(cols[0], run_id);
    assert_eq!(&cols[1..3], ["completed", "review"]);
    assert_eq!(&cols[4..], ["2", "done"], "{text}");
    assert!(lines[2].starts_with(first[0]["runId"].as_str().expect("runId")));

    // list, json, with --limit.
    let list = json_lines(&home.ok(&["runs", "list", "--limit", "1", "--format", "json"]));
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["runId"], run_id.as_str());
    assert_eq!(list[0]["state"], "completed");
    assert_eq!(list[0]["findingCount"], 2);
    assert_eq!(list[0]["projectPath"], PROJECT);
    assert_eq!(list[0]["errorCode"], Value::Null);

    // show, json: the record, then exactly the streamed events.
    let shown = json_lines(&home.ok(&["runs", "show", &run_id, "--events", "--format", "json"]));
    let record = &shown[0];
    assert_eq!(record["runId"], run_id.as_str());
    assert_eq!(record["state"], "completed");
    assert_eq!(record["findingCount"], 2);
    assert_eq!(
        record["request"]["target"]["diffRefs"]["headSha"],
        repo.head
    );
    assert_eq!(&shown[1..], streamed.as_slice());
    for line in &shown[1..] {
        serde_json::from_value::<AgentEvent>(line.clone()).expect("an AgentEvent");
    }
    let without = json_lines(&home.ok(&["runs", "show", &run_id, "--format", "json"]));
    assert_eq!(without, shown[..1]);

    // show, text.
    let text = home.ok(&["runs", "show", &run_id, "--events"]);
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key).filter(|v| v.starts_with("  ")))
            .map(str::trim)
    };
    assert_eq!(field("run"), Some(run_id.as_str()), "{text}");
    assert_eq!(field("kind"), Some("review"));
    assert_eq!(field("state"), Some("completed"));
    assert_eq!(field("request id"), Some("two"));
    assert_eq!(
        field("stage"),
        Some("done (completed: resolve, diff, rules, validate, done)")
    );
    assert_eq!(field("findings"), Some("2"));
    assert_eq!(field("gitlab"), Some(ORIGIN));
    assert_eq!(field("project"), Some(PROJECT));
    assert_eq!(field("merge request"), Some("!7"));
    assert_eq!(field("base sha"), Some(repo.base.as_str()));
    assert_eq!(field("head sha"), Some(repo.head.as_str()));
    assert_eq!(field("error"), None);
    let events_header = format!("events ({}):\n", streamed.len());
    assert!(text.contains(&events_header), "{text}");
    assert!(
        text.contains("\n     1 run.created      review, request two"),
        "{text}"
    );
    let finding_lines = text
        .lines()
        .filter(|l| l.contains(" finding.created "))
        .count();
    assert_eq!(finding_lines, 2, "{text}");
    assert!(
        text.lines()
            .last()
            .is_some_and(|l| l.contains("run.completed"))
    );

    // A failed run: the list shows its error code, `show` the error and its remediation.
    let mut missing = repo.review_body("three", PROJECT);
    missing["target"]["diffRefs"]["headSha"] = json!("0123456789012345678901234567890123456789");
    let failed = daemon.review(&missing);
    let failed_id = failed[0]["runId"].as_str().expect("runId");
    assert_eq!(
        failed.last().map(|e| &e["type"]),
        Some(&json!("run.failed"))
    );
    let text = home.ok(&["runs", "list", "--limit", "1"]);
    let cols: Vec<&str> = text
        .lines()
        .nth(1)
        .expect("a run")
        .split_whitespace()
        .collect();
    assert_eq!(cols[0], failed_id);
    assert_eq!(cols[1], "failed");
    assert_eq!(cols.last(), Some(&"repository.revision_missing"), "{text}");
    let text = home.ok(&["runs", "show", failed_id]);
    assert!(
        text.contains("\nerror          repository.revision_missing: "),
        "{text}"
    );
    assert!(text.contains("\nremediation    "), "{text}");

    let stderr = home.fails(&["runs", "show", "run_nope"], "run.not_found");
    assert!(stderr.contains("run_nope"), "{stderr}");
}

#[test]
fn a_confirmed_proposal_is_used_by_the_running_daemon() {
    let repo = Repo::new();
    let home = Home::new(&repo);
    let daemon = Daemon::start(&home);
    let second = Repo::new();
    let not_a_repo = tempfile::tempdir().expect("temp dir");

    let (status, text) = daemon.request(
        "POST",
        "/v1/reviews",
        &second.review_body("before", "group/second"),
    );
    assert_eq!(status, 404, "{text}");
    assert!(text.contains("repository.not_mapped"), "{text}");

    let id = daemon.propose("group/second", &second.path());
    let bad = daemon.propose("group/bad", not_a_repo.path());
    let odd = daemon.propose("group/odd", Path::new("/no/such\n\u{1b}[31mred"));

    let out = home.run(&["mappings", "list"]);
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    let confirmed_line = format!("{ORIGIN}\t{PROJECT}\t{}\tmain\n", repo.path().display());
    let pending_line = format!(
        "{id}\tpending\t{ORIGIN}\tgroup/second\t{}\tmain\n",
        second.path().display()
    );
    assert!(listed.starts_with(&confirmed_line), "{listed}");
    assert!(listed.contains(&pending_line), "{listed}");
    assert!(listed.contains(&format!("{bad}\tpending\t")), "{listed}");
    assert!(
        listed.contains(&format!(
            "{odd}\tpending\t{ORIGIN}\tgroup/odd\t/no/such\\n\\u{{1b}}[31mred\tmain\n"
        )),
        "browser text is shown escaped: {listed}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("3 pending proposals"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = home.ok(&["mappings", "confirm", &id]);
    assert!(out.starts_with(&format!("Confirmed {id}: ")), "{out}");
    let config = std::fs::read_to_string(home.config_file()).expect("config");
    assert!(config.starts_with(CONFIG_COMMENT), "{config}");
    assert!(
        config.contains("project_path = \"group/second\""),
        "{config}"
    );

    // Confirmed: listed as a mapping, no longer as a proposal; confirming again changes nothing.
    let listed = home.ok(&["mappings", "list"]);
    assert!(
        listed.contains(&format!(
            "{ORIGIN}\tgroup/second\t{}\tmain\n",
            second.path().display()
        )),
        "{listed}"
    );
    assert!(!listed.contains(&id), "{listed}");
    assert!(listed.contains(&bad), "{listed}");
    let again = home.ok(&["mappings", "confirm", &id]);
    assert!(again.contains("already confirmed"), "{again}");
    assert_eq!(
        std::fs::read_to_string(home.config_file()).expect("config"),
        config
    );

    // The daemon reloads the changed config: the project reviews without a restart.
    let events = daemon.review(&second.review_body("after", "group/second"));
    assert_eq!(
        events.last().map(|e| &e["type"]),
        Some(&json!("run.completed"))
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "finding.created")
            .count(),
        2
    );

    // Bad inputs leave the config as it is.
    let stderr = home.fails(&["mappings", "confirm", &bad], "repository.not_found");
    assert!(stderr.contains("remediation"), "{stderr}");
    let stderr = home.fails(&["mappings", "confirm", &odd], "repository.not_found");
    assert!(stderr.contains("does not exist"), "{stderr}");
    let stderr = home.fails(&["mappings", "confirm", "mapping_nope"], "request.invalid");
    assert!(stderr.contains("`mapping_nope`"), "{stderr}");
    assert!(
        stderr.contains("Run `review-agent-gateway mappings list`"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(home.config_file()).expect("config"),
        config
    );
}

#[test]
fn without_a_store_there_are_no_runs_and_no_proposals() {
    let repo = Repo::new();
    let home = Home::new(&repo);
    let out = home.run(&["runs", "list", "--format", "json"]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "No runs yet.\n");
    home.fails(&["runs", "show", "run_nope"], "run.not_found");
    home.fails(&["mappings", "confirm", "mapping_nope"], "request.invalid");
    let listed = home.ok(&["mappings", "list"]);
    assert_eq!(listed.lines().count(), 1, "{listed}");
}

/// Issue 12 §5: a default ref that is not in the clone. `mappings confirm` of a proposal whose
/// `defaultRef` is missing is refused (naming the clone's own default); one without a
/// `defaultRef` gets the clone's default branch (`master` here, as tokio's); and a tool call
/// on a mapping whose `default_ref` is missing names the mapping's default ref and how to
/// change it.
#[test]
fn a_missing_default_ref_is_refused_at_confirm_and_named_at_call_time() {
    let repo = Repo::new();
    let home = Home::new(&repo);
    let daemon = Daemon::start(&home);
    let master = tempfile::tempdir().expect("temp dir");
    git(master.path(), &["init", "-q", "-b", "master"]);
    std::fs::write(master.path().join("lib.rs"), "pub fn f() {}\n").expect("write");
    git(master.path(), &["add", "-A"]);
    git(master.path(), &["commit", "-q", "-m", "first"]);
    let master_path = master.path().canonicalize().expect("canonical");

    let with_main = daemon.propose("group/tokio", &master_path);
    let stderr = home.fails(
        &["mappings", "confirm", &with_main],
        "repository.revision_missing",
    );
    assert!(stderr.contains("`main` does not exist"), "{stderr}");
    assert!(stderr.contains("it picks `master`"), "{stderr}");

    let body = json!({
        "gitlabOrigin": ORIGIN, "projectPath": "group/tokio2",
        "localPath": master_path.to_str().expect("utf-8")
    });
    let (status, text) = daemon.request("POST", "/v1/repository-mappings", &body);
    assert_eq!(status, 202, "{text}");
    let reply: Value = serde_json::from_str(&text).expect("JSON");
    let id = reply["data"]["id"].as_str().expect("id").to_owned();
    // Listed with `-`: no ref asked for; confirm picks the clone's own.
    let listed = home.ok(&["mappings", "list"]);
    assert!(
        listed.contains(&format!(
            "{id}\tpending\t{ORIGIN}\tgroup/tokio2\t{}\t-\n",
            master_path.display()
        )),
        "{listed}"
    );
    let out = home.ok(&["mappings", "confirm", &id]);
    assert!(
        out.contains("(default ref master, the checked-out branch)"),
        "{out}"
    );

    // A mapping written by hand with a default ref the clone lacks.
    let mut config = std::fs::read_to_string(home.config_file()).expect("config");
    config.push_str(&format!(
        "\n[[mappings]]\ngitlab_origin = \"{ORIGIN}\"\nproject_path = \"group/typo\"\n\
         local_path = \"{}\"\ndefault_ref = \"main\"\n",
        master_path.display()
    ));
    std::fs::write(home.config_file(), config).expect("write config");
    let call = json!({"gitlabOrigin": ORIGIN, "projectPath": "group/typo",
                      "input": {"path": "lib.rs"}});
    let (status, text) = daemon.request("POST", "/v1/tools/file_read", &call);
    let reply: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (400, Some("repository.revision_missing")),
        "{text}"
    );
    let message = reply["error"]["message"].as_str().expect("message");
    assert!(message.contains("default ref `main`"), "{message}");
    let remediation = reply["error"]["remediation"].as_str().expect("remediation");
    assert!(
        remediation.contains("`default_ref`") && remediation.contains("`master`"),
        "{remediation}"
    );
    // The same mapping with the request's own ref works.
    let mut with_ref = call.clone();
    with_ref["ref"] = json!("master");
    let (status, text) = daemon.request("POST", "/v1/tools/file_read", &with_ref);
    assert_eq!(status, 200, "{text}");
}
