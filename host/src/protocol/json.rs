//! Reading the JSON a client sends — request bodies and frames — by one rule on every route and
//! transport (issue 12 §4).
//!
//! - [`parse_strict`]: JSON text → [`serde_json::Value`], refusing an object that holds the same
//!   key twice, at any depth. RFC 8259 §4 leaves duplicate names to the implementation ("the
//!   behavior of software that receives such an object is unpredictable"); refusing them means a
//!   proxy or client library that keeps the first value cannot disagree with the gateway, which
//!   would otherwise keep the last. The error names the key by its dotted path
//!   (`target.diffRefs.headSha`).
//! - [`decode`]: a parsed body → a request type. Unknown keys stay ignored (optional fields may be
//!   added within `/v1`), but a key that differs from a field of the type only in case, `_` or
//!   `-` (`requestID`, `request_id`) is refused as "unknown field `requestID`; did you mean
//!   `requestId`?" instead of the "missing field" it would otherwise cause, or the silent default
//!   of an optional field. serde's other messages are prefixed with the path of the field.
//!
//! **Invariant:** no I/O; pure functions of their input.

use std::fmt;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::{Map, Value};

use crate::error::{GatewayError, codes};

/// The remediation of a body that is not valid JSON or not the route's request type: where the
/// user finds an example of each body.
pub const BODY_REMEDIATION: &str = "Fix the request body; the README shows one for each route \
     (sections \"The daemon\", \"Repository tools\" and \"Model providers\").";

/// Parses `text` as one JSON value, refusing duplicate object keys (see the module docs).
///
/// # Errors
/// serde_json's error for text that is not one JSON value, or `duplicate key `path.to.key``
/// (with line and column) for an object holding a key twice.
pub fn parse_strict(text: &[u8]) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    let value = Strict(Path::Root).deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// `deserialize_with` for an optional JSON body inside a frame (the `request` frame's `body`):
/// the value read by [`parse_strict`]'s rule, `null` as absent.
///
/// # Errors
/// The deserializer's error, or `duplicate key `path``.
pub fn strict_body<'de, D: de::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Value>, D::Error> {
    match Strict(Path::Root).deserialize(deserializer)? {
        Value::Null => Ok(None),
        value => Ok(Some(value)),
    }
}

/// Reads `value` as the request type `T` (`what` names it in messages, e.g. "review request").
///
/// # Errors
/// `request.invalid` with [`BODY_REMEDIATION`]: a key that is a near miss of a field of `T` (at
/// the top level, or where serde reports a missing field: "unknown field `requestID`; did you
/// mean `requestId`?"), or serde's message prefixed with the field's path.
pub fn decode<T: DeserializeOwned>(what: &str, value: &Value) -> Result<T, GatewayError> {
    let invalid = |message: String| {
        GatewayError::new(
            codes::REQUEST_INVALID,
            format!("the {what} is not valid: {message}"),
            BODY_REMEDIATION,
        )
    };
    if let Value::Object(object) = value
        && let Some(message) = near_miss(object, field_names::<T>(), "")
    {
        return Err(invalid(message));
    }
    let missing_in = |path: &serde_path_to_error::Path, message: &str| -> Option<String> {
        let field = message.strip_prefix("missing field `")?.split('`').next()?;
        let mut at = value;
        let mut prefix = String::new();
        for segment in path.iter() {
            match segment {
                serde_path_to_error::Segment::Map { key } => {
                    at = at.get(key)?;
                    prefix.push_str(key);
                    prefix.push('.');
                }
                serde_path_to_error::Segment::Seq { index } => {
                    at = at.get(index)?;
                    prefix.pop();
                    prefix.push_str(&format!("[{index}]."));
                }
                _ => return None,
            }
        }
        near_miss(at.as_object()?, &[field], &prefix)
    };
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let message = e.inner().to_string();
        if let Some(near) = missing_in(e.path(), &message) {
            return invalid(near);
        }
        match e.path().to_string().as_str() {
            "." => invalid(message),
            path => invalid(format!("{path}: {message}")),
        }
    })
}

