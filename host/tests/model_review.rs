//! Model review through the command line (`review --provider`), against the scripted fake
//! provider (`common::fake_provider`, a real HTTP server speaking each provider's streaming
//! format): what the model reports is checked (diff range, evidence, schema), budgets end the
//! loop with a warning, retries and broken streams end as DESIGN §8 says.

mod common;

use std::process::{Command, Output};

use common::fake_provider::{AnthropicStream, FakeProvider, OpenAiStream, Reply};
use common::git;
use review_agent_gateway::config::ProviderKind;
use serde_json::{Value, json};

/// The head side of `app.py`: a rule finding on line 2 (`eval`), an off-by-one on line 5.
const APP: &str = "import os\na = eval(x)\ndef total(items):\n    t = 0\n    for i in range(1, len(items)):\n        t += items[i]\n    return t\n";

struct Fixture {
    repo: tempfile::TempDir,
    home: tempfile::TempDir,
    base: String,
}

impl Fixture {
    /// A repository whose head adds [`APP`], and a gateway home whose config has `top` (keys
    /// before any table) and the fake as provider `fake` plus `provider` (more keys of its
    /// `[[providers]]` entry).
    fn new(fake: &FakeProvider, kind: ProviderKind, top: &str, provider: &str) -> Fixture {
        let repo = tempfile::tempdir().expect("temp dir");
        git(repo.path(), &["init", "-q", "-b", "main"]);
        std::fs::write(repo.path().join("app.py"), "import os\n").expect("write");
        std::fs::write(repo.path().join("lib.py"), "def helper():\n    return 1\n").expect("write");
        git(repo.path(), &["add", "-A"]);
        git(repo.path(), &["commit", "-q", "-m", "base"]);
        let base = git(repo.path(), &["rev-parse", "HEAD"]);
        std::fs::write(repo.path().join("app.py"), APP).expect("write");
        git(repo.path(), &["commit", "-q", "-am", "head"]);
        let home = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(home.path().join("config")).expect("mkdir");
        std::fs::write(
            home.path().join("config/config.toml"),
            format!(
                "{top}\n{}{provider}\n",
                fake.toml("fake", kind, Some("FAKE_KEY"))
            ),
        )
        .expect("write config");
        Fixture { repo, home, base }
    }

    fn review(&self, args: &[&str]) -> Output {
        self.command("review")
            .args(["--repo"])
            .arg(self.repo.path())
            .args([
                "--base",
                &self.base,
                "--provider",
                "fake",
                "--format",
                "json",
            ])
            .args(args)
            .output()
            .expect("review runs")
    }

    fn command(&self, sub: &str) -> Command {
        let mut c = Command::new(common::bin());
        c.arg(sub)
            .env("REVIEW_AGENT_GATEWAY_HOME", self.home.path())
            .env("FAKE_KEY", "sk-fake-0123456789abcdef")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY");
        c
    }
}

