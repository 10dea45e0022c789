//! The common response object and the common error object (draft §4, DESIGN §10).
//!
//! Every HTTP route answers with an [`ApiResponse`]; the `response` frame of DESIGN §4 carries one
//! as its `body`, and `error` frames, `tool.completed` and `run.failed` events carry an
//! [`ErrorObject`].

use serde::de::{DeserializeOwned, Error as _};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::GatewayError;

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
/// `requestId` is optional: the draft's §5 health and capabilities examples omit it (those
/// requests carry no id). It is omitted on the wire when `None`.
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
    use crate::error::codes;
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
    fn request_id_is_omitted_when_none() {
        let r = ApiResponse::success(None, json!({"a": 1}));
        assert_eq!(
            serde_json::to_value(&r).ok(),
            Some(json!({"ok": true, "data": {"a": 1}}))
        );
    }
}
