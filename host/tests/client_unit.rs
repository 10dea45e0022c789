//! The client library's pure parts (`extension-bridge/client/index.js`): Markdown parsing and
//! its link and HTML refusals, GitLab note positions, the draft note body and its fingerprint
//! marker, review request ids — `extension-bridge/tests/client-unit.mjs` run with `node --test`.
//! The DOM parts (rendering, the three diff markups, selections) run in real browsers in
//! `browser_companion.rs`.
//!
//! Not skippable: without node the test fails and says to run `.ci/run`'s install steps.

mod common;

use std::process::Command;

#[test]
fn client_library_unit_tests_pass_under_node_test() {
    let bridge = common::extension_bridge();
    let out = Command::new("node")
        .args(["--test", "tests/client-unit.mjs"])
        .current_dir(&bridge)
        .output()
        .unwrap_or_else(|e| panic!("node does not run ({e}): run the install steps of .ci/run"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "node --test tests/client-unit.mjs failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let passed = stdout
        .lines()
        .find_map(|l| l.strip_prefix("# pass "))
        .and_then(|n| n.trim().parse::<u32>().ok())
        .unwrap_or_else(|| panic!("no `# pass N` line in\n{stdout}"));
    assert!(passed >= 9, "only {passed} tests ran:\n{stdout}");
    assert!(stdout.contains("# fail 0"), "{stdout}");
}
