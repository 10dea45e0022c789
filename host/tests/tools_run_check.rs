//! `run_check` (issue 4) with real processes in real git repositories: off by default, the
//! allowlist and its wildcards, no shell, the fixed working directory, the scrubbed
//! environment, output caps, timeout / cancel killing the whole process group, CPU and memory
//! limits, redaction of the output, and the audit log.

#[path = "e2e/support.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use review_agent_gateway::GatewayError;
use review_agent_gateway::config::{Config, Paths, RunCheckCommand, RunCheckConfig};
use review_agent_gateway::error::codes;
use review_agent_gateway::tools::run_check::{AUDIT_LOG, matches};
use review_agent_gateway::tools::{Registry, ToolContext};
use serde_json::{Value, json};
use support::TestRepo;

const GHP: &str = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123";

struct Fixture {
    repo: TestRepo,
    state: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let mut repo = TestRepo::new();
    repo.write_all(&[("README.md", "hello\n"), ("src/lib.rs", "fn a() {}\n")]);
    repo.commit("base");
    Fixture {
        repo,
        state: tempfile::tempdir().expect("state dir"),
    }
}

fn config(commands: &[&[&str]]) -> RunCheckConfig {
    RunCheckConfig {
        enabled: true,
        timeout_seconds: 30,
        commands: commands
            .iter()
            .map(|argv| RunCheckCommand {
                argv: argv.iter().map(|s| s.to_string()).collect(),
                options: true,
                network: false,
                writable: Vec::new(),
            })
            .collect(),
        ..RunCheckConfig::default()
    }
}

/// `ctx` with `run_check` settings `config`, the state dir `state` (its config dir beside it)
/// and the gateway's binary as the sandbox helper.
fn with_settings(ctx: ToolContext, config: RunCheckConfig, state: &Path) -> ToolContext {
    let mut full = Config::default();
    full.tools.run_check = config;
    ctx.with_run_check(&full, &Paths::new(state.join("config"), state.to_owned()))
        .with_sandbox_helper(support::binary())
}

impl Fixture {
    fn ctx(&self, config: RunCheckConfig) -> ToolContext {
        with_settings(
            ToolContext::open(self.repo.path(), Some("WORKTREE")).expect("open"),
            config,
            self.state.path(),
        )
    }

    fn call(&self, config: RunCheckConfig, input: Value) -> Result<Value, GatewayError> {
        call_in(&self.ctx(config), input)
    }

    fn audit_path(&self) -> PathBuf {
        self.state.path().join(AUDIT_LOG)
    }

