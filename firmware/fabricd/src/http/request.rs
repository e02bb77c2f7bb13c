//! The completion request's shape (OpenAI completions), parsed and checked.
//!
//! A request body becomes a [`CompletionRequest`] here, or a 400 that names
//! the field. Fields of the OpenAI API that the fabric cannot honour (`n`,
//! `best_of`, `logprobs`, `echo`, `suffix`, penalties, `logit_bias`) are
//! refused when set to anything but their neutral value, rather than
//! silently ignored. Unknown fields are ignored, as clients send extras.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::sched::Outcome;

/// Longest session id, in bytes.
pub const MAX_SESSION_LEN: usize = 128;

/// Most stop sequences per request (as the OpenAI API).
pub const MAX_STOPS: usize = 4;
/// Longest stop sequence, in bytes.
pub const MAX_STOP_LEN: usize = 256;

/// A completion request, checked for shape (not yet against the model).
///
/// The strings borrow the body where they can: the common request needs
/// its model and prompt only until it is tokenized and admitted.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionRequest<'a> {
    pub model: Cow<'a, str>,
    pub prompt: Cow<'a, str>,
    pub max_tokens: Option<u32>,
    pub temperature: f32,
    pub seed: Option<u64>,
    pub stop: Vec<String>,
    pub stream: bool,
    pub include_usage: bool,
    pub user: Option<Cow<'a, str>>,
    /// The typing session the request belongs to (an extension; see
    /// [`check_session`]).
    pub session: Option<Cow<'a, str>>,
    /// Where the request stands in its session, in the client's own order
    /// (an extension; see [`check_session_seq`]).
    pub session_seq: Option<u64>,
    pub deadline_ms: Option<u64>,
    /// Keep generating past the end-of-text token (an extension, as in
    /// vLLM): fixed-length outputs, for benchmarks.
    pub ignore_eos: bool,
}

fn bad(param: &'static str, message: impl Into<String>) -> Outcome {
    Outcome::invalid(param, message)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn get<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

fn string(obj: &Map<String, Value>, key: &'static str) -> Result<Option<String>, Outcome> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(bad(key, format!("{key} must be a string, not {}", kind(v)))),
    }
}

fn uint(obj: &Map<String, Value>, key: &'static str) -> Result<Option<u64>, Outcome> {
    match get(obj, key) {
        None => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            bad(
                key,
                format!("{key} must be a non-negative integer, not {v}"),
            )
        }),
    }
}

fn float(obj: &Map<String, Value>, key: &'static str) -> Result<Option<f64>, Outcome> {
    match get(obj, key) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| bad(key, format!("{key} must be a number, not {}", kind(v)))),
    }
}

fn boolean(obj: &Map<String, Value>, key: &'static str) -> Result<Option<bool>, Outcome> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(bad(
            key,
            format!("{key} must be a boolean, not {}", kind(v)),
        )),
    }
}

/// Parses and checks a `POST /v1/completions` body.
pub fn parse_completion(body: &[u8]) -> Result<CompletionRequest<'_>, Outcome> {
    // Checked whole, once: cheaper than serde_json checking each string it
    // reads from bytes.
    let text = std::str::from_utf8(body).map_err(|e| Outcome::Invalid {
        param: None,
        code: "invalid_utf8",
        message: format!(
            "the request body is not valid UTF-8 (at byte {})",
            e.valid_up_to()
        ),
    })?;
    if let Some(checked) = parse_plain(text) {
        return checked;
    }
    parse_general(text)
}

/// The common body, typed: only these fields, each of its usual type.
/// Parsed straight into this struct, with no JSON tree in between (most
/// of the cost of a request's JSON); any other body (another field, a
/// type, a duplicate) goes to [`parse_general`], which names what is
/// wrong. Both apply the same checks, in the same order.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Plain<'a> {
    #[serde(borrow)]
    model: Cow<'a, str>,
    #[serde(borrow)]
    prompt: Cow<'a, str>,
    max_tokens: Option<u64>,
    temperature: Option<f64>,
    seed: Option<u64>,
    stream: Option<bool>,
    #[serde(borrow)]
    user: Option<Cow<'a, str>>,
    #[serde(borrow)]
    session: Option<Cow<'a, str>>,
    session_seq: Option<u64>,
    deadline_ms: Option<u64>,
    ignore_eos: Option<bool>,
}