fn events(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

fn findings(events: &[Value], source: &str) -> Vec<Value> {
    of_type(events, "finding.created")
        .into_iter()
        .map(|e| e["finding"].clone())
        .filter(|f| f["source"] == source)
        .collect()
}

fn warning_codes(events: &[Value]) -> Vec<String> {
    of_type(events, "warning")
        .iter()
        .map(|w| w["code"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn off_by_one(evidence_quote: &str, line: u32) -> String {
    json!({
        "path": "app.py", "startLine": line, "endLine": line, "category": "bug",
        "severity": "medium", "confidence": "high",
        "title": "The loop skips the first item",
        "content": "range(1, len(items)) starts at 1, so items[0] is never added.",
        "evidence": [{"path": "app.py", "startLine": line, "endLine": line, "quote": evidence_quote}],
        "suggestionCode": "    for i in range(len(items)):",
    })
    .to_string()
}

/// An OpenAI turn that reports `arguments` with `report_finding` (split in three pieces).
fn report_turn(id: &str, arguments: &str) -> OpenAiStream {
    let (a, rest) = arguments.split_at(arguments.len() / 3);
    let (b, c) = rest.split_at(rest.len() / 2);
    OpenAiStream::new()
        .text("Checking the loop. ")
        .tool_call(0, id, "report_finding", &[a, b, c])
        .end("tool_calls", 900, 60)
}

fn summary_turn() -> OpenAiStream {
    OpenAiStream::new()
        .text("One problem found.")
        .end("stop", 1000, 8)
}

#[test]
fn rule_and_model_findings_together_and_what_the_model_was_sent() {
    let fake = FakeProvider::with_script([
        report_turn("call_1", &off_by_one("for i in range(1, len(items)):", 5)).into(),
        Reply::from(summary_turn()),
    ]);
    let f = Fixture::new(
        &fake,
        ProviderKind::OpenaiCompatible,
        "",
        "context_window = 32768",
    );
    let out = f.review(&["--language", "de"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "findings exit 1: {stderr}");
    let events = events(&out);
    let stages: Vec<&str> = of_type(&events, "stage.changed")
        .iter()
        .filter_map(|e| e["stage"].as_str())
        .collect();
    assert_eq!(
        stages,
        ["resolve", "diff", "rules", "model", "validate", "done"]
    );
    let model_context: Vec<&Value> = of_type(&events, "context.added")
        .into_iter()
        .filter(|e| e["context"]["kind"] == "model")
        .collect();
    assert_eq!(
        model_context[0]["context"],
        json!({"kind": "model", "providerId": "fake", "providerKind": "openai-compatible",
            "model": "fake-model", "maxContextTokens": 32768, "maxToolCalls": 60, "tools": true})
    );
    let rule = findings(&events, "rule");
    assert_eq!(rule.len(), 1, "{events:?}");
    assert_eq!(rule[0]["startLine"], 2);
    let model = findings(&events, "model");
    assert_eq!(model.len(), 1, "{events:?}");
    let m = &model[0];
    assert_eq!(
        (m["path"].as_str(), m["startLine"].as_u64()),
        (Some("app.py"), Some(5))
    );
    assert_eq!(m["existingCode"], "    for i in range(1, len(items)):");
    assert!(
        m["fingerprint"]
            .as_str()
            .is_some_and(|f| f.starts_with("sha256:"))
    );
    assert_ne!(m["fingerprint"], rule[0]["fingerprint"]);
    let text: String = of_type(&events, "text.delta")
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(text, "Checking the loop. One problem found.");
    let completed = of_type(&events, "run.completed");
    assert_eq!(
        completed[0]["usage"],
        json!({"inputTokens": 1900, "outputTokens": 68})
    );

    // What the model got: the diff with new-side numbers, the tools, the language, the key.
    let requests = fake.scripted_requests();
    assert_eq!(requests.len(), 2);
    let first = requests[0].json();
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-fake-0123456789abcdef")
    );
    assert_eq!(first["model"], "fake-model");
    assert_eq!(first["stream"], true);
    let system = first["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(system.contains("`de`"), "{system}");
    assert!(system.contains("python.eval"), "rule guidance: {system}");
    let prompt = first["messages"][1]["content"].as_str().unwrap_or_default();
    assert!(prompt.contains("### app.py (modified)"), "{prompt}");
    assert!(
        prompt.contains("    5 +     for i in range(1, len(items)):"),
        "{prompt}"
    );
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(
        tools.contains(&"report_finding") && tools.contains(&"file_read"),
        "{tools:?}"
    );
    assert!(!tools.contains(&"run_check"));
    let second = requests[1].json();
    let result = second["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "tool"))
        .expect("a tool result");
    assert_eq!(result["tool_call_id"], "call_1");
    assert!(
        result["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("Recorded"))
    );
    // The key is nowhere in what the user sees.
    assert!(!String::from_utf8_lossy(&out.stdout).contains("sk-fake"));
    assert!(!stderr.contains("sk-fake"));
}

/// The tool result the model got for its call `call_id` in `request`'s messages (OpenAI form).
fn tool_result(request: &Value, call_id: &str) -> String {
    request["messages"]
        .as_array()
        .and_then(|m| {
            m.iter()
                .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        })
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no result for {call_id} in {request}"))
        .to_owned()
}

const WIDE: &str = "context_window = 32768";

#[test]
fn a_finding_outside_the_diff_is_dropped_with_a_warning_and_the_model_told() {
    let outside = off_by_one("for i in range(1, len(items)):", 5).replace(
        "\"startLine\":5,\"endLine\":5,\"category\"",
        "\"startLine\":90,\"endLine\":91,\"category\"",
    );
    assert!(outside.contains("\"startLine\":90"), "{outside}");
    let not_in_diff = json!({"path": "lib.py", "startLine": 1, "endLine": 1, "category": "bug",
        "severity": "low", "confidence": "high", "title": "t", "content": "c"})
    .to_string();
    let fake = FakeProvider::with_script([
        Reply::from(
            OpenAiStream::new()
                .tool_call(0, "call_out", "report_finding", &[&outside])
                .tool_call(1, "call_lib", "report_finding", &[&not_in_diff])
                .end("tool_calls", 10, 10),
        ),
        report_turn(
            "call_fixed",
            &off_by_one("for i in range(1, len(items)):", 5),
        )
        .into(),
        summary_turn().into(),
    ]);
    let f = Fixture::new(&fake, ProviderKind::OpenaiCompatible, "", WIDE);
    let events = events(&f.review(&[]));
    let codes = warning_codes(&events);
    assert_eq!(
        codes
            .iter()
            .filter(|c| *c == "finding.outside_diff")
            .count(),
        2,
        "{codes:?}"
    );
    let model = findings(&events, "model");
    assert_eq!(model.len(), 1);
    assert_eq!(model[0]["startLine"], 5);
    let second = fake.scripted_requests()[1].json();
    assert!(tool_result(&second, "call_out").contains("app.py:90-91 is not inside the diff"));
    assert!(tool_result(&second, "call_lib").contains("`lib.py` is not a file of this diff"));
}

#[test]
fn an_invented_evidence_quote_drops_the_finding_and_real_quotes_elsewhere_pass() {
    let invented = off_by_one("for i in range(len(items)):", 5);
    let mut elsewhere: Value =
        serde_json::from_str(&off_by_one("for i in range(1, len(items)):", 5)).expect("json");
    elsewhere["evidence"]
        .as_array_mut()
        .expect("evidence")
        .push(json!({"path": "lib.py", "startLine": 2, "endLine": 2, "quote": "return   1"}));
    let bad_file = json!({"path": "app.py", "startLine": 5, "endLine": 5, "category": "bug",
        "severity": "low", "confidence": "high", "title": "t2", "content": "c",
        "evidence": [{"path": "missing.py", "startLine": 1, "endLine": 1, "quote": "x"}]})
    .to_string();
    let fake = FakeProvider::with_script([
        Reply::from(
            OpenAiStream::new()
                .tool_call(0, "call_invented", "report_finding", &[&invented])
                .tool_call(
                    1,
                    "call_elsewhere",
                    "report_finding",
                    &[&elsewhere.to_string()],
                )
                .tool_call(2, "call_missing", "report_finding", &[&bad_file])
                .end("tool_calls", 10, 10),
        ),
        summary_turn().into(),
    ]);
    let f = Fixture::new(&fake, ProviderKind::OpenaiCompatible, "", WIDE);
    let events = events(&f.review(&[]));
    let codes = warning_codes(&events);
    assert_eq!(
        codes
            .iter()
            .filter(|c| *c == "finding.evidence_mismatch")
            .count(),
        2,
        "{codes:?}"
    );
    let model = findings(&events, "model");
    assert_eq!(
        model.len(),
        1,
        "only the finding with real quotes: {model:?}"
    );
    assert_eq!(model[0]["evidence"][1]["path"], "lib.py");
    let second = fake.scripted_requests()[1].json();
    assert!(tool_result(&second, "call_invented").contains("is not in those lines"));
    assert!(tool_result(&second, "call_missing").contains("no such text file"));
}

#[test]
fn schema_violations_duplicates_of_rules_and_low_confidence_are_not_findings() {
    let mut bad: Value =
        serde_json::from_str(&off_by_one("for i in range(1, len(items)):", 5)).expect("json");
    bad["severity"] = json!("urgent");
    bad["extra"] = json!(true);
    let duplicate = json!({"path": "app.py", "startLine": 2, "endLine": 2, "category": "security",
        "severity": "high", "confidence": "high", "title": "eval", "content": "eval of input",
        "ruleId": "python.eval-dynamic"})
    .to_string();
    let mut low: Value =
        serde_json::from_str(&off_by_one("for i in range(1, len(items)):", 5)).expect("json");
    low["confidence"] = json!("low");
    let fake = FakeProvider::with_script([
        Reply::from(
            OpenAiStream::new()
                .tool_call(0, "call_bad", "report_finding", &[&bad.to_string()])
                .tool_call(1, "call_dup", "report_finding", &[&duplicate])
                .tool_call(2, "call_low", "report_finding", &[&low.to_string()])
                .tool_call(3, "call_garbage", "report_finding", &["{\"path\": "])
                .end("tool_calls", 10, 10),
        ),
        summary_turn().into(),
    ]);
    let f = Fixture::new(&fake, ProviderKind::OpenaiCompatible, "", WIDE);
    let events = events(&f.review(&[]));
    assert!(warning_codes(&events).contains(&"finding.invalid".to_owned()));
    // The duplicate of the rule finding is said, not dropped silently; the low-confidence one
    // is filtered by minConfidence like a rule finding would be.
    let duplicates: Vec<&Value> = of_type(&events, "warning")
        .into_iter()
        .filter(|w| w["code"] == "finding.duplicate")
        .collect();
    assert_eq!(duplicates.len(), 1, "{events:?}");
    assert!(
        duplicates[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("app.py:2-2"))
    );
    assert!(findings(&events, "model").is_empty(), "{events:?}");
    assert_eq!(findings(&events, "rule").len(), 1);
    let second = fake.scripted_requests()[1].json();
    let bad_answer = tool_result(&second, "call_bad");
    assert!(
        bad_answer.contains("does not match the schema") && bad_answer.contains("/severity"),
        "{bad_answer}"
    );
    assert!(tool_result(&second, "call_garbage").contains("not valid JSON"));
}

#[test]
fn a_model_looping_on_tool_calls_is_stopped_by_the_budget() {
    let search = json!({"query": "items"}).to_string();
    let fake = FakeProvider::start();
    for i in 0..8 {
        fake.push(
            OpenAiStream::new()
                .tool_call(0, &format!("call_{i}"), "code_search", &[&search])
                .end("tool_calls", 100, 10),
        );
    }
    let f = Fixture::new(&fake, ProviderKind::OpenaiCompatible, "", WIDE);
    let out = f.review(&["--max-tool-calls", "2"]);
    let events = events(&out);
    assert_eq!(of_type(&events, "tool.started").len(), 2);
    assert_eq!(of_type(&events, "tool.completed").len(), 2);
    let budget = of_type(&events, "warning")
        .into_iter()
        .filter(|w| w["code"] == "budget.exhausted")
        .count();
    assert_eq!(budget, 2, "the refusal, then the stop: {events:?}");
    assert_eq!(
        of_type(&events, "run.completed").len(),
        1,
        "it ends, and completes"
    );
    // Two calls run, three turns refused, then stopped: five requests, three replies unused.
    assert_eq!(fake.scripted_requests().len(), 5);
    let third = fake.scripted_requests()[3].json();
    assert!(tool_result(&third, "call_2").contains("budget (2) is used up"));
    assert_eq!(fake.remaining(), 3);
}

#[test]
fn the_output_token_budget_stops_the_model_and_keeps_its_findings() {
    let fake = FakeProvider::with_script([
        report_turn("call_1", &off_by_one("for i in range(1, len(items)):", 5)).into(),
        Reply::from(summary_turn()),
    ]);
    let f = Fixture::new(&fake, ProviderKind::OpenaiCompatible, "", WIDE);
    let events = events(&f.review(&["--max-output-tokens", "50"]));
    assert_eq!(fake.scripted_requests()[0].json()["max_tokens"], 50);
    assert!(warning_codes(&events).contains(&"budget.exhausted".to_owned()));
    assert_eq!(findings(&events, "model").len(), 1);
    assert_eq!(
        fake.scripted_requests().len(),
        1,
        "60 of 50 tokens used: no second request"
    );
}

#[test]
fn a_429_is_retried_after_retry_after_and_the_review_completes() {
    let fake = FakeProvider::with_script([
        Reply::openai_error(429, "rate_limit_exceeded", "slow down").header("retry-after", "1"),
        report_turn("call_1", &off_by_one("for i in range(1, len(items)):", 5)).into(),
        summary_turn().into(),
    ]);
    let f = Fixture::new(&fake, ProviderKind::OpenaiCompatible, "", WIDE);
    let started = std::time::Instant::now();
    let events = events(&f.review(&[]));
    assert!(started.elapsed() >= std::time::Duration::from_millis(950));
    assert_eq!(fake.scripted_requests().len(), 3);
    assert_eq!(findings(&events, "model").len(), 1);
    assert_eq!(of_type(&events, "run.completed").len(), 1);
}

#[test]
fn a_stream_dropped_mid_answer_is_asked_again_once() {
    let fake = FakeProvider::with_script([
        report_turn("call_1", &off_by_one("for i in range(1, len(items)):", 5))
            .drop_after(3)
            .into(),
        report_turn("call_1", &off_by_one("for i in range(1, len(items)):", 5)).into(),
        summary_turn().into(),
    ]);
    let f = Fixture::new(&fake, ProviderKind::OpenaiCompatible, "", WIDE);
    let events = events(&f.review(&[]));
    assert_eq!(
        warning_codes(&events)
            .iter()
            .filter(|c| *c == "provider.stream_retried")
            .count(),
        1
    );
    assert_eq!(
        findings(&events, "model").len(),
        1,
        "reported once, although streamed twice"
    );
    assert_eq!(of_type(&events, "run.completed").len(), 1);
}

#[test]
fn a_provider_that_refuses_fails_the_run_after_the_rule_findings() {
    let fake = FakeProvider::with_script([Reply::openai_error(401, "invalid_api_key", "bad key")]);
    let f = Fixture::new(&fake, ProviderKind::OpenaiCompatible, "", WIDE);
    let out = f.review(&[]);
    assert_eq!(out.status.code(), Some(2));
    let events = events(&out);
    assert_eq!(
        findings(&events, "rule").len(),
        1,
        "rule findings are not lost"
    );
    let failed = of_type(&events, "run.failed");
    assert_eq!(failed[0]["error"]["code"], "provider.auth_failed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("error[provider.auth_failed]") && stderr.contains("providers set-key fake"),
        "{stderr}"
    );
    assert!(!stderr.contains("sk-fake"));

    // The other formats still carry the rule findings (a CI report is not left empty).
    fake.push(Reply::openai_error(401, "invalid_api_key", "bad key"));
    let out = f
        .command("review")
        .arg("--repo")
        .arg(f.repo.path())
        .args(["--base", &f.base, "--provider", "fake", "--format", "sarif"])
        .output()
        .expect("review runs");
    assert_eq!(out.status.code(), Some(2));
    let sarif: Value = serde_json::from_slice(&out.stdout).expect("a SARIF report on stdout");
    assert_eq!(
        sarif["runs"][0]["results"].as_array().map(Vec::len),
        Some(1)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("error[provider.auth_failed]"));
    fake.push(Reply::openai_error(401, "invalid_api_key", "bad key"));
    let text = f
        .command("review")
        .arg("--repo")
        .arg(f.repo.path())
        .args(["--base", &f.base, "--provider", "fake", "--color", "never"])
        .output()
        .expect("review runs");
    assert_eq!(text.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("app.py:2"),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );
}

#[test]
fn a_context_window_too_small_for_the_diff_skips_it_with_a_warning() {
    let fake = FakeProvider::start();
    let f = Fixture::new(
        &fake,
        ProviderKind::OpenaiCompatible,
        "",
        "context_window = 1200",
    );
    let events = events(&f.review(&[]));
    let codes = warning_codes(&events);
    assert!(
        codes.contains(&"model.tools_omitted".to_owned()),
        "{codes:?}"
    );
    // One warning for the whole diff, not one per hunk or line.
    let too_small: Vec<&Value> = of_type(&events, "warning")
        .into_iter()
        .filter(|w| w["code"] == "model.context_too_small")
        .collect();
    assert_eq!(too_small.len(), 1, "{codes:?}");
    assert!(
        too_small[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("1200 tokens"))
    );
    assert!(
        !codes.contains(&"model.hunk_skipped".to_owned()),
        "{codes:?}"
    );
    assert_eq!(fake.scripted_requests().len(), 0);
    assert_eq!(findings(&events, "rule").len(), 1);
    // The same from a budget given on the command line.
    let f = Fixture::new(&fake, ProviderKind::OpenaiCompatible, "", WIDE);
    let low = self::events(&f.review(&["--max-context-tokens", "2000"]));
    assert!(warning_codes(&low).contains(&"model.context_too_small".to_owned()));
    assert_eq!(fake.scripted_requests().len(), 0);
}

#[test]
fn anthropic_tool_use_review_with_repository_tools() {
    let report = off_by_one("for i in range(1, len(items)):", 5);
    let fake = FakeProvider::with_script([
        Reply::from(
            AnthropicStream::new()
                .message_start(500)
                .text_block(&["Let me read ", "lib.py."])
                .tool_use_block("toolu_read", "file_read", &["{\"path\":", " \"lib.py\"}"])
                .end("tool_use", 30),
        ),
        Reply::from(
            AnthropicStream::new()
                .message_start(700)
                .ping()
                .tool_use_block(
                    "toolu_report",
                    "report_finding",
                    &[&report[..20], &report[20..]],
                )
                .end("tool_use", 80),
        ),
        Reply::from(
            AnthropicStream::new()
                .message_start(800)
                .text_block(&["Done."])
                .end("end_turn", 3),
        ),
    ]);
    let f = Fixture::new(&fake, ProviderKind::Anthropic, "", "");
    let out = f.review(&["--effort", "thorough"]);
    let events = events(&out);
    assert_eq!(
        findings(&events, "model").len(),
        1,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let started = of_type(&events, "tool.started");
    assert_eq!(started.len(), 1);
    assert_eq!(started[0]["tool"], "file_read");
    let completed = of_type(&events, "tool.completed");
    assert_eq!(completed[0]["ok"], true);
    assert!(
        completed[0]["outputPreview"]
            .as_str()
            .is_some_and(|p| p.contains("def helper"))
    );
    assert_eq!(
        of_type(&events, "run.completed")[0]["usage"],
        json!({"inputTokens": 2000, "outputTokens": 113})
    );
    let requests = fake.scripted_requests();
    assert_eq!(
        requests[0].header("x-api-key"),
        Some("sk-fake-0123456789abcdef")
    );
    assert_eq!(requests[0].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(requests[0].path, "/v1/messages");
    let second = requests[1].json();
    let blocks = &second["messages"][2]["content"];
    assert_eq!(blocks[0]["type"], "tool_result");
    assert_eq!(blocks[0]["tool_use_id"], "toolu_read");
    assert!(
        blocks[0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("def helper"))
    );
    assert_eq!(
        second["messages"][1]["content"][1]["input"],
        json!({"path": "lib.py"})
    );
    let system = requests[0].json()["system"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(system.contains("thorough"), "{system}");
}

#[test]
fn bad_provider_arguments_are_clear_errors() {
    let fake = FakeProvider::start();
    let f = Fixture::new(&fake, ProviderKind::OpenaiCompatible, "", "");
    let out = f.review(&["--provider", "nope"]);
    // clap: --provider given twice is an error of usage; use a fresh command instead.
    assert_eq!(out.status.code(), Some(2));
    let out = f
        .command("review")
        .arg("--repo")
        .arg(f.repo.path())
        .args(["--base", &f.base, "--provider", "nope"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("error[provider.not_configured]") && stderr.contains("fake"),
        "{stderr}"
    );
    let out = f
        .command("review")
        .arg("--repo")
        .arg(f.repo.path())
        .args(["--base", &f.base, "--model", "m"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2), "--model needs --provider");
}

/// Issue 12 §5: after a failed `review --provider` (provider unreachable) the text summary
/// said `reviewed (unknown)`; it says what the rules reviewed before the failure, and the
/// `run.failed` event carries the files.
#[test]
fn an_unreachable_provider_leaves_a_summary_of_what_the_rules_reviewed() {
    let fake = FakeProvider::start();
    let f = Fixture::new(
        &fake,
        ProviderKind::OpenaiCompatible,
        "",
        &format!("{WIDE}\nmax_retries = 0"),
    );
    drop(fake); // nothing listens on its port any more
    let text = f
        .command("review")
        .arg("--repo")
        .arg(f.repo.path())
        .args(["--base", &f.base, "--provider", "fake", "--color", "never"])
        .output()
        .expect("review runs");
    assert_eq!(text.status.code(), Some(2), "{text:?}");
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("  reviewed   1 file by the rules before the run failed\n"),
        "{stdout}"
    );
    assert!(stdout.contains("  skipped    0 files\n"), "{stdout}");
    assert!(!stdout.contains("(unknown)"), "{stdout}");
    assert!(stdout.contains("result     FAILED provider."), "{stdout}");

    let out = f.review(&[]);
    let events = events(&out);
    let failed = of_type(&events, "run.failed");
    assert_eq!(failed[0]["reviewedFiles"], json!(["app.py"]), "{failed:?}");
    assert_eq!(failed[0]["skippedFiles"], json!([]), "{failed:?}");
}

#[test]
fn a_wrong_base_url_is_named_as_such_and_not_retried() {
    let page = "<!DOCTYPE HTML>\n<html>\n<body>\n<h1>Error response</h1>\n<p>Error code: 501</p>\n</body>\n</html>\n";
    let fake = FakeProvider::with_script([Reply::status(501)
        .header("content-type", "text/html")
        .body(page)]);
    let f = Fixture::new(&fake, ProviderKind::OpenaiCompatible, "", WIDE);
    let out = f.review(&[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("error[provider.request_rejected]"),
        "{stderr}"
    );
    assert!(
        stderr.contains("(an HTML page, not a model API's answer)"),
        "{stderr}"
    );
    assert!(!stderr.contains("<html>"), "{stderr}");
    assert!(stderr.contains("base_url ends in /v1"), "{stderr}");
    assert_eq!(
        fake.scripted_requests().len(),
        1,
        "a missing route is not retried"
    );
}

#[test]
fn chat_on_the_command_line_streams_the_answer_and_reads_the_repository() {
    let fake = FakeProvider::with_script([
        Reply::from(
            OpenAiStream::new()
                .tool_call(0, "call_read", "file_read", &["{\"path\": ", "\"lib.py\"}"])
                .end("tool_calls", 50, 5),
        ),
        Reply::from(
            OpenAiStream::new()
                .text("It starts at 1, ")
                .text("so items[0] is skipped.")
                .end("stop", 80, 9),
        ),
    ]);
    let f = Fixture::new(&fake, ProviderKind::OpenaiCompatible, "", WIDE);
    let out = f
        .command("chat")
        .args(["--provider", "fake", "--repo"])
        .arg(f.repo.path())
        .args([
            "--file", "app.py", "--lines", "3-7", "Why", "is", "the", "total", "wrong?",
        ])
        .output()
        .expect("chat runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "It starts at 1, so items[0] is skipped.\n"
    );
    assert!(stderr.contains("[file_read"), "{stderr}");
    let requests = fake.scripted_requests();
    let first = requests[0].json();
    let question = first["messages"][1]["content"].as_str().unwrap_or_default();
    assert!(
        question.contains("app.py:3-7") && question.contains("for i in range(1, len(items)):"),
        "{question}"
    );
    assert!(question.ends_with("Why is the total wrong?"), "{question}");
    assert!(tool_result(&requests[1].json(), "call_read").contains("def helper"));

    // JSON: the AgentEvents of a chat run.
    fake.push(OpenAiStream::new().text("Yes.").end("stop", 5, 1));
    let out = f
        .command("chat")
        .args(["--provider", "fake", "--format", "json", "Is it?"])
        .output()
        .expect("chat runs");
    assert!(out.status.success());
    let events = events(&out);
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        types,
        [
            "run.created",
            "stage.changed",
            "context.added",
            "text.delta",
            "run.completed"
        ]
    );
    assert_eq!(events[2]["context"]["tools"], false, "no --repo: no tools");
}

#[test]
fn a_chat_that_cannot_fit_the_context_fails_with_a_budget_error() {
    let fake = FakeProvider::start();
    let f = Fixture::new(
        &fake,
        ProviderKind::OpenaiCompatible,
        "",
        "context_window = 300",
    );
    let out = f
        .command("chat")
        .args(["--provider", "fake", "--repo"])
        .arg(f.repo.path())
        .args(["--file", "app.py", "Explain this file."])
        .output()
        .expect("chat runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("warning[model.tools_omitted]"), "{stderr}");
    assert!(
        stderr.contains("error[budget.exhausted]") && stderr.contains("context_window"),
        "{stderr}"
    );
    assert_eq!(fake.scripted_requests().len(), 0);
}

#[test]
fn a_hunk_larger_than_the_context_is_sent_in_runs_of_lines_not_skipped() {
    let fake = FakeProvider::start();
    for _ in 0..40 {
        fake.push(OpenAiStream::new().text("Nothing.").end("stop", 10, 2));
    }
    let f = Fixture::new(&fake, ProviderKind::OpenaiCompatible, "", "");
    // A new file of 1,500 lines: one hunk, ~20k tokens, in a default 8,192-token window.
    let big: String = (1..=1500)
        .map(|i| format!("value_{i} = compute({i}, 'some text to make the line longer')\n"))
        .collect();
    std::fs::write(f.repo.path().join("big.py"), big).expect("write");
    git(f.repo.path(), &["add", "big.py"]);
    git(f.repo.path(), &["commit", "-q", "-m", "big"]);
    let events = events(&f.review(&["--paths", "big.py"]));
    assert!(
        !warning_codes(&events).contains(&"model.hunk_skipped".to_owned()),
        "{:?}",
        warning_codes(&events)
    );
    let requests = fake.scripted_requests();
    assert!(requests.len() > 2, "{} requests", requests.len());
    let mut seen = std::collections::BTreeSet::new();
    for request in &requests {
        let prompt = request.json()["messages"][1]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(prompt.contains("### big.py (new file)"));
        for line in prompt.lines() {
            if let Some((n, rest)) = line.trim_start().split_once(" + ")
                && let Ok(n) = n.parse::<u32>()
            {
                assert!(rest.starts_with(&format!("value_{n} = ")), "{line}");
                seen.insert(n);
            }
        }
    }
    assert_eq!(
        seen,
        (1..=1500).collect(),
        "every line sent once or more, numbered right"
    );
    assert_eq!(of_type(&events, "run.completed").len(), 1);
}

#[test]
fn command_line_mistakes_get_errors_in_command_line_words() {
    let fake = FakeProvider::start();
    let f = Fixture::new(&fake, ProviderKind::OpenaiCompatible, "", WIDE);
    let run = |args: &[&str]| {
        let out = f.command(args[0]).args(&args[1..]).output().expect("runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let repo = f.repo.path().to_str().expect("utf-8 path").to_owned();
    let cases: [(&[&str], &[&str]); 5] = [
        (
            &["chat", "--provider", "builtin", "hi"],
            &[
                "error[provider.not_configured]",
                "`builtin` runs the review rules only",
            ],
        ),
        (
            &[
                "chat",
                "--provider",
                "fake",
                "--repo",
                &repo,
                "--file",
                "app.py",
                "--lines",
                "9000-9001",
                "hi",
            ],
            &[
                "error[request.invalid]",
                "--lines: line 9000 is past the end of the file (7 lines)",
            ],
        ),
        (
            &[
                "chat",
                "--provider",
                "fake",
                "--repo",
                &repo,
                "--file",
                "app.py",
                "--lines",
                "5-2",
                "hi",
            ],
            &["error[request.invalid]", "START comes first"],
        ),
        (
            &[
                "review",
                "--repo",
                &repo,
                "--base",
                &f.base,
                "--provider",
                "fake",
                "--language",
                "not a tag!",
            ],
            &[
                "error[request.invalid]",
                "`not a tag!` is not a language tag",
            ],
        ),
        (
            &["chat", "--provider", "nope", "hi"],
            &[
                "error[provider.not_configured]",
                "no provider `nope`",
                "fake",
            ],
        ),
    ];
    for (args, expected) in cases {
        let stderr = run(args);
        for part in expected {
            assert!(stderr.contains(part), "{args:?}: {stderr}");
        }
        assert!(!stderr.contains("  remediation:  "), "{stderr}");
    }
    assert_eq!(
        fake.scripted_requests().len(),
        0,
        "no mistake reached the model"
    );
}

#[test]
fn a_server_that_does_not_stream_is_a_protocol_error_not_a_broken_stream() {
    let fake = FakeProvider::with_script([Reply::json(
        200,
        json!({"id": "chatcmpl-1", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}),
    )]);
    let f = Fixture::new(&fake, ProviderKind::OpenaiCompatible, "", WIDE);
    let out = f.review(&[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("error[provider.protocol_error]"),
        "{stderr}"
    );
    assert!(
        stderr.contains("not an event stream (content-type application/json)"),
        "{stderr}"
    );
    assert_eq!(fake.scripted_requests().len(), 1, "not retried");
    assert_eq!(findings(&events(&out), "rule").len(), 1);
}