    fn audit(&self) -> Vec<Value> {
        match std::fs::read_to_string(self.audit_path()) {
            Ok(text) => text
                .lines()
                .map(|l| serde_json::from_str(l).expect("a JSON line"))
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

fn call_in(ctx: &ToolContext, input: Value) -> Result<Value, GatewayError> {
    let registry = Registry::builtin();
    let tool = registry.get("run_check")?;
    tool.execute(ctx, input).map(|out| {
        assert_eq!(
            out.truncated, out.value["truncated"],
            "flag and field agree"
        );
        out.value
    })
}

fn argv(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Whether process `pid` is gone (or a zombie waiting to be reaped by someone else).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

fn wait_gone(pid: u32) -> bool {
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        if gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    gone(pid)
}

#[test]
fn disabled_unless_configured_and_enabled() {
    let fx = fixture();
    // No settings given to the context at all.
    let ctx = ToolContext::open(fx.repo.path(), None).expect("open");
    let err = call_in(&ctx, json!({"argv": ["pwd"]})).expect_err("disabled");
    assert_eq!(err.code, codes::TOOL_DISABLED);
    assert!(err.remediation.contains("[tools.run_check]"), "{err:?}");
    // Settings from a config that does not enable it (the default), even with an allowlist.
    let mut off = config(&[&["pwd"]]);
    off.enabled = false;
    assert!(!RunCheckConfig::default().enabled);
    let err = fx
        .call(off, json!({"argv": ["pwd"]}))
        .expect_err("disabled");
    assert_eq!(err.code, codes::TOOL_DISABLED);
    let audit = fx.audit();
    assert_eq!(audit.len(), 1, "the refused call is audited");
    assert_eq!(audit[0]["outcome"], "refused");
    assert_eq!(audit[0]["code"], codes::TOOL_DISABLED);
}

#[test]
fn allowlist_refusals_are_audited_with_mode_0600() {
    use std::os::unix::fs::PermissionsExt;
    let fx = fixture();
    let cfg = config(&[&["git", "status", "**"], &["cat", "*"]]);
    let table: &[(&[&str], &str)] = &[
        (&["git", "push"], "matches no allowlist entry"),
        (&["/usr/bin/git", "status"], "matches no allowlist entry"),
        (&["cat"], "matches no allowlist entry"),
        (&["cat", "a", "b"], "matches no allowlist entry"),
        (&["cat", "/etc/passwd"], "absolute path"),
        (&["cat", "../outside"], "`..`"),
        (&["cat", "src/../../x"], "`..`"),
        (&["cat", "~/.ssh/id_rsa"], "home directory"),
        (&["git", "status", "--git-dir=/etc"], "absolute path"),
    ];
    for (call, why) in table {
        let err = fx
            .call(cfg.clone(), json!({ "argv": call }))
            .expect_err("refused");
        assert_eq!(err.code, codes::TOOL_COMMAND_NOT_ALLOWED, "{call:?}");
        assert!(err.message.contains(why), "{call:?}: {}", err.message);
    }
    let audit = fx.audit();
    assert_eq!(audit.len(), table.len(), "one line per call");
    for (line, (call, _)) in audit.iter().zip(table) {
        assert_eq!(line["outcome"], "refused");
        assert_eq!(line["argv"], json!(call));
        assert_eq!(line["code"], codes::TOOL_COMMAND_NOT_ALLOWED, "{line}");
        let time = line["time"].as_str().expect("time");
        time::OffsetDateTime::parse(time, &time::format_description::well_known::Rfc3339)
            .expect("RFC 3339");
    }
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&fx.audit_path()), 0o600);
    assert_eq!(mode(fx.audit_path().parent().expect("dir")), 0o700);
    // An allowed call with a glob-matched relative argument runs.
    let out = fx
        .call(cfg, json!({"argv": ["cat", "README.md"]}))
        .expect("allowed");
    assert_eq!(out["stdout"], "hello\n");
    assert_eq!(out["exitCode"], 0);
}

#[test]
fn runs_in_the_work_tree_root_with_paths_redacted() {
    let fx = fixture();
    let cfg = config(&[&["pwd"], &["git", "status", "--short"], &["ls"]]);
    let out = fx.call(cfg.clone(), json!({"argv": ["pwd"]})).expect("pwd");
    assert_eq!(out["stdout"], "<repo>\n", "{out}");
    assert_eq!(out["exitCode"], 0);
    assert_eq!(out["timedOut"], false);
    assert_eq!(out["cancelled"], false);
    assert_eq!(out["truncated"], false);
    assert!(out.get("signal").is_none());
    fx.repo.write("new.txt", "x\n");
    let out = fx
        .call(
            cfg.clone(),
            json!({"argv": ["git", "status", "--short"], "ref": "WORKTREE"}),
        )
        .expect("git status");
    assert_eq!(out["stdout"], "?? new.txt\n", "{out}");
    // From a context opened on a subfolder, the command still runs at the root.
    let ctx = ToolContext::open(&fx.repo.path().join("src"), Some("WORKTREE")).expect("open");
    let ctx = with_settings(ctx, cfg, fx.state.path());
    let out = call_in(&ctx, json!({"argv": ["ls"]})).expect("ls");
    assert_eq!(out["stdout"], "README.md\nnew.txt\nsrc\n");
    let audit = fx.audit();
    assert_eq!(audit.len(), 3);
    let root = std::fs::canonicalize(fx.repo.path()).expect("canonical");
    assert_eq!(audit[0]["outcome"], "ran");
    assert_eq!(audit[0]["cwd"], root.to_str().expect("utf-8"));
    assert_eq!(audit[0]["exitCode"], 0);
    assert!(audit[0]["durationMs"].is_u64());
    assert_eq!(
        audit[0]["outputBytes"],
        root.to_str().expect("utf-8").len() + 1
    );
}

#[test]
fn bad_refs_and_bad_inputs_are_invalid() {
    let fx = fixture();
    let cfg = config(&[&["pwd"]]);
    for input in [
        json!({"argv": ["pwd"], "ref": "-p"}),
        json!({"argv": ["pwd"], "ref": "main..HEAD"}),
        json!({"argv": []}),
        json!({"argv": ["pwd"], "timeoutSeconds": 0}),
        json!({"argv": ["pwd"], "timeoutSeconds": 31}),
        json!({"argv": ["pw\u{0}d"]}),
        json!({"argv": "pwd"}),
        json!({"argv": ["pwd"], "shell": true}),
    ] {
        let err = fx.call(cfg.clone(), input.clone()).expect_err("invalid");
        assert_eq!(err.code, codes::REQUEST_INVALID, "{input}: {err:?}");
    }
    let bare = tempfile::tempdir().expect("tempdir");
    let status = Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(fx.repo.path())
        .arg(bare.path().join("b.git"))
        .status()
        .expect("git clone");
    assert!(status.success());
    let ctx = ToolContext::open(&bare.path().join("b.git"), None).expect("open bare");
    let ctx = with_settings(ctx, cfg.clone(), fx.state.path());
    let err = call_in(&ctx, json!({"argv": ["pwd"], "ref": "WORKTREE"})).expect_err("bare");
    assert_eq!(err.code, codes::REQUEST_INVALID);
    // A bare repository still has commits to check out: its HEAD, the context's revision.
    let out = call_in(&ctx, json!({"argv": ["pwd"]})).expect("checkout");
    assert_eq!(out["workdir"], "checkout", "{out}");
    let err = fx
        .call(cfg, json!({"argv": ["pwd"], "ref": "no-such-branch"}))
        .expect_err("missing");
    assert_eq!(err.code, codes::REPOSITORY_REVISION_MISSING);
}

#[test]
fn no_shell_metacharacters_are_plain_text() {
    let fx = fixture();
    let cfg = config(&[&["echo", "**"]]);
    let args = [
        "$(id)", ";", "rm", "-rf", "src", "|", "cat", "`whoami`", "*", "&&", "x>y",
    ];
    let mut call = vec!["echo"];
    call.extend(args);
    let out = fx.call(cfg, json!({ "argv": call })).expect("echo");
    assert_eq!(out["stdout"], format!("{}\n", args.join(" ")));
    assert!(
        fx.repo.path().join("src/lib.rs").exists(),
        "nothing removed"
    );
}

#[test]
fn the_environment_is_scrubbed() {
    // The gateway process gets extra variables; only PATH, HOME, TMPDIR, LANG, TERM and the
    // passthrough names reach the command (run through the real binary, so the test does not
    // modify its own environment).
    let fx = fixture();
    let home = fx.repo.config_home();
    let config_file = home.join("config.toml");
    std::fs::write(
        &config_file,
        "[tools.run_check]\nenabled = true\nenv_passthrough = [\"PASS_ME\", \"MY_API_TOKEN\", \
         \"NOT_SET_ANYWHERE\"]\n\n[[tools.run_check.commands]]\nargv = [\"env\"]\n",
    )
    .expect("write config");
    let out = Command::new(support::binary())
        .args(["tool", "run_check", "--repo"])
        .arg(fx.repo.path())
        .arg("--config")
        .arg(&config_file)
        .args(["--input", r#"{"argv": ["env"]}"#])
        .env("REVIEW_AGENT_GATEWAY_HOME", fx.state.path())
        .env("HOME", home)
        .env("PASS_ME", "hello-there")
        .env("MY_API_TOKEN", "tok-0123456789-secret")
        .env("PLAIN_PARENT_VAR", "must-not-leak")
        .env("GITLAB_TOKEN", "glpat-abcdefghij0123456789")
        .env_remove("CARGO_HOME")
        .env_remove("RUSTUP_HOME")
        .env_remove("USER")
        .env_remove("LOGNAME")
        .output()
        .expect("binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let value: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let env = value["stdout"].as_str().expect("stdout");
    let names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        [
            "HOME",
            "LANG",
            "MY_API_TOKEN",
            "PASS_ME",
            "PATH",
            "TERM",
            "TMPDIR"
        ],
        "{env}"
    );
    assert!(env.contains("PASS_ME=hello-there\n"), "{env}");
    assert!(env.contains("LANG=C.UTF-8\n"), "{env}");
    assert!(env.contains("TERM=dumb\n"), "{env}");
    // HOME and TMPDIR are the call's own scratch dir (removed after it), not the user's.
    let calls = fx.state.path().join("state/sandbox/calls");
    let var = |name: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .map(PathBuf::from)
            .expect(name)
    };
    assert!(
        var("HOME").starts_with(&calls) && var("HOME").ends_with("home"),
        "{env}"
    );
    assert!(
        var("TMPDIR").starts_with(&calls) && var("TMPDIR").ends_with("tmp"),
        "{env}"
    );
    assert_eq!(var("HOME").parent(), var("TMPDIR").parent());
    assert!(
        !var("HOME").exists(),
        "the scratch dir is removed after the call"
    );
    assert!(env.contains("MY_API_TOKEN=[REDACTED]"), "{env}");
    assert!(!env.contains("tok-0123456789-secret"), "{env}");
    assert!(!env.contains("must-not-leak"), "{env}");
    // The audit log went to the state dir of REVIEW_AGENT_GATEWAY_HOME.
    let audit =
        std::fs::read_to_string(fx.state.path().join("state").join(AUDIT_LOG)).expect("audit log");
    assert_eq!(audit.lines().count(), 1);
}

#[test]
fn output_is_capped_and_drained() {
    let fx = fixture();
    let mut cfg = config(&[&["seq", "*"]]);
    cfg.max_output_bytes = 1000;
    let out = fx
        .call(cfg, json!({"argv": ["seq", "200000"]}))
        .expect("seq");
    let expected_bytes: u64 = (1..=200_000u64)
        .map(|n| n.to_string().len() as u64 + 1)
        .sum();
    assert_eq!(out["stdoutBytes"], expected_bytes, "everything was read");
    assert_eq!(out["exitCode"], 0, "seq was never blocked on a full pipe");
    assert_eq!(out["truncated"], true);
    let stdout = out["stdout"].as_str().expect("stdout");
    assert_eq!(stdout.len(), 1000);
    assert!(stdout.starts_with("1\n2\n3\n"));
}

#[test]
fn timeout_kills_the_whole_process_group() {
    let fx = fixture();
    let cfg = config(&[&["sh", "-c", "*"]]);
    let started = Instant::now();
    let out = fx
        .call(
            cfg,
            json!({"argv": ["sh", "-c", "sleep 100 & echo $!; wait"], "timeoutSeconds": 1}),
        )
        .expect("sh");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "returned promptly"
    );
    assert_eq!(out["timedOut"], true, "{out}");
    assert_eq!(out["cancelled"], false);
    assert_eq!(out["exitCode"], Value::Null);
    assert_eq!(out["signal"], 9);
    let grandchild: u32 = out["stdout"]
        .as_str()
        .and_then(|s| s.trim().parse().ok())
        .expect("the background pid");
    assert!(
        wait_gone(grandchild),
        "the background sleep {grandchild} was killed"
    );
    let audit = fx.audit();
    assert_eq!(audit[0]["timedOut"], true);
    assert_eq!(audit[0]["signal"], 9);
}

#[test]
fn background_children_do_not_outlive_a_normal_exit() {
    let fx = fixture();
    let cfg = config(&[&["sh", "-c", "*"]]);
    let started = Instant::now();
    let out = fx
        .call(cfg, json!({"argv": ["sh", "-c", "sleep 100 & echo $!"]}))
        .expect("sh");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "did not wait for the sleep"
    );
    assert_eq!(out["exitCode"], 0);
    assert_eq!(out["timedOut"], false);
    let pid: u32 = out["stdout"]
        .as_str()
        .and_then(|s| s.trim().parse().ok())
        .expect("the background pid");
    assert!(wait_gone(pid), "the background sleep {pid} was killed");
}

#[test]
fn cancel_kills_the_command() {
    let fx = fixture();
    let cancel = Arc::new(AtomicBool::new(false));
    let ctx = fx
        .ctx(config(&[&["sleep", "*"]]))
        .with_cancel(Arc::clone(&cancel));
    let flag = Arc::clone(&cancel);
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let started = Instant::now();
    let out = call_in(&ctx, json!({"argv": ["sleep", "30"]})).expect("sleep");
    setter.join().expect("setter");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out["cancelled"], true, "{out}");
    assert_eq!(out["timedOut"], false);
    assert_eq!(out["signal"], 9);
    assert_eq!(fx.audit()[0]["cancelled"], true);
}

