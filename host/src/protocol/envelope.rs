//! The common response object and the common error object (draft §4, DESIGN §10).
//!
//! Every HTTP route answers with an [`ApiResponse`]; the `response` frame of DESIGN §4 carries one
//! as its `body`, and `error` frames, `tool.completed` and `run.failed` events carry an
//! [`ErrorObject`].

use serde::de::{DeserializeOwned, Error as _};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{GatewayError, codes};

/// Longest id the gateway takes from a client and echoes back, in characters: a body's
/// `requestId` on every route, the `X-Request-Id` header, a frame's string `id` (issue 12 §4:
/// one cap for every id, so none can make an answer megabytes long). 200 holds any ULID, UUID
/// or prefixed variant with room to spare.
pub const MAX_REQUEST_ID_CHARS: usize = 200;

/// Checks an id the gateway would echo (`name` says which, e.g. "`requestId`"): 1 to
/// [`MAX_REQUEST_ID_CHARS`] characters, no control characters (an id is written into log lines
/// and headers).
///
/// # Errors
/// `request.invalid` saying the rule, without quoting the id (it may be megabytes long).
pub fn check_request_id(name: &str, id: &str) -> Result<(), GatewayError> {
    let chars = id.chars().take(MAX_REQUEST_ID_CHARS + 1).count();
    let problem = if chars == 0 {
        "is empty".to_owned()
    } else if chars > MAX_REQUEST_ID_CHARS {
        format!("is longer than {MAX_REQUEST_ID_CHARS} characters")
    } else if id.chars().any(char::is_control) {
        "contains a control character".to_owned()
    } else {
        return Ok(());
    };
    Err(GatewayError::new(
        codes::REQUEST_INVALID,
        format!("{name} {problem}"),
        format!(
            "Send an id of 1 to {MAX_REQUEST_ID_CHARS} characters without control characters, \
             e.g. a ULID or UUID."
        ),
    ))
}

/// The common error object (draft §4 `error`, DESIGN §10).
///
/// Wire form: `{"code","message","retryable","remediation"}`, all required.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorObject {
    /// Dotted error code such as `repository.not_mapped` (see [`crate::error::codes`]). Clients
    /// must accept codes they do not know.
    pub code: String,
    /// What went wrong, for a human.
    pub message: String,
    /// Whether the same request may succeed if simply retried later.
    pub retryable: bool,
    /// What the user can do about it, e.g. "Open Gateway settings and add a repository mapping."
    pub remediation: String,
}

impl From<&GatewayError> for ErrorObject {
    /// Copies the four fields of the error; the code becomes an owned string.
    fn from(error: &GatewayError) -> Self {
        ErrorObject {
            code: error.code.to_owned(),
            message: error.message.clone(),
            retryable: error.retryable,
            remediation: error.remediation.clone(),
        }
    }
}

impl From<GatewayError> for ErrorObject {
    /// Moves the fields of the error; see the `From<&GatewayError>` impl.
    fn from(error: GatewayError) -> Self {
        ErrorObject {
            code: error.code.to_owned(),
            message: error.message,
            retryable: error.retryable,
            remediation: error.remediation,
        }
    }
}

/// The common response object (draft §4).
///
/// Wire forms:
/// - success: `{"ok": true, "requestId": "...", "data": <T>}`
/// - failure: `{"ok": false, "requestId": "...", "error": <ErrorObject>}`
///
/// The gateway sets `requestId` on every answer (issue 12 §4): the client's id when the request
/// carried one (a body's `requestId`, else an `X-Request-Id` header), else one it minted
/// (`req_<ULID>`); the same id is in the `X-Request-Id` response header and the daemon's log
/// line for the request. It stays optional here for reading answers of other gateways (the
/// draft's §5 examples omit it) and is omitted on the wire when `None`.
///
/// Deserializing checks the `ok` discriminant: `ok: true` requires `data` to parse as `T`
/// (a missing `data` is read as `null`, which only types like `()` or `serde_json::Value`
/// accept); `ok: false` requires `error`. Anything else is a serde error, never a panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiResponse<T> {
    /// `ok: true`.
    Success {
        /// The `requestId` of the request this answers, when it had one.
        request_id: Option<String>,
        /// The route-specific payload.
        data: T,
    },
    /// `ok: false`.
    Failure {
        /// The `requestId` of the request this answers, when it had one.
        request_id: Option<String>,
        /// What went wrong.
        error: ErrorObject,
    },
}

impl<T> ApiResponse<T> {
    /// A success response carrying `data`.
    pub fn success(request_id: Option<String>, data: T) -> Self {
        ApiResponse::Success { request_id, data }
    }

