//! The completion request body (`POST /v1/completions`) as the edge reads
//! it: `fabricd::http::request::parse_completion`.
//!
//! Beyond not panicking: a body that parses meets every check the parser
//! promises (validation after it relies on them), and written back as JSON
//! it parses to the same request; a refusal is a 400 with a message, whose
//! `param`, when it names one, is a field of the request.
#![no_main]

use fabricd::http::reply::{self, Failure};
use fabricd::http::request::{
    parse_completion, CompletionRequest, MAX_SESSION_LEN, MAX_SESSION_SEQ, MAX_STOPS, MAX_STOP_LEN,
};
use fabricd::sched::Outcome;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

/// Every field a refusal may name.
const FIELDS: &[&str] = &[
    "model",
    "prompt",
    "max_tokens",
    "temperature",
    "seed",
    "stop",
    "stream",
    "stream_options",
    "include_usage",
    "n",
    "best_of",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "echo",
    "logprobs",
    "suffix",
    "logit_bias",
    "user",
    "session",
    "session_seq",
    "deadline_ms",
    "ignore_eos",
];

fuzz_target!(|body: &[u8]| {
    match parse_completion(body) {
        Ok(request) => {
            checked(&request);
            let again = written_back(&request).to_string();
            let back = parse_completion(again.as_bytes())
                .unwrap_or_else(|e| panic!("{again} was refused: {e:?}"));
            assert_eq!(back, request, "{again}");
        }
        Err(outcome) => {
            let Outcome::Invalid {
                param,
                code,
                message,
            } = &outcome
            else {
                panic!("a body is refused only as invalid, not {outcome:?}");
            };
            assert!(!message.is_empty() && !code.is_empty(), "{outcome:?}");
            if let Some(p) = param {
                assert!(FIELDS.contains(p), "unknown param {p}");
            }
            let failure = Failure::from(outcome.clone());
            assert_eq!(reply::status(&failure).as_u16(), 400);
            assert!(!failure.body().to_string().is_empty());
        }
    }
});

/// What `parse_completion` promises of a request it returns.
fn checked(r: &CompletionRequest<'_>) {
    assert!(!r.prompt.is_empty());
    assert_ne!(r.max_tokens, Some(0));
    assert!((0.0..=2.0).contains(&r.temperature), "{}", r.temperature);
    assert!(r.stop.len() <= MAX_STOPS);
    assert!(r.stop.iter().all(|s| s.len() <= MAX_STOP_LEN));
    assert!(r
        .session
        .as_ref()
        .is_none_or(|s| (1..=MAX_SESSION_LEN).contains(&s.len())));
    assert!(r.session_seq.is_none_or(|n| n <= MAX_SESSION_SEQ));
    assert_ne!(r.deadline_ms, Some(0));
}

/// The request as a client would send it.
fn written_back(r: &CompletionRequest<'_>) -> Value {
    let mut o = Map::new();
    o.insert("model".into(), json!(r.model));
    o.insert("prompt".into(), json!(r.prompt));
    o.insert("temperature".into(), json!(f64::from(r.temperature)));
    o.insert("stream".into(), json!(r.stream));
    o.insert("ignore_eos".into(), json!(r.ignore_eos));
    if r.include_usage {
        o.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if !r.stop.is_empty() {
        o.insert("stop".into(), json!(r.stop));
    }
    for (key, value) in [
        ("max_tokens", r.max_tokens.map(u64::from)),
        ("seed", r.seed),
        ("session_seq", r.session_seq),
        ("deadline_ms", r.deadline_ms),
    ] {
        if let Some(v) = value {
            o.insert(key.into(), json!(v));
        }
    }
    for (key, value) in [("user", &r.user), ("session", &r.session)] {
        if let Some(v) = value {
            o.insert(key.into(), json!(v));
        }
    }
    Value::Object(o)
}