#[test]
fn memory_limit_makes_a_big_allocation_fail() {
    let fx = fixture();
    let python = "/usr/bin/python3";
    if !Path::new(python).exists() {
        eprintln!("skipped: no {python}");
        return;
    }
    let mut cfg = config(&[&[python, "-c", "*"]]);
    cfg.memory_mb = 256;
    let out = fx
        .call(
            cfg.clone(),
            json!({"argv": [python, "-c", "x = bytearray(2 * 10**9); print('allocated')"]}),
        )
        .expect("python");
    assert_ne!(out["exitCode"], 0, "{out}");
    assert!(
        out["stderr"]
            .as_str()
            .expect("stderr")
            .contains("MemoryError"),
        "{out}"
    );
    assert!(
        !out["stdout"]
            .as_str()
            .expect("stdout")
            .contains("allocated")
    );
    // The same allocation within a larger limit succeeds: the limit, not the machine, refused.
    cfg.memory_mb = 4096;
    let out = fx
        .call(
            cfg,
            json!({"argv": [python, "-c", "x = bytearray(10**8); print('allocated')"]}),
        )
        .expect("python");
    assert_eq!(out["stdout"], "allocated\n", "{out}");
}

#[test]
fn cpu_limit_stops_a_busy_loop() {
    let fx = fixture();
    let mut cfg = config(&[&["sh", "-c", "*"]]);
    cfg.cpu_seconds = 1;
    let started = Instant::now();
    let out = fx
        .call(cfg, json!({"argv": ["sh", "-c", "while :; do :; done"]}))
        .expect("sh");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        out["timedOut"], false,
        "the CPU limit, not the timeout: {out}"
    );
    let signal = out["signal"].as_i64().expect("killed by a signal");
    assert!(
        signal == 24 || signal == 9,
        "SIGXCPU or SIGKILL, got {signal}"
    );
}

