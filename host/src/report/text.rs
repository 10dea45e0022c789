//! Human-readable report for a terminal or a CI log.
//!
//! Layout: findings grouped by file (files in path order, findings by line), each with a
//! `path:line` location, severity, title, rule, category, confidence, source, the explanation,
//! every evidence quote and the suggested replacement, if any; then a summary with counts by
//! severity, files reviewed, files skipped with their reasons, warnings, the rule-set version and
//! how the run ended.
//!
//! All text that comes from events is sanitized before printing: control characters (ESC, CR,
//! ...) become `U+FFFD`, so a finding cannot move the cursor or recolour the terminal; one-line
//! fields also have their line breaks replaced by spaces.

use std::borrow::Cow;
use std::fmt::{self, Write as _};

use super::{Collected, Outcome, ReportInput, severity_name};
use crate::protocol::{ReviewFinding, Severity, Side};

/// Renders the report of `input` as text, ending with a newline.
///
/// With `color`, severities, paths and the outcome are highlighted with ANSI SGR escapes; without
/// it the output is plain text with no escape sequences at all. Decide `color` at the call site
/// (TTY, `NO_COLOR`, `--color`).
pub fn render(input: &ReportInput, color: bool) -> String {
    let collected = Collected::from_events(input.events);
    let mut out = String::new();
    write_report(&mut out, input, &collected, Painter { color })
        .expect("writing to a String cannot fail");
    out
}

fn write_report(out: &mut String, input: &ReportInput, c: &Collected, p: Painter) -> fmt::Result {
    if c.findings.is_empty() {
        writeln!(out, "{}", p.paint(Tone::Good, "No findings."))?;
        writeln!(out)?;
    }
    let mut rest = c.findings.as_slice();
    while let Some(first) = rest.first() {
        let n = rest.iter().take_while(|f| f.path == first.path).count();
        let (group, tail) = rest.split_at(n);
        rest = tail;
        writeln!(
            out,
            "{} ({})",
            p.paint(Tone::Heading, &clean_line(&first.path)),
            plural(group.len(), "finding", "findings")
        )?;
        for f in group {
            writeln!(out)?;
            write_finding(out, f, p)?;
        }
        writeln!(out)?;
    }
    write_summary(out, input, c, p)
}

fn write_finding(out: &mut String, f: &ReviewFinding, p: Painter) -> fmt::Result {
    let mut location = format!("{}:{}", clean_line(&f.path), f.start_line);
    if f.end_line != f.start_line {
        write!(location, "-{}", f.end_line)?;
    }
    if f.side == Side::Old {
        location.push_str(" (base side)");
    }
    writeln!(
        out,
        "  {}  {}  {}",
        p.paint(Tone::Path, &location),
        p.paint(
            Tone::Severity(f.severity),
            &severity_name(f.severity).to_uppercase()
        ),
        p.paint(Tone::Heading, &clean_line(&f.title)),
    )?;
    let rule = f.rule_id.as_deref().map(clean_line);
    let meta = format!(
        "rule {}, category {}, confidence {}, source {}",
        rule.as_deref().unwrap_or("(none)"),
        clean_line(&f.category),
        confidence_name(f),
        source_name(f),
    );
    writeln!(out, "    {}", p.paint(Tone::Dim, &meta))?;
    // Markdown emphasis is for rich clients; a terminal shows the words.
    for line in clean_block(&f.content).replace("**", "").lines() {
        if line.trim().is_empty() {
            writeln!(out)?;
        } else {
            writeln!(out, "    {line}")?;
        }
    }
    for e in &f.evidence {
        let mut at = format!("{}:{}", clean_line(&e.path), e.start_line);
        if e.end_line != e.start_line {
            write!(at, "-{}", e.end_line)?;
        }
        writeln!(out, "    {} {}", p.paint(Tone::Dim, "evidence"), at)?;
        for line in clean_block(&e.quote).lines() {
            writeln!(out, "      {} {line}", p.paint(Tone::Dim, "|"))?;
        }
    }
    if let Some(code) = &f.suggestion_code {
        writeln!(
            out,
            "    {}",
            p.paint(
                Tone::Dim,
                &format!(
                    "suggested replacement for {}:",
                    line_span(f.start_line, f.end_line)
                )
            )
        )?;
        let code = clean_block(code);
        if code.is_empty() {
            writeln!(out, "      {}", p.paint(Tone::Dim, "(delete the lines)"))?;
        }
        for line in code.lines() {
            writeln!(out, "      {} {line}", p.paint(Tone::Good, "+"))?;
        }
    }
    Ok(())
}

