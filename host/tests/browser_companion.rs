//! The companion test of issue 17: `extension-bridge/tests/companion-e2e.mjs` run by node with
//! this build's binary and a temporary home, once per browser — Debian's headless Chromium
//! (through `playwright-core`) and Debian's `firefox-esr` (through the test's own WebDriver BiDi
//! client, `tests/companion/bidi.mjs`; Playwright's Firefox BiDi channel does not work with
//! Firefox ESR 153).
//!
//! The userscript (`dist/review-locally.user.js`) runs on stand-in GitLab merge-request pages
//! (`tests/companion/gitlab-standin.mjs`: the diff of a real git repository rendered in GitLab's
//! Rapid Diffs, Vue and classic markups, and the REST endpoints the script calls, enforcing
//! GitLab's documented draft-note position rules and its CSRF rule for session-authenticated
//! API calls) against the real daemon with a fake OpenAI-compatible model server
//! (`tests/companion/fake-model.mjs`) and a GM stand-in as the userscript manager's storage.
//! Each step prints a line asserted here: the stand-ins' self-check (and the gateway's review
//! and chat with them); the token moved out of localStorage into GM storage, and the settings
//! dialog keeping it there; a review reloaded mid-way restored with every finding once and
//! under its line; cancel; a chat on a selected line with the model's tool call shown, the
//! answer streamed, then stopped; draft notes at GitLab's positions for an added line
//! (`new_line` only) and a context line (`old_line` and `new_line`); a second review marking
//! both and refusing to post again; a dismissed finding hidden and kept hidden; an incremental
//! review of a new head commit reviewing only the new file; Rapid Diffs' parallel view, the Vue
//! and classic markups; the `/gitlab` path prefix; dark mode; the interface language set to
//! 简体中文 in the settings dialog (the panel in Chinese, also after a reload) and back to
//! Automatic (the browser's, English here: the other steps read English texts). Screenshots go to
//! `target/browser-companion/<browser>-<state>.png`. About 25 s per browser.
//!
//! Not skippable: without the browser, node or `extension-bridge/node_modules` the test fails
//! and says to run `.ci/run`'s install steps.

mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

/// The lines `companion-e2e.mjs` prints (after the browser's name) when a step passed.
const STEPS: [&str; 21] = [
    "self-check: stand-in GitLab enforces CSRF and position rules",
    "self-check: fake model answers tool calls and streams",
    "self-check: the gateway reviews app.py:2 app.py:3 app.py:4 app.py:44 app.py:6 and chats",
    "pages: rapid, vue and classic markup rendered from the git diff",
    "token: moved from localStorage into GM storage; localStorage holds no token",
    "reload mid-review:",
    "settings: the dialog shows the stored token and port; saving keeps the token in GM",
    "cancel: the review ended cancelled",
    "chat: file_read shown",
    "chat on a file: its header asks about the whole file (app.py:L1–",
    "draft notes: added line posted as new_line 2 only; context line as old_line 4 + new_line 6",
    "second review: both posted findings marked \"Comment exists\"; clicking posts nothing",
    "dismiss: app.py:3 hidden",
    "incremental: app.py and lib.py skipped (unchanged_since), extra.py:2 new",
    "rapid markup (parallel view):",
    "late file: ",
    "vue markup:",
    "classic markup:",
    "path prefix:",
    "dark mode:",
    "language: 简体中文 chosen in ⚙: Review button \"审查\", status \"已审查",
];

/// Runs the companion test in `browser` and asserts every step's line and a screenshot of
/// each state; `binary` is the browser's executable, `hint` how to install what is missing.
fn companion(browser: &str, binary: &str, hint: &str) {
    let bridge = common::extension_bridge();
    assert!(Path::new(binary).exists(), "{binary} is missing: {hint}");
    assert!(
        bridge.join("node_modules/playwright-core").is_dir(),
        "extension-bridge/node_modules/playwright-core is missing: {hint}"
    );
    let artifacts: PathBuf = bridge
        .parent()
        .expect("workspace root")
        .join("target/browser-companion");
    let states = [
        "review-restored",
        "cancelled",
        "chat-stopped",
        "published",
        "incremental",
        "rapid-parallel",
        "vue",
        "classic",
        "path-prefix",
        "dark",
        "zh-CN",
    ];
    for state in states {
        let _ = std::fs::remove_file(artifacts.join(format!("{browser}-{state}.png")));
    }
    let started = Instant::now();
    let stdout = common::run_browser_test(
        "companion-e2e.mjs",
        &[
            "--browser".as_ref(),
            browser.as_ref(),
            "--artifacts".as_ref(),
            artifacts.as_os_str(),
        ],
        hint,
    );
    for step in STEPS {
        let line = format!("{browser} {step}");
        assert!(stdout.contains(&line), "no `{line}` in\n{stdout}");
    }
    assert!(
        stdout.contains(&format!("{browser} companion ok")),
        "no `{browser} companion ok` in\n{stdout}"
    );
    for state in states {
        let shot = artifacts.join(format!("{browser}-{state}.png"));
        assert!(shot.is_file(), "no screenshot {}", shot.display());
    }
    eprintln!("{browser} companion took {:.1?}", started.elapsed());
}

#[test]
fn companion_userscript_on_standin_gitlab_in_headless_chromium() {
    companion(
        "chromium",
        "/usr/bin/chromium",
        "run the install steps of .ci/run: `apt-get install -y chromium nodejs npm` and `npm ci` \
         in extension-bridge/",
    );
}

#[test]
fn companion_userscript_on_standin_gitlab_in_headless_firefox() {
    companion(
        "firefox",
        "/usr/bin/firefox-esr",
        "run the install steps of .ci/run: `apt-get install -y firefox-esr nodejs npm` and \
         `npm ci` in extension-bridge/",
    );
}
