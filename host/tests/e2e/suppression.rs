//! Inline suppression: `review-agent: ignore <ruleId>` on the flagged line or alone on the line
//! above silences exactly that rule.

use crate::support::{TestRepo, found};

/// `(path, base, head, expected findings as (ruleId, line))`.
type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static [(&'static str, u32)],
);

const CASES: &[Case] = &[
    (
        "app/py.py",
        "",
        "a = eval(expr_a)  # review-agent: ignore python.eval-dynamic\n\
         # review-agent: ignore python.eval-dynamic\n\
         b = eval(expr_b)\n\
         c = eval(expr_c)  # review-agent: ignore python.sql-injection\n\
         # review-agent: ignore python.tls-verify-disabled\n\
         d = eval(expr_d)\n\
         e = eval(expr_e)\n\
         f = eval(expr_f)  # review-agent: ignore security-default/python.eval-dynamic -- vetted\n\
         g = eval(expr_g)  # review-agent: ignore python.eval-dynamic-extra\n\
         h = requests.get(url, verify=False)  # review-agent: ignore python.eval-dynamic, python.tls-verify-disabled\n",
        &[
            ("python.eval-dynamic", 4),
            ("python.eval-dynamic", 6),
            ("python.eval-dynamic", 7),
            ("python.eval-dynamic", 9),
        ],
    ),
    (
        "web/app.js",
        "",
        "const a = eval(userA); // review-agent: ignore javascript.code-injection\n\
         // review-agent: ignore javascript.code-injection\n\
         const b = eval(userB);\n\
         const c = eval(userC); // review-agent: ignore javascript.dom-xss\n\
         el.innerHTML = c; /* review-agent: ignore javascript.dom-xss */\n",
        &[("javascript.code-injection", 4)],
    ),
    // The directive line above was already in base (a context line): it still applies.
    (
        "app/kept.py",
        "# review-agent: ignore python.eval-dynamic\nx = 1\n",
        "# review-agent: ignore python.eval-dynamic\nx = eval(expr)\n",
        &[],
    ),
];

#[test]
fn same_line_and_line_above_suppress_only_the_named_rule() {
    let mut repo = TestRepo::new();
    repo.write("README.md", "fixture\n");
    for (path, base, _, _) in CASES {
        if !base.is_empty() {
            repo.write(path, base);
        }
    }
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    for (path, _, head, _) in CASES {
        repo.write(path, head);
    }
    repo.commit("head");

    let run = repo.review(&["--base", "main", "--head", "feature", "--format", "json"]);
    run.assert_code(1);
    let expected: Vec<(&str, &str, u32)> = CASES
        .iter()
        .flat_map(|(path, _, _, f)| f.iter().map(move |(rule, line)| (*rule, *path, *line)))
        .collect();
    assert_eq!(run.found(), found(&expected), "{}", run.describe());
}
