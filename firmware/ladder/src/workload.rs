//! What the clients send, the completions they must get back, and how a
//! reply is judged.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

use crate::client::{Conn, Reply, Target};

/// The typed outcomes fabricd documents; anything else is a failure.
/// `superseded` answers a typing session's request that a newer one of the
/// same session replaced.
pub const TYPED: [&str; 7] = [
    "overloaded",
    "superseded",
    "deadline_exceeded",
    "model_loading",
    "model_not_loaded",
    "fabric_error",
    "shutting_down",
];

/// The requests of a run.
#[derive(Debug, Clone)]
pub struct Workload {
    pub model: String,
    pub prompts: Vec<String>,
    /// Seeds per prompt.
    pub seeds: u64,
    pub max_tokens: u32,
    /// Fixed-length outputs (so every request costs the fabric the same).
    pub ignore_eos: bool,
    pub deadline_ms: Option<u64>,
    /// Ask for an event stream (with the usage in its last event).
    pub stream: bool,
}

impl Workload {
    /// Eight speculative-typing prompts, eight seeds each, 8 output tokens.
    pub fn typing(model: &str, max_tokens: u32) -> Workload {
        Workload {
            model: model.to_owned(),
            prompts: [
                "And God said",
                "In the beginning",
                "The computer",
                "Blessed are the",
                "Never trust a",
                "A wise man",
                "The LORD is",
                "Life is",
            ]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
            seeds: 8,
            max_tokens,
            ignore_eos: true,
            deadline_ms: None,
            stream: false,
        }
    }

    /// Every (prompt, seed) key.
    pub fn keys(&self) -> Vec<(usize, u64)> {
        (0..self.prompts.len())
            .flat_map(|p| (0..self.seeds).map(move |s| (p, s)))
            .collect()
    }

    /// The key of client `client`'s `i`-th request.
    pub fn key(&self, client: usize, i: u64) -> (usize, u64) {
        let prompts = self.prompts.len() as u64;
        let p = (client as u64 + i) % prompts;
        let s = (client as u64 / prompts + i * 3) % self.seeds;
        (p as usize, s)
    }

    /// The request body.
    pub fn body(&self, key: (usize, u64), user: Option<&str>) -> Bytes {
        let mut v = json!({
            "model": self.model,
            "prompt": self.prompts[key.0],
            "max_tokens": self.max_tokens,
            "seed": key.1,
            "temperature": 1.0,
            "ignore_eos": self.ignore_eos,
        });
        if let Some(u) = user {
            v["user"] = json!(u);
        }
        if let Some(d) = self.deadline_ms {
            v["deadline_ms"] = json!(d);
        }
        if self.stream {
            v["stream"] = json!(true);
            v["stream_options"] = json!({"include_usage": true});
        }
        Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
    }
}

/// How a reply was judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Class {
    /// The right completion.
    Ok { tokens: u64 },
    /// A documented typed outcome.
    Typed(String),
    /// Not a documented answer: a failure.
    Raw(String),
    /// A 200 whose completion is not the one for its prompt and seed.
    Corrupt(String),
}

/// The completion for each (prompt, seed), from a solo run.
#[derive(Debug, Clone, Default)]
pub struct References {
    pub texts: HashMap<(usize, u64), String>,
    pub prompt_tokens: f64,
    /// Solo latency of the reference requests.
    pub solo: Duration,
}

