//! The settings-page test of issue 18: `extension-bridge/tests/settings-e2e.mjs` run by node with
//! this build's binary and a temporary home, in Debian's headless Chromium through
//! `playwright-core`: the login flow (a code used twice, an expired code, the code gone from the
//! URL, the bearer token and the cookie kept apart), every page with a running daemon's real
//! data, a proposal made through `POST /v1/repository-mappings` confirmed and another rejected, a
//! review watched live to completion, cancel and resume, the token rotated, the language menu, a
//! cross-site page's form refused with nothing changed, and an axe-core scan of every page with
//! no serious or critical violation. The step modules of `tests/settings/` add their own lines.
//! Screenshots go to `target/browser-settings/chromium-<page>.png`.
//!
//! Not skippable: without Chromium, node or `extension-bridge/node_modules` the test fails and
//! says to run `.ci/run`'s install steps.

mod common;

use std::path::{Path, PathBuf};

/// The lines `settings-e2e.mjs` prints (after `chromium `) when a step passed.
const STEPS: [&str; 13] = [
    "login: code used once and gone from the URL; reused and expired codes refused; token and \
     cookie kept apart",
    "status: version, address, provider ready, sandbox and store shown",
    "mappings: a proposal confirmed into config.toml, one rejected, a missing clone refused, the \
     default ref checked, an origin allowed and removed",
    "providers: settings and health shown; a key stored in the 0600 key file (no keyring) made \
     the provider ready on Test and Status, never shown or logged; deleted, it is not configured \
     again",
    "rules: security-default listed with its version and rules with examples; a pasted \
     snippet's shell injection flagged at its line; a snippet over 64 KiB refused",
    "agents: a delegated OpenCode edit's permission request answered Once on the page (Always \
     refused by the engine), the edit made, the request gone, by settings; roots, workspace, \
     audit line and snippets shown",
    "runs: a review watched live to completion in the list and on its page; cancelled and \
     resumed from the page",
    "token: shown, rotated; the old one refused, the new one taken",
    "language: 简体中文 from the menu, kept across pages, then English",
    "csrf: cross-site and forged forms refused (403), nothing changed",
    "a11y: axe-core found no serious or critical violation on ",
    "logout: the session ended",
    "settings ok in ",
];

/// Screenshots every run must leave.
const SHOTS: [&str; 14] = [
    "login-refused",
    "status",
    "mappings-pending",
    "mappings",
    "runs-live",
    "run-live",
    "run",
    "providers",
    "rules",
    "agents",
    "agents-answered",
    "token",
    "status-zh-CN",
    "mappings",
];

#[test]
fn settings_page_in_headless_chromium() {
    let hint = "run the install steps of .ci/run: `apt-get install -y chromium nodejs npm` and \
                `npm ci` in extension-bridge/";
    let bridge = common::extension_bridge();
    assert!(
        Path::new("/usr/bin/chromium").exists(),
        "/usr/bin/chromium is missing: {hint}"
    );
    assert!(
        bridge.join("node_modules/playwright-core").is_dir()
            && bridge.join("node_modules/axe-core").is_dir(),
        "extension-bridge/node_modules lacks playwright-core or axe-core: {hint}"
    );
    let artifacts: PathBuf = bridge
        .parent()
        .expect("workspace root")
        .join("target/browser-settings");
    for shot in SHOTS {
        let _ = std::fs::remove_file(artifacts.join(format!("chromium-{shot}.png")));
    }
    let stdout = common::run_browser_test(
        "settings-e2e.mjs",
        &["--artifacts".as_ref(), artifacts.as_os_str()],
        hint,
    );
    for step in STEPS {
        let line = format!("chromium {step}");
        assert!(stdout.contains(&line), "no `{line}` in\n{stdout}");
    }
    for shot in SHOTS {
        let path = artifacts.join(format!("chromium-{shot}.png"));
        assert!(path.is_file(), "no screenshot {}", path.display());
    }
}
