//! A request's head as the connection reads it: where it ends
//! (`fabricd::http::head::head_len`, how `read_head` knows it is whole),
//! and whether it is a completion served before hyper
//! (`fabricd::http::early::plan`).
//!
//! Beyond not panicking: a planned head is what the plan says it is: `POST
//! /v1/completions`, ending where the head reader saw it end (else the
//! body would be read from the wrong place), with one `Content-Length`
//! that is the body's length, within the limit, and no `Transfer-Encoding`,
//! `Expect` or `Upgrade`; and httparse, hyper's own parser, takes the same
//! head whole, to the same length.
//!
//! And one judge of every head, planned or not: a head the head reader
//! takes as whole, httparse (with hyper's limit of headers) takes whole to
//! the same length or refuses; one the reader waits on for more, httparse
//! does not call whole. hyper is never handed a head the reader has not
//! judged.
#![no_main]

use fabricd::http::early::plan;
use fabricd::http::head::{head_len, MAX_HEADERS};
use libfuzzer_sys::fuzz_target;

/// A small limit, so that lengths past it are found.
const LIMIT: usize = 4096;

fuzz_target!(|data: &[u8]| {
    // As `read_head` does (and hyper would): empty lines before the
    // request line are dropped before the head is looked at.
    let blank = data
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    let data = &data[blank..];
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let judged = httparse::Request::new(&mut headers).parse(data);
    let Some(end) = head_len(data) else {
        assert!(
            !matches!(judged, Ok(httparse::Status::Complete(_))),
            "httparse has a whole head the reader would wait on: {judged:?}"
        );
        return;
    };
    assert!(end <= data.len());
    assert!(
        judged.is_err() || judged == Ok(httparse::Status::Complete(end)),
        "the reader ends the head at {end}, httparse says {judged:?}"
    );
    let Some(p) = plan(data, LIMIT) else {
        return;
    };
    assert_eq!(p.head_len(), end, "the plan and the head reader disagree");
    assert!(p.body_len() <= LIMIT);
    let head = p.head();
    assert_eq!(head.method(), "POST");
    assert_eq!(head.uri(), "/v1/completions");
    let lengths: Vec<_> = head.headers().get_all("content-length").iter().collect();
    assert_eq!(lengths.len(), 1);
    assert_eq!(
        lengths[0].to_str().ok().and_then(|v| v.parse().ok()),
        Some(p.body_len())
    );
    for name in ["transfer-encoding", "expect", "upgrade"] {
        assert!(!head.headers().contains_key(name), "{name}");
    }
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut headers);
    assert_eq!(req.parse(data), Ok(httparse::Status::Complete(end)));
});
