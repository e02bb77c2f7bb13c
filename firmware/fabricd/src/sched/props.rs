//! The scheduler's invariants, held over random runs of admissions,
//! completions, cancels and time: every request answered exactly once,
//! contexts conserved, first-in-first-out within a client, round-robin
//! across clients. With the typing features' policy as well as without:
//! then a request may be refused at once as predicted late, which is its
//! one answer.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric_hw::contract::{CqeStatus, Finish, SlotState};
use fabric_hw::shell::Params;
use proptest::prelude::*;

use super::events::{events, Events};
use super::request::{Admission, ClientKey, Request};
use super::{Outcome, Policy, ReqEvent, ShellSlot, State};
use crate::fabric::{Done, DriverEvent};

#[derive(Debug, Clone)]
enum Op {
    /// A request from `client`, due within `deadline_ms`.
    Admit { client: u8, deadline_ms: u16 },
    /// The fabric finishes one of the running requests.
    Complete { pick: u16 },
    /// A client goes away from one of its requests.
    Cancel { pick: u16 },
    /// Time passes; deadlines fall due.
    Advance { ms: u16 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..4, 50u16..2000).prop_map(|(client, deadline_ms)| Op::Admit { client, deadline_ms }),
        3 => any::<u16>().prop_map(|pick| Op::Complete { pick }),
        1 => any::<u16>().prop_map(|pick| Op::Cancel { pick }),
        1 => (1u16..500).prop_map(|ms| Op::Advance { ms }),
    ]
}

/// What the test knows of one request.
struct Tracked {
    client: u8,
    /// When it was admitted, in the run's sequence of events.
    admitted: u64,
    events: Events,
    started: bool,
    /// Terminal events heard: `Finished` or `Failed`.
    answers: u32,
    /// Its client went away before it was answered.
    cancelled: bool,
}

impl Tracked {
    fn waiting(&self) -> bool {
        !self.started && self.answers == 0 && !self.cancelled
    }
}

struct Run {
    state: State,
    now: Instant,
    total_contexts: usize,
    reqs: Vec<Tracked>,
    /// Running tags, in start order.
    running: Vec<u32>,
    seq: u64,
    /// Per client, the sequence number of its last start.
    last_start: HashMap<u8, u64>,
}

impl Run {
    fn new(slots: u8, contexts: usize, typing: bool) -> Run {
        let shell = (0..slots)
            .map(|index| ShellSlot {
                index,
                state: SlotState::Ready,
                model: Some(Arc::from("m")),
                engine: None,
                identity: String::new(),
            })
            .collect();
        Run {
            state: State::with_policy(
                shell,
                contexts,
                if typing {
                    Policy::for_contexts(contexts)
                } else {
                    Policy::base(contexts)
                },
            ),
            now: Instant::now(),
            total_contexts: usize::from(slots) * contexts,
            reqs: Vec::new(),
            running: Vec::new(),
            seq: 0,
            last_start: HashMap::new(),
        }
    }

    fn admit(&mut self, client: u8, deadline_ms: u16) {
        let id = self.reqs.len() as u64;
        let (tx, rx) = events(true);
        let timeout = Duration::from_millis(deadline_ms.into());
        let adm = Admission {
            id,
            request: Request {
                model: Arc::from("m"),
                client: ClientKey {
                    ip: IpAddr::from([10, 0, 0, client]),
                    user: None,
                },
                // The request's id, so a started tag names its request.
                prompt: vec![id as u32],
                params: Params {
                    max_tokens: 4,
                    temperature: 0.0,
                    seed: 0,
                    stop_token: 0,
                    stream: false,
                },
                announce: true,
                deadline: self.now + timeout,
                timeout,
                received: self.now,
                session: None,
                join: None,
                front: false,
                pause_after: None,
            },
            events: tx,
            permit: None,
        };
        self.seq += 1;
        self.reqs.push(Tracked {
            client,
            admitted: self.seq,
            events: rx,
            started: false,
            answers: 0,
            cancelled: false,
        });
        if let Err(refusal) = self.state.admit(adm, self.now) {
            let typed = matches!(refusal.outcome, Outcome::PredictedLate { .. });
            assert!(
                typed && self.state.policy.predictive,
                "a ready model refused: {:?}",
                refusal.outcome
            );
            // Its one answer, as the task would send it.
            if let Some(r) = self.reqs.last_mut() {
                r.answers += 1;
            }
        }
    }

    fn id_of(&self, tag: u32) -> usize {
        self.state.submission(tag).expect("running").prompt[0] as usize
    }

