//! Where an ending becomes HTTP: the one mapping from outcomes to statuses,
//! and the OpenAI-shaped error body (`{"error": {"message", "type",
//! "param", "code"}}`).
//!
//! | outcome | status | type | why |
//! |---|---|---|---|
//! | bad request | 400 | `invalid_request_error` | `param` names the field |
//! | unknown model | 404 | `invalid_request_error`, code `model_not_found` | as the OpenAI API does |
//! | unknown path | 404 | `invalid_request_error`, code `unknown_url` | |
//! | wrong method | 405 | `invalid_request_error`, code `method_not_allowed` | with `Allow` |
//! | body over the limit | 413 | `invalid_request_error`, code `body_too_large` | declared too large: before `100 Continue` |
//! | head over the limit | 431 | `invalid_request_error`, code `header_too_large` | then closed |
//! | wrong content type | 415 | `invalid_request_error`, code `unsupported_media_type` | |
//! | overloaded | 429 | `overloaded` | `Retry-After` and `retry-after-ms`, which the OpenAI SDK honours |
//! | model loading | 503 | `model_loading` | `Retry-After`: the model is being reflashed |
//! | model not loaded | 503 | `model_not_loaded` | in the catalog, in no slot |
//! | deadline exceeded | 504 | `deadline_exceeded` | `x-should-retry: false`: a retried speculative request is stale |
//! | predicted late | 504 | `deadline_exceeded`, code `predicted_late` | at once, with `X-Fabricd-Predicted-Wait-Ms` and `x-should-retry: false` |
//! | superseded | 409 | `superseded`, code `superseded` | a newer request of its session replaced it; `x-should-retry: false` |
//! | fabric error | 502 | `fabric_error` | the fabric failed or corrupted the output; retrying is fine |
//! | shutting down | 503 | `shutting_down` | `Retry-After`, `Connection: close` |

use std::time::Duration;

use bytes::Bytes;
use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Response, StatusCode};
use serde_json::json;

use super::body::{full, Body};
use crate::sched::{Ending, Outcome};

/// The predicted wait of a request refused as predicted late, in ms.
pub const PREDICTED_WAIT: &str = "x-fabricd-predicted-wait-ms";

/// The error body's `type`, as a header of every typed failure.
pub const ERROR_TYPE: &str = "x-fabricd-error";

/// `overloaded` for a load balancer that cannot retry a 429 (HAProxy
/// before 3.0 has no `retry-on 429`): the status it retries on another
/// board, with the type in [`ERROR_TYPE`] so that it can give the client
/// back its 429 after the last try.
pub fn overloaded_for_proxy(resp: &mut Response<Body>, status: StatusCode) {
    if resp.status() == StatusCode::TOO_MANY_REQUESTS {
        *resp.status_mut() = status;
    }
}

/// How an HTTP exchange ended without a result: a domain outcome (from
/// validation or the scheduler), or a refusal of the HTTP layer's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    Outcome(Outcome),
    NotFound { path: String },
    MethodNotAllowed { method: String, allow: &'static str },
    BodyTooLarge { limit: usize },
    HeaderTooLarge { limit: usize },
    UnsupportedMediaType { found: String },
}

impl From<Outcome> for Failure {
    fn from(o: Outcome) -> Failure {
        Failure::Outcome(o)
    }
}

/// The one place an ending becomes an HTTP status.
pub fn status(f: &Failure) -> StatusCode {
    match f {
        Failure::NotFound { .. } => StatusCode::NOT_FOUND,
        Failure::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
        Failure::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        Failure::HeaderTooLarge { .. } => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        Failure::UnsupportedMediaType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        Failure::Outcome(o) => match o {
            Outcome::Invalid { .. } => StatusCode::BAD_REQUEST,
            Outcome::ModelNotFound { .. } => StatusCode::NOT_FOUND,
            Outcome::Overloaded { .. } => StatusCode::TOO_MANY_REQUESTS,
            Outcome::ModelLoading { .. }
            | Outcome::ModelNotLoaded { .. }
            | Outcome::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            Outcome::DeadlineExceeded { .. } | Outcome::PredictedLate { .. } => {
                StatusCode::GATEWAY_TIMEOUT
            }
            Outcome::Superseded => StatusCode::CONFLICT,
            Outcome::FabricError { .. } => StatusCode::BAD_GATEWAY,
        },
    }
}

impl Failure {
    /// What the request is counted as.
    pub fn ending(&self) -> Ending {
        match self {
            Failure::Outcome(o) => o.ending(),
            _ => Ending::InvalidRequest,
        }
    }

