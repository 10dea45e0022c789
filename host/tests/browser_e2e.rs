//! The browser end-to-end test of issue 6: `extension-bridge/tests/e2e.mjs` run by node with
//! this build's binary and a temporary home. It drives Debian's headless Chromium (through
//! `playwright-core`) with the companion extension loaded unpacked and the native host
//! registered by `review-agent-gateway install`, and checks (each step prints a line asserted
//! here): the options page of a profile without the host (the exact `install` command) and the
//! WebSocket fallback there; a review followed over the WebSocket across a daemon `kill -9` and
//! restart; the userscript's findings under their lines on GitLab's classic and Vue diff
//! markup through extension → native host → daemon; the options page's status and a GitLab
//! origin added and removed there; the WebSocket and SSE fallbacks; a tool answer over 1 MiB
//! arriving intact as chunk frames; and the native host killed mid-session (open request fails
//! retryably, the review stream is followed again, a new host answers). Screenshots go to
//! `target/browser-e2e/`.
//!
//! Not skippable: without `/usr/bin/chromium`, node or `extension-bridge/node_modules` the test
//! fails and says to run `.ci/run`'s install steps.

mod common;

use std::path::Path;

#[test]
fn review_through_extension_websocket_and_sse_in_headless_chromium() {
    let bridge = common::extension_bridge();
    let hint = "run the install steps of .ci/run: `apt-get install -y chromium nodejs npm` and \
                `npm ci` in extension-bridge/";
    assert!(
        Path::new("/usr/bin/chromium").exists(),
        "/usr/bin/chromium is missing: {hint}"
    );
    assert!(
        bridge.join("node_modules/playwright-core").is_dir(),
        "extension-bridge/node_modules/playwright-core is missing: {hint}"
    );
    let artifacts = bridge
        .parent()
        .expect("workspace root")
        .join("target/browser-e2e");
    let screenshot = artifacts.join("browser-e2e-extension.png");
    let _ = std::fs::remove_file(&screenshot);
    let stdout = common::run_browser_test(
        "e2e.mjs",
        &["--artifacts".as_ref(), artifacts.as_os_str()],
        hint,
    );
    for line in [
        "options without host: The native messaging host is not installed for this browser",
        "Install it with: review-agent-gateway install --browser chromium",
        "no host, extension present: 5 findings in the DOM",
        "websocket resume: daemon killed after",
        "extension: 5 findings in the DOM",
        "extension, Vue diff markup: 5 findings in the DOM",
        "options: Connected to the gateway. transport native messaging",
        "extension, origin added in options: 5 findings in the DOM",
        "(review via extension there), removed it",
        "websocket: 5 findings in the DOM",
        "sse: 5 findings in the DOM",
        "chunked: file_read_diff answer of",
        "native host killed after",
        "run_check got gateway.unavailable (retryable), review followed again",
        "e2e ok",
    ] {
        assert!(stdout.contains(line), "no `{line}` in\n{stdout}");
    }
    assert!(
        screenshot.is_file(),
        "no screenshot in {}",
        artifacts.display()
    );
}