    /// Starts what can start, checking each start against the order rules.
    fn dispatch(&mut self) -> Result<(), TestCaseError> {
        let mut started = Vec::new();
        self.state.dispatch(self.now, &mut started);
        for tag in started {
            let id = self.id_of(tag);
            self.seq += 1;
            let client = self.reqs[id].client;
            let admitted = self.reqs[id].admitted;
            // First in, first out within a client: nothing of this client
            // admitted before it still waits.
            let older_waiting = self
                .reqs
                .iter()
                .any(|r| r.client == client && r.waiting() && r.admitted < admitted);
            prop_assert!(
                !older_waiting,
                "request {id} overtook an older one of its client"
            );
            // Round-robin: since this client last started, every other
            // client that waited all along has had a turn.
            if let Some(&prev) = self.last_start.get(&client) {
                for other in (0..4u8).filter(|&c| c != client) {
                    let waited_all_along = self
                        .reqs
                        .iter()
                        .any(|r| r.client == other && r.waiting() && r.admitted < prev);
                    let had_turn = self.last_start.get(&other).is_some_and(|&t| t > prev);
                    prop_assert!(
                        !waited_all_along || had_turn,
                        "client {client} started twice while client {other} waited"
                    );
                }
            }
            self.last_start.insert(client, self.seq);
            self.reqs[id].started = true;
            self.running.push(tag);
        }
        Ok(())
    }

    fn complete(&mut self, pick: u16) {
        if self.running.is_empty() {
            return;
        }
        let tag = self.running.remove(usize::from(pick) % self.running.len());
        let ctx = self.state.submission(tag).expect("running").ctx;
        self.state.on_driver(DriverEvent::Done(Done {
            tag,
            ctx,
            status: CqeStatus::Ok,
            finish: Finish::Length,
            tokens: &[1, 2, 3, 4],
            n_tokens: 4,
            fabric_us: 10,
            intact: true,
        }));
    }

    fn cancel(&mut self, pick: u16) {
        let open: Vec<usize> = (0..self.reqs.len())
            .filter(|&i| self.reqs[i].answers == 0 && !self.reqs[i].cancelled)
            .collect();
        if open.is_empty() {
            return;
        }
        let id = open[usize::from(pick) % open.len()];
        self.reqs[id].cancelled = true;
        // A running one keeps its context until the fabric says it is
        // done, which a later completion does.
        let _ = self.state.cancel(id as u64);
    }

    fn advance(&mut self, ms: u16) {
        self.now += Duration::from_millis(ms.into());
        let mut cancels = Vec::new();
        self.state.expire(self.now, &mut cancels);
    }

    /// Takes every event the requests heard; at most one answer each.
    fn listen(&mut self) -> Result<(), TestCaseError> {
        for (id, r) in self.reqs.iter_mut().enumerate() {
            while let Some(ev) = r.events.try_recv() {
                if matches!(ev, ReqEvent::Finished { .. } | ReqEvent::Failed(_)) {
                    r.answers += 1;
                    prop_assert!(!r.cancelled, "request {id} answered after its client left");
                }
                prop_assert!(r.answers <= 1, "request {id} answered twice");
            }
        }
        Ok(())
    }

    fn check_contexts(&self) -> Result<(), TestCaseError> {
        prop_assert_eq!(
            self.state.free_contexts() + self.state.in_flight(),
            self.total_contexts,
            "contexts are free or held by one running request"
        );
        prop_assert_eq!(self.state.in_flight(), self.running.len());
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn every_request_is_answered_once_in_order_and_in_turn(
        slots in 1u8..=2,
        contexts in 1usize..=3,
        typing in any::<bool>(),
        ops in prop::collection::vec(op(), 1..150),
    ) {
        let mut run = Run::new(slots, contexts, typing);
        for op in ops {
            match op {
                Op::Admit { client, deadline_ms } => run.admit(client, deadline_ms),
                Op::Complete { pick } => run.complete(pick),
                Op::Cancel { pick } => run.cancel(pick),
                Op::Advance { ms } => run.advance(ms),
            }
            run.dispatch()?;
            run.listen()?;
            run.check_contexts()?;
        }
        // The fabric finishes everything; what waits runs, or its
        // deadline passes.
        for _ in 0..10_000 {
            if run.running.is_empty() && run.state.queued() == 0 {
                break;
            }
            if run.running.is_empty() {
                run.advance(100);
            } else {
                run.complete(0);
            }
            run.dispatch()?;
            run.listen()?;
            run.check_contexts()?;
        }
        prop_assert_eq!(run.state.queued(), 0);
        prop_assert_eq!(run.state.in_flight(), 0);
        for (id, r) in run.reqs.iter().enumerate() {
            if !r.cancelled {
                prop_assert_eq!(r.answers, 1, "request {} was never answered", id);
            }
        }
    }
}
