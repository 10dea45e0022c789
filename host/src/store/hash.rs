//! The idempotency payload hash (DESIGN §5, draft §12).

use std::fmt::Write as _;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// `sha256:<64 lowercase hex>` of the canonical JSON of a request body minus its top-level
/// `requestId` (DESIGN §5 idempotency, draft §12).
///
/// Takes the request body as received. The canonical form sorts object keys recursively (by
/// their UTF-8 bytes), has no whitespace, and writes strings and numbers as `serde_json` does,
/// so the hash does not depend on key order or formatting; any other change (a value, an array
/// order, a nested `requestId`) changes it. A body that is not an object is hashed whole.
pub fn payload_hash(body: &Value) -> String {
    let mut canonical = String::new();
    match body {
        Value::Object(map) => write_object(
            &mut canonical,
            map.iter().filter(|(key, _)| key.as_str() != "requestId"),
        ),
        other => write_canonical(&mut canonical, other),
    }
    format!("sha256:{:x}", Sha256::digest(canonical.as_bytes()))
}

/// Appends the canonical form of `value` to `out`.
fn write_canonical(out: &mut String, value: &Value) {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
            // Scalars: serde_json's own compact rendering (escapes, number format).
            let _ = write!(out, "{value}");
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(out, map.iter()),
    }
}

/// Appends `{"k":v,...}` with the entries sorted by key.
fn write_object<'a>(out: &mut String, entries: impl Iterator<Item = (&'a String, &'a Value)>) {
    let mut entries: Vec<_> = entries.collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push('{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_canonical(out, &Value::String(key.clone()));
        out.push(':');
        write_canonical(out, value);
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_form_is_sorted_and_compact() {
        let mut out = String::new();
        write_canonical(
            &mut out,
            &json!({"b": [1, {"z": null, "a": "x\"y"}], "a": 1.5, "é": true}),
        );
        assert_eq!(out, r#"{"a":1.5,"b":[1,{"a":"x\"y","z":null}],"é":true}"#);
    }

    #[test]
    fn hash_ignores_key_order_and_request_id() {
        let a = json!({"requestId": "review_1", "mode": "merge-request",
                       "target": {"projectPath": "g/p", "gitlabOrigin": "https://gl"}});
        let b = json!({"target": {"gitlabOrigin": "https://gl", "projectPath": "g/p"},
                       "mode": "merge-request", "requestId": "review_2"});
        let c = json!({"mode": "merge-request",
                       "target": {"gitlabOrigin": "https://gl", "projectPath": "g/p"}});
        assert_eq!(payload_hash(&a), payload_hash(&b));
        assert_eq!(payload_hash(&a), payload_hash(&c));
        let h = payload_hash(&a);
        assert!(h.starts_with("sha256:") && h.len() == 7 + 64, "{h}");
    }

    #[test]
    fn hash_changes_with_anything_else() {
        let base =
            json!({"requestId": "r", "mode": "merge-request", "scope": {"filePaths": ["a", "b"]}});
        let changed = [
            json!({"requestId": "r", "mode": "selection", "scope": {"filePaths": ["a", "b"]}}),
            json!({"requestId": "r", "mode": "merge-request", "scope": {"filePaths": ["b", "a"]}}),
            json!({"requestId": "r", "mode": "merge-request", "scope": {"filePaths": ["a", "b"], "requestId": "r"}}),
            json!({"requestId": "r", "mode": "merge-request", "scope": {"filePaths": ["a", "b"]}, "extra": null}),
        ];
        for other in changed {
            assert_ne!(payload_hash(&base), payload_hash(&other), "{other}");
        }
    }
}
