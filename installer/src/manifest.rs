//! The host manifests: rendering them from the templates in `manifests/`, and checking one the
//! way the browser will before it starts the host.

use serde_json::{Value, json};

use crate::browser::Family;
use crate::ids;

/// The Chrome-family template (`manifests/chrome.json.tmpl`): `name, description, path, type,
/// allowed_origins`.
pub const CHROME_TEMPLATE: &str = include_str!("../../manifests/chrome.json.tmpl");
/// The Firefox-family template (`manifests/firefox.json.tmpl`): `name, description, path, type,
/// allowed_extensions`.
pub const FIREFOX_TEMPLATE: &str = include_str!("../../manifests/firefox.json.tmpl");

/// The allowlist key a family reads: `allowed_origins` or `allowed_extensions`.
pub fn allowlist_key(family: Family) -> &'static str {
    match family {
        Family::Chromium => "allowed_origins",
        Family::Firefox => "allowed_extensions",
    }
}

/// The manifest for `family` with `path` = `host_path` and the allowlist = `allowlist`
/// (`chrome-extension://ID/` origins or add-on ids, see [`crate::ExtensionIds::allowlist`]).
/// Built by parsing the embedded template and setting the two fields with serde_json: paths with
/// quotes, backslashes, spaces or non-ASCII characters come out as valid JSON.
pub fn render(family: Family, host_path: &str, allowlist: &[String]) -> Value {
    let template = match family {
        Family::Chromium => CHROME_TEMPLATE,
        Family::Firefox => FIREFOX_TEMPLATE,
    };
    let mut manifest: Value =
        serde_json::from_str(template).expect("the embedded manifest templates are valid JSON");
    manifest["path"] = json!(host_path);
    manifest[allowlist_key(family)] = json!(allowlist);
    manifest
}

/// The file content for a manifest: pretty JSON, UTF-8 without a byte-order mark, ending in a
/// newline.
pub fn to_file_text(manifest: &Value) -> String {
    let mut text =
        serde_json::to_string_pretty(manifest).expect("a serde_json::Value always serializes");
    text.push('\n');
    text
}

/// One thing wrong with an installed registration, with the fix to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// A dotted code: `manifest.bom`, `manifest.json_invalid`, `manifest.name_invalid`,
    /// `manifest.type_invalid`, `manifest.path_relative`, `manifest.path_missing`,
    /// `manifest.path_not_executable`, `manifest.allowlist_missing`, `manifest.allowlist_mixed`,
    /// `manifest.origin_invalid`, `manifest.extension_id_invalid`, `manifest.extension_not_allowed`,
    /// `manifest.registry_mismatch`, `host.no_hello`, `daemon.unreachable`, ..., or the code of
    /// the host's own `error` frame (e.g. `config.invalid`).
    pub code: std::borrow::Cow<'static, str>,
    /// What is wrong, naming the value at fault.
    pub message: String,
    /// What to do about it.
    pub fix: String,
}

impl Problem {
    /// A problem with the given code, message and fix.
    pub fn new(
        code: impl Into<std::borrow::Cow<'static, str>>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Problem {
        Problem {
            code: code.into(),
            message: message.into(),
            fix: fix.into(),
        }
    }
}

