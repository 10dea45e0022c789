//! Firefox manifest validation of issue 6: the companion extension is built with
//! `extension-bridge/build.mjs` into a temporary directory and its `dist/firefox` is checked
//! by Mozilla's `web-ext lint` (the addons-linter AMO runs; `web-ext` is a devDependency of
//! `extension-bridge/package.json`). Errors fail the test; warnings and notices are listed.
//! A copy whose manifest lacks `name` must fail the same lint, so the check itself is exercised.
//!
//! Not skippable: without node or `extension-bridge/node_modules/web-ext` the test fails and
//! says to run `.ci/run`'s install steps.

use std::path::{Path, PathBuf};
use std::process::Command;

const HINT: &str = "run the install steps of .ci/run: `apt-get install -y nodejs npm` and `npm ci` \
                    in extension-bridge/";

fn bridge() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .join("extension-bridge")
}

/// `web-ext lint --output json` of `dir`: the linter's report (`summary`, `errors`, `warnings`,
/// `notices`, `metadata`).
fn lint(dir: &Path) -> serde_json::Value {
    let web_ext = bridge().join("node_modules/web-ext/bin/web-ext.js");
    assert!(
        web_ext.is_file(),
        "{} is missing: {HINT}",
        web_ext.display()
    );
    let out = Command::new("node")
        .arg(&web_ext)
        .args([
            "lint",
            "--output",
            "json",
            "--no-config-discovery",
            "--source-dir",
        ])
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("node does not run ({e}): {HINT}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = stdout
        .find('{')
        .map(|start| &stdout[start..])
        .unwrap_or_else(|| {
            panic!(
                "web-ext lint printed no report (exit {:?})\n--- stdout\n{stdout}\n--- stderr\n{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            )
        });
    serde_json::from_str(json).unwrap_or_else(|e| panic!("web-ext lint report ({e}):\n{stdout}"))
}

fn messages(report: &serde_json::Value, kind: &str) -> Vec<String> {
    report[kind]
        .as_array()
        .unwrap_or_else(|| panic!("no `{kind}` in {report}"))
        .iter()
        .map(|m| format!("{} {}: {}", m["code"], m["file"], m["message"]))
        .collect()
}

#[test]
fn firefox_build_passes_web_ext_lint() {
    let out_dir = tempfile::tempdir().expect("temp dir");
    let built = Command::new("node")
        .arg(bridge().join("build.mjs"))
        .arg("--out")
        .arg(out_dir.path())
        .output()
        .unwrap_or_else(|e| panic!("node does not run ({e}): {HINT}"));
    assert!(
        built.status.success(),
        "build.mjs failed: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let firefox = out_dir.path().join("firefox");

    let report = lint(&firefox);
    for kind in ["warnings", "notices"] {
        for message in messages(&report, kind) {
            eprintln!("web-ext lint {kind}: {message}");
        }
    }
    let errors = messages(&report, "errors");
    assert!(
        errors.is_empty(),
        "web-ext lint errors:\n{}",
        errors.join("\n")
    );
    assert_eq!(
        report["metadata"]["id"], "companion@review-agent-gateway",
        "the add-on id the native host manifest allows"
    );
    assert_eq!(report["metadata"]["manifestVersion"], 3);

    // The same lint on a broken copy (no `name`) reports errors.
    let manifest_path = firefox.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).expect("manifest"))
            .expect("manifest JSON");
    manifest.as_object_mut().expect("object").remove("name");
    std::fs::write(&manifest_path, manifest.to_string()).expect("write manifest");
    let broken = lint(&firefox);
    assert!(
        !messages(&broken, "errors").is_empty(),
        "web-ext lint found no error in a manifest without `name`: {broken}"
    );
}