    /// A failure response carrying `error`.
    pub fn failure(request_id: Option<String>, error: impl Into<ErrorObject>) -> Self {
        ApiResponse::Failure {
            request_id,
            error: error.into(),
        }
    }

    /// The wire `ok` flag: `true` for [`ApiResponse::Success`].
    pub fn is_ok(&self) -> bool {
        matches!(self, ApiResponse::Success { .. })
    }

    /// The `requestId`, if any.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            ApiResponse::Success { request_id, .. } | ApiResponse::Failure { request_id, .. } => {
                request_id.as_deref()
            }
        }
    }

    /// The payload or the error, dropping the `requestId`.
    ///
    /// # Errors
    ///
    /// Returns the [`ErrorObject`] of a failure response.
    pub fn into_result(self) -> Result<T, ErrorObject> {
        match self {
            ApiResponse::Success { data, .. } => Ok(data),
            ApiResponse::Failure { error, .. } => Err(error),
        }
    }
}

// === impl Serialize / Deserialize for ApiResponse ===
//
// serde's derive cannot use a boolean as an enum tag, so both directions are written out.

impl<T: Serialize> Serialize for ApiResponse<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (request_id, len) = match self {
            ApiResponse::Success { request_id, .. } | ApiResponse::Failure { request_id, .. } => {
                (request_id, if request_id.is_some() { 3 } else { 2 })
            }
        };
        let mut s = serializer.serialize_struct("ApiResponse", len)?;
        s.serialize_field("ok", &self.is_ok())?;
        match request_id {
            Some(id) => s.serialize_field("requestId", id)?,
            None => s.skip_field("requestId")?,
        }
        match self {
            ApiResponse::Success { data, .. } => s.serialize_field("data", data)?,
            ApiResponse::Failure { error, .. } => s.serialize_field("error", error)?,
        }
        s.end()
    }
}

/// The wire shape both variants share, before `ok` is checked.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawResponse {
    ok: bool,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    data: serde_json::Value,
    #[serde(default)]
    error: Option<ErrorObject>,
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for ApiResponse<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = RawResponse::deserialize(deserializer)?;
        if raw.ok {
            let data = serde_json::from_value(raw.data).map_err(D::Error::custom)?;
            Ok(ApiResponse::Success {
                request_id: raw.request_id,
                data,
            })
        } else {
            let error = raw
                .error
                .ok_or_else(|| D::Error::custom("`ok: false` response without `error`"))?;
            Ok(ApiResponse::Failure {
                request_id: raw.request_id,
                error,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn gateway_error_converts_field_by_field() {
        let err = GatewayError::new(codes::REQUEST_INVALID, "bad body", "Fix the JSON").retryable();
        let obj = ErrorObject::from(&err);
        assert_eq!(
            serde_json::to_value(&obj).ok(),
            Some(json!({
                "code": "request.invalid",
                "message": "bad body",
                "retryable": true,
                "remediation": "Fix the JSON"
            }))
        );
        assert_eq!(ErrorObject::from(err), obj);
    }

    #[test]
    fn ok_true_without_data_is_rejected_for_structs() {
        #[derive(Debug, Deserialize)]
        struct Payload {
            #[allow(dead_code)]
            x: u32,
        }
        let r: Result<ApiResponse<Payload>, _> = serde_json::from_value(json!({"ok": true}));
        assert!(r.is_err());
    }

    #[test]
    fn ok_false_without_error_is_rejected() {
        let r: Result<ApiResponse<serde_json::Value>, _> =
            serde_json::from_value(json!({"ok": false, "requestId": "r"}));
        assert!(r.is_err());
    }

    #[test]
    fn request_ids_are_capped_everywhere_by_one_rule() {
        assert!(check_request_id("`requestId`", "req_01J").is_ok());
        assert!(check_request_id("`requestId`", &"é".repeat(MAX_REQUEST_ID_CHARS)).is_ok());
        for (id, why) in [
            (String::new(), "is empty"),
            ("x".repeat(MAX_REQUEST_ID_CHARS + 1), "longer than 200"),
            ("a\nb".to_owned(), "control character"),
        ] {
            let error = check_request_id("`requestId`", &id).expect_err(why);
            assert_eq!(error.code, codes::REQUEST_INVALID);
            assert!(error.message.contains(why), "{}", error.message);
            assert!(error.message.len() < 100, "the id is not quoted");
        }
    }

    #[test]
    fn request_id_is_omitted_when_none() {
        let r = ApiResponse::success(None, json!({"a": 1}));
        assert_eq!(
            serde_json::to_value(&r).ok(),
            Some(json!({"ok": true, "data": {"a": 1}}))
        );
    }
}