fn write_summary(out: &mut String, input: &ReportInput, c: &Collected, p: Painter) -> fmt::Result {
    const INDENT: &str = "             ";
    writeln!(out, "{}", p.paint(Tone::Heading, "Summary"))?;

    let counts: Vec<String> = c
        .severity_counts()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| p.paint(Tone::Severity(*s), &format!("{n} {}", severity_name(*s))))
        .collect();
    if counts.is_empty() {
        writeln!(out, "  findings   0")?;
    } else {
        writeln!(
            out,
            "  findings   {}: {}",
            c.findings.len(),
            counts.join(", ")
        )?;
    }

    let completed = c.completed;
    // A review that failed after its rules ran (a model provider that broke) says what the
    // rules reviewed in its run.failed.
    let failed = c.failed.filter(|_| matches!(c.outcome, Outcome::Failed(_)));
    let reviewed = match c.outcome {
        Outcome::Failed(_) => failed.and_then(|f| f.reviewed_files.as_ref()),
        _ => completed.and_then(|c| c.reviewed_files.as_ref()),
    };
    match (reviewed, &c.outcome) {
        (Some(files), Outcome::Failed(_)) => writeln!(
            out,
            "  reviewed   {} by the rules before the run failed",
            plural(files.len(), "file", "files")
        )?,
        (Some(files), _) => writeln!(out, "  reviewed   {}", plural(files.len(), "file", "files"))?,
        (None, Outcome::Failed(_)) => writeln!(
            out,
            "  reviewed   no file: the run failed before its rules ran"
        )?,
        (None, Outcome::Cancelled(_)) => {
            writeln!(out, "  reviewed   not reported: the run was cancelled")?
        }
        (None, Outcome::Interrupted(_)) => {
            writeln!(out, "  reviewed   not reported: the run was interrupted")?
        }
        (None, Outcome::Incomplete) => writeln!(
            out,
            "  reviewed   not reported: the events end before the run finished"
        )?,
        (None, Outcome::Completed) => writeln!(out, "  reviewed   not reported")?,
    }

    let skipped = match c.outcome {
        Outcome::Failed(_) => failed.and_then(|f| f.skipped_files.as_deref()),
        _ => completed.and_then(|c| c.skipped_files.as_deref()),
    }
    .unwrap_or_default();
    // Counts per reason, then the files worth a look: deletions and out-of-scope files are
    // expected and only counted; the rest is listed up to a limit (json lists everything).
    let mut by_reason: Vec<(&str, usize)> = Vec::new();
    for s in skipped {
        match by_reason.iter_mut().find(|(r, _)| *r == s.reason) {
            Some((_, n)) => *n += 1,
            None => by_reason.push((&s.reason, 1)),
        }
    }
    let reasons: Vec<String> = by_reason
        .iter()
        .map(|(r, n)| format!("{n} {}", clean_line(r)))
        .collect();
    write!(
        out,
        "  skipped    {}",
        plural(skipped.len(), "file", "files")
    )?;
    if reasons.is_empty() {
        writeln!(out)?;
    } else {
        writeln!(out, ": {}", reasons.join(", "))?;
    }
    const MAX_LISTED: usize = 20;
    let notable: Vec<_> = skipped
        .iter()
        .filter(|s| s.reason != "deleted" && s.reason != "out_of_scope")
        .collect();
    for s in notable.iter().take(MAX_LISTED) {
        write!(
            out,
            "{INDENT}{}: {}",
            clean_line(&s.path),
            clean_line(&s.reason)
        )?;
        if let Some(detail) = &s.detail {
            write!(out, " ({})", clean_line(detail))?;
        }
        writeln!(out)?;
    }
    if notable.len() > MAX_LISTED {
        writeln!(
            out,
            "{INDENT}... and {} more (--format json lists every file)",
            notable.len() - MAX_LISTED
        )?;
    }

    // A warning about a file already listed as skipped would say the same thing twice.
    let is_listed_skip = |w: &crate::protocol::Warning| {
        w.code.ends_with("_skipped")
            && w.path
                .as_deref()
                .is_some_and(|p| skipped.iter().any(|s| s.path == p))
    };
    let repeated = c.warnings.iter().filter(|w| is_listed_skip(w)).count();
    write!(out, "  warnings   {}", c.warnings.len())?;
    if repeated > 0 {
        write!(out, " ({repeated} about the skipped files above)")?;
    }
    writeln!(out)?;
    for w in c.warnings.iter().filter(|w| !is_listed_skip(w)) {
        write!(
            out,
            "{INDENT}{}: {}",
            p.paint(Tone::Warning, &clean_line(&w.code)),
            clean_line(&w.message)
        )?;
        if let Some(path) = w.path.as_deref().filter(|p| !w.message.contains(p)) {
            write!(out, " ({})", clean_line(path))?;
        }
        writeln!(out)?;
        if let Some(r) = &w.remediation {
            writeln!(out, "{INDENT}  {}", clean_line(r))?;
        }
    }

    if let Some(v) = c.rule_set_version(input.events) {
        writeln!(out, "  rule sets  {}", clean_line(v))?;
    }
    // The external analyzers (`tool: "analyzer"` calls), each with what it did.
    for (i, (name, outcome)) in analyzer_lines(input.events).iter().enumerate() {
        let label = if i == 0 { "  analyzers  " } else { INDENT };
        writeln!(out, "{label}{}: {}", clean_line(name), clean_line(outcome))?;
    }
    if let Some(r) = c.revisions {
        writeln!(
            out,
            "  revisions  {}..{}",
            revision(&r.base_sha, r.base_ref.as_deref()),
            revision(&r.head_sha, r.head_ref.as_deref())
        )?;
    }

    match c.outcome {
        Outcome::Completed => {
            let mut s = String::from("completed");
            if let Some(ms) = completed.and_then(|c| c.duration_ms) {
                if ms < 1000 {
                    write!(s, " in {ms} ms")?;
                } else {
                    write!(s, " in {}.{} s", ms / 1000, (ms % 1000) / 100)?;
                }
            }
            if completed.and_then(|c| c.from_cache) == Some(true) {
                s.push_str(" (from cache)");
            }
            writeln!(out, "  result     {}", p.paint(Tone::Good, &s))?;
        }
        Outcome::Failed(e) => {
            writeln!(
                out,
                "  result     {} {}: {}",
                p.paint(Tone::Bad, "FAILED"),
                clean_line(&e.code),
                clean_line(&e.message)
            )?;
            if !e.remediation.is_empty() {
                writeln!(out, "{INDENT}{}", clean_line(&e.remediation))?;
            }
        }
        Outcome::Cancelled(reason) => {
            let reason = reason.map(|r| format!(" ({})", clean_line(r)));
            writeln!(
                out,
                "  result     {}{}",
                p.paint(Tone::Bad, "cancelled"),
                reason.unwrap_or_default()
            )?;
        }
        Outcome::Interrupted(reason) => writeln!(
            out,
            "  result     {} ({}): the gateway stopped before the run finished; resume it",
            p.paint(Tone::Bad, "interrupted"),
            super::interrupt_reason(reason)
        )?,
        Outcome::Incomplete => writeln!(
            out,
            "  result     {}",
            p.paint(
                Tone::Bad,
                "incomplete: the events end before the run finished"
            )
        )?,
    }
    Ok(())
}