#[test]
fn tokens_printed_by_the_command_are_redacted() {
    let fx = fixture();
    let cfg = config(&[&["echo", "**"], &["sh", "-c", "*"]]);
    let out = fx
        .call(cfg.clone(), json!({"argv": ["echo", "token", GHP]}))
        .expect("echo");
    assert_eq!(out["stdout"], "token [REDACTED:github-token]\n");
    assert_eq!(
        out["argv"],
        json!(["echo", "token", "[REDACTED:github-token]"])
    );
    let out = fx
        .call(
            cfg,
            json!({"argv": ["sh", "-c", "echo 'Authorization: Bearer abc123def456' >&2; pwd >&2"]}),
        )
        .expect("sh");
    assert_eq!(out["stderr"], "Authorization: [REDACTED]\n<repo>\n");
    let audit = std::fs::read_to_string(fx.audit_path()).expect("audit");
    assert!(!audit.contains(GHP), "{audit}");
    assert!(audit.contains("[REDACTED:github-token]"), "{audit}");
}

#[test]
fn a_missing_program_fails_cleanly() {
    let fx = fixture();
    let cfg = config(&[&["no-such-program-xyz"]]);
    let err = fx
        .call(cfg, json!({"argv": ["no-such-program-xyz"]}))
        .expect_err("missing");
    assert_eq!(err.code, codes::TOOL_COMMAND_FAILED);
    assert_eq!(fx.audit()[0]["outcome"], "refused");
}

