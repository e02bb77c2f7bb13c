//! From tokens to text: incremental UTF-8 decoding and stop sequences.
//!
//! Tokens decode to bytes, and a byte-fallback token can end in the middle
//! of a UTF-8 character, so [`Utf8Decoder`] holds back an incomplete tail.
//! [`StopMatcher`] finds the request's stop strings in the decoded text and
//! holds back any tail that could still become one, so a stream never sends
//! text that a stop sequence would have cut. [`Assembler`] puts the two
//! together for one request's tokens.

use std::sync::Arc;

use fabric_model::tokenizer::EOS;

/// Turns a byte stream into text without splitting characters.
#[derive(Debug, Default)]
pub struct Utf8Decoder {
    pending: Vec<u8>,
}

impl Utf8Decoder {
    /// Adds bytes; appends the text that is now complete to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut String) {
        if self.pending.is_empty() {
            // The usual case: whole characters, straight through.
            if let Ok(s) = std::str::from_utf8(bytes) {
                out.push_str(s);
                return;
            }
        }
        self.pending.extend_from_slice(bytes);
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // Valid up to here; the error is either an incomplete
                    // tail (wait for more) or an invalid sequence (replace).
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        None => {
                            self.pending.drain(..valid);
                            return;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Adds one token: its `text` when it is whole characters (checked
    /// once, when the tokenizer was loaded), else its `bytes`.
    pub fn push_token(&mut self, text: Option<&str>, bytes: &[u8], out: &mut String) {
        match text {
            Some(s) if self.pending.is_empty() => out.push_str(s),
            _ => self.push(bytes, out),
        }
    }

    /// Appends whatever is left at the end (an incomplete character is
    /// replaced).
    pub fn finish(&mut self, out: &mut String) {
        out.push_str(&String::from_utf8_lossy(&self.pending));
        self.pending.clear();
    }
}

/// Finds stop strings in streamed text.
#[derive(Debug)]
pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
    stopped: bool,
}

impl StopMatcher {
    pub fn new(stops: Vec<String>) -> StopMatcher {
        StopMatcher {
            stops: stops.into_iter().filter(|s| !s.is_empty()).collect(),
            held: String::new(),
            stopped: false,
        }
    }

    /// Whether there are no stop strings: all text passes as it comes.
    pub fn passes_through(&self) -> bool {
        self.stops.is_empty()
    }

    /// Whether a stop string was found.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Adds text; appends what can be sent now to `out`. After a stop
    /// string, the text before it is appended and everything after is
    /// dropped.
    pub fn push(&mut self, text: &str, out: &mut String) {
        if self.stopped {
            return;
        }
        if self.stops.is_empty() {
            out.push_str(text);
            return;
        }
        self.held.push_str(text);
        if let Some(at) = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()))
            .min()
        {
            self.stopped = true;
            out.push_str(&self.held[..at]);
            self.held.clear();
            return;
        }
        // Hold back the longest suffix that is a prefix of some stop string.
        let keep = self
            .stops
            .iter()
            .map(|s| longest_suffix_prefix(&self.held, s))
            .max()
            .unwrap_or(0);
        let cut = self.held.len() - keep;
        out.push_str(&self.held[..cut]);
        self.held.drain(..cut);
    }

    /// Appends the held-back text, at the end of generation.
    pub fn finish(&mut self, out: &mut String) {
        out.push_str(&self.held);
        self.held.clear();
    }
}

/// Length of the longest suffix of `text` that is a proper prefix of `stop`,
/// on character boundaries.
fn longest_suffix_prefix(text: &str, stop: &str) -> usize {
    let max = text.len().min(stop.len().saturating_sub(1));
    (1..=max)
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n)
                && stop.is_char_boundary(n)
                && text.ends_with(&stop[..n])
        })
        .unwrap_or(0)
}

/// Tokens to text, through the stop sequences.
pub(super) struct Assembler {
    pub(super) tokenizer: Arc<fabric_model::Tokenizer>,
    utf8: Utf8Decoder,
    pub(super) stops: StopMatcher,
    pub(super) tokens: usize,
    /// Scratch, kept between pushes: the text before the stop sequences.
    pub(super) text: String,
}

impl Assembler {
    pub(super) fn new(tokenizer: Arc<fabric_model::Tokenizer>, stops: Vec<String>) -> Assembler {
        Assembler {
            tokenizer,
            utf8: Utf8Decoder::default(),
            stops: StopMatcher::new(stops),
            tokens: 0,
            text: String::new(),
        }
    }

