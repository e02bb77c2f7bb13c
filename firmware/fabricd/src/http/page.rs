//! The typing page: `GET /` serves one HTML file, embedded in the binary,
//! where you type and the fabric's suggestion shows as ghost text.
//!
//! # Invariants
//! - The page is self-contained: its script and style are inline, and its
//!   `Content-Security-Policy` lets it reach nothing but this daemon
//!   (`connect-src 'self'`), so it works on a board with no internet.
//! - It is the same bytes whatever the request's `Accept` says: there is
//!   one representation, and a browser's `Accept` is not worth a 406.
//!   Any other path is the usual typed 404 (`unknown_url`), never the page.
//! - The page shows a suggestion only for exactly the text it was asked
//!   for (it compares the field with the answer's prompt when the answer
//!   comes), and shows nothing for a typed outcome (`superseded`,
//!   `overloaded`, `deadline_exceeded`…). Each page load is one typing
//!   session (the body's `session`), so the daemon supersedes the older
//!   keystrokes' requests. `tests/browser/` checks this in Chromium.

use hyper::header::{HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use super::body::{full, Body};

/// The page (HTML with its inline script and style).
pub const PAGE: &str = include_str!("page.html");

const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `GET /`.
pub(super) fn page() -> Response<Body> {
    let mut r = Response::new(full(PAGE));
    *r.status_mut() = StatusCode::OK;
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        HeaderName::from_static("content-security-policy"),
        HeaderValue::from_static(CSP),
    );
    h.insert(
        HeaderName::from_static("x-content-type-options"),
        HeaderValue::from_static("nosniff"),
    );
    r
}
