//! The scheduling policy's settings, and the service-rate meter that
//! predictive admission reads. Plain data: the [`State`](super::State)
//! applies them.
//!
//! # Interactive first
//! A request asking for at most `interactive_max_tokens` is interactive,
//! any other is bulk. Two things keep an interactive request from waiting
//! behind bulk ones:
//! - In the daemon's queue, interactive requests of a model go before bulk
//!   ones (round-robin across clients within each class), unless the bulk
//!   request at the head has waited `ageing` already: then it goes first,
//!   so bulk is slowed by interactive traffic, never starved by it.
//! - On the fabric, a slot decodes `lanes` requests at once and queues the
//!   rest of its contexts on-chip, first come first served. Bulk requests
//!   may hold at most `lanes - reserved_lanes` contexts of a slot (at
//!   least one), so at least `reserved_lanes` lanes are never decoding a
//!   long request: an interactive request waits on-chip for short ones at
//!   most, never for a long completion to end.

use std::time::{Duration, Instant};

use fabric_hw::shell::{Params, ShellInfo};

use crate::config::TypingSettings;

/// Which of a model's two queues a request waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    /// Short requests (and every request when interactive-first is off).
    Interactive = 0,
    /// Long ones.
    Bulk = 1,
}

/// How the scheduler orders and admits work.
#[derive(Debug, Clone)]
pub struct Policy {
    /// A newer request of a typing session supersedes the older one.
    pub supersede: bool,
    /// Every slot holding a model serves its requests (else only the
    /// lowest-numbered ready one).
    pub every_slot: bool,
    /// Refuse at once what is predicted to finish past its deadline.
    pub predictive: bool,
    /// Interactive requests first (see the module doc).
    pub interactive_first: bool,
    pub interactive_max_tokens: u32,
    /// Contexts of a slot that bulk requests may hold at once.
    pub bulk_contexts: usize,
    /// A bulk request waiting this long goes before interactive ones.
    pub ageing: Duration,
    /// A typing session's request is held back until its session pauses
    /// (see `held`).
    pub hold: bool,
    /// Decode lanes a slot has, for the nominal service rate.
    pub lanes: usize,
    /// The fabric's own timing, for a request's service time.
    pub prefill_ns: u64,
    pub decode_ns: u64,
}

impl Policy {
    /// The policy the settings ask for, on this shell.
    pub fn new(t: &TypingSettings, info: &ShellInfo) -> Policy {
        Policy {
            supersede: t.supersede,
            every_slot: t.every_slot,
            predictive: t.predictive_admission,
            interactive_first: t.interactive_first,
            interactive_max_tokens: t.interactive_max_tokens,
            bulk_contexts: info.lanes.saturating_sub(t.reserved_lanes as usize).max(1),
            ageing: Duration::from_millis(t.bulk_ageing_ms),
            hold: t.holds(),
            lanes: info.lanes.max(1),
            prefill_ns: info.prefill_ns.into(),
            decode_ns: info.decode_ns.into(),
        }
    }

    /// Every feature on, for a shell of `contexts` contexts a slot with as
    /// many lanes, 50 µs a prompt token and 1.9 ms an output token (the
    /// simulator's defaults): the scheduler's own tests.
    pub fn for_contexts(contexts: usize) -> Policy {
        let t = TypingSettings::default();
        Policy {
            supersede: t.supersede,
            every_slot: t.every_slot,
            predictive: t.predictive_admission,
            interactive_first: t.interactive_first,
            interactive_max_tokens: t.interactive_max_tokens,
            bulk_contexts: contexts.saturating_sub(1).max(1),
            ageing: Duration::from_millis(t.bulk_ageing_ms),
            hold: t.holds(),
            lanes: contexts.max(1),
            prefill_ns: 50_000,
            decode_ns: 1_900_000,
        }
    }

    /// Every typing feature off: the scheduler as it was before them (one
    /// class, first come first served within a client, every slot).
    pub fn base(contexts: usize) -> Policy {
        Policy {
            supersede: false,
            every_slot: true,
            predictive: false,
            interactive_first: false,
            hold: false,
            ..Policy::for_contexts(contexts)
        }
    }

    /// The queue a request with these parameters waits in.
    pub(super) fn class(&self, params: &Params) -> Class {
        if self.interactive_first && params.max_tokens > self.interactive_max_tokens {
            Class::Bulk
        } else {
            Class::Interactive
        }
    }

