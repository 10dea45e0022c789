//! One rule catalogue for every entry point (issue 12 §5): the command line's `review` and
//! `rules list` load the config file's `rules_dirs` (and the config dir's `rules/`) as the
//! daemon does, so the same commits give the same findings over HTTP and in CI. Also what the
//! daemon says about a swapped `baseSha`/`headSha`. The real binary, a real git repository,
//! real HTTP.

mod common;

use std::path::Path;
use std::process::{Child, Command, Output};

use common::{bin, read_port, token};
use serde_json::{Value, json};

const ORIGIN: &str = "https://gitlab.example.com";
const PROJECT: &str = "group/project";

/// A rule set flagging `print(` in Python files; in a `rules_dirs` entry of the config.
const TEAM_RULES: &str = r#"id = "team-rules"
version = "2.1.0"

[[rules]]
id = "team.no-print"
title = "print() left in code"
category = "style"
severity = "low"
confidence = "high"
languages = ["python"]
pattern = '''^\s*print\('''
message = "Use logging instead of print."
"#;

/// A rule set flagging `TODO` in Python files; in the config dir's `rules/`.
const USER_RULES: &str = r#"id = "user-rules"
version = "1"

[[rules]]
id = "user.todo"
title = "TODO left in code"
category = "style"
severity = "low"
confidence = "high"
languages = ["python"]
pattern = '''\bTODO\b'''
message = "Finish it or file an issue."
"#;

struct Fixture {
    home: tempfile::TempDir,
    repo: tempfile::TempDir,
    base: String,
    head: String,
}

impl Fixture {
    /// A repository whose head adds a built-in finding, two `print(` calls and a `TODO`, and a
    /// gateway home whose config maps it and names `team-rules` (relative) in `rules_dirs`,
    /// with `extra` appended to the config.
    fn new(extra: &str) -> Fixture {
        let (repo, base, head) = common::app_repository(
            "import os\n",
            "import os\nvalue = eval(expr)\nprint(value)\nprint(os.name)\n# TODO: logging\n",
        );

        let home = tempfile::tempdir().expect("temp dir");
        let config_dir = home.path().join("config");
        std::fs::create_dir_all(config_dir.join("team-rules")).expect("mkdir");
        std::fs::create_dir_all(config_dir.join("rules")).expect("mkdir");
        std::fs::write(config_dir.join("team-rules/team.toml"), TEAM_RULES).expect("write");
        std::fs::write(config_dir.join("rules/user.toml"), USER_RULES).expect("write");
        let config = format!(
            "rules_dirs = [\"team-rules\"]\n{extra}\n[[mappings]]\ngitlab_origin = \"{ORIGIN}\"\n\
             project_path = \"{PROJECT}\"\nlocal_path = \"{}\"\n",
            repo.path().display()
        );
        std::fs::write(config_dir.join("config.toml"), config).expect("write config");
        Fixture {
            home,
            repo,
            base,
            head,
        }
    }

    /// The binary with this gateway home and no other config.
    fn cli(&self, args: &[&str]) -> Output {
        Command::new(bin())
            .args(args)
            .env("REVIEW_AGENT_GATEWAY_HOME", self.home.path())
            .env_remove("XDG_CONFIG_HOME")
            .output()
            .expect("binary runs")
    }

    fn review_body(&self, base: &str, head: &str) -> Value {
        json!({
            "requestId": format!("r-{base}-{head}"),
            "mode": "merge-request",
            "target": {
                "gitlabOrigin": ORIGIN,
                "projectPath": PROJECT,
                "mergeRequestIid": 7,
                "diffRefs": { "baseSha": base, "startSha": base, "headSha": head }
            },
            "policy": { "minConfidence": "low" }
        })
    }
}

/// A running daemon on the fixture's home; killed on drop.
struct Daemon {
    child: Child,
    port: u16,
    token: String,
}

impl Daemon {
    fn start(home: &Path) -> Daemon {
        let mut child = common::http::spawn_serve(home, &[]);
        let port = read_port(&mut child);
        Daemon {
            child,
            port,
            token: token(home),
        }
    }