// === Helpers ===

/// `line 12` or `lines 44-47`.
fn line_span(start: u32, end: u32) -> String {
    if start == end {
        format!("line {start}")
    } else {
        format!("lines {start}-{end}")
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn confidence_name(f: &ReviewFinding) -> &'static str {
    use crate::protocol::Confidence;
    match f.confidence {
        Confidence::High => "high",
        Confidence::Medium => "medium",
        Confidence::Low => "low",
    }
}

/// `(analyzer name, what it did)` of each `tool.started` of tool `analyzer`, in order: the
/// preview of its `tool.completed` and its duration, or that it failed.
fn analyzer_lines(events: &[crate::protocol::AgentEvent]) -> Vec<(String, String)> {
    use crate::protocol::EventPayload;
    let mut lines = Vec::new();
    for event in events {
        let EventPayload::ToolStarted(started) = &event.payload else {
            continue;
        };
        if started.tool != crate::review::analyzers::TOOL_NAME {
            continue;
        }
        let name = started.input["analyzer"].as_str().unwrap_or("?").to_owned();
        let completed = events.iter().find_map(|e| match &e.payload {
            EventPayload::ToolCompleted(c) if c.call_id == started.call_id => Some(c),
            _ => None,
        });
        let outcome = match completed {
            None => "did not finish".to_owned(),
            Some(c) if c.ok => {
                let mut text = c.output_preview.clone().unwrap_or_default();
                if let Some(ms) = c.duration_ms {
                    text.push_str(&format!(", {:.1} s", ms as f64 / 1000.0));
                }
                text
            }
            Some(c) => format!(
                "failed ({}; see its warning)",
                c.error.as_ref().map_or("?", |e| e.code.as_str())
            ),
        };
        lines.push((name, outcome));
    }
    lines
}

fn source_name(f: &ReviewFinding) -> String {
    use crate::protocol::FindingSource;
    match (f.source, &f.analyzer) {
        (FindingSource::Rule, _) => "rule".to_owned(),
        (FindingSource::Model, _) => "model".to_owned(),
        (FindingSource::Analyzer, Some(name)) => format!("analyzer {}", clean_line(name)),
        (FindingSource::Analyzer, None) => "analyzer".to_owned(),
    }
}

/// `abcdef1 (main)`: a short SHA and the name the user gave, if any.
fn revision(sha: &str, name: Option<&str>) -> String {
    let short: String = clean_line(sha).chars().take(7).collect();
    match name {
        Some(n) => format!("{short} ({})", clean_line(n)),
        None => short,
    }
}

/// `s` for a one-line slot: control characters become U+FFFD, line breaks and tabs spaces.
fn clean_line(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| match c {
                '\n' | '\t' => ' ',
                c if c.is_control() => char::REPLACEMENT_CHARACTER,
                c => c,
            })
            .collect(),
    )
}

