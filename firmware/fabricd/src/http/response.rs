//! The completion's shape (OpenAI completions), written as JSON by hand
//! for the request path and held equal to serde's by a test.

use std::cell::Cell;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::Serialize;

/// `finish_reason` as the API spells it.
pub fn finish_reason(stopped: bool, length: bool) -> &'static str {
    if length && !stopped {
        "length"
    } else {
        "stop"
    }
}

// The answers are typed structs, serialized straight to bytes: building a
// `serde_json::Value` first costs a map and a string per key, per request.

/// A completion, whole or one event of a stream.
#[derive(Debug, Serialize)]
pub struct Completion<'a> {
    pub id: &'a str,
    pub object: &'static str,
    pub created: u64,
    pub model: &'a str,
    pub choices: [Choice<'a>; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Where and how long it ran (an extension; clients ignore it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fabric: Option<FabricInfo>,
}

/// The one choice of a completion.
#[derive(Debug, Serialize)]
pub struct Choice<'a> {
    pub text: &'a str,
    pub index: u32,
    /// Always null: the fabric reports no log probabilities.
    pub logprobs: Option<()>,
    pub finish_reason: Option<&'a str>,
}

/// Token counts.
#[derive(Debug, Serialize)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub total_tokens: usize,
}

impl Usage {
    pub fn new(prompt_tokens: usize, completion_tokens: usize) -> Usage {
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
        }
    }
}

/// The fabric's side of a completion.
#[derive(Debug, Serialize)]
pub struct FabricInfo {
    pub slot: Option<u8>,
    pub queue_ms: f64,
    pub fabric_us: u32,
}

impl Completion<'_> {
    /// Appends the completion's JSON to `out`: the bytes serde_json writes
    /// for it (a test holds the two equal).
    ///
    /// By hand because every request sends one: serde's derived path
    /// escapes each of the twenty-odd constant keys byte by byte, a
    /// noticeable share of a request's work (docs/design.md, design notes). The
    /// keys are written as they are; every value still goes through
    /// serde_json.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        /// Writes one value. Only maps with non-string keys fail to
        /// serialize, and there are none here.
        fn value(out: &mut Vec<u8>, v: &impl Serialize) {
            let _ = serde_json::to_writer(&mut *out, v);
        }
        let [choice] = &self.choices;
        out.extend_from_slice(b"{\"id\":");
        json_str(out, self.id);
        out.extend_from_slice(b",\"object\":");
        json_str(out, self.object);
        out.extend_from_slice(b",\"created\":");
        value(out, &self.created);
        out.extend_from_slice(b",\"model\":");
        json_str(out, self.model);
        out.extend_from_slice(b",\"choices\":[{\"text\":");
        json_str(out, choice.text);
        out.extend_from_slice(b",\"index\":");
        value(out, &choice.index);
        out.extend_from_slice(b",\"logprobs\":null,\"finish_reason\":");
        match choice.finish_reason {
            Some(reason) => json_str(out, reason),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b"}]");
        if let Some(u) = &self.usage {
            out.extend_from_slice(b",\"usage\":{\"prompt_tokens\":");
            value(out, &u.prompt_tokens);
            out.extend_from_slice(b",\"completion_tokens\":");
            value(out, &u.completion_tokens);
            out.extend_from_slice(b",\"total_tokens\":");
            value(out, &u.total_tokens);
            out.push(b'}');
        }
        if let Some(f) = &self.fabric {
            out.extend_from_slice(b",\"fabric\":{\"slot\":");
            value(out, &f.slot);
            out.extend_from_slice(b",\"queue_ms\":");
            value(out, &f.queue_ms);
            out.extend_from_slice(b",\"fabric_us\":");
            value(out, &f.fabric_us);
            out.push(b'}');
        }
        out.push(b'}');
    }
}

/// Writes `s` as a JSON string: as it is between quotes when nothing in it
/// needs escaping (ids, names, most text), else through serde_json, whose
/// formatter goes byte by byte through a table.
fn json_str(out: &mut Vec<u8>, s: &str) {
    if needs_escape(s.as_bytes()) {
        let _ = serde_json::to_writer(&mut *out, s);
    } else {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

/// Whether a JSON string needs escapes: a control character, `"` or `\`
/// (what serde_json escapes; it writes everything else as it is). Eight
/// bytes a step, with the bit trick of "Bit Twiddling Hacks" ("determine
/// if a word has a byte less than n"), exact for the whole word. By hand
/// because memchr finds given bytes, not a range.
fn needs_escape(s: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let less_than = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x & HIGH != 0;
    let mut words = s.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        let x = u64::from_le_bytes(b);
        if less_than(x, 0x20)
            || less_than(x ^ (ONES * u64::from(b'"')), 1)
            || less_than(x ^ (ONES * u64::from(b'\\')), 1)
        {
            return true;
        }
    }
    words
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// A completion's id: `cmpl-` and the request's id in 16 hex digits,
/// written without the formatting machinery.
#[derive(Debug, Clone, Copy)]
pub struct CompletionId([u8; 21]);

impl CompletionId {
    pub fn new(id: u64) -> CompletionId {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut b = *b"cmpl-0000000000000000";
        for (i, c) in b[5..].iter_mut().enumerate() {
            *c = HEX[(id >> (60 - 4 * i) & 0xf) as usize];
        }
        CompletionId(b)
    }

    pub fn as_str(&self) -> &str {
        // ASCII by construction.
        std::str::from_utf8(&self.0).unwrap_or("cmpl-")
    }
}

/// The body of a finished, non-streamed completion.
pub fn completion_body<'a>(
    id: &'a str,
    created: u64,
    model: &'a str,
    text: &'a str,
    finish: &'a str,
    usage: Usage,
    fabric: FabricInfo,
) -> Completion<'a> {
    Completion {
        usage: Some(usage),
        fabric: Some(fabric),
        ..chunk_body(id, created, model, text, Some(finish))
    }
}

