//! The shape of the `--format json` AgentEvent stream (DESIGN §5, §8): envelope, stage order,
//! context items that agree with git, and the terminal `run.completed`.

use review_agent_gateway::protocol::{ContextItem, EventPayload, RunKind, Stage};
use review_agent_gateway::rules::Catalog;

use crate::support::TestRepo;

/// Base on `main`, head on `feature` with every kind of text change: an edit with a flagged
/// line, a deletion, a rename with one edited line, a new file and a mode change.
fn fixture() -> TestRepo {
    let guide: String = (1..=20).map(|i| format!("Guide line {i}.\n")).collect();
    let mut repo = TestRepo::new();
    repo.write_all(&[
        (
            "src/app.py",
            "import os\n\n\ndef main():\n    print(os.getcwd())\n    return 0\n",
        ),
        ("src/old.py", "OLD = 1\nOLDER = 2\nOLDEST = 3\n"),
        ("docs/guide.md", &guide),
        ("run.sh", "#!/bin/sh\necho hi\n"),
    ]);
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write(
        "src/app.py",
        "import os\n\n\ndef main(expr):\n    value = eval(expr)\n    return value\n",
    );
    repo.remove("src/old.py");
    repo.remove("docs/guide.md");
    repo.write(
        "docs/manual.md",
        guide.replace("Guide line 7.", "Manual line 7."),
    );
    repo.write("src/new.py", "A = 1\nB = 2\nC = 3\n");
    repo.make_executable("run.sh");
    repo.commit("head");
    repo
}

#[test]
fn stream_shape_and_context_agree_with_git() {
    let repo = fixture();
    let run = repo.review(&["--base", "main", "--head", "feature", "--format", "json"]);
    run.assert_code(1);
    let events = run.events();
    assert!(events.len() >= 10, "{}", run.describe());

    // Envelope: one run id, seq gap-free from 1, RFC 3339 UTC timestamps that never go back.
    let run_id = &events[0].run_id;
    assert!(run_id.starts_with("run_") && run_id.len() > 4, "{run_id}");
    let mut last_at = None;
    for (i, e) in events.iter().enumerate() {
        assert_eq!(&e.run_id, run_id, "event {i}");
        assert_eq!(e.seq, i as u64 + 1, "event {i} ({})", e.event_type());
        let at = time::OffsetDateTime::parse(&e.at, &time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|err| panic!("event {i}: `at` {} is not RFC 3339: {err}", e.at));
        assert_eq!(at.offset(), time::UtcOffset::UTC, "event {i}: {}", e.at);
        assert!(
            last_at.is_none_or(|last| last <= at),
            "event {i}: time went back"
        );
        last_at = Some(at);
    }

    // First run.created, last run.completed, nothing terminal in between.
    match &events[0].payload {
        EventPayload::RunCreated(c) => assert_eq!(c.kind, Some(RunKind::Review)),
        other => panic!("first event is {}", other.event_type()),
    }
    let last = events.last().expect("events");
    assert_eq!(last.event_type(), "run.completed", "{}", run.describe());
    assert_eq!(
        events.iter().filter(|e| e.payload.is_terminal()).count(),
        1,
        "{}",
        run.describe()
    );

    // Stages in pipeline order, each once; findings inside validate; contexts where they belong.
    let position = |pred: &dyn Fn(&EventPayload) -> bool| -> Vec<usize> {
        events
            .iter()
            .enumerate()
            .filter(|(_, e)| pred(&e.payload))
            .map(|(i, _)| i)
            .collect()
    };
    let stages: Vec<Stage> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::StageChanged(s) => Some(s.stage),
            _ => None,
        })
        .collect();
    assert_eq!(
        stages,
        [
            Stage::Resolve,
            Stage::Diff,
            Stage::Rules,
            Stage::Validate,
            Stage::Done
        ]
    );
    let stage_at = |stage: Stage| {
        position(&|p| matches!(p, EventPayload::StageChanged(s) if s.stage == stage))[0]
    };
    let findings = position(&|p| matches!(p, EventPayload::FindingCreated(_)));
    assert_eq!(findings.len(), 1, "{}", run.describe());
    assert!(
        findings
            .iter()
            .all(|&i| i > stage_at(Stage::Validate) && i < stage_at(Stage::Done))
    );
    assert_eq!(stage_at(Stage::Done), events.len() - 2);

    let contexts = run.contexts();
    assert_eq!(contexts.len(), 3, "{}", run.describe());
    let revisions_at = position(
        &|p| matches!(p, EventPayload::ContextAdded(c) if matches!(c.context, ContextItem::Revisions(_))),
    )[0];
    let diff_at = position(
        &|p| matches!(p, EventPayload::ContextAdded(c) if matches!(c.context, ContextItem::Diff(_))),
    )[0];
    assert!(revisions_at > stage_at(Stage::Resolve) && revisions_at < stage_at(Stage::Diff));
    assert!(diff_at > stage_at(Stage::Diff) && diff_at < stage_at(Stage::Rules));

    // Revisions: the commits git resolves (main has not moved, so it is the merge base).
    let ContextItem::Revisions(revisions) = &contexts[0] else {
        panic!("first context is not revisions: {contexts:?}")
    };
    assert_eq!(revisions.base_sha, repo.rev_parse("main"));
    assert_eq!(revisions.head_sha, repo.rev_parse("feature"));
    assert_eq!(revisions.base_ref.as_deref(), Some("main"));
    assert_eq!(revisions.head_ref.as_deref(), Some("feature"));

    // Rule sets: the built-in set and all its rules.
    let ContextItem::RuleSets(rule_sets) = &contexts[1] else {
        panic!("second context is not ruleSets: {contexts:?}")
    };
    let builtin = Catalog::builtin();
    let builtin = &builtin.sets()[0];
    assert_eq!(rule_sets.rule_set_version, "security-default@1.0.0");
    assert_eq!(rule_sets.rule_sets.len(), 1);
    assert_eq!(rule_sets.rule_sets[0].id, "security-default");
    assert_eq!(rule_sets.rule_sets[0].version, "1.0.0");
    assert_eq!(rule_sets.rule_sets[0].origin, "builtin");
    assert_eq!(rule_sets.rule_sets[0].rules as usize, builtin.rules.len());

    // Diff size: what `git diff --shortstat -M` says (5 files, renames detected).
    let ContextItem::Diff(diff) = &contexts[2] else {
        panic!("third context is not diff: {contexts:?}")
    };
    let (files, additions, deletions) = repo.shortstat("main", "feature");
    assert_eq!(files, 5, "fixture sanity");
    assert_eq!(
        (diff.files, diff.additions, diff.deletions),
        (files, additions, deletions),
        "diff context vs git diff --shortstat"
    );

    // run.completed: counts and file lists.
    let completed = run.completed();
    assert_eq!(completed.finding_count, Some(1));
    assert_eq!(
        completed.rule_set_version.as_deref(),
        Some("security-default@1.0.0")
    );
    assert!(completed.duration_ms.is_some());
    assert_eq!(
        completed.reviewed_files,
        Some(vec![
            "docs/manual.md".to_owned(),
            "run.sh".to_owned(),
            "src/app.py".to_owned(),
            "src/new.py".to_owned(),
        ])
    );
    assert_eq!(
        run.skipped(),
        [("src/old.py".to_owned(), "deleted".to_owned())]
    );
    assert_eq!(
        run.found(),
        crate::support::found(&[("python.eval-dynamic", "src/app.py", 5)])
    );
}