/// Asks for every key once, alone.
pub async fn references(
    target: &Target,
    w: &Workload,
    timeout: Duration,
) -> anyhow::Result<References> {
    let mut conn = Conn::connect(target).await?;
    // A stream's text is held to the whole answer's.
    let whole = Workload {
        stream: false,
        ..w.clone()
    };
    let w = &whole;
    let mut refs = References::default();
    let mut prompt_tokens = 0u64;
    let mut total = Duration::ZERO;
    for key in w.keys() {
        let start = std::time::Instant::now();
        let reply = conn
            .send(
                target,
                "POST",
                "/v1/completions",
                w.body(key, None),
                timeout,
            )
            .await?;
        total += start.elapsed();
        if reply.status != 200 {
            anyhow::bail!(
                "reference request for prompt {:?} seed {} got {}: {}",
                w.prompts[key.0],
                key.1,
                reply.status,
                String::from_utf8_lossy(&reply.body)
            );
        }
        let v: Value = serde_json::from_slice(&reply.body)?;
        let text = v["choices"][0]["text"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("reference reply has no text: {v}"))?;
        prompt_tokens += v["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
        refs.texts.insert(key, text.to_owned());
    }
    let n = w.keys().len().max(1);
    refs.prompt_tokens = prompt_tokens as f64 / n as f64;
    refs.solo = total / n as u32;
    Ok(refs)
}

/// Judges a reply to the request for `key`.
pub fn classify(reply: &Reply, key: (usize, u64), refs: &References, w: &Workload) -> Class {
    if reply.status == 200 && reply.event_stream {
        return match read_stream(&reply.body) {
            Ok((text, tokens)) => judge_text(&text, tokens, key, refs, w),
            Err(class) => class,
        };
    }
    let v: Result<Value, _> = serde_json::from_slice(&reply.body);
    match (reply.status, v) {
        (200, Ok(v)) => {
            let text = v["choices"][0]["text"].as_str();
            let tokens = v["usage"]["completion_tokens"].as_u64().unwrap_or(0);
            match text {
                Some(t) => judge_text(t, tokens, key, refs, w),
                None => Class::Corrupt(format!("a 200 without text: {v}")),
            }
        }
        (200, Err(e)) => Class::Corrupt(format!("a 200 whose body is not JSON: {e}")),
        (status, Ok(v)) => typed_or_raw(status, &v),
        (status, Err(_)) => Class::Raw(format!(
            "status {status} with a non-JSON body: {:?}",
            String::from_utf8_lossy(&reply.body[..reply.body.len().min(120)])
        )),
    }
}

/// An error body: a documented typed outcome, or a failure.
pub fn typed_or_raw(status: u16, v: &Value) -> Class {
    let kind = v["error"]["type"].as_str().unwrap_or_default();
    if TYPED.contains(&kind) {
        Class::Typed(kind.to_owned())
    } else {
        Class::Raw(format!(
            "status {status}, error type {kind:?}: {}",
            v["error"]["message"]
        ))
    }
}

/// An event stream's text and completion tokens (from its usage), or how
/// it failed: an error in-band, an event that is not JSON, no `[DONE]`.
fn read_stream(body: &[u8]) -> Result<(String, u64), Class> {
    let body = String::from_utf8_lossy(body);
    let mut text = String::new();
    let mut tokens = 0;
    for line in body.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            return Ok((text, tokens));
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| Class::Corrupt(format!("an event that is not JSON ({e}): {data:?}")))?;
        if v.get("error").is_some() {
            return Err(typed_or_raw(200, &v));
        }
        if let Some(t) = v["choices"][0]["text"].as_str() {
            text.push_str(t);
        }
        if let Some(n) = v["usage"]["completion_tokens"].as_u64() {
            tokens = n;
        }
    }
    Err(Class::Corrupt(
        "the event stream ended without [DONE]".into(),
    ))
}

/// Judges a completion's text against the reference for its key.
fn judge_text(t: &str, tokens: u64, key: (usize, u64), refs: &References, w: &Workload) -> Class {
    match refs.texts.get(&key) {
        Some(expected) if t != expected => {
            Class::Corrupt(format!("got {t:?}, expected {expected:?}"))
        }
        _ if w.ignore_eos && tokens != u64::from(w.max_tokens) => Class::Corrupt(format!(
            "{tokens} completion tokens, asked for {}",
            w.max_tokens
        )),
        _ => Class::Ok { tokens },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, body: &str) -> Reply {
        Reply {
            status,
            body: Bytes::from(body.to_owned()),
            ..Reply::default()
        }
    }

    #[test]
    fn judges_every_kind_of_reply() {
        let w = Workload::typing("kjv", 2);
        let mut refs = References::default();
        refs.texts.insert((0, 1), " unto".into());
        let ok = r#"{"choices":[{"text":" unto"}],"usage":{"completion_tokens":2}}"#;
        assert_eq!(
            classify(&reply(200, ok), (0, 1), &refs, &w),
            Class::Ok { tokens: 2 }
        );
        let wrong = r#"{"choices":[{"text":" into"}],"usage":{"completion_tokens":2}}"#;
        assert!(matches!(
            classify(&reply(200, wrong), (0, 1), &refs, &w),
            Class::Corrupt(_)
        ));
        let short = r#"{"choices":[{"text":" unto"}],"usage":{"completion_tokens":1}}"#;
        assert!(matches!(
            classify(&reply(200, short), (0, 1), &refs, &w),
            Class::Corrupt(_)
        ));
        let over = r#"{"error":{"type":"overloaded","message":"full"}}"#;
        assert_eq!(
            classify(&reply(429, over), (0, 1), &refs, &w),
            Class::Typed("overloaded".into())
        );
        let bad = r#"{"error":{"type":"invalid_request_error","message":"x"}}"#;
        assert!(matches!(
            classify(&reply(400, bad), (0, 1), &refs, &w),
            Class::Raw(_)
        ));
        assert!(matches!(
            classify(&reply(502, "<html>"), (0, 1), &refs, &w),
            Class::Raw(_)
        ));
    }

    #[test]
    fn keys_cover_prompts_and_seeds() {
        let w = Workload::typing("kjv", 8);
        assert_eq!(w.keys().len(), 64);
        let mut seen = std::collections::HashSet::new();
        for c in 0..64 {
            seen.insert(w.key(c, 0));
        }
        assert_eq!(seen.len(), 64, "64 clients start on 64 different keys");
    }
}
