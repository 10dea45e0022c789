//! The diff starts at the merge base: what landed on the target branch after the merge request
//! forked is not reviewed.

use crate::support::{TestRepo, found};

#[test]
fn commits_on_the_target_branch_after_the_fork_are_not_reviewed() {
    let mut repo = TestRepo::new();
    repo.write_all(&[("app/a.py", "A = 1\n"), ("app/b.py", "B = 1\n")]);
    let fork = repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write("app/a.py", "A = 1\nfeature = eval(expr)\n");
    repo.commit("feature");
    repo.checkout(&["main"]);
    // main moves on: its own flagged lines, in another file and in the same file.
    repo.write("app/b.py", "B = 1\nmain_only = eval(expr)\n");
    repo.write("app/a.py", "main_too = eval(expr)\nA = 1\n");
    repo.commit("main moves on");
    assert_ne!(repo.rev_parse("main"), fork, "fixture sanity");

    let run = repo.review(&["--base", "main", "--head", "feature", "--format", "json"]);
    run.assert_code(1);
    assert_eq!(
        run.found(),
        found(&[("python.eval-dynamic", "app/a.py", 2)]),
        "{}",
        run.describe()
    );
    assert_eq!(run.reviewed(), ["app/a.py"], "{}", run.describe());
    let revisions = run
        .contexts()
        .into_iter()
        .find_map(|c| match c {
            review_agent_gateway::protocol::ContextItem::Revisions(r) => Some(r),
            _ => None,
        })
        .expect("revisions context");
    assert_eq!(revisions.base_sha, repo.merge_base("main", "feature"));
    assert_eq!(revisions.base_sha, fork);
    assert_eq!(revisions.head_sha, repo.rev_parse("feature"));
    assert_eq!(
        repo.shortstat(&fork, "feature"),
        (1, 1, 0),
        "fixture sanity: the merge request changes one line"
    );
}