    /// `POST /v1/reviews`, its SSE events.
    fn review(&self, body: &Value) -> Vec<common::http::SseEvent> {
        let auth = format!("Bearer {}", self.token);
        let reply = common::http::request(
            self.port,
            "POST",
            "/v1/reviews",
            &[("Authorization", &auth)],
            Some(body),
        );
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.sse()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `(ruleId, path, startLine)` of each finding in AgentEvent JSON values, sorted.
fn found<'a>(events: impl Iterator<Item = &'a Value>) -> Vec<(String, String, u64)> {
    let mut found: Vec<_> = events
        .filter(|e| e["type"] == "finding.created")
        .map(|e| {
            let f = &e["finding"];
            (
                f["ruleId"].as_str().unwrap_or_default().to_owned(),
                f["path"].as_str().unwrap_or_default().to_owned(),
                f["startLine"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    found.sort();
    found
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        stdout(out),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The issue's trial: 12 findings over HTTP, 9 from the command line for the same commits.
#[test]
fn the_command_line_and_the_daemon_review_with_the_same_rules() {
    let fx = Fixture::new("");
    let cli = fx.cli(&[
        "review",
        "--repo",
        fx.repo.path().to_str().expect("utf-8 temp path"),
        "--base",
        &fx.base,
        "--head",
        &fx.head,
        "--min-confidence",
        "low",
        "--format",
        "json",
    ]);
    assert_eq!(cli.status.code(), Some(1), "{}", describe(&cli));
    let cli_events: Vec<Value> = stdout(&cli)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one event a line"))
        .collect();
    let cli_found = found(cli_events.iter());
    let rules: Vec<&str> = cli_found.iter().map(|(r, _, _)| r.as_str()).collect();
    assert_eq!(
        rules,
        [
            "python.eval-dynamic",
            "team.no-print",
            "team.no-print",
            "user.todo"
        ],
        "{}",
        describe(&cli)
    );

    let daemon = Daemon::start(fx.home.path());
    let events = daemon.review(&fx.review_body(&fx.base, &fx.head));
    assert_eq!(
        events.last().map(|e| e.1.as_str()),
        Some("run.completed"),
        "{events:?}"
    );
    assert_eq!(found(events.iter().map(|e| &e.2)), cli_found);

    // `rules list` shows the same catalogue.
    let list = fx.cli(&["rules", "list", "--format", "json"]);
    assert_eq!(list.status.code(), Some(0), "{}", describe(&list));
    let ids: Vec<String> = stdout(&list)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("one rule a line")["id"].to_string())
        .collect();
    for id in [
        "\"team.no-print\"",
        "\"user.todo\"",
        "\"python.eval-dynamic\"",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} missing: {ids:?}");
    }
}

/// A CI run reads only `rules_dirs` of the config: a section it does not use that the daemon
/// would refuse does not fail it. A broken `rules_dirs` entry does, naming the key.
#[test]
fn the_command_line_reads_only_rules_dirs_of_the_config() {
    let fx = Fixture::new("event_retention_hours = \"soon\"\n");
    let repo = fx.repo.path().to_str().expect("utf-8 temp path");
    let args = [
        "review", "--repo", repo, "--base", &fx.base, "--format", "json",
    ];
    let run = fx.cli(&args);
    assert_eq!(run.status.code(), Some(1), "{}", describe(&run));
    assert!(stdout(&run).contains("team.no-print"), "{}", describe(&run));

    // A missing `rules_dirs` directory: an error naming the config key, exit 2.
    let config = fx.home.path().join("config/config.toml");
    let text = std::fs::read_to_string(&config).expect("read config");
    std::fs::write(&config, text.replace("team-rules", "no-such-rules")).expect("write");
    let run = fx.cli(&args);
    assert_eq!(run.status.code(), Some(2), "{}", describe(&run));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("error[config.invalid]")
            && stderr.contains("no-such-rules")
            && stderr.contains("rules_dirs"),
        "{}",
        describe(&run)
    );

    // An empty `rules_dirs` directory: a warning naming it.
    std::fs::create_dir_all(fx.home.path().join("config/no-such-rules")).expect("mkdir");
    let run = fx.cli(&args);
    assert_eq!(run.status.code(), Some(1), "{}", describe(&run));
    let warning = stdout(&run)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("one event a line"))
        .find(|e| e["type"] == "warning" && e["code"] == "rules.empty_dir");
    let message = warning
        .map(|w| w["message"].to_string())
        .unwrap_or_default();
    assert!(
        message.contains("no-such-rules") && message.contains("rules_dirs"),
        "{}",
        describe(&run)
    );
}

/// Over HTTP, a swapped `baseSha`/`headSha` fails the run with a message in the request's
/// words (not the command line's).
#[test]
fn the_daemon_says_when_base_and_head_are_swapped() {
    let fx = Fixture::new("");
    let daemon = Daemon::start(fx.home.path());
    let events = daemon.review(&fx.review_body(&fx.head, &fx.base));
    let last = events.last().expect("events");
    assert_eq!(last.1, "run.failed", "{events:?}");
    let error = &last.2["error"];
    assert_eq!(error["code"], "review.range_reversed");
    let message = error["message"].as_str().unwrap_or_default();
    let remediation = error["remediation"].as_str().unwrap_or_default();
    assert!(
        message.contains("diffRefs.headSha") && message.contains("diffRefs.baseSha"),
        "{error}"
    );
    assert!(
        !message.contains("--") && !remediation.contains("--"),
        "no command-line flags over HTTP: {error}"
    );
}