/// "unknown field `<prefix>key`; did you mean `field`?" for the first key of `object` that is
/// not one of `fields` but equals one of them ignoring case, `_` and `-`.
fn near_miss(object: &Map<String, Value>, fields: &[&str], prefix: &str) -> Option<String> {
    fn fold(name: &str) -> String {
        name.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect()
    }
    for key in object.keys() {
        if fields.contains(&key.as_str()) {
            continue;
        }
        let folded = fold(key);
        if let Some(field) = fields.iter().find(|f| fold(f) == folded) {
            return Some(format!(
                "unknown field `{prefix}{key}`; did you mean `{prefix}{field}`?"
            ));
        }
    }
    None
}

/// The wire names of the fields of the struct `T` (empty for anything else): what serde's
/// derive passes to `deserialize_struct`, captured by a deserializer that reads nothing.
fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Capture<'a>(&'a mut &'static [&'static str]);
    impl<'de> de::Deserializer<'de> for Capture<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("captured"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Capture(&mut fields));
    fields
}

// === impl Strict ===

/// Where a value sits in the document, for messages; built only when one is written.
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Key(Path::Root, key) => f.write_str(key),
            Path::Key(parent, key) => write!(f, "{parent}.{key}"),
            Path::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

/// A `serde_json::Value` seed that refuses duplicate keys.
struct Strict<'a>(Path<'a>);

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        loop {
            let path = Path::Index(&self.0, items.len());
            match seq.next_element_seed(Strict(path))? {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                // Skip the value so the error carries the position after it, then refuse.
                let _: IgnoredAny = map.next_value()?;
                return Err(de::Error::custom(format_args!(
                    "duplicate key `{}`",
                    Path::Key(&self.0, &key)
                )));
            }
            let value = map.next_value_seed(Strict(Path::Key(&self.0, &key)))?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ReviewRequest, ToolCallRequest};
    use serde_json::json;

    #[test]
    fn strict_parsing_keeps_values_and_refuses_duplicates_at_any_depth() {
        let text = br#"{"a":[1,-2,3.5,"x",null,true,{"b":{}}],"c":{"d":"e"}}"#;
        let strict = parse_strict(text).expect("parses");
        let lax: Value = serde_json::from_slice(text).expect("parses");
        assert_eq!(strict, lax);
        for (text, key) in [
            (r#"{"a":1,"a":2}"#, "`a`"),
            (r#"{"t":{"d":{"h":"1","h":"2"}}}"#, "`t.d.h`"),
            (r#"{"s":[{"x":1},{"x":1,"x":1}]}"#, "`s[1].x`"),
        ] {
            let error = parse_strict(text.as_bytes()).expect_err(text).to_string();
            assert!(
                error.contains(&format!("duplicate key {key}")),
                "{text}: {error}"
            );
        }
        assert!(parse_strict(b"{} x").is_err());
        assert!(parse_strict(b"{\"a\":").is_err());
    }

    #[test]
    fn near_misses_of_fields_are_named() {
        let error = decode::<ToolCallRequest>(
            "tool call",
            &json!({"requestID": "a", "gitlabOrigin": "o", "projectPath": "p"}),
        )
        .expect_err("near miss");
        assert!(
            error
                .message
                .contains("unknown field `requestID`; did you mean `requestId`?"),
            "{}",
            error.message
        );
        // A required field spelled another way deep inside: named where it is.
        let review = json!({
            "requestId": "r", "mode": "merge-request",
            "target": {"gitlabOrigin": "o", "projectPath": "p", "mergeRequestIid": 1,
                "diffRefs": {"baseSha": "a", "startSha": "a", "head_sha": "b"}}
        });
        let error = decode::<ReviewRequest>("review request", &review).expect_err("near miss");
        assert!(
            error.message.contains(
                "unknown field `target.diffRefs.head_sha`; did you mean `target.diffRefs.headSha`?"
            ),
            "{}",
            error.message
        );
        // Other errors carry the path of the field; unknown keys are still ignored.
        let error = decode::<ToolCallRequest>(
            "tool call",
            &json!({"gitlabOrigin": 1, "projectPath": "p", "later": true}),
        )
        .expect_err("wrong type");
        assert!(
            error.message.contains("gitlabOrigin: invalid type"),
            "{}",
            error.message
        );
        assert!(
            decode::<ToolCallRequest>(
                "tool call",
                &json!({"gitlabOrigin": "o", "projectPath": "p", "later": true})
            )
            .is_ok()
        );
    }
}
