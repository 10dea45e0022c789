//! External analyzers (`[[analyzers]]`, issue 16 part 4) through the real binary: ruff (from
//! `target/test-venv`, which `.ci/run` installs) run in the sandbox on a scratch checkout of
//! the head commit, its SARIF kept on added lines and deduplicated with the rules' findings;
//! and the ways one fails — a missing program, output that is not SARIF, a timeout, a hostile
//! SARIF log, a bad config entry — each a clear warning or error, never a lost review.

use std::path::PathBuf;

use review_agent_gateway::protocol::{EventPayload, FindingSource, Warning};

use crate::support::{Run, TestRepo};

/// The test venv's ruff, which must exist.
fn ruff() -> String {
    let ruff = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .join("target/test-venv/bin/ruff");
    assert!(
        ruff.is_file(),
        "{} is missing: run `bash .ci/run` once (it installs ruff into target/test-venv)",
        ruff.display()
    );
    ruff.display().to_string()
}

/// A TOML string literal of `text` (a JSON string is one).
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// Write `config` as the config file of `repo`'s isolated home and return its path.
fn config(repo: &TestRepo, config: &str) -> String {
    let path = repo.config_home().join("analyzers.toml");
    std::fs::write(&path, config).expect("write config");
    path.display().to_string()
}

/// `review --base main --head feature --format json --fail-on never --config <config>`.
fn review_json(repo: &TestRepo, config: &str) -> Run {
    review_json_with(repo, config, &[])
}

/// [`review_json`] with more arguments.
fn review_json_with(repo: &TestRepo, config: &str, extra: &[&str]) -> Run {
    repo.review(&json_args(config, extra))
}

/// `review`'s arguments for JSON events of main..feature with `config`, never failing on
/// findings, then `extra`.
fn json_args<'a>(config: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "--base",
        "main",
        "--head",
        "feature",
        "--format",
        "json",
        "--fail-on",
        "never",
        "--config",
        config,
    ];
    args.extend_from_slice(extra);
    args
}

fn warnings(run: &Run) -> Vec<Warning> {
    run.events()
        .into_iter()
        .filter_map(|e| match e.payload {
            EventPayload::Warning(w) => Some(w),
            _ => None,
        })
        .collect()
}

const BASE: &str = "\
import hashlib
import subprocess


def old_digest(data):
    return hashlib.md5(data).hexdigest()
";

const HEAD: &str = "\
import hashlib
import subprocess


def old_digest(data):
    return hashlib.md5(data).hexdigest()


def new_digest(data):
    return hashlib.sha1(data).hexdigest()


def run(cmd):
    return subprocess.call(cmd, shell=True)
";

/// A repository whose `feature` branch adds `app.py`'s second half.
fn repo() -> TestRepo {
    let (mut repo, _) = TestRepo::with_commit(&[("app.py", BASE)]);
    repo.git(&["checkout", "-q", "-b", "feature"]);
    repo.write("app.py", HEAD);
    repo.commit("head");
    repo
}

fn ruff_entry(extra: &str) -> String {
    format!(
        "[[analyzers]]\nname = \"ruff\"\ncommand = [{}, \"check\", \"--no-cache\", \"--exit-zero\", \
         \"--select\", \"S\", \"--output-format\", \"sarif\", \"{{files}}\"]\npaths = [\"*.py\"]\n{extra}",
        quoted(&ruff())
    )
}

