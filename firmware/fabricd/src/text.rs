//! From tokens to text: incremental UTF-8 decoding and stop sequences.
//!
//! Tokens decode to bytes, and a byte-fallback token can end in the middle
//! of a UTF-8 character, so [`Utf8Decoder`] holds back an incomplete tail.
//! [`StopMatcher`] finds the request's stop strings in the decoded text and
//! holds back any tail that could still become one, so a stream never sends
//! text that a stop sequence would have cut.

/// Turns a byte stream into text without splitting characters.
#[derive(Debug, Default)]
pub struct Utf8Decoder {
    pending: Vec<u8>,
}

impl Utf8Decoder {
    /// Adds bytes and returns the text that is now complete.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // Valid up to here; the error is either an incomplete
                    // tail (wait for more) or an invalid sequence (replace).
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        None => {
                            self.pending.drain(..valid);
                            return out;
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

    /// Whatever is left at the end (an incomplete character is replaced).
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
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

    /// Whether a stop string was found.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Adds text; returns what can be sent now. After a stop string, the
    /// text before it is returned and everything after is dropped.
    pub fn push(&mut self, text: &str) -> String {
        if self.stopped {
            return String::new();
        }
        self.held.push_str(text);
        if let Some(at) = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()))
            .min()
        {
            self.stopped = true;
            let out = self.held[..at].to_owned();
            self.held.clear();
            return out;
        }
        // Hold back the longest suffix that is a prefix of some stop string.
        let keep = self
            .stops
            .iter()
            .map(|s| longest_suffix_prefix(&self.held, s))
            .max()
            .unwrap_or(0);
        let cut = self.held.len() - keep;
        let out = self.held[..cut].to_owned();
        self.held.drain(..cut);
        out
    }

    /// The held-back text, at the end of generation.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_characters_wait_for_their_tail() {
        let mut d = Utf8Decoder::default();
        let e_acute = "é".as_bytes();
        assert_eq!(d.push(b"caf"), "caf");
        assert_eq!(d.push(&e_acute[..1]), "");
        assert_eq!(d.push(&e_acute[1..]), "é");
        assert_eq!(d.push(&[0xff, b'x']), "\u{fffd}x");
        assert_eq!(d.push(&e_acute[..1]), "");
        assert_eq!(d.finish(), "\u{fffd}");
    }

    #[test]
    fn stops_cut_and_hold_back() {
        let mut m = StopMatcher::new(vec!["\n\n".into(), "END".into()]);
        assert_eq!(m.push("hello E"), "hello ");
        assert_eq!(m.push("N"), "");
        assert_eq!(m.push("Dless"), "", "END found: nothing after it");
        assert!(m.stopped());
        let mut m = StopMatcher::new(vec!["END".into()]);
        assert_eq!(m.push("EN"), "");
        assert_eq!(m.push("x"), "ENx");
        assert_eq!(m.push("E"), "");
        assert_eq!(m.finish(), "E");
        assert!(!m.stopped());
    }

    #[test]
    fn without_stops_everything_flows() {
        let mut m = StopMatcher::new(vec![String::new()]);
        assert_eq!(m.push("abc"), "abc");
    }
}