#[test]
fn pattern_semantics() {
    let p = |items: &[&str]| argv(items);
    /// (pattern, `options`, call, expected: whether it matches, or a part of the refusal).
    type Case<'a> = (&'a [&'a str], bool, &'a [&'a str], Result<bool, &'a str>);
    let table: &[Case] = &[
        (&["cargo", "test"], false, &["cargo", "test"], Ok(true)),
        (
            &["cargo", "test"],
            false,
            &["cargo", "test", "x"],
            Ok(false),
        ),
        (
            &["cargo", "test", "**"],
            false,
            &["cargo", "test"],
            Ok(true),
        ),
        (
            &["cargo", "test", "**"],
            true,
            &["cargo", "test", "--lib", "a::b"],
            Ok(true),
        ),
        // Options only where the entry allows them (issue 13: `--config`, `--output=…`).
        (
            &["cargo", "test", "**"],
            false,
            &["cargo", "test", "a::b", "--lib"],
            Err("`--lib` is an option"),
        ),
        (
            &["cargo", "test", "**"],
            false,
            &["cargo", "test", "--config", "x"],
            Err("option"),
        ),
        (
            &["git", "log", "*"],
            false,
            &["git", "log", "-p"],
            Err("option"),
        ),
        (&["cat", "*"], false, &["cat", "-"], Err("option")),
        (
            &["cargo", "test", "--lib"],
            false,
            &["cargo", "test", "--lib"],
            Ok(true),
        ),
        (
            &["cargo", "test", "**"],
            false,
            &["cargo", "build"],
            Ok(false),
        ),
        (
            &["cargo", "test", "*"],
            false,
            &["cargo", "test"],
            Ok(false),
        ),
        (
            &["cargo", "test", "--package=*"],
            false,
            &["cargo", "test", "--package=x"],
            Ok(true),
        ),
        (
            &["cargo", "test", "--package=*"],
            false,
            &["cargo", "test", "--features=x"],
            Ok(false),
        ),
        (&["cargo"], false, &["/usr/bin/cargo"], Ok(false)),
        (
            &["cargo", "**"],
            true,
            &["cargo", "--manifest-path=/etc/x"],
            Err("absolute"),
        ),
        (&["cargo", "**"], false, &["cargo", "x/../../y"], Err("..")),
        (
            &["cat", "/etc/hosts"],
            false,
            &["cat", "/etc/hosts"],
            Ok(true),
        ),
        (&[], true, &["x"], Ok(false)),
    ];
    for (pattern, options, call, expected) in table {
        let got = matches(&p(pattern), *options, &p(call));
        match (got, expected) {
            (Ok(a), Ok(b)) => assert_eq!(a, *b, "{pattern:?} {call:?}"),
            (Err(e), Err(part)) => assert!(e.contains(part), "{e}"),
            (got, _) => panic!("{pattern:?} {call:?}: {got:?}, expected {expected:?}"),
        }
    }
}

#[test]
fn config_section_is_checked() {
    let path = Path::new("config.toml");
    let ok = Config::parse(
        "[tools.run_check]\nenabled = true\ntimeout_seconds = 60\nmemory_mb = 512\n\
         [[tools.run_check.commands]]\nargv = [\"cargo\", \"test\", \"**\"]\n",
        path,
    )
    .expect("valid");
    assert!(ok.tools.run_check.enabled);
    assert_eq!(ok.tools.run_check.timeout_seconds, 60);
    assert_eq!(ok.tools.run_check.cpu_seconds, 600);
    assert_eq!(
        ok.tools.run_check.commands[0].argv,
        argv(&["cargo", "test", "**"])
    );
    assert!(!Config::default().tools.run_check.enabled);
    for (text, key) in [
        ("[tools.run_check]\nshell = true\n", "tools.run_check"),
        (
            "[tools.run_check]\ntimeout_seconds = 0\n",
            "tools.run_check.timeout_seconds",
        ),
        (
            "[tools.run_check]\nmemory_mb = 1\n",
            "tools.run_check.memory_mb",
        ),
        (
            "[tools.run_check]\nenv_passthrough = [\"A-B\"]\n",
            "tools.run_check.env_passthrough[0]",
        ),
        (
            "[[tools.run_check.commands]]\nargv = []\n",
            "tools.run_check.commands[0].argv",
        ),
        (
            "[[tools.run_check.commands]]\nargv = [\"cargo\", \"**\", \"x\"]\n",
            "tools.run_check.commands[0].argv",
        ),
        (
            "[[tools.run_check.commands]]\nargv = [\"./gradlew\"]\n",
            "tools.run_check.commands[0].argv",
        ),
        (
            "[[tools.run_check.commands]]\nargv = [\"c*\"]\n",
            "tools.run_check.commands[0].argv",
        ),
        (
            "[[tools.run_check.commands]]\nargv = [\"make\"]\nwritable = [\"../out\"]\n",
            "tools.run_check.commands[0].writable[0]",
        ),
        (
            "[[tools.run_check.commands]]\nargv = [\"make\"]\nwritable = [\".GIT/hooks\"]\n",
            "tools.run_check.commands[0].writable[0]",
        ),
        (
            "[[tools.run_check.commands]]\nargv = [\"make\"]\nwritable = [\"/tmp\"]\n",
            "tools.run_check.commands[0].writable[0]",
        ),
        ("[sandbox]\nmode = \"off\"\n", "sandbox.mode"),
        ("[sandbox]\nread = [\"relative\"]\n", "sandbox.read[0]"),
        ("[sandbox]\nwrite = [\"/\"]\n", "sandbox"),
    ] {
        let err = Config::parse(text, path).expect_err(text);
        let message = err.to_string();
        assert!(message.contains(key), "{text}: {message}");
    }
}

/// The limits hold from the command's first instruction, so a child it forks at once inherits
/// them (issue 13: they used to be set a moment after the start), and a limit smaller than the
/// gateway's own binary still lets a small command run.
#[test]
fn limits_hold_from_the_first_instruction() {
    let fx = fixture();
    let mut cfg = config(&[&["sh", "-c", "*"]]);
    cfg.memory_mb = 64;
    cfg.cpu_seconds = 7;
    for _ in 0..5 {
        let out = fx
            .call(
                cfg.clone(),
                json!({"argv": ["sh", "-c", "ulimit -v; ulimit -t; sh -c 'ulimit -v'"]}),
            )
            .expect("sh");
        assert_eq!(out["exitCode"], 0, "{out}");
        assert_eq!(out["stdout"], "65536\n7\n65536\n", "{out}");
    }
}

/// Without a `ref` of its own a call runs at the context's revision, as every tool reads: the
/// CLI's `--ref` (HEAD by default), the request's `ref` — a commit means its scratch checkout,
/// so the user's uncommitted changes are not what runs; `WORKTREE` means the work tree.
#[test]
fn the_context_revision_decides_where_a_call_runs() {
    let fx = fixture();
    fx.repo.write("README.md", "changed in the work tree\n");
    let cfg = config(&[&["cat", "README.md"]]);
    let at = |rev: Option<&str>, input: Value| {
        let ctx = with_settings(
            ToolContext::open(fx.repo.path(), rev).expect("open"),
            cfg.clone(),
            fx.state.path(),
        );
        call_in(&ctx, input).expect("cat")
    };
    let head = at(None, json!({"argv": ["cat", "README.md"]}));
    assert_eq!(head["stdout"], "hello\n", "{head}");
    assert_eq!(head["workdir"], "checkout");
    let worktree = at(Some("WORKTREE"), json!({"argv": ["cat", "README.md"]}));
    assert_eq!(
        worktree["stdout"], "changed in the work tree\n",
        "{worktree}"
    );
    assert_eq!(worktree["workdir"], "worktree");
    // The call's own `ref` wins over the context's.
    let own = at(
        Some("WORKTREE"),
        json!({"argv": ["cat", "README.md"], "ref": "HEAD"}),
    );
    assert_eq!(own["stdout"], "hello\n", "{own}");
}

/// A program the sandbox does not let run — here a script whose interpreter lies outside every
/// readable location — is refused as `sandbox.denied` with a remediation, not run.
#[test]
fn a_program_the_sandbox_cannot_execute_is_denied() {
    use std::os::unix::fs::PermissionsExt;
    let fx = fixture();
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let interpreter = elsewhere.path().join("interp");
    std::fs::copy("/bin/sh", &interpreter).expect("copy sh");
    let tools = tempfile::tempdir().expect("tempdir");
    let script = tools.path().join("tool.sh");
    std::fs::write(&script, format!("#!{}\necho ran\n", interpreter.display())).expect("write");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let program = script.display().to_string();
    let err = fx
        .call(config(&[&[&program]]), json!({ "argv": [program] }))
        .expect_err("denied");
    assert_eq!(err.code, codes::SANDBOX_DENIED, "{err:?}");
    assert!(err.remediation.contains("[sandbox] read"), "{err:?}");
}
