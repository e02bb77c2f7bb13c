//! Every way a request can end, and the one place they become HTTP.
//!
//! Each outcome has a stable `type` string, used in the OpenAI-shaped error
//! body (`{"error": {"message", "type", "param", "code"}}`) and as the
//! `outcome` label of the metrics. The statuses and headers are chosen for
//! what clients do with them:
//!
//! | outcome | status | type | why |
//! |---|---|---|---|
//! | bad request | 400 | `invalid_request_error` | `param` names the field |
//! | unknown model | 404 | `invalid_request_error`, code `model_not_found` | as the OpenAI API does |
//! | unknown path | 404 | `invalid_request_error`, code `unknown_url` | |
//! | wrong method | 405 | `invalid_request_error`, code `method_not_allowed` | with `Allow` |
//! | body over the limit | 413 | `invalid_request_error`, code `body_too_large` | |
//! | wrong content type | 415 | `invalid_request_error`, code `unsupported_media_type` | |
//! | overloaded | 429 | `overloaded` | `Retry-After` and `retry-after-ms`, which the OpenAI SDK honours |
//! | model loading | 503 | `model_loading` | `Retry-After`: the model is being reflashed |
//! | model not loaded | 503 | `model_not_loaded` | in the catalog, in no slot |
//! | deadline exceeded | 504 | `deadline_exceeded` | `x-should-retry: false`: a retried speculative request is stale |
//! | fabric error | 502 | `fabric_error` | the fabric failed or corrupted the output; retrying is fine |
//! | shutting down | 503 | `shutting_down` | `Retry-After`, `Connection: close` |

use std::time::Duration;

use bytes::Bytes;
use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Response, StatusCode};
use serde_json::json;

use crate::body::{full, Body};

/// How a request ended, when it did not end with a completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Invalid {
        param: Option<&'static str>,
        code: &'static str,
        message: String,
    },
    ModelNotFound {
        model: String,
        known: Vec<String>,
    },
    NotFound {
        path: String,
    },
    MethodNotAllowed {
        method: String,
        allow: &'static str,
    },
    BodyTooLarge {
        limit: usize,
    },
    UnsupportedMediaType {
        found: String,
    },
    Overloaded {
        retry_after: Duration,
        reason: String,
    },
    ModelLoading {
        model: String,
        retry_after: Duration,
    },
    ModelNotLoaded {
        model: String,
    },
    DeadlineExceeded {
        deadline: Duration,
    },
    FabricError {
        message: String,
    },
    ShuttingDown,
}

impl Outcome {
    /// A 400 naming a field.
    pub fn invalid(param: &'static str, message: impl Into<String>) -> Outcome {
        Outcome::Invalid {
            param: Some(param),
            code: "invalid_value",
            message: message.into(),
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            Outcome::Invalid { .. } => StatusCode::BAD_REQUEST,
            Outcome::ModelNotFound { .. } | Outcome::NotFound { .. } => StatusCode::NOT_FOUND,
            Outcome::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Outcome::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Outcome::UnsupportedMediaType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Outcome::Overloaded { .. } => StatusCode::TOO_MANY_REQUESTS,
            Outcome::ModelLoading { .. }
            | Outcome::ModelNotLoaded { .. }
            | Outcome::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            Outcome::DeadlineExceeded { .. } => StatusCode::GATEWAY_TIMEOUT,
            Outcome::FabricError { .. } => StatusCode::BAD_GATEWAY,
        }
    }

