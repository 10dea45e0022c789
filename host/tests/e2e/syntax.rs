//! Syntax rules (`ast` + `flow`) through the real binary on a real repository: a match that
//! spans lines, a value built in a variable and used lines later, a constant that stays safe,
//! findings only where the range adds a line of the match or of its flow, and the evidence
//! citing the flow.

use crate::support::{Run, TestRepo};

const RULES: &str = r#"id = "team-syntax"
version = "1"

[[rules]]
id = "team.sql-built"
title = "SQL built from a non-constant string"
category = "security"
severity = "high"
confidence = "high"
languages = ["python"]
message = "The query is built at run time."
ast.rule.any = [{ pattern = "$CUR.execute($Q)" }, { pattern = "$CUR.execute($Q, $$$REST)" }]
flow.dynamic = ["Q"]

[rules.examples]
match = ["q = 'SELECT * FROM t WHERE id = ' + ident\ncur.execute(q)"]
no_match = ["q = 'SELECT * FROM t'\ncur.execute(q)"]

[[rules]]
id = "team.shell-true"
title = "Shell command"
category = "security"
severity = "high"
confidence = "medium"
languages = ["python"]
message = "shell=True runs the command through a shell."
ast.rule.pattern = "subprocess.$F($CMD, $$$A, shell=True, $$$B)"
flow.not_constant = ["CMD"]
"#;

const BASE: &str = "\
import subprocess


def lookup(cur, ident):
    query = 'SELECT name FROM users WHERE id = %s'
    cur.execute(query, (ident,))


def legacy(cur, name):
    cur.execute('SELECT 1')
";

const HEAD: &str = "\
import subprocess


def lookup(cur, ident):
    query = 'SELECT name FROM users WHERE id = %s'
    cur.execute(query, (ident,))


def legacy(cur, name):
    cur.execute('SELECT 1')


def search(cur, term):
    sql = \"SELECT * FROM items WHERE title LIKE '%\" + term + \"%'\"
    rows = cur.execute(sql)
    return rows


def fixed(cur):
    sql = 'SELECT * FROM items'
    cur.execute(sql)


def run(cmd):
    return subprocess.run(
        cmd,
        check=True,
        shell=True,
    )


def run_fixed():
    return subprocess.run(
        'ls -l',
        shell=True,
    )
";

/// Commits `base` then `head` of one file and reviews the change with [`RULES`] only.
fn review_change(path: &str, base: &str, head: &str) -> Run {
    let mut repo = TestRepo::new();
    repo.write(path, base);
    repo.commit("base");
    repo.git(&["branch", "base"]);
    repo.write(path, head);
    repo.commit("head");
    let rules = repo.path().join("rules");
    std::fs::create_dir_all(&rules).expect("rules dir");
    std::fs::write(rules.join("team.toml"), RULES).expect("write rules");
    repo.review(&[
        "--base",
        "base",
        "--head",
        "HEAD",
        "--format",
        "json",
        "--fail-on",
        "never",
        "--rules-dir",
        rules.to_str().expect("utf-8"),
        "--rules",
        "team-syntax",
    ])
}

#[test]
fn syntax_rules_follow_values_and_span_lines() {
    let run = review_change("app/db.py", BASE, HEAD);
    run.assert_code(0);
    let findings = run.findings();
    let got: Vec<(String, u32, u32)> = findings
        .iter()
        .map(|f| {
            (
                f.rule_id.clone().expect("rule id"),
                f.start_line,
                f.end_line,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("team.sql-built".to_owned(), 15, 15),
            ("team.shell-true".to_owned(), 25, 29),
        ],
        "{}",
        run.describe()
    );
    // The SQL finding cites the line that built the query.
    let sql = &findings[0];
    assert_eq!(sql.evidence.len(), 2, "{:?}", sql.evidence);
    assert_eq!(sql.evidence[0].quote, "    rows = cur.execute(sql)");
    assert_eq!(sql.evidence[1].start_line, 14);
    assert!(
        sql.evidence[1].quote.contains("LIKE '%\" + term"),
        "{:?}",
        sql.evidence
    );
    // The multi-line call is quoted whole.
    let shell = &findings[1];
    assert_eq!(shell.evidence[0].quote.lines().count(), 5);
    assert!(shell.evidence[0].quote.ends_with("    )"));
}

#[test]
fn an_added_flow_line_flags_an_unchanged_sink() {
    let before = "def f(cur, name):\n    q = 'SELECT 1'\n    cur.execute(q)\n";
    let after =
        "def f(cur, name):\n    q = f'SELECT * FROM t WHERE name = {name}'\n    cur.execute(q)\n";
    let run = review_change("app/q.py", before, after);
    let found: Vec<(String, u32)> = run
        .findings()
        .iter()
        .map(|f| (f.rule_id.clone().expect("rule id"), f.start_line))
        .collect();
    // The sink (line 3) is unchanged; the line that makes the query dynamic (2) is added.
    assert_eq!(
        found,
        vec![("team.sql-built".to_owned(), 2)],
        "{}",
        run.describe()
    );
}

/// A team's copy of a built-in syntax rule under another id (the fresh user's trial): one
/// finding per problem, the team's, and a `rules.duplicate_rule` warning naming both ids.
#[test]
fn a_copy_of_a_builtin_rule_reports_once_and_warns() {
    const COPY: &str = r#"id = "team-copy"
version = "1"

[[rules]]
id = "team.sql"
title = "SQL built from strings"
category = "security"
severity = "high"
confidence = "high"
languages = ["python"]
message = "Our words."
ast.rule.any = [
    { pattern = "$CUR.$M($Q)" },
    { pattern = "$CUR.$M($Q, $$$REST)" },
    { pattern = "text($Q)" },
]
ast.constraints.M = { regex = "^(execute|executemany|executescript|raw|mogrify|read_sql|read_sql_query)$" }
flow.dynamic = ["Q"]
"#;
    let mut repo = TestRepo::new();
    repo.write("app/db.py", BASE);
    repo.commit("base");
    repo.git(&["branch", "base"]);
    repo.write("app/db.py", HEAD);
    repo.commit("head");
    let rules = repo.path().join("rules");
    std::fs::create_dir_all(&rules).expect("rules dir");
    std::fs::write(rules.join("copy.toml"), COPY).expect("write rules");
    let run = repo.review(&[
        "--base",
        "base",
        "--format",
        "json",
        "--fail-on",
        "never",
        "--rules-dir",
        rules.to_str().expect("utf-8"),
    ]);
    run.assert_code(0);
    let sql: Vec<(String, u32)> = run
        .findings()
        .iter()
        .filter(|f| f.start_line == 15)
        .map(|f| (f.rule_id.clone().expect("rule id"), f.start_line))
        .collect();
    assert_eq!(sql, vec![("team.sql".to_owned(), 15)], "{}", run.describe());
    let warnings = run.warnings();
    let duplicate = warnings
        .iter()
        .find(|w| w.code == "rules.duplicate_rule")
        .unwrap_or_else(|| panic!("no duplicate warning: {}", run.describe()));
    assert!(
        duplicate
            .message
            .contains("`python.sql-injection` (builtin:")
            && duplicate.message.contains("`team.sql` (local:copy.toml:5)"),
        "{duplicate:?}"
    );
    assert!(duplicate.remediation.is_some());
}