/// `None` when the body is not a [`Plain`] one.
fn parse_plain(text: &str) -> Option<Result<CompletionRequest<'_>, Outcome>> {
    let p: Plain = serde_json::from_str(text).ok()?;
    Some(check_plain(p))
}

fn check_plain(p: Plain<'_>) -> Result<CompletionRequest<'_>, Outcome> {
    check_prompt(&p.prompt)?;
    let max_tokens = check_max_tokens(p.max_tokens)?;
    let temperature = check_temperature(p.temperature)?;
    check_deadline(p.deadline_ms)?;
    check_session(p.session.as_deref())?;
    check_session_seq(p.session_seq)?;
    Ok(CompletionRequest {
        model: p.model,
        prompt: p.prompt,
        max_tokens,
        temperature: temperature as f32,
        seed: p.seed,
        stop: Vec::new(),
        stream: p.stream.unwrap_or(false),
        include_usage: false,
        user: p.user,
        session: p.session,
        session_seq: p.session_seq,
        deadline_ms: p.deadline_ms,
        ignore_eos: p.ignore_eos.unwrap_or(false),
    })
}

fn check_prompt(prompt: &str) -> Result<(), Outcome> {
    if prompt.is_empty() {
        return Err(bad("prompt", "prompt is empty"));
    }
    Ok(())
}

fn check_max_tokens(max_tokens: Option<u64>) -> Result<Option<u32>, Outcome> {
    let max_tokens = max_tokens
        .map(|n| {
            u32::try_from(n).map_err(|_| {
                bad(
                    "max_tokens",
                    format!("max_tokens {n} is far beyond the fabric's limit"),
                )
            })
        })
        .transpose()?;
    if max_tokens == Some(0) {
        return Err(bad("max_tokens", "max_tokens must be at least 1"));
    }
    Ok(max_tokens)
}

fn check_temperature(temperature: Option<f64>) -> Result<f64, Outcome> {
    let temperature = temperature.unwrap_or(1.0);
    if !(0.0..=2.0).contains(&temperature) {
        return Err(bad(
            "temperature",
            format!("temperature {temperature} is outside 0..=2"),
        ));
    }
    Ok(temperature)
}

/// A session id (the body's `session`, or the `X-Session-Id` header): 1 to
/// [`MAX_SESSION_LEN`] bytes. Any string of that size will do: it is only
/// compared, never parsed or shown.
pub fn check_session(session: Option<&str>) -> Result<(), Outcome> {
    match session {
        Some("") => Err(bad("session", "session is empty")),
        Some(s) if s.len() > MAX_SESSION_LEN => Err(bad(
            "session",
            format!("session is {} bytes; at most {MAX_SESSION_LEN}", s.len()),
        )),
        _ => Ok(()),
    }
}

/// Largest `session_seq`: the largest integer a JavaScript number holds
/// exactly, so a page's counter and the daemon agree on every value.
pub const MAX_SESSION_SEQ: u64 = (1 << 53) - 1;

/// A session's sequence number (the body's `session_seq`, or the
/// `X-Session-Seq` header): the client's own order of its session's
/// requests, which the order they arrive in need not keep (a browser sends
/// on up to six connections).
pub fn check_session_seq(seq: Option<u64>) -> Result<(), Outcome> {
    match seq {
        Some(n) if n > MAX_SESSION_SEQ => Err(bad(
            "session_seq",
            format!("session_seq {n} is over {MAX_SESSION_SEQ} (2^53 - 1)"),
        )),
        _ => Ok(()),
    }
}

fn check_deadline(deadline_ms: Option<u64>) -> Result<(), Outcome> {
    if deadline_ms == Some(0) {
        return Err(bad("deadline_ms", "deadline_ms must be at least 1"));
    }
    Ok(())
}

/// Any body: through a JSON tree, so a field of the wrong type is named.
fn parse_general(text: &str) -> Result<CompletionRequest<'static>, Outcome> {
    let value: Value = serde_json::from_str(text).map_err(|e| Outcome::Invalid {
        param: None,
        code: "invalid_json",
        message: format!("the request body is not valid JSON: {e}"),
    })?;
    let Value::Object(obj) = value else {
        return Err(Outcome::Invalid {
            param: None,
            code: "invalid_json",
            message: format!(
                "the request body must be a JSON object, not {}",
                kind(&value)
            ),
        });
    };
    let model = string(&obj, "model")?.ok_or_else(|| Outcome::Invalid {
        param: Some("model"),
        code: "missing_required_parameter",
        message: "model is required".into(),
    })?;
    let prompt = match get(&obj, "prompt") {
        None => {
            return Err(Outcome::Invalid {
                param: Some("prompt"),
                code: "missing_required_parameter",
                message: "prompt is required".into(),
            })
        }
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => match items.as_slice() {
            [Value::String(s)] => s.clone(),
            [] => return Err(bad("prompt", "prompt is an empty list")),
            [_] => {
                return Err(bad(
                    "prompt",
                    "prompt must be a string (token-id prompts are not supported)",
                ))
            }
            _ => return Err(bad("prompt", "only one prompt per request is supported")),
        },
        Some(v) => {
            return Err(bad(
                "prompt",
                format!("prompt must be a string, not {}", kind(v)),
            ))
        }
    };
    check_prompt(&prompt)?;
    let max_tokens = check_max_tokens(uint(&obj, "max_tokens")?)?;
    let temperature = check_temperature(float(&obj, "temperature")?)?;
    let seed = match get(&obj, "seed") {
        None => None,
        Some(v) => Some(
            v.as_u64()
                .or_else(|| v.as_i64().map(|i| i as u64))
                .ok_or_else(|| bad("seed", format!("seed must be an integer, not {v}")))?,
        ),
    };
    let stop = match get(&obj, "stop") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => Ok(s.clone()),
                v => Err(bad(
                    "stop",
                    format!("stop sequences must be strings, not {}", kind(v)),
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(v) => {
            return Err(bad(
                "stop",
                format!(
                    "stop must be a string or a list of strings, not {}",
                    kind(v)
                ),
            ))
        }
    };
    if stop.len() > MAX_STOPS {
        return Err(bad(
            "stop",
            format!("at most {MAX_STOPS} stop sequences, got {}", stop.len()),
        ));
    }
    if let Some(s) = stop.iter().find(|s| s.len() > MAX_STOP_LEN) {
        return Err(bad(
            "stop",
            format!(
                "a stop sequence of {} bytes is longer than {MAX_STOP_LEN}",
                s.len()
            ),
        ));
    }
    let stream = boolean(&obj, "stream")?.unwrap_or(false);
    let include_usage = match get(&obj, "stream_options") {
        None => false,
        Some(Value::Object(o)) => boolean(o, "include_usage")?.unwrap_or(false),
        Some(v) => {
            return Err(bad(
                "stream_options",
                format!("stream_options must be an object, not {}", kind(v)),
            ))
        }
    };
    for (key, neutral) in [
        ("n", 1.0),
        ("best_of", 1.0),
        ("top_p", 1.0),
        ("presence_penalty", 0.0),
        ("frequency_penalty", 0.0),
    ] {
        if let Some(v) = float(&obj, key_static(key))? {
            if v != neutral {
                return Err(bad(
                    key_static(key),
                    format!("{key} = {v} is not supported by the fabric (only {neutral})"),
                ));
            }
        }
    }
    if boolean(&obj, "echo")? == Some(true) {
        return Err(bad("echo", "echo is not supported"));
    }
    if get(&obj, "logprobs").is_some() {
        return Err(bad("logprobs", "logprobs are not supported"));
    }
    if string(&obj, "suffix")?.is_some_and(|s| !s.is_empty()) {
        return Err(bad("suffix", "suffix is not supported"));
    }
    if get(&obj, "logit_bias").is_some_and(|v| v.as_object().is_none_or(|o| !o.is_empty())) {
        return Err(bad("logit_bias", "logit_bias is not supported"));
    }
    let user = string(&obj, "user")?;
    let session = string(&obj, "session")?;
    check_session(session.as_deref())?;
    let session_seq = uint(&obj, "session_seq")?;
    check_session_seq(session_seq)?;
    let deadline_ms = uint(&obj, "deadline_ms")?;
    check_deadline(deadline_ms)?;
    let ignore_eos = boolean(&obj, "ignore_eos")?.unwrap_or(false);
    Ok(CompletionRequest {
        ignore_eos,
        model: Cow::Owned(model),
        prompt: Cow::Owned(prompt),
        max_tokens,
        temperature: temperature as f32,
        seed,
        stop,
        stream,
        include_usage,
        user: user.map(Cow::Owned),
        session: session.map(Cow::Owned),
        session_seq,
        deadline_ms,
    })
}

fn key_static(key: &str) -> &'static str {
    match key {
        "n" => "n",
        "best_of" => "best_of",
        "top_p" => "top_p",
        "presence_penalty" => "presence_penalty",
        _ => "frequency_penalty",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> Outcome {
        parse_completion(body.as_bytes()).expect_err(body)
    }

    fn param(o: &Outcome) -> Option<&'static str> {
        match o {
            Outcome::Invalid { param, .. } => *param,
            _ => None,
        }
    }

    #[test]
    fn a_plain_request_parses() {
        let r = parse_completion(br#"{"model":"kjv","prompt":"In the","max_tokens":8,"seed":3,"stop":["\n"],"stream":true,"stream_options":{"include_usage":true}}"#)
            .expect("valid");
        assert_eq!(r.model, "kjv");
        assert_eq!(r.max_tokens, Some(8));
        assert_eq!(r.seed, Some(3));
        assert!(r.stream && r.include_usage);
        assert_eq!(r.stop, vec!["\n".to_string()]);
        let r = parse_completion(br#"{"model":"kjv","prompt":["x"],"unknown":1}"#).expect("valid");
        assert_eq!((&*r.prompt, r.temperature), ("x", 1.0));
    }

    #[test]
    fn every_bad_field_is_named() {
        for (body, field) in [
            (r#"{"prompt":"x"}"#, "model"),
            (r#"{"model":"kjv"}"#, "prompt"),
            (r#"{"model":"kjv","prompt":""}"#, "prompt"),
            (r#"{"model":"kjv","prompt":["a","b"]}"#, "prompt"),
            (
                r#"{"model":"kjv","prompt":"x","max_tokens":0}"#,
                "max_tokens",
            ),
            (
                r#"{"model":"kjv","prompt":"x","max_tokens":-3}"#,
                "max_tokens",
            ),
            (
                r#"{"model":"kjv","prompt":"x","max_tokens":1.5}"#,
                "max_tokens",
            ),
            (
                r#"{"model":"kjv","prompt":"x","temperature":9}"#,
                "temperature",
            ),
            (r#"{"model":"kjv","prompt":"x","stop":[1]}"#, "stop"),
            (
                r#"{"model":"kjv","prompt":"x","stop":["a","b","c","d","e"]}"#,
                "stop",
            ),
            (r#"{"model":"kjv","prompt":"x","stream":"yes"}"#, "stream"),
            (r#"{"model":"kjv","prompt":"x","n":2}"#, "n"),
            (r#"{"model":"kjv","prompt":"x","logprobs":2}"#, "logprobs"),
            (
                r#"{"model":"kjv","prompt":"x","deadline_ms":0}"#,
                "deadline_ms",
            ),
            (r#"{"model":7,"prompt":"x"}"#, "model"),
            (r#"{"model":"kjv","prompt":"x","session":""}"#, "session"),
            (r#"{"model":"kjv","prompt":"x","session":7}"#, "session"),
            (r#"{"model":"kjv","prompt":"x","session":["a"]}"#, "session"),
        ] {
            assert_eq!(param(&err(body)), Some(field), "{body}");
        }
    }

    #[test]
    fn the_typed_path_answers_as_the_general_one() {
        let bodies = [
            r#"{"model":"kjv","prompt":"And God said","max_tokens":8,"seed":1,"ignore_eos":true}"#,
            r#"{"model":"kjv","prompt":"x","temperature":0,"stream":true,"user":"u\n1"}"#,
            r#"{"model":"k\u006av","prompt":"\"q\"","temperature":1.5,"deadline_ms":250}"#,
            r#"{"model":"kjv","prompt":"x","seed":null,"max_tokens":null,"stream":false}"#,
            r#"{"model":"kjv","prompt":""}"#,
            r#"{"model":"kjv","prompt":"x","max_tokens":0}"#,
            r#"{"model":"kjv","prompt":"x","max_tokens":99999999999}"#,
            r#"{"model":"kjv","prompt":"x","temperature":2.5}"#,
            r#"{"model":"kjv","prompt":"x","temperature":-0.5}"#,
            r#"{"model":"kjv","prompt":"x","deadline_ms":0}"#,
            r#"{"model":"kjv","prompt":"x","session":"typist-7"}"#,
            r#"{"model":"kjv","prompt":"x","session":""}"#,
        ];
        for body in bodies {
            let typed = parse_plain(body).unwrap_or_else(|| panic!("typed path: {body}"));
            assert_eq!(typed, parse_general(body), "{body}");
        }
        // Everything else is the general path's to answer.
        for body in [
            r#"{"model":"kjv","prompt":"x","stop":"\n"}"#,
            r#"{"model":"kjv","prompt":["x"]}"#,
            r#"{"model":"kjv","prompt":"x","seed":-1}"#,
            r#"{"model":"kjv","prompt":"x","max_tokens":1.5}"#,
            r#"{"model":"kjv","prompt":"x","n":1}"#,
            r#"{"model":"kjv","prompt":"x","prompt":"y"}"#,
            r#"{"model":7,"prompt":"x"}"#,
            r#"{"prompt":"x"}"#,
        ] {
            assert!(parse_plain(body).is_none(), "{body}");
        }
        // Invalid UTF-8 in a string: named before either path reads it.
        let bad = parse_completion(b"{\"model\":\"kjv\",\"prompt\":\"a\xff\"}");
        assert!(
            matches!(
                bad,
                Err(Outcome::Invalid {
                    code: "invalid_utf8",
                    ..
                })
            ),
            "{bad:?}"
        );
        let twice = parse_completion(br#"{"model":"kjv","prompt":"x","prompt":"y"}"#);
        assert_eq!(twice.map(|r| r.prompt).as_deref(), Ok("y"));
    }

    #[test]
    fn a_session_is_one_to_128_bytes() {
        let long = "s".repeat(MAX_SESSION_LEN);
        let body = format!(r#"{{"model":"kjv","prompt":"x","session":"{long}"}}"#);
        let r = parse_completion(body.as_bytes()).expect("128 bytes");
        assert_eq!(r.session.as_deref(), Some(long.as_str()));
        let body = format!(r#"{{"model":"kjv","prompt":"x","session":"{long}s"}}"#);
        assert_eq!(param(&err(&body)), Some("session"));
        // Multi-byte: counted in bytes.
        let body = format!(
            r#"{{"model":"kjv","prompt":"x","session":"{}"}}"#,
            "é".repeat(65)
        );
        assert_eq!(param(&err(&body)), Some("session"));
    }

    #[test]
    fn malformed_bodies_are_typed() {
        assert!(matches!(
            err("{not json"),
            Outcome::Invalid {
                code: "invalid_json",
                ..
            }
        ));
        assert!(matches!(
            err("[1,2]"),
            Outcome::Invalid {
                code: "invalid_json",
                ..
            }
        ));
        let bytes = b"{\"model\":\"\xff\"}";
        assert!(matches!(
            parse_completion(bytes),
            Err(Outcome::Invalid {
                code: "invalid_utf8",
                ..
            })
        ));
    }
}