    /// The error `type`.
    pub fn type_str(&self) -> &'static str {
        match self {
            Outcome::Invalid { .. }
            | Outcome::ModelNotFound { .. }
            | Outcome::NotFound { .. }
            | Outcome::MethodNotAllowed { .. }
            | Outcome::BodyTooLarge { .. }
            | Outcome::UnsupportedMediaType { .. } => "invalid_request_error",
            Outcome::Overloaded { .. } => "overloaded",
            Outcome::ModelLoading { .. } => "model_loading",
            Outcome::ModelNotLoaded { .. } => "model_not_loaded",
            Outcome::DeadlineExceeded { .. } => "deadline_exceeded",
            Outcome::FabricError { .. } => "fabric_error",
            Outcome::ShuttingDown => "shutting_down",
        }
    }

    /// The metrics label: the type, with client errors lumped together.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::ModelNotFound { .. } => "model_not_found",
            Outcome::Invalid { .. }
            | Outcome::NotFound { .. }
            | Outcome::MethodNotAllowed { .. }
            | Outcome::BodyTooLarge { .. }
            | Outcome::UnsupportedMediaType { .. } => "invalid_request",
            other => other.type_str(),
        }
    }

    fn code(&self) -> Option<&'static str> {
        match self {
            Outcome::Invalid { code, .. } => Some(code),
            Outcome::ModelNotFound { .. } => Some("model_not_found"),
            Outcome::NotFound { .. } => Some("unknown_url"),
            Outcome::MethodNotAllowed { .. } => Some("method_not_allowed"),
            Outcome::BodyTooLarge { .. } => Some("body_too_large"),
            Outcome::UnsupportedMediaType { .. } => Some("unsupported_media_type"),
            _ => None,
        }
    }

    fn param(&self) -> Option<&'static str> {
        match self {
            Outcome::Invalid { param, .. } => *param,
            Outcome::ModelNotFound { .. }
            | Outcome::ModelLoading { .. }
            | Outcome::ModelNotLoaded { .. } => Some("model"),
            _ => None,
        }
    }

    /// The human message.
    pub fn message(&self) -> String {
        match self {
            Outcome::Invalid { message, .. } => message.clone(),
            Outcome::ModelNotFound { model, known } => {
                format!(
                    "the model {model:?} does not exist; available: {}",
                    known.join(", ")
                )
            }
            Outcome::NotFound { path } => format!("no such endpoint: {path}"),
            Outcome::MethodNotAllowed { method, allow } => {
                format!("{method} is not allowed here; use {allow}")
            }
            Outcome::BodyTooLarge { limit } => {
                format!("the request body is larger than {limit} bytes")
            }
            Outcome::UnsupportedMediaType { found } => {
                format!("content type {found:?} is not supported; send application/json")
            }
            Outcome::Overloaded {
                reason,
                retry_after,
            } => {
                format!("{reason}; retry in {} ms", retry_after.as_millis())
            }
            Outcome::ModelLoading { model, retry_after } => format!(
                "the model {model} is being loaded into the fabric; retry in {} ms",
                retry_after.as_millis()
            ),
            Outcome::ModelNotLoaded { model } => {
                format!("the model {model} is in the catalog but not loaded in any slot")
            }
            Outcome::DeadlineExceeded { deadline } => {
                format!(
                    "the request's deadline of {} ms passed before it completed",
                    deadline.as_millis()
                )
            }
            Outcome::FabricError { message } => {
                format!("the fabric failed this request: {message}")
            }
            Outcome::ShuttingDown => "the server is shutting down".into(),
        }
    }

    /// The OpenAI-shaped error body.
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {
            "message": self.message(),
            "type": self.type_str(),
            "param": self.param(),
            "code": self.code(),
        }})
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Outcome::Overloaded { retry_after, .. } | Outcome::ModelLoading { retry_after, .. } => {
                Some(*retry_after)
            }
            Outcome::ShuttingDown => Some(Duration::from_secs(1)),
            _ => None,
        }
    }

    /// The HTTP response.
    pub fn response(&self) -> Response<Body> {
        let mut bytes = serde_json::to_vec(&self.body()).unwrap_or_default();
        bytes.push(b'\n');
        let mut resp = Response::new(full(Bytes::from(bytes)));
        *resp.status_mut() = self.status();
        let h = resp.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(after) = self.retry_after() {
            let ms = after.as_millis().max(1);
            let secs = after.as_secs() + u64::from(after.subsec_nanos() > 0);
            h.insert(RETRY_AFTER, HeaderValue::from(secs.max(1)));
            h.insert("retry-after-ms", HeaderValue::from(ms as u64));
        }
        match self {
            Outcome::DeadlineExceeded { .. } => {
                h.insert("x-should-retry", HeaderValue::from_static("false"));
            }
            Outcome::MethodNotAllowed { allow, .. } => {
                h.insert(ALLOW, HeaderValue::from_static(allow));
            }
            Outcome::ShuttingDown => {
                h.insert(CONNECTION, HeaderValue::from_static("close"));
            }
            _ => {}
        }
        resp
    }

    /// The same error inside an event stream that has already started.
    pub fn sse(&self) -> Bytes {
        let body = serde_json::to_string(&self.body()).unwrap_or_default();
        Bytes::from(format!("data: {body}\n\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overloaded_carries_both_retry_headers() {
        let o = Outcome::Overloaded {
            retry_after: Duration::from_millis(1500),
            reason: "queue full".into(),
        };
        let r = o.response();
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()[RETRY_AFTER], "2");
        assert_eq!(r.headers()["retry-after-ms"], "1500");
        assert_eq!(o.body()["error"]["type"], "overloaded");
    }

    #[test]
    fn deadline_says_do_not_retry() {
        let r = Outcome::DeadlineExceeded {
            deadline: Duration::from_millis(300),
        }
        .response();
        assert_eq!(r.status(), 504);
        assert_eq!(r.headers()["x-should-retry"], "false");
    }

    #[test]
    fn bad_fields_are_named() {
        let o = Outcome::invalid("max_tokens", "must be at least 1");
        assert_eq!(o.body()["error"]["param"], "max_tokens");
        assert_eq!(o.status(), 400);
        assert!(o.sse().starts_with(b"data: {\"error\""));
    }
}