    /// The error `type`.
    fn type_str(&self) -> &'static str {
        match self {
            Failure::Outcome(o) => match o {
                Outcome::Invalid { .. } | Outcome::ModelNotFound { .. } => "invalid_request_error",
                Outcome::Overloaded { .. } => "overloaded",
                Outcome::ModelLoading { .. } => "model_loading",
                Outcome::ModelNotLoaded { .. } => "model_not_loaded",
                Outcome::DeadlineExceeded { .. } | Outcome::PredictedLate { .. } => {
                    "deadline_exceeded"
                }
                Outcome::Superseded => "superseded",
                Outcome::FabricError { .. } => "fabric_error",
                Outcome::ShuttingDown => "shutting_down",
            },
            _ => "invalid_request_error",
        }
    }

    fn code(&self) -> Option<&'static str> {
        match self {
            Failure::Outcome(Outcome::Invalid { code, .. }) => Some(code),
            Failure::Outcome(Outcome::ModelNotFound { .. }) => Some("model_not_found"),
            Failure::Outcome(Outcome::PredictedLate { .. }) => Some("predicted_late"),
            Failure::Outcome(Outcome::Superseded) => Some("superseded"),
            Failure::Outcome(_) => None,
            Failure::NotFound { .. } => Some("unknown_url"),
            Failure::MethodNotAllowed { .. } => Some("method_not_allowed"),
            Failure::BodyTooLarge { .. } => Some("body_too_large"),
            Failure::HeaderTooLarge { .. } => Some("header_too_large"),
            Failure::UnsupportedMediaType { .. } => Some("unsupported_media_type"),
        }
    }

    fn param(&self) -> Option<&'static str> {
        match self {
            Failure::Outcome(Outcome::Invalid { param, .. }) => *param,
            Failure::Outcome(
                Outcome::ModelNotFound { .. }
                | Outcome::ModelLoading { .. }
                | Outcome::ModelNotLoaded { .. },
            ) => Some("model"),
            _ => None,
        }
    }

    /// The human message.
    pub fn message(&self) -> String {
        match self {
            Failure::Outcome(o) => o.message(),
            Failure::NotFound { path } => format!("no such endpoint: {path}"),
            Failure::MethodNotAllowed { method, allow } => {
                format!("{method} is not allowed here; use {allow}")
            }
            Failure::BodyTooLarge { limit } => {
                format!("the request body is larger than {limit} bytes")
            }
            Failure::HeaderTooLarge { limit } => {
                format!("the request line and headers are larger than {limit} bytes")
            }
            Failure::UnsupportedMediaType { found } => {
                format!("content type {found:?} is not supported; send application/json")
            }
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
            Failure::Outcome(
                Outcome::Overloaded { retry_after, .. } | Outcome::ModelLoading { retry_after, .. },
            ) => Some(*retry_after),
            Failure::Outcome(Outcome::ShuttingDown) => Some(Duration::from_secs(1)),
            _ => None,
        }
    }

    /// The HTTP response.
    pub fn response(&self) -> Response<Body> {
        let mut bytes = serde_json::to_vec(&self.body()).unwrap_or_default();
        bytes.push(b'\n');
        let mut resp = Response::new(full(Bytes::from(bytes)));
        *resp.status_mut() = status(self);
        let h = resp.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        // The body's type, where a proxy can act on it without reading the
        // body (fleet/haproxy.cfg does).
        h.insert(ERROR_TYPE, HeaderValue::from_static(self.type_str()));
        if let Some(after) = self.retry_after() {
            let ms = after.as_millis().max(1);
            let secs = after.as_secs() + u64::from(after.subsec_nanos() > 0);
            h.insert(RETRY_AFTER, HeaderValue::from(secs.max(1)));
            h.insert("retry-after-ms", HeaderValue::from(ms as u64));
        }
        match self {
            // A retried speculative request would be stale: the OpenAI SDK
            // retries 409 and 5xx unless told not to.
            Failure::Outcome(Outcome::DeadlineExceeded { .. } | Outcome::Superseded) => {
                h.insert("x-should-retry", HeaderValue::from_static("false"));
            }
            Failure::Outcome(Outcome::PredictedLate { predicted_wait, .. }) => {
                h.insert("x-should-retry", HeaderValue::from_static("false"));
                h.insert(
                    PREDICTED_WAIT,
                    HeaderValue::from(predicted_wait.as_millis() as u64),
                );
            }
            Failure::MethodNotAllowed { allow, .. } => {
                h.insert(ALLOW, HeaderValue::from_static(allow));
            }
            Failure::Outcome(Outcome::ShuttingDown) => {
                h.insert(CONNECTION, HeaderValue::from_static("close"));
            }
            _ => {}
        }
        resp
    }

    /// The response as bytes on the wire, and `Connection: close`: for a
    /// refusal written before hyper has the connection (a head too large,
    /// the heads' budget spent).
    pub fn wire(&self, to_proxy: Option<StatusCode>) -> Vec<u8> {
        let mut resp = self.response();
        if let Some(status) = to_proxy {
            overloaded_for_proxy(&mut resp, status);
        }
        let mut body = serde_json::to_vec(&self.body()).unwrap_or_default();
        body.push(b'\n');
        let status = resp.status();
        let mut out = Vec::with_capacity(256 + body.len());
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(status.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
        out.extend_from_slice(b"\r\n");
        for (k, v) in resp.headers() {
            if k == CONNECTION {
                continue;
            }
            out.extend_from_slice(k.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(v.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(
            format!(
                "content-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        );
        out.extend_from_slice(&body);
        out
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
        let o = Failure::from(Outcome::Overloaded {
            retry_after: Duration::from_millis(1500),
            reason: "queue full".into(),
        });
        let r = o.response();
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()[RETRY_AFTER], "2");
        assert_eq!(r.headers()["retry-after-ms"], "1500");
        assert_eq!(o.body()["error"]["type"], "overloaded");
        assert_eq!(r.headers()[ERROR_TYPE], "overloaded");
    }

    #[test]
    fn a_proxy_may_hear_overloaded_as_503_and_nothing_else_changes() {
        let overloaded = Failure::from(Outcome::Overloaded {
            retry_after: Duration::from_millis(1500),
            reason: "queue full".into(),
        });
        let mut r = overloaded.response();
        overloaded_for_proxy(&mut r, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()[ERROR_TYPE], "overloaded");
        assert_eq!(r.headers()["retry-after-ms"], "1500");
        // Only a 429 is turned: a deadline stays what it is.
        let late = Failure::from(Outcome::DeadlineExceeded {
            deadline: Duration::from_millis(10),
        });
        let mut r = late.response();
        overloaded_for_proxy(&mut r, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.status(), 504);
        assert_eq!(r.headers()[ERROR_TYPE], "deadline_exceeded");
    }

    #[test]
    fn a_refusal_on_the_wire_is_a_whole_response_that_closes() {
        let f = Failure::HeaderTooLarge { limit: 16384 };
        let wire = String::from_utf8(f.wire(None)).expect("utf-8");
        let (head, body) = wire.split_once("\r\n\r\n").expect("a head");
        assert!(
            head.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\nconnection: close"), "{head}");
        assert!(
            head.contains(&format!("\r\ncontent-length: {}", body.len())),
            "{head}"
        );
        let v: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(v["error"]["code"], "header_too_large");
        assert!(v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("16384")));
    }

    #[test]
    fn deadline_says_do_not_retry() {
        let r = Failure::from(Outcome::DeadlineExceeded {
            deadline: Duration::from_millis(300),
        })
        .response();
        assert_eq!(r.status(), 504);
        assert_eq!(r.headers()["x-should-retry"], "false");
    }

    #[test]
    fn superseded_is_a_409_not_to_retry() {
        let f = Failure::from(Outcome::Superseded);
        let r = f.response();
        assert_eq!(r.status(), 409);
        assert_eq!(r.headers()["x-should-retry"], "false");
        let e = &f.body()["error"];
        assert_eq!(
            (&e["type"], &e["code"]),
            (&"superseded".into(), &"superseded".into())
        );
        assert!(e["param"].is_null());
        assert_eq!(f.ending(), Ending::Superseded);
        assert!(f.sse().starts_with(b"data: {\"error\""));
    }

    #[test]
    fn predicted_late_says_how_long_and_not_to_retry() {
        let f = Failure::from(Outcome::PredictedLate {
            predicted_wait: Duration::from_millis(1234),
            deadline: Duration::from_millis(1000),
        });
        let r = f.response();
        assert_eq!(r.status(), 504);
        assert_eq!(r.headers()["x-should-retry"], "false");
        assert_eq!(r.headers()[PREDICTED_WAIT], "1234");
        assert_eq!(f.body()["error"]["type"], "deadline_exceeded");
        assert!(f.message().contains("1234 ms"), "{}", f.message());
        assert_eq!(f.ending(), Ending::PredictedLate);
    }

    #[test]
    fn bad_fields_are_named() {
        let o = Failure::from(Outcome::invalid("max_tokens", "must be at least 1"));
        assert_eq!(o.body()["error"]["param"], "max_tokens");
        assert_eq!(status(&o), 400);
        assert!(o.sse().starts_with(b"data: {\"error\""));
    }

    #[test]
    fn http_refusals_count_as_invalid_requests() {
        for f in [
            Failure::NotFound { path: "/x".into() },
            Failure::BodyTooLarge { limit: 1 },
            Failure::UnsupportedMediaType {
                found: "text/plain".into(),
            },
            Failure::MethodNotAllowed {
                method: "GET".into(),
                allow: "POST",
            },
        ] {
            assert_eq!(f.ending(), Ending::InvalidRequest, "{f:?}");
            assert_eq!(f.body()["error"]["type"], "invalid_request_error");
        }
    }
}