    /// The fabric's time for a request, at most (every token it may ask).
    pub(super) fn service_time(&self, prompt: usize, params: &Params) -> Duration {
        Duration::from_nanos(
            self.prefill_ns
                .saturating_mul(prompt as u64)
                .saturating_add(self.decode_ns.saturating_mul(params.max_tokens.into())),
        )
    }
}

/// Contexts freed per second while a model's queue was never empty: how
/// fast a waiting request of that model moves up. Measured only while the
/// model is saturated (its contexts all held, requests waiting), so a quiet
/// spell, whose rate is the demand rather than the capacity, does not make
/// the next burst look slow. Every context freed counts (completed,
/// cancelled or superseded): each lets the next one in.
#[derive(Debug, Default)]
pub(super) struct ServiceMeter {
    last: Option<Instant>,
    /// Whether requests were waiting at the last tick: the time since was
    /// time at capacity.
    saturated: bool,
    busy: Duration,
    freed: u32,
    /// Contexts freed a second at capacity (an exponentially weighted
    /// average of 250 ms samples); 0 until measured.
    rate: f64,
}

/// Shortest time at capacity a sample of the rate covers.
const SAMPLE: Duration = Duration::from_millis(250);

impl ServiceMeter {
    /// `freed` contexts since the last tick; `saturated`: requests wait now.
    pub(super) fn tick(&mut self, now: Instant, freed: u32, saturated: bool) {
        if let Some(last) = self.last {
            if self.saturated {
                self.busy += now.saturating_duration_since(last);
                self.freed += freed;
            }
        }
        self.last = Some(now);
        self.saturated = saturated;
        if self.busy >= SAMPLE {
            let sample = f64::from(self.freed) / self.busy.as_secs_f64();
            self.rate = if self.rate == 0.0 {
                sample
            } else {
                0.7 * self.rate + 0.3 * sample
            };
            self.busy = Duration::ZERO;
            self.freed = 0;
        }
    }

    /// The measured rate, if there is one.
    pub(super) fn rate(&self) -> Option<f64> {
        (self.rate > 0.0).then_some(self.rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meter_counts_only_time_at_capacity() {
        let t = Instant::now();
        let ms = |n| t + Duration::from_millis(n);
        let mut m = ServiceMeter::default();
        // Quiet: a request now and then, nothing waiting. No rate.
        m.tick(ms(0), 0, false);
        m.tick(ms(1000), 1, false);
        m.tick(ms(2000), 1, false);
        assert_eq!(m.rate(), None);
        // Saturated for 500 ms, 100 contexts freed: 200 a second.
        m.tick(ms(2000), 0, true);
        m.tick(ms(2250), 50, true);
        m.tick(ms(2500), 50, false);
        let r = m.rate().expect("measured");
        assert!((r - 200.0).abs() < 1.0, "{r}");
        // A quiet spell after does not change it.
        m.tick(ms(9000), 3, false);
        assert_eq!(m.rate(), Some(r));
    }

    #[test]
    fn long_requests_are_bulk_only_when_interactive_first_is_on() {
        let mut p = Policy::for_contexts(8);
        let params = |max_tokens| Params {
            max_tokens,
            temperature: 0.0,
            seed: 0,
            stop_token: 0,
            stream: false,
        };
        assert_eq!(p.class(&params(32)), Class::Interactive);
        assert_eq!(p.class(&params(33)), Class::Bulk);
        p.interactive_first = false;
        assert_eq!(p.class(&params(256)), Class::Interactive);
        assert_eq!(p.bulk_contexts, 7);
        assert_eq!(Policy::for_contexts(1).bulk_contexts, 1);
    }

    #[test]
    fn requests_are_held_only_where_a_newer_one_can_supersede_them() {
        let info = ShellInfo {
            version_major: 1,
            version_minor: 1,
            slots: 2,
            lanes: 4,
            contexts_per_slot: 32,
            max_prompt: 512,
            max_output: 256,
            interface_id: 0,
            prefill_ns: 50_000,
            decode_ns: 1_900_000,
        };
        let mut t = TypingSettings::default();
        assert!(Policy::new(&t, &info).hold);
        t.supersede = false;
        assert!(!Policy::new(&t, &info).hold);
    }
}
