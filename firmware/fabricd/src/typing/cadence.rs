//! A typing session's cadence: how often its requests come while it types,
//! and from that, how long after its newest request the session counts as
//! paused.
//!
//! A typing page sends a request on every keystroke, and most are stale
//! by the next keystroke, a few hundred milliseconds later. The one that
//! matters is the last before a pause. A request whose session has said
//! nothing for [`PAUSE_GAPS`] of its own typing gaps is taken for that
//! one; until then the scheduler holds it back behind requests whose
//! sessions have paused, and runs it only with room to spare, so the next
//! keystroke supersedes it before it costs fabric time
//! (`sched::State`, "held requests").
//!
//! The gap is learned per session (an exponentially weighted mean of the
//! gaps between its requests), so a fast typist is held briefly and a slow
//! one longer, within the operator's bound. Gaps of a second or more are
//! pauses, not typing, and do not count.

use std::time::{Duration, Instant};

/// A gap this long or longer is a pause: it does not move the mean.
pub const PAUSE_GAP: Duration = Duration::from_millis(1000);

/// A session that has been quiet this many of its typing gaps has paused.
/// For the log-normal gaps of a typist (σ about 0.45) three times the mean
/// is past all but about one gap in two hundred.
pub const PAUSE_GAPS: u32 = 3;

/// The newest gap moves the mean by this share (1/4) of the difference.
const WEIGHT_SHIFT: u32 = 2;

/// When a session's requests came.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cadence {
    last: Instant,
    /// Mean typing gap in microseconds; 0 until a gap has been seen.
    gap_us: u64,
}

impl Cadence {
    /// A session's first request, at `now`.
    pub fn new(now: Instant) -> Cadence {
        Cadence {
            last: now,
            gap_us: 0,
        }
    }

    /// The session sent a request at `now`. Requests from several
    /// connections may be taken out of order: a `now` before the last one
    /// moves nothing.
    pub fn arrive(&mut self, now: Instant) {
        let Some(gap) = now.checked_duration_since(self.last) else {
            return;
        };
        self.last = now;
        if gap >= PAUSE_GAP {
            return;
        }
        // Under a second, so it fits.
        let us = gap.as_micros() as u64;
        self.gap_us = if self.gap_us == 0 {
            us.max(1)
        } else if us >= self.gap_us {
            self.gap_us + ((us - self.gap_us) >> WEIGHT_SHIFT)
        } else {
            self.gap_us - ((self.gap_us - us) >> WEIGHT_SHIFT)
        };
    }

    /// How long it has been at `now` since the session's newest request
    /// (none if `now` is before it).
    pub fn since_last(&self, now: Instant) -> Option<Duration> {
        now.checked_duration_since(self.last)
    }

    /// The session's mean typing gap, once one has been seen.
    pub fn gap(&self) -> Option<Duration> {
        (self.gap_us > 0).then(|| Duration::from_micros(self.gap_us))
    }

    /// How long after a request the session counts as paused:
    /// [`PAUSE_GAPS`] of its typing gaps, at most `max`. `None` until it
    /// has typed (a first request is not held).
    pub fn pause_after(&self, max: Duration) -> Option<Duration> {
        self.gap().map(|g| (g * PAUSE_GAPS).min(max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gap_is_learned_from_typing_and_pauses_do_not_count() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut c = Cadence::new(t0);
        let max = Duration::from_millis(600);
        assert_eq!(c.pause_after(max), None, "a first request is not held");
        c.arrive(ms(200));
        assert_eq!(c.gap(), Some(Duration::from_millis(200)));
        assert_eq!(c.pause_after(max), Some(Duration::from_millis(600)));
        // A pause of 2 s: the gap stays a typing gap.
        c.arrive(ms(2200));
        assert_eq!(c.gap(), Some(Duration::from_millis(200)));
        // Faster typing pulls it down, by a quarter of the difference.
        c.arrive(ms(2300));
        assert_eq!(c.gap(), Some(Duration::from_millis(175)));
        assert_eq!(
            c.pause_after(max).map(|d| d.as_millis()),
            Some(525),
            "three gaps"
        );
        // A slow typist is held at most `max`.
        let mut slow = Cadence::new(t0);
        slow.arrive(ms(900));
        assert_eq!(slow.pause_after(max), Some(max));
        // Out of order: nothing moves.
        let before = c;
        c.arrive(ms(2250));
        assert_eq!(c, before);
    }
}