/// `s` for a multi-line block: control characters other than `\n` and `\t` become U+FFFD
/// (`\r` of CRLF line ends is dropped).
fn clean_block(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Cow::Borrowed(s);
    }
    let s = s.replace("\r\n", "\n");
    Cow::Owned(
        s.chars()
            .map(|c| match c {
                '\n' | '\t' => c,
                c if c.is_control() => char::REPLACEMENT_CHARACTER,
                c => c,
            })
            .collect(),
    )
}

/// What a piece of text means; mapped to one ANSI style in [`Painter::paint`].
#[derive(Clone, Copy)]
enum Tone {
    Heading,
    Path,
    Dim,
    Good,
    Bad,
    Warning,
    Severity(Severity),
}

/// The one place ANSI escapes are produced. With `color: false` it returns the text unchanged.
#[derive(Clone, Copy)]
struct Painter {
    color: bool,
}

impl Painter {
    fn paint(self, tone: Tone, text: &str) -> String {
        if !self.color {
            return text.to_owned();
        }
        let sgr = match tone {
            Tone::Heading => "1",
            Tone::Path => "1;4",
            Tone::Dim => "2",
            Tone::Good => "32",
            Tone::Bad => "1;31",
            Tone::Warning => "33",
            Tone::Severity(Severity::Critical) => "1;35",
            Tone::Severity(Severity::High) => "1;31",
            Tone::Severity(Severity::Medium) => "33",
            Tone::Severity(Severity::Low) => "36",
            Tone::Severity(Severity::Info) => "34",
        };
        format!("\x1b[{sgr}m{text}\x1b[0m")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    fn check(events: &[crate::protocol::AgentEvent], expect: &str) {
        let input = ReportInput::new(events, "review-agent-gateway", "0.1.0");
        let actual = render(&input, false);
        assert_eq!(actual, expect, "actual output:\n{actual}");
    }

    #[test]
    fn review_with_findings() {
        check(
            &fixture::review_events(),
            r#"src/checkout.ts (2 findings)

  src/checkout.ts:12  CRITICAL  Hard-coded payment API key
    rule security-default/hardcoded-secret, category security, confidence high, source rule
    A live secret key is committed to the repository.
    evidence src/checkout.ts:12
      | const KEY = "sk_live_abc"
    suggested replacement for line 12:
      + const KEY = process.env.PAYMENT_KEY

  src/checkout.ts:44-47  HIGH  Inventory can be oversold during checkout
    rule checkout.inventory-atomicity, category bug, confidence high, source model
    The inventory update is not atomic with request creation.
    Two concurrent checkouts can both pass the stock check.
    evidence src/checkout.ts:44-47
      | const ok = await stock.check(order.items)
      | if (ok) {
      |   await createRequest(order)
      |   await checkoutInventory(order.items)
    evidence src/inventory.ts:18-24
      | export async function checkoutInventory(items) {
    suggested replacement for lines 44-47:
      + await db.transaction(async (tx) => {
      +   await createRequest(order, tx)
      +   await inventory.reserve(order.items, tx)
      + })

src/inventory.ts (1 finding)

  src/inventory.ts:18-24  MEDIUM  Inventory is loaded item by item
    rule (none), category performance, confidence medium, source model
    Each item issues one query; load them in one batch.
    evidence src/inventory.ts:18-24
      | quoted();

src/old.ts (1 finding)

  src/old.ts:3-5 (base side)  LOW  Removed retry loop was the only back-off
    rule (none), category bug, confidence medium, source model
    Explanation.
    evidence src/old.ts:3-5
      | quoted();
    suggested replacement for lines 3-5:
      + retry()

Summary
  findings   4: 1 critical, 1 high, 1 medium, 1 low
  reviewed   4 files
  skipped    2 files: 1 binary, 1 too_large
             assets/logo.png: binary
             vendor/big.min.js: too_large (2.3 MiB > 1 MiB limit)
  warnings   1
             budget.exhausted: Tool call budget of 30 reached; the model stopped early.
               Raise policy.maxToolCalls.
  rule sets  rs-2025.01.31-4f2a
  revisions  aaaaaaa (main)..bbbbbbb (feature/checkout)
  result     completed in 12.3 s
"#,
        );
    }

    #[test]
    fn empty_review() {
        check(
            &fixture::empty_events(),
            "No findings.

Summary
  findings   0
  reviewed   1 file
  skipped    0 files
  warnings   0
  result     completed
",
        );
    }

    #[test]
    fn failed_review() {
        check(
            &fixture::failed_events(),
            "No findings.

Summary
  findings   0
  reviewed   no file: the run failed before its rules ran
  skipped    0 files
  warnings   0
  result     FAILED repository.revision_missing: Commit bbbbbbb is not in the local repository.
             Run `git fetch` in the repository.
",
        );
    }

    #[test]
    fn color_only_when_asked() {
        let events = fixture::review_events();
        let input = ReportInput::new(&events, "t", "1");
        assert!(!render(&input, false).contains('\x1b'));
        let colored = render(&input, true);
        assert!(colored.contains("\x1b[1;35mCRITICAL\x1b[0m"), "{colored}");
        assert!(colored.contains("\x1b[1;31mHIGH\x1b[0m"));
    }

    #[test]
    fn control_characters_from_events_are_neutralized() {
        let mut f = fixture::finding("a.rs", 1, 1, Severity::Info);
        f.title = "evil\x1b[2J title\nsecond".into();
        f.content = "line\x1b]0;pwned\x07\r\nnext".into();
        let events = vec![crate::protocol::AgentEvent::new(
            "r",
            1,
            "2025-01-31T12:00:00Z",
            crate::protocol::FindingCreated { finding: f },
        )];
        let out = render(&ReportInput::new(&events, "t", "1"), false);
        assert!(!out.contains('\x1b') && !out.contains('\x07') && !out.contains('\r'));
        assert!(out.contains("evil\u{FFFD}[2J title second"), "{out}");
        assert!(
            out.contains("    line\u{FFFD}]0;pwned\u{FFFD}\n    next\n"),
            "{out}"
        );
    }

    #[test]
    fn long_skip_lists_are_counted_and_cut() {
        use crate::protocol::{RunCompleted, RunCreated, SkippedFile, Warning};
        let mut payloads: Vec<crate::protocol::EventPayload> = vec![RunCreated::default().into()];
        let mut skipped = Vec::new();
        for i in 0..25 {
            let path = format!("img/{i:02}.png");
            payloads.push(
                Warning {
                    code: "diff.binary_skipped".into(),
                    message: format!("{path} was not reviewed: NUL byte"),
                    path: Some(path.clone()),
                    remediation: None,
                }
                .into(),
            );
            skipped.push(SkippedFile {
                path,
                reason: "binary".into(),
                detail: None,
            });
        }
        for i in 0..3 {
            let path = format!("old/{i}.py");
            skipped.push(SkippedFile {
                path,
                reason: "deleted".into(),
                detail: None,
            });
        }
        payloads.push(
            RunCompleted {
                finding_count: Some(0),
                reviewed_files: Some(vec![]),
                skipped_files: Some(skipped),
                ..RunCompleted::default()
            }
            .into(),
        );
        let events = fixture::events(payloads);
        let out = render(&ReportInput::new(&events, "t", "0"), false);
        assert!(
            out.contains("  skipped    28 files: 25 binary, 3 deleted\n"),
            "{out}"
        );
        assert!(out.contains("img/19.png: binary\n"), "{out}");
        assert!(!out.contains("img/20.png"), "{out}");
        assert!(!out.contains("old/0.py"), "{out}");
        assert!(
            out.contains("... and 5 more (--format json lists every file)\n"),
            "{out}"
        );
        assert!(
            out.contains("  warnings   25 (25 about the skipped files above)\n"),
            "{out}"
        );
        assert!(!out.contains("NUL byte"), "{out}");
    }
}