#[test]
fn a_request_without_findings_still_ends_with_run_completed() {
    let repo = fixture();
    let run = repo.review(&[
        "--base", "main", "--head", "feature", "--format", "json", "--paths", "docs/**",
    ]);
    run.assert_code(0);
    let events = run.events();
    assert_eq!(events[0].event_type(), "run.created");
    assert_eq!(events.last().map(|e| e.event_type()), Some("run.completed"));
    let completed = run.completed();
    assert_eq!(completed.finding_count, Some(0));
    assert_eq!(
        completed.reviewed_files,
        Some(vec!["docs/manual.md".to_owned()])
    );
}

// Regression: `RevisionsContext::base_ref`/`head_ref` are documented (src/protocol/event.rs) as "the
// base/head as the user named it (branch, tag, `HEAD~2`), when not a SHA", but a review given
// full SHAs reports the SHAs again as `baseRef`/`headRef` (src/review.rs passes `spec` through
// unconditionally); the pipeline now leaves them out.
#[test]
fn refs_are_left_out_when_revisions_are_given_as_shas() {
    let repo = fixture();
    let (base, head) = (repo.rev_parse("main"), repo.rev_parse("feature"));
    let run = repo.review(&["--base", &base, "--head", &head, "--format", "json"]);
    let revisions = run
        .contexts()
        .into_iter()
        .find_map(|c| match c {
            ContextItem::Revisions(r) => Some(r),
            _ => None,
        })
        .expect("revisions context");
    assert_eq!(
        (revisions.base_sha.as_str(), revisions.head_sha.as_str()),
        (base.as_str(), head.as_str())
    );
    assert_eq!(
        (revisions.base_ref, revisions.head_ref),
        (None, None),
        "{}",
        run.describe()
    );
}

// Regression: the `diff` context disagreed with `git diff --shortstat` on a file with repeated lines:
// base `    pass` ×2, head `def f():` / `    {` / `    pass` / `    {` / `    {`. git counts
// 4 insertions and 1 deletion (it keeps one `    pass`); we reported 5 additions and 2
// deletions, because imara-diff 0.2's Myers found no common line.
// Library-level repro: repo_diff.rs `line_diff_is_as_small_as_gits`.
#[test]
fn diff_context_counts_like_git_with_repeated_lines() {
    let mut repo = TestRepo::new();
    repo.write("app/rep.py", "    pass\n    pass\n");
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write("app/rep.py", "def f():\n    {\n    pass\n    {\n    {\n");
    repo.commit("head");
    assert_eq!(
        repo.shortstat("main", "feature"),
        (1, 4, 1),
        "fixture sanity"
    );

    let run = repo.review(&["--base", "main", "--head", "feature", "--format", "json"]);
    run.assert_code(0);
    let diff = run
        .contexts()
        .into_iter()
        .find_map(|c| match c {
            ContextItem::Diff(d) => Some((d.files, d.additions, d.deletions)),
            _ => None,
        })
        .expect("diff context");
    assert_eq!(diff, (1, 4, 1), "diff context vs git diff --shortstat");
}