#[test]
fn ruff_results_on_added_lines_become_findings_deduplicated_with_the_rules() {
    let repo = repo();
    let config = config(&repo, &ruff_entry(""));
    let run = review_json(&repo, &config);
    run.assert_code(0);
    let findings = run.findings();
    let from_ruff: Vec<_> = findings
        .iter()
        .filter(|f| f.source == FindingSource::Analyzer)
        .collect();
    // S324 (sha1) on the added line 10; the md5 on unchanged line 6 is not the range's.
    assert_eq!(from_ruff.len(), 1, "{}", run.describe());
    let sha1 = from_ruff[0];
    assert_eq!(sha1.analyzer.as_deref(), Some("ruff"));
    assert_eq!(sha1.rule_id.as_deref(), Some("S324"));
    assert_eq!((sha1.path.as_str(), sha1.start_line), ("app.py", 10));
    assert_eq!(sha1.category, "security");
    assert!(sha1.fingerprint.starts_with("sha256:"));
    assert_eq!(
        sha1.evidence[0].quote,
        "    return hashlib.sha1(data).hexdigest()"
    );
    assert!(
        sha1.content.contains("analyzer `ruff`, rule `S324`"),
        "{}",
        sha1.content
    );
    // S602 (shell=True) on line 14 is the built-in python.shell-injection's too: one finding.
    let on_14: Vec<_> = findings.iter().filter(|f| f.start_line == 14).collect();
    assert_eq!(on_14.len(), 1, "{}", run.describe());
    assert_eq!(on_14[0].source, FindingSource::Rule);
    let duplicate = warnings(&run)
        .into_iter()
        .find(|w| w.code == "finding.duplicate")
        .unwrap_or_else(|| panic!("no finding.duplicate warning\n{}", run.describe()));
    assert!(duplicate.message.contains("S602"), "{}", duplicate.message);
    // The analyzer's call is reported as a tool call.
    let events = run.events();
    let started = events.iter().find_map(|e| match &e.payload {
        EventPayload::ToolStarted(t) if t.tool == "analyzer" => Some(t.clone()),
        _ => None,
    });
    let started = started.unwrap_or_else(|| panic!("no tool.started\n{}", run.describe()));
    assert_eq!(started.input["analyzer"], "ruff");
    assert_eq!(started.input["files"], 1);
    let completed = events.iter().find_map(|e| match &e.payload {
        EventPayload::ToolCompleted(t) if t.call_id == started.call_id => Some(t.clone()),
        _ => None,
    });
    assert!(completed.expect("tool.completed").ok);

    // The same review twice gives the same fingerprints (stable across runs).
    let again = review_json(&repo, &config);
    let fingerprints = |run: &Run| {
        let mut f: Vec<String> = run.findings().into_iter().map(|f| f.fingerprint).collect();
        f.sort();
        f
    };
    assert_eq!(fingerprints(&run), fingerprints(&again));

    // --no-analyzers: the rules only.
    let rules_only = review_json_with(&repo, &config, &["--no-analyzers"]);
    assert!(
        rules_only
            .findings()
            .iter()
            .all(|f| f.source == FindingSource::Rule),
        "{}",
        rules_only.describe()
    );
}

