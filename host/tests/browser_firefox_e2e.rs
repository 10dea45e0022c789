//! The Firefox end-to-end test of issue 6: `extension-bridge/tests/firefox-e2e.mjs` run by node
//! with this build's binary and a temporary home. It runs Debian's `firefox-esr` headless through
//! `web-ext run` (a devDependency of `extension-bridge/package.json`) with the companion
//! extension as a temporary add-on, `HOME` set to the temporary home so that Firefox reads the
//! host manifest `review-agent-gateway install --browser firefox` wrote there. A page on loopback
//! standing in for a GitLab merge-request page loads the built userscript and a harness that
//! clicks "Review locally" and posts what the DOM shows to the test's server: first without the
//! host installed (Firefox's "No such native application" must reach the page), then a review of
//! a real git repository through extension → native host → daemon, a tool answer over 1 MiB
//! through the extension (chunk frames), then the review through the WebSocket and HTTP + SSE
//! fallbacks, each finding under its diff line. About 5 s.
//!
//! Not skippable: without `/usr/bin/firefox-esr`, node or `extension-bridge/node_modules` the
//! test fails and says to run `.ci/run`'s install steps.

mod common;

use std::path::Path;
use std::time::Instant;

#[test]
fn review_through_extension_websocket_and_sse_in_headless_firefox() {
    let bridge = common::extension_bridge();
    let hint = "run the install steps of .ci/run: `apt-get install -y firefox-esr nodejs npm` and \
                `npm ci` in extension-bridge/";
    assert!(
        Path::new("/usr/bin/firefox-esr").exists(),
        "/usr/bin/firefox-esr is missing: {hint}"
    );
    assert!(
        bridge.join("node_modules/web-ext/bin/web-ext.js").is_file(),
        "extension-bridge/node_modules/web-ext is missing: {hint}"
    );
    let started = Instant::now();
    let stdout = common::run_browser_test("firefox-e2e.mjs", &[], hint);
    for line in [
        "firefox no-host: the page says \"gateway.unavailable",
        "No such native application com.review_agent.gateway",
        "firefox extension: 5 findings in the DOM",
        "firefox chunked: file_read_diff answer of",
        "firefox websocket: 5 findings in the DOM",
        "firefox sse: 5 findings in the DOM",
        "firefox e2e ok",
    ] {
        assert!(stdout.contains(line), "no `{line}` in\n{stdout}");
    }
    eprintln!("firefox e2e took {:.1?}", started.elapsed());
}