    /// Appends the text of `tokens` that can go out now to `out`.
    pub(super) fn push(&mut self, tokens: &[u32], out: &mut String) {
        if self.stops.stopped() {
            return;
        }
        self.tokens += tokens.len();
        // Without stop sequences the text goes straight out.
        let text = if self.stops.passes_through() {
            &mut *out
        } else {
            self.text.clear();
            &mut self.text
        };
        for &t in tokens.iter().filter(|&&t| t != EOS) {
            let tok = &self.tokenizer;
            self.utf8
                .push_token(tok.token_text(t), tok.token_bytes(t), text);
        }
        if !self.stops.passes_through() {
            self.stops.push(&self.text, out);
        }
    }

    /// Appends what was held back, at the end.
    pub(super) fn finish(&mut self, out: &mut String) {
        if self.stops.stopped() {
            return;
        }
        self.text.clear();
        self.utf8.finish(&mut self.text);
        self.stops.push(&self.text, out);
        if !self.stops.stopped() {
            self.stops.finish(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What one step appends.
    fn step(f: impl FnOnce(&mut String)) -> String {
        let mut out = String::new();
        f(&mut out);
        out
    }

    #[test]
    fn split_characters_wait_for_their_tail() {
        let mut d = Utf8Decoder::default();
        let e_acute = "é".as_bytes();
        assert_eq!(step(|o| d.push(b"caf", o)), "caf");
        assert_eq!(step(|o| d.push(&e_acute[..1], o)), "");
        assert_eq!(step(|o| d.push(&e_acute[1..], o)), "é");
        assert_eq!(step(|o| d.push(&[0xff, b'x'], o)), "\u{fffd}x");
        assert_eq!(step(|o| d.push(&[b'a', 0xff, b'b'], o)), "a\u{fffd}b");
        assert_eq!(step(|o| d.push(&e_acute[..1], o)), "");
        assert_eq!(step(|o| d.finish(o)), "\u{fffd}");
    }

    #[test]
    fn whole_tokens_wait_behind_a_partial_character() {
        let mut d = Utf8Decoder::default();
        let e_acute = "é".as_bytes();
        assert_eq!(step(|o| d.push_token(Some("in"), b"in", o)), "in");
        assert_eq!(step(|o| d.push_token(None, &e_acute[..1], o)), "");
        // A whole token after half a character: the half is completed
        // first, then the token follows it, in order.
        assert_eq!(step(|o| d.push_token(None, &e_acute[1..], o)), "é");
        assert_eq!(step(|o| d.push_token(None, &e_acute[..1], o)), "");
        assert_eq!(step(|o| d.push_token(Some("x"), b"x", o)), "\u{fffd}x");
        assert_eq!(step(|o| d.finish(o)), "");
    }

    #[test]
    fn stops_cut_and_hold_back() {
        let mut m = StopMatcher::new(vec!["\n\n".into(), "END".into()]);
        assert_eq!(step(|o| m.push("hello E", o)), "hello ");
        assert_eq!(step(|o| m.push("N", o)), "");
        assert_eq!(
            step(|o| m.push("Dless", o)),
            "",
            "END found: nothing after it"
        );
        assert!(m.stopped());
        let mut m = StopMatcher::new(vec!["END".into()]);
        assert_eq!(step(|o| m.push("EN", o)), "");
        assert_eq!(step(|o| m.push("x", o)), "ENx");
        assert_eq!(step(|o| m.push("E", o)), "");
        assert_eq!(step(|o| m.finish(o)), "E");
        assert!(!m.stopped());
    }

    #[test]
    fn without_stops_everything_flows() {
        let mut m = StopMatcher::new(vec![String::new()]);
        assert_eq!(step(|o| m.push("abc", o)), "abc");
        assert_eq!(step(|o| m.finish(o)), "");
    }

    #[test]
    fn the_assembler_cuts_at_stops_and_skips_end_of_text() {
        let tok = Arc::new(fabric_model::Tokenizer::new(vec![
            b" world".to_vec(),
            b"\n".to_vec(),
        ]));
        let hello: Vec<u32> = b"hello".iter().map(|&b| u32::from(b)).collect();
        let mut a = Assembler::new(tok.clone(), vec!["\n".into()]);
        let mut pushed = |tokens: &[u32]| {
            let mut out = String::new();
            a.push(tokens, &mut out);
            out
        };
        assert_eq!(pushed(&hello), "hello");
        assert_eq!(pushed(&[257, EOS]), " world");
        assert_eq!(pushed(&[258, 257]), "");
        assert!(a.stops.stopped());
    }
}