#[test]
fn sarif_file_output_severity_override_and_reports_name_the_analyzer() {
    let repo = repo();
    let entry = format!(
        "[[analyzers]]\nname = \"ruff-file\"\ncommand = [{}, \"check\", \"--no-cache\", \
         \"--exit-zero\", \"--select\", \"S324\", \"--output-format\", \"sarif\", \
         \"--output-file\", \"{{sarif}}\", \"{{files}}\"]\nseverity = \"low\"\n\
         confidence = \"high\"\n",
        quoted(&ruff())
    );
    let config = config(&repo, &entry);
    let run = review_json(&repo, &config);
    run.assert_code(0);
    let found: Vec<_> = run
        .findings()
        .into_iter()
        .filter(|f| f.source == FindingSource::Analyzer)
        .collect();
    assert_eq!(found.len(), 1, "{}", run.describe());
    assert_eq!(
        found[0].severity,
        review_agent_gateway::protocol::Severity::Low
    );
    assert_eq!(
        found[0].confidence,
        review_agent_gateway::protocol::Confidence::High
    );

    // SARIF output names the analyzer's rule by analyzer; text says the source.
    let sarif = repo.review(&[
        "--base",
        "main",
        "--head",
        "feature",
        "--format",
        "sarif",
        "--fail-on",
        "never",
        "--config",
        &config,
    ]);
    let log = sarif.json();
    let ids: Vec<&str> = log["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter_map(|r| r["ruleId"].as_str())
        .collect();
    assert!(ids.contains(&"ruff-file/S324"), "{ids:?}");
    let text = repo.review(&[
        "--base",
        "main",
        "--head",
        "feature",
        "--fail-on",
        "never",
        "--color",
        "never",
        "--config",
        &config,
    ]);
    assert!(
        text.stdout.contains("source analyzer ruff-file"),
        "{}",
        text.describe()
    );

    // --fail-on low fails on the analyzer's finding, as on a rule's.
    repo.review(&[
        "--base",
        "main",
        "--head",
        "feature",
        "--fail-on",
        "low",
        "--config",
        &config,
    ])
    .assert_code(1);
}

#[test]
fn an_analyzer_without_files_for_it_does_not_run() {
    let repo = repo();
    let config = config(
        &repo,
        "[[analyzers]]\nname = \"js-only\"\ncommand = [\"/bin/false\", \"{files}\"]\n\
         paths = [\"*.js\"]\n",
    );
    let run = review_json(&repo, &config);
    run.assert_code(0);
    assert!(
        warnings(&run).iter().all(|w| w.code != "analyzer.failed"),
        "{}",
        run.describe()
    );
    let preview = run.events().into_iter().find_map(|e| match e.payload {
        EventPayload::ToolCompleted(t) => t.output_preview,
        _ => None,
    });
    assert!(
        preview.as_deref().is_some_and(|p| p.contains("not run")),
        "{preview:?}"
    );
}

#[test]
fn failures_are_warnings_and_the_review_completes() {
    let repo = repo();
    let cases: [(&str, &str, &str); 4] = [
        (
            "missing",
            "command = [\"no-such-analyzer-program\", \"{files}\"]",
            "is not an executable file in PATH",
        ),
        (
            "chatty",
            "command = [\"/bin/echo\", \"hello\", \"{files}\"]",
            "not SARIF",
        ),
        (
            "silent",
            "command = [\"/bin/true\"]",
            "wrote no SARIF on standard output",
        ),
        (
            "slow",
            "command = [\"/bin/sleep\", \"30\"]\ntimeout_seconds = 1",
            "longer than its limit of 1 seconds",
        ),
    ];
    let mut text = String::new();
    for (name, command, _) in cases {
        text.push_str(&format!("[[analyzers]]\nname = \"{name}\"\n{command}\n\n"));
    }
    let config = config(&repo, &text);
    let started = std::time::Instant::now();
    let run = review_json(&repo, &config);
    run.assert_code(0);
    // They ran side by side: the timeout bounds the whole stage (not a timed assertion of
    // speed: 30 s would mean the timeout did not work).
    assert!(started.elapsed() < std::time::Duration::from_secs(25));
    let failures: Vec<Warning> = warnings(&run)
        .into_iter()
        .filter(|w| w.code == "analyzer.failed")
        .collect();
    for (name, _, why) in cases {
        let warning = failures
            .iter()
            .find(|w| w.message.contains(&format!("`{name}`")))
            .unwrap_or_else(|| panic!("no analyzer.failed for {name}\n{}", run.describe()));
        assert!(warning.message.contains(why), "{name}: {}", warning.message);
        assert!(
            warning
                .remediation
                .as_deref()
                .is_some_and(|r| !r.is_empty()),
            "{warning:?}"
        );
    }
    // The rules' findings are there all the same.
    assert!(
        run.findings()
            .iter()
            .any(|f| f.rule_id.as_deref() == Some("python.shell-injection")),
        "{}",
        run.describe()
    );
    let completed = run.events().into_iter().filter_map(|e| match e.payload {
        EventPayload::ToolCompleted(t) => Some(t),
        _ => None,
    });
    let failed: Vec<_> = completed.filter(|t| !t.ok).collect();
    assert_eq!(failed.len(), 4);
    assert!(
        failed.iter().all(|t| t
            .error
            .as_ref()
            .is_some_and(|e| e.code == "analyzer.failed")),
        "{failed:?}"
    );
}

/// A SARIF log committed to the repository, printed by `sh -c 'cat …'`: results outside the
/// checkout, on unchanged lines, past the end of the file, without a region — only the one on
/// an added line of a reviewed file is kept. The sandbox keeps the checkout read-only: the
/// script can tell, and says so through which log it prints.
#[test]
fn a_hostile_sarif_log_and_a_read_only_checkout() {
    let result = |uri: &str, line: u64, rule: &str| {
        serde_json::json!({
            "ruleId": rule,
            "message": { "text": format!("{rule} says so") },
            "locations": [{ "physicalLocation": {
                "artifactLocation": { "uri": uri },
                "region": { "startLine": line }
            }}]
        })
    };
    let log = |rule: &str| {
        serde_json::json!({
            "version": "2.1.0",
            "runs": [{
                "tool": { "driver": { "name": "hostile" } },
                "results": [
                    result("../../../../etc/passwd", 1, "escape"),
                    result("file:///etc/passwd", 1, "absolute"),
                    result("app.py", 6, "unchanged-line"),
                    result("app.py", 0, "line-zero"),
                    result("app.py", 4_000_000_000, "past-the-end"),
                    result("missing.py", 3, "not-reviewed"),
                    { "ruleId": "no-region", "message": { "text": "x" },
                      "locations": [{ "physicalLocation": {
                          "artifactLocation": { "uri": "app.py" } } }] },
                    { "ruleId": 42, "message": 7 },
                    result("app.py", 10, rule),
                ]
            }]
        })
        .to_string()
    };
    let (mut repo, _) = TestRepo::with_commit(&[("app.py", BASE)]);
    repo.git(&["checkout", "-q", "-b", "feature"]);
    repo.write("app.py", HEAD);
    repo.write("denied.sarif", log("write-denied"));
    repo.write("wrote.sarif", log("write-allowed"));
    repo.commit("head");
    let config = config(
        &repo,
        "[[analyzers]]\nname = \"hostile\"\ncommand = [\"sh\", \"-c\", \"if echo x > probe \
         2>/dev/null; then cat wrote.sarif; else cat denied.sarif; fi\"]\n",
    );
    let run = review_json(&repo, &config);
    run.assert_code(0);
    let kept: Vec<_> = run
        .findings()
        .into_iter()
        .filter(|f| f.source == FindingSource::Analyzer)
        .map(|f| (f.rule_id.unwrap_or_default(), f.path, f.start_line))
        .collect();
    assert_eq!(
        kept,
        [("write-denied".to_owned(), "app.py".to_owned(), 10)],
        "{}",
        run.describe()
    );
}

#[test]
fn bad_entries_are_config_errors_naming_the_key() {
    let repo = repo();
    let cases = [
        (
            "name = \"bad name\"\ncommand = [\"ruff\"]",
            "analyzers[0].name",
        ),
        ("name = \"a\"\ncommand = []", "analyzers[0].command"),
        (
            "name = \"a\"\ncommand = [\"ruff\", \"--files={files}\"]",
            "analyzers[0].command[1]",
        ),
        (
            "name = \"a\"\ncommand = [\"ruff\"]\ntimeout_seconds = 0",
            "analyzers[0].timeout_seconds",
        ),
        (
            "name = \"a\"\ncommand = [\"ruff\"]\nwritable = [\"../up\"]",
            "analyzers[0].writable[0]",
        ),
        (
            "name = \"a\"\ncommand = [\"ruff\"]\nread = [\"relative\"]",
            "analyzers[0].read[0]",
        ),
        (
            "name = \"a\"\ncommand = [\"ruff\"]\nsevertiy = \"low\"",
            "severtiy",
        ),
    ];
    for (entry, key) in cases {
        let config = config(&repo, &format!("[[analyzers]]\n{entry}\n"));
        let run = repo.review(&["--base", "main", "--head", "feature", "--config", &config]);
        run.assert_code(2);
        assert!(run.stderr.contains("config.invalid"), "{}", run.describe());
        assert!(run.stderr.contains(key), "{key}: {}", run.describe());
    }
    let twice = config(
        &repo,
        "[[analyzers]]\nname = \"a\"\ncommand = [\"ruff\"]\n\n[[analyzers]]\nname = \"a\"\n\
         command = [\"ruff\"]\n",
    );
    let run = repo.review(&["--base", "main", "--head", "feature", "--config", &twice]);
    run.assert_code(2);
    assert!(
        run.stderr.contains("analyzers[1].name"),
        "{}",
        run.describe()
    );
    // A disabled entry does not run.
    let disabled = config(
        &repo,
        "[[analyzers]]\nname = \"off\"\ncommand = [\"/bin/false\"]\nenabled = false\n",
    );
    let run = review_json(&repo, &disabled);
    run.assert_code(0);
    assert!(
        run.events()
            .iter()
            .all(|e| !matches!(e.payload, EventPayload::ToolStarted(_))),
        "{}",
        run.describe()
    );
}

/// `workdir = "worktree"`: the analyzer runs in the work tree (where what it needs is
/// installed) and gets only the files whose work-tree copy is the head commit's.
#[test]
fn in_the_work_tree_only_files_as_at_the_head_commit() {
    let repo = repo();
    let config = config(&repo, &ruff_entry("workdir = \"worktree\"\n"));
    // The work tree is the head commit: ruff sees app.py.
    let run = review_json(&repo, &config);
    run.assert_code(0);
    let from_ruff = |run: &Run| {
        run.findings()
            .into_iter()
            .filter(|f| f.source == FindingSource::Analyzer)
            .map(|f| f.rule_id.unwrap_or_default())
            .collect::<Vec<_>>()
    };
    assert_eq!(from_ruff(&run), ["S324"], "{}", run.describe());
    // An uncommitted edit: the work tree's app.py is not the head's, so ruff does not get it.
    repo.write("app.py", format!("{HEAD}\n\nimport pickle\n"));
    let run = review_json(&repo, &config);
    run.assert_code(0);
    assert!(from_ruff(&run).is_empty(), "{}", run.describe());
    let warning = warnings(&run)
        .into_iter()
        .find(|w| w.code == "analyzer.files_differ")
        .unwrap_or_else(|| panic!("no analyzer.files_differ\n{}", run.describe()));
    assert!(warning.message.contains("`app.py`"), "{}", warning.message);
    // The rules still review the head commit.
    assert!(
        run.findings()
            .iter()
            .any(|f| f.rule_id.as_deref() == Some("python.shell-injection")),
        "{}",
        run.describe()
    );
}

/// `# review-agent: ignore S324` (an analyzer's upper-case id) suppresses its finding, without
/// a `rules.unknown_ignore_id` warning; an id neither a rule nor an analyzer knows still warns.
#[test]
fn an_ignore_comment_names_an_analyzer_rule() {
    let (mut repo, _) = TestRepo::with_commit(&[("app.py", BASE)]);
    repo.git(&["checkout", "-q", "-b", "feature"]);
    repo.write(
        "app.py",
        HEAD.replace(
            "    return hashlib.sha1(data).hexdigest()",
            "    return hashlib.sha1(data).hexdigest()  # review-agent: ignore ruff/S324\n    \
             x = 1  # review-agent: ignore S999",
        ),
    );
    repo.commit("head");
    let config = config(&repo, &ruff_entry(""));
    let run = review_json(&repo, &config);
    run.assert_code(0);
    assert!(
        run.findings()
            .iter()
            .all(|f| f.rule_id.as_deref() != Some("S324")),
        "{}",
        run.describe()
    );
    let unknown: Vec<String> = warnings(&run)
        .into_iter()
        .filter(|w| w.code == "rules.unknown_ignore_id")
        .map(|w| w.message)
        .collect();
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert!(unknown[0].contains("S999"), "{unknown:?}");

    // With an analyzer that failed, an unknown id may be one it would have reported: no
    // warning.
    let failing = config_text_with_failure(&repo);
    let run = review_json(&repo, &failing);
    run.assert_code(0);
    assert!(
        warnings(&run)
            .iter()
            .all(|w| w.code != "rules.unknown_ignore_id"),
        "{}",
        run.describe()
    );
    // An absolute program that is missing is not looked up in PATH, and the message says so.
    let failed = warnings(&run)
        .into_iter()
        .find(|w| w.code == "analyzer.failed")
        .unwrap_or_else(|| panic!("no analyzer.failed\n{}", run.describe()));
    assert!(
        failed
            .message
            .ends_with("`/opt/no-such/analyzer` is not an executable file"),
        "{}",
        failed.message
    );
}

/// A config with ruff and an analyzer whose absolute program is missing.
fn config_text_with_failure(repo: &TestRepo) -> String {
    config(
        repo,
        &format!(
            "{}\n[[analyzers]]\nname = \"gone\"\ncommand = [\"/opt/no-such/analyzer\"]\n",
            ruff_entry("")
        ),
    )
}

/// Two entries running the same tool report a rule once; a `required` analyzer that fails
/// fails the review after its findings are out (exit 2).
#[test]
fn one_report_per_rule_and_required_analyzers() {
    let repo = repo();
    let config_text = format!(
        "{}\n{}\n[[analyzers]]\nname = \"gone\"\ncommand = [\"no-such-analyzer\", \"{{files}}\"]\n\
         required = true\n",
        ruff_entry(""),
        ruff_entry("").replace("name = \"ruff\"", "name = \"ruff-again\"")
    );
    let config = config(&repo, &config_text);
    let run = review_json(&repo, &config);
    run.assert_code(2);
    let s324: Vec<_> = run
        .findings()
        .into_iter()
        .filter(|f| f.rule_id.as_deref() == Some("S324"))
        .collect();
    assert_eq!(s324.len(), 1, "{}", run.describe());
    assert_eq!(s324[0].analyzer.as_deref(), Some("ruff"));
    let last = run.events().pop().expect("events");
    match last.payload {
        EventPayload::RunFailed(failed) => {
            assert_eq!(failed.error.code, "analyzer.failed");
            assert!(failed.error.message.contains("`gone`"), "{failed:?}");
        }
        other => panic!("the run ended with {other:?}\n{}", run.describe()),
    }
}

/// `workdir = "worktree"` on a bare repository: a clear `analyzer.failed`, the review goes on.
#[test]
fn the_work_tree_mode_on_a_bare_repository() {
    let repo = repo();
    let clones = tempfile::tempdir().expect("temp dir");
    let bare = repo.bare_clone(clones.path());
    let config = config(&repo, &ruff_entry("workdir = \"worktree\"\n"));
    let run = repo.review_at(&bare, &json_args(&config, &[]));
    run.assert_code(0);
    let failed = warnings(&run)
        .into_iter()
        .find(|w| w.code == "analyzer.failed")
        .unwrap_or_else(|| panic!("no analyzer.failed\n{}", run.describe()));
    assert!(failed.message.contains("bare"), "{}", failed.message);
    assert!(failed.remediation.is_some());
}

/// More results on added lines than an analyzer may report: the first 1000 are kept and an
/// `analyzer.results_capped` warning says the rest are not shown.
#[test]
fn a_flood_of_results_is_capped() {
    let results: Vec<serde_json::Value> = (0..1_005)
        .map(|i| {
            serde_json::json!({
                "ruleId": format!("flood-{i}"),
                "message": { "text": "noise" },
                "locations": [{ "physicalLocation": {
                    "artifactLocation": { "uri": "app.py" },
                    "region": { "startLine": 10 }
                }}]
            })
        })
        .collect();
    let log = serde_json::json!({ "version": "2.1.0", "runs": [{
        "tool": { "driver": { "name": "flood" } }, "results": results }] });
    let (mut repo, _) = TestRepo::with_commit(&[("app.py", BASE)]);
    repo.git(&["checkout", "-q", "-b", "feature"]);
    repo.write("app.py", HEAD);
    repo.write("flood.sarif", log.to_string());
    repo.commit("head");
    let config = config(
        &repo,
        "[[analyzers]]\nname = \"flood\"\ncommand = [\"/bin/cat\", \"flood.sarif\"]\n",
    );
    let run = review_json(&repo, &config);
    run.assert_code(0);
    let kept = run
        .findings()
        .iter()
        .filter(|f| f.analyzer.as_deref() == Some("flood"))
        .count();
    assert_eq!(kept, 1000);
    assert!(
        warnings(&run)
            .iter()
            .any(|w| w.code == "analyzer.results_capped" && w.remediation.is_some()),
        "no analyzer.results_capped warning"
    );
}