/// The UTF-8 byte-order mark.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Check a manifest file's bytes as `family`'s browser will: no BOM, UTF-8 JSON object, `name`
/// valid and equal to `expected_name` (the file name / registry key name), `description` a
/// string, `type` `"stdio"`, `path` a string (absolute on Linux/macOS when `require_absolute`),
/// exactly the family's allowlist key, non-empty, each entry well-formed (origins
/// `chrome-extension://<32 a-p>/` with the trailing slash; add-on ids `name@domain` or `{uuid}`).
///
/// Returns the parsed manifest (when it parsed) and every problem found; `path`'s existence and
/// the host's answer are checked by [`crate::doctor`].
pub fn check(
    bytes: &[u8],
    family: Family,
    expected_name: &str,
    require_absolute: bool,
    reinstall: &str,
) -> (Option<Value>, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut body = bytes;
    if let Some(rest) = bytes.strip_prefix(BOM) {
        problems.push(Problem::new(
            "manifest.bom",
            "the file starts with a UTF-8 byte-order mark, which the browser's JSON parser refuses",
            format!("Save it as UTF-8 without a BOM, or {reinstall}."),
        ));
        body = rest;
    }
    let text = match std::str::from_utf8(body) {
        Ok(text) => text,
        Err(e) => {
            problems.push(Problem::new(
                "manifest.json_invalid",
                format!("the file is not UTF-8: {e}"),
                format!("{reinstall}."),
            ));
            return (None, problems);
        }
    };
    let manifest: Value = match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Value::Object(map),
        Ok(_) => {
            problems.push(Problem::new(
                "manifest.json_invalid",
                "the file is JSON but not an object",
                format!("{reinstall}."),
            ));
            return (None, problems);
        }
        Err(e) => {
            problems.push(Problem::new(
                "manifest.json_invalid",
                format!("the file is not valid JSON: {e}"),
                format!("{reinstall}."),
            ));
            return (None, problems);
        }
    };
    match manifest.get("name").and_then(Value::as_str) {
        Some(name) if !ids::is_valid_host_name(name) => problems.push(Problem::new(
            "manifest.name_invalid",
            format!(
                "name {name:?} breaks the host name rules (lowercase letters, digits, `_` and \
                 `.`; no leading, trailing or doubled dot)"
            ),
            format!("{reinstall}."),
        )),
        Some(name) if name != expected_name => problems.push(Problem::new(
            "manifest.name_invalid",
            format!("name {name:?} does not match the file/key name {expected_name:?}"),
            format!("{reinstall}."),
        )),
        Some(_) => {}
        None => problems.push(Problem::new(
            "manifest.name_invalid",
            "`name` is missing or not a string",
            format!("{reinstall}."),
        )),
    }
    if !manifest.get("description").is_some_and(Value::is_string) {
        problems.push(Problem::new(
            "manifest.description_missing",
            "`description` is missing or not a string",
            format!("{reinstall}."),
        ));
    }
    if manifest.get("type").and_then(Value::as_str) != Some("stdio") {
        problems.push(Problem::new(
            "manifest.type_invalid",
            format!(
                "`type` is {}, not \"stdio\"",
                manifest
                    .get("type")
                    .map_or("missing".into(), Value::to_string)
            ),
            format!("{reinstall}."),
        ));
    }
    match manifest.get("path").and_then(Value::as_str) {
        None | Some("") => problems.push(Problem::new(
            "manifest.path_missing",
            "`path` is missing or empty",
            format!("{reinstall}."),
        )),
        Some(path) if require_absolute && !path.starts_with('/') => problems.push(Problem::new(
            "manifest.path_relative",
            format!("`path` {path:?} is not absolute (required on Linux and macOS)"),
            format!("{reinstall}."),
        )),
        Some(_) => {}
    }
    let key = allowlist_key(family);
    let other = allowlist_key(match family {
        Family::Chromium => Family::Firefox,
        Family::Firefox => Family::Chromium,
    });
    if manifest.get(other).is_some() {
        problems.push(Problem::new(
            "manifest.allowlist_mixed",
            format!(
                "a {} manifest has `{other}` (the other browser family's key)",
                family.label()
            ),
            format!("{reinstall}."),
        ));
    }
    match manifest.get(key).and_then(Value::as_array) {
        None => problems.push(Problem::new(
            "manifest.allowlist_missing",
            format!("`{key}` is missing or not an array"),
            format!("{reinstall} --extension-id ID."),
        )),
        Some(list) if list.is_empty() => problems.push(Problem::new(
            "manifest.allowlist_missing",
            format!("`{key}` is empty: no extension may connect"),
            format!("{reinstall} --extension-id ID."),
        )),
        Some(list) => {
            for (i, entry) in list.iter().enumerate() {
                let text = entry.as_str().unwrap_or_default();
                match family {
                    Family::Chromium if !ids::is_chrome_origin(text) => {
                        let hint =
                            if text.starts_with("chrome-extension://") && !text.ends_with('/') {
                                " (the trailing slash is missing)"
                            } else {
                                ""
                            };
                        problems.push(Problem::new(
                            "manifest.origin_invalid",
                            format!(
                                "allowed_origins[{i}] = {entry} is not chrome-extension://<32 \
                                 letters a-p>/{hint}"
                            ),
                            format!("{reinstall} --extension-id <the 32-letter id>."),
                        ));
                    }
                    Family::Firefox if !ids::is_firefox_extension_id(text) => {
                        problems.push(Problem::new(
                            "manifest.extension_id_invalid",
                            format!(
                                "allowed_extensions[{i}] = {entry} is not an add-on id \
                                 (name@domain or {{uuid}})"
                            ),
                            format!("{reinstall} --extension-id <the add-on id>."),
                        ));
                    }
                    _ => {}
                }
            }
        }
    }
    (Some(manifest), problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_our_host_and_one_allowlist_each() {
        for (family, template) in [
            (Family::Chromium, CHROME_TEMPLATE),
            (Family::Firefox, FIREFOX_TEMPLATE),
        ] {
            let value: Value = serde_json::from_str(template).expect("template parses");
            assert_eq!(value["name"], crate::HOST_NAME);
            assert_eq!(value["type"], "stdio");
            let keys: Vec<&String> = value.as_object().expect("object").keys().collect();
            assert_eq!(
                keys,
                ["name", "description", "path", "type", allowlist_key(family)]
            );
        }
    }

    #[test]
    fn rendered_manifests_pass_the_check() {
        let origins = vec!["chrome-extension://knldjmfmopnpolahpmmgbagdohdnhkik/".to_owned()];
        let m = render(Family::Chromium, "/opt/My \"Apps\"/ré\\host", &origins);
        let text = to_file_text(&m);
        assert!(!text.as_bytes().starts_with(BOM));
        let (parsed, problems) = check(
            text.as_bytes(),
            Family::Chromium,
            crate::HOST_NAME,
            true,
            "reinstall",
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(parsed.expect("parsed")["path"], "/opt/My \"Apps\"/ré\\host");
        let m = render(Family::Firefox, "/x", &["a@b".to_owned()]);
        let (_, problems) = check(
            to_file_text(&m).as_bytes(),
            Family::Firefox,
            crate::HOST_NAME,
            true,
            "reinstall",
        );
        assert!(problems.is_empty(), "{problems:?}");
    }

    fn codes(bytes: &[u8], family: Family) -> Vec<String> {
        check(bytes, family, crate::HOST_NAME, true, "reinstall")
            .1
            .iter()
            .map(|p| p.code.to_string())
            .collect()
    }

    #[test]
    fn check_catches_what_browsers_refuse() {
        let good = to_file_text(&render(
            Family::Chromium,
            "/x",
            &["chrome-extension://knldjmfmopnpolahpmmgbagdohdnhkik/".to_owned()],
        ));
        let mut bom = BOM.to_vec();
        bom.extend_from_slice(good.as_bytes());
        assert_eq!(codes(&bom, Family::Chromium), ["manifest.bom"]);
        assert_eq!(
            codes(b"{\"name\": ", Family::Chromium),
            ["manifest.json_invalid"]
        );
        assert_eq!(codes(b"[]", Family::Chromium), ["manifest.json_invalid"]);
        let no_slash = good.replace("hkik/", "hkik");
        assert_eq!(
            codes(no_slash.as_bytes(), Family::Chromium),
            ["manifest.origin_invalid"]
        );
        let relative = good.replace("\"/x\"", "\"x\"");
        assert_eq!(
            codes(relative.as_bytes(), Family::Chromium),
            ["manifest.path_relative"]
        );
        let bad_name = good.replace("com.review_agent.gateway", "com..x");
        assert_eq!(
            codes(bad_name.as_bytes(), Family::Chromium),
            ["manifest.name_invalid"]
        );
        // A Chrome manifest read by Firefox: wrong key, missing allowlist.
        assert_eq!(
            codes(good.as_bytes(), Family::Firefox),
            ["manifest.allowlist_mixed", "manifest.allowlist_missing"]
        );
        let ff = to_file_text(&render(Family::Firefox, "/x", &["not-an-id".to_owned()]));
        assert_eq!(
            codes(ff.as_bytes(), Family::Firefox),
            ["manifest.extension_id_invalid"]
        );
    }
}