/// One event of a streamed completion.
pub fn chunk_body<'a>(
    id: &'a str,
    created: u64,
    model: &'a str,
    text: &'a str,
    finish: Option<&'a str>,
) -> Completion<'a> {
    Completion {
        id,
        object: "text_completion",
        created,
        model,
        choices: [Choice {
            text,
            index: 0,
            logprobs: None,
            finish_reason: finish,
        }],
        usage: None,
        fabric: None,
    }
}

/// Seconds since the epoch at `at` (a request's arrival), for `created`.
///
/// The wall clock is read at most once a second a thread, as hyper reads it
/// for `Date`; in between, `at`'s distance from that reading gives the
/// time. A clock read is a system call on a Cortex-A9 (it has no vDSO
/// clock; results/arm-cost-2026-12-07-run2.md), and `at` is already read.
/// A step of the wall clock shows within a second.
pub fn unix_at(at: Instant) -> u64 {
    thread_local! {
        static ANCHOR: Cell<Option<(Instant, SystemTime)>> = const { Cell::new(None) };
    }
    // The wall clock at `at`, from a reading of both clocks at `mono`.
    let shift = |mono: Instant, wall: SystemTime| match at.checked_duration_since(mono) {
        Some(after) => wall.checked_add(after),
        None => wall.checked_sub(mono - at),
    };
    let near = |mono: Instant| at.max(mono) - at.min(mono) < Duration::from_secs(1);
    let wall = ANCHOR.with(|anchor| match anchor.get() {
        Some((mono, wall)) if near(mono) => shift(mono, wall),
        _ => {
            let (mono, wall) = (Instant::now(), SystemTime::now());
            anchor.set(Some((mono, wall)));
            shift(mono, wall)
        }
    });
    wall.and_then(|w| w.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs())
}

/// One event of a stream: `data: ` and the JSON.
pub fn sse(c: &Completion<'_>) -> Bytes {
    let mut out = Vec::with_capacity(256 + c.choices[0].text.len());
    out.extend_from_slice(b"data: ");
    c.write_json(&mut out);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `unix_at` gives is the wall clock at the instant asked about,
    /// read fresh or shifted from the reading before, to the second.
    #[test]
    fn created_is_the_wall_clock_at_the_instant_asked() {
        let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).expect("after 1970").as_secs();
        let (mono, wall) = (Instant::now(), SystemTime::now());
        // Now (the first call reads the clock), then a request that came
        // 400 ms and one that came 5 s before (shifted from the reading).
        for ago in [
            Duration::ZERO,
            Duration::from_millis(400),
            Duration::from_secs(5),
        ] {
            let Some(at) = mono.checked_sub(ago) else {
                continue;
            };
            let want = secs(wall - ago);
            let got = unix_at(at);
            // The two clocks were not read at one instant: a second's
            // boundary may fall between them.
            assert!(
                got == want || got == want + 1,
                "{ago:?} ago: {got}, want {want}"
            );
        }
    }

    #[test]
    fn completions_are_written_as_serde_writes_them() {
        let texts = [
            "",
            "plain",
            "\"quoted\" \\ back\nline\ttab\u{1}",
            "é 😀 \u{7f}",
        ];
        for (i, text) in texts.into_iter().enumerate() {
            let chunk = chunk_body("cmpl-00000000000000ab", 1_700_000_000, "kjv", text, None);
            let stop = chunk_body("id \"x\"", 0, "m\\n", text, Some("stop"));
            let whole = completion_body(
                "cmpl-0000000000000001",
                u64::MAX,
                "kjv",
                text,
                "length",
                Usage::new(i, 7),
                FabricInfo {
                    slot: (i % 2 == 0).then_some(i as u8),
                    queue_ms: [0.0, 0.012_345, 1e-9, 12_345.678_9][i],
                    fabric_us: 15_350,
                },
            );
            let nan = Completion {
                fabric: Some(FabricInfo {
                    slot: None,
                    queue_ms: f64::NAN,
                    fabric_us: 0,
                }),
                ..chunk_body("c", 1, "m", text, None)
            };
            for c in [chunk, stop, whole, nan] {
                let mut ours = Vec::new();
                c.write_json(&mut ours);
                let theirs = serde_json::to_vec(&c).expect("serializes");
                assert_eq!(
                    String::from_utf8_lossy(&ours),
                    String::from_utf8_lossy(&theirs)
                );
            }
        }
    }

    #[test]
    fn escapes_are_found_at_every_byte_and_position() {
        for len in 1..20 {
            for at in 0..len {
                for b in 0u8..=255 {
                    let mut s = vec![b'a'; len];
                    s[at] = b;
                    let want = b < 0x20 || b == b'"' || b == b'\\';
                    assert_eq!(needs_escape(&s), want, "byte {b:#x} at {at} of {len}");
                }
            }
        }
        assert!(!needs_escape("é 😀 \u{7f} plain".as_bytes()));
        assert!(!needs_escape(b""));
    }

    #[test]
    fn completion_ids_are_the_request_id_in_hex() {
        for id in [0, 1, 0xabc, 0x0123_4567_89ab_cdef, u64::MAX] {
            assert_eq!(
                CompletionId::new(id).as_str(),
                format!("cmpl-{id:016x}"),
                "{id}"
            );
        }
    }
}
