//! Errors of the server as JSON with a stable code: `{"error": {"code": "bad_input", "message":
//! "request:3: kind: missing field"}}`. The codes mirror the CLI's exit codes, so a client can
//! tell a bad request from a missing node or a limit without reading messages.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An error answered to a client.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    /// Stable, snake_case: `bad_input`, `not_found`, `method_not_allowed`, `unauthorized`,
    /// `payload_too_large`,
    /// `timeout` (a body that did not arrive in time), `limit_exceeded`, `busy`, `closed`,
    /// `locked`, `read_only`, `corrupt`, `internal`.
    pub code: &'static str,
    pub message: String,
    /// Seconds a client should wait before retrying (`busy`).
    pub retry_after: Option<u32>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            // Every answer's message, axum's and serde's rejections among them, which quote
            // the value they refuse whole.
            message: crate::error::shortened_message(&message.into()),
            retry_after: None,
        }
    }
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_input", message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
    /// The store's handle refuses every call (see [`crate::Store::usable`]): an error that
    /// said so is answered 503 `closed`, not 500, for no retry mends it; a restart does.
    pub fn closed(self) -> Self {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: "closed",
            retry_after: None,
            ..self
        }
    }
    pub fn busy(message: impl Into<String>) -> Self {
        ApiError {
            retry_after: Some(1),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, "busy", message)
        }
    }
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this server needs `Authorization: Bearer <key>`",
        )
    }
}

impl From<crate::Error> for ApiError {
    fn from(e: crate::Error) -> Self {
        use crate::Error as E;
        let message = e.to_string();
        match e {
            E::Input { .. } | E::InvalidEvent { .. } | E::InvalidArgument { .. } => {
                Self::bad_input(message)
            }
            E::NotFound(_) => Self::not_found(message),
            E::Locked { .. } | E::OtherRules { held: true, .. } => {
                Self::new(StatusCode::CONFLICT, "locked", message)
            }
            E::ReadOnly { .. } => Self::new(StatusCode::CONFLICT, "read_only", message),
            E::NotAStore { .. } => Self::new(StatusCode::INTERNAL_SERVER_ERROR, "corrupt", message),
            // A backend's or tantivy's own report of damage too, not an internal error.
            e if e.reports_damage() => {
                Self::new(StatusCode::INTERNAL_SERVER_ERROR, "corrupt", message)
            }
            _ => Self::internal(message),
        }
    }
}

impl From<crate::query::QueryError> for ApiError {
    fn from(e: crate::query::QueryError) -> Self {
        use crate::query::QueryError as Q;
        match e {
            Q::Store(s) => s.into(),
            Q::LimitExceeded(_) => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "limit_exceeded",
                e.to_string(),
            ),
            other => Self::bad_input(other.to_string()),
        }
    }
}

/// Rejections of axum's extractors (a body that is not JSON, a missing field, a body over the
/// limit, a bad path or query parameter) as errors with a stable code.
macro_rules! from_rejection {
    ($($t:ty),*) => {$(
        impl From<$t> for ApiError {
            fn from(r: $t) -> Self {
                match r.status() {
                    StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "payload_too_large",
                        r.body_text(),
                    ),
                    _ => ApiError::bad_input(r.body_text()),
                }
            }
        }
    )*};
}
from_rejection!(axum::extract::rejection::BytesRejection);

impl From<axum::extract::rejection::PathRejection> for ApiError {
    /// A parameter that does not parse is named, with what it was and what it must be, as a
    /// body's field is; anything else as axum says it.
    fn from(r: axum::extract::rejection::PathRejection) -> Self {
        use axum::extract::path::ErrorKind;
        use axum::extract::rejection::PathRejection;
        if let PathRejection::FailedToDeserializePathParams(e) = &r {
            if let ErrorKind::ParseErrorAtKey {
                key,
                value,
                expected_type,
            } = e.kind()
            {
                return ApiError::bad_input(format!(
                    "{key}: {} is not a {expected_type}",
                    crate::error::quoted_excerpt(value)
                ));
            }
        }
        match r.status() {
            StatusCode::INTERNAL_SERVER_ERROR => ApiError::internal(r.body_text()),
            _ => ApiError::bad_input(r.body_text()),
        }
    }
}

impl From<axum::extract::rejection::QueryRejection> for ApiError {
    /// Said by where, as a body's errors are (`query string: lable: unknown field ...`), not
    /// after axum's "Failed to deserialize query string".
    fn from(r: axum::extract::rejection::QueryRejection) -> Self {
        ApiError::bad_input(format!("query string: {}", query_refusal(&r)))
    }
}

/// What serde said of a query string `r` refuses (`limit: invalid digit found in string`),
/// without axum's "Failed to deserialize query string".
pub(super) fn query_refusal(r: &axum::extract::rejection::QueryRejection) -> String {
    let said = r.body_text();
    match said.strip_prefix("Failed to deserialize query string: ") {
        Some(why) => why.to_string(),
        None => said,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message,
            },
        };
        let mut r = (self.status, axum::Json(body)).into_response();
        if let Some(s) = self.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// helper-112: the CLI took a backend's own report of damage (redb's "corrupted", a read
    /// past the file's end) for damage, exit 6, while the server answered it as an internal
    /// error: both now ask the error itself ([`crate::Error::reports_damage`]).
    #[test]
    fn a_backends_report_of_damage_is_answered_as_corrupt() {
        let damaged = |source: redb::StorageError| crate::Error::Backend {
            backend: "redb",
            message: source.to_string(),
            source: Some(Box::new(source)),
        };
        let corrupted = redb::StorageError::Corrupted("a page's checksum".into());
        assert_eq!(ApiError::from(damaged(corrupted)).code, "corrupt");
        let past_end = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
        assert_eq!(
            ApiError::from(damaged(redb::StorageError::Io(past_end))).code,
            "corrupt"
        );
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(
            ApiError::from(damaged(redb::StorageError::Io(denied))).code,
            "internal"
        );
    }
}
