//! `.ci/with-total`, the end of `.ci/run` (issue 12 §5: the CI log ended on a doc-test
//! "0 passed" line instead of the suite's total). Run on captured `cargo test` output from a
//! stand-in command, not the whole suite.

use std::path::PathBuf;
use std::process::Command;

/// What `cargo test --workspace` prints, cut down: a library run, a failing test binary, and
/// the empty doc-test run that used to be the last line.
const SAMPLE: &str = "\
     Running unittests src/lib.rs (target/debug/deps/review_agent_gateway-1)

running 2 tests
test a ... ok
test b ... ok

test result: ok. 124 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 3.10s

     Running tests/e2e/main.rs (target/debug/deps/e2e-2)
test result: FAILED. 57 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 9.80s

   Doc-tests review_agent_gateway

running 0 tests

test result: ok. 0 passed; 0 failed; 3 ignored; 0 measured; 0 filtered out; finished in 0.00s

";

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.ci/with-total")
}

/// Run `.ci/with-total sh -c 'printf SAMPLE; exit <status>'`: (exit code, stdout).
fn run(status: i32) -> (Option<i32>, String) {
    let out = Command::new(script())
        .args([
            "sh",
            "-c",
            &format!("printf '%s' \"$SAMPLE\"; exit {status}"),
        ])
        .env("SAMPLE", SAMPLE)
        .output()
        .expect(".ci/with-total runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_last_line_is_the_suites_total_and_the_status_is_the_commands() {
    for status in [0, 101] {
        let (code, stdout) = run(status);
        assert_eq!(code, Some(status), "{stdout}");
        assert!(stdout.starts_with(SAMPLE), "the output is shown: {stdout}");
        let last = stdout.lines().last().unwrap_or_default();
        let time = last
            .strip_prefix("suite: 181 passed, 2 failed, 4 ignored in ")
            .unwrap_or_else(|| panic!("last line: {last:?}"));
        let (minutes, seconds) = time.split_once("m ").expect("Xm Ys");
        assert!(
            minutes.parse::<u32>().is_ok()
                && seconds
                    .strip_suffix('s')
                    .is_some_and(|s| s.parse::<u32>().is_ok()),
            "{last:?}"
        );
    }
}

#[test]
fn ci_run_ends_with_the_total() {
    let run = std::fs::read_to_string(script().with_file_name("run")).expect("read .ci/run");
    let last = run.lines().rev().find(|l| !l.trim().is_empty());
    assert_eq!(
        last,
        Some(".ci/with-total cargo test --workspace --locked --no-fail-fast")
    );
    assert!(run.contains("set -euo pipefail"));
}
