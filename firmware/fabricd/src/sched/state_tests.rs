//! The [`State`](super::State)'s own unit tests, without tokio: fairness
//! and order, deadlines, cancels, models and slots, bounced requests. A
//! file of their own, so `state.rs` is the scheduler's rules alone.

use super::*;
use std::net::IpAddr;

use fabric_hw::contract::Finish;
use fabric_hw::shell::Params;

use crate::sched::events::{events, Events};
use crate::sched::request::{ClientKey, Request};

/// Ready slots holding `models`, in order (the typing tests' too).
pub(in crate::sched) fn views(models: &[&str]) -> Vec<ShellSlot> {
    models
        .iter()
        .enumerate()
        .map(|(i, m)| ShellSlot {
            index: i as u8,
            state: SlotState::Ready,
            model: Some(Arc::from(*m)),
            engine: None,
            identity: String::new(),
        })
        .collect()
}

fn adm(id: ReqId, client: &str, model: &str, now: Instant) -> (Admission, Events) {
    let (tx, rx) = events(true);
    (
        Admission {
            id,
            request: Request {
                model: Arc::from(model),
                client: ClientKey {
                    ip: IpAddr::from([127, 0, 0, 1]),
                    user: Some(Arc::from(client)),
                },
                prompt: vec![1, 2],
                params: Params {
                    max_tokens: 4,
                    temperature: 0.0,
                    seed: 0,
                    stop_token: 256,
                    stream: false,
                },
                announce: true,
                deadline: now + Duration::from_secs(10),
                timeout: Duration::from_secs(10),
                received: now,
                session: None,
                join: None,
                front: false,
                pause_after: None,
            },
            events: tx,
            permit: None,
        },
        rx,
    )
}

impl State {
    /// Starts what can start: (tag, ctx) of each.
    fn dispatch_now(&mut self, now: Instant) -> Vec<(u32, u16)> {
        let mut started = Vec::new();
        self.dispatch(now, &mut started);
        started
            .iter()
            .map(|&t| (t, self.submission(t).expect("running").ctx))
            .collect()
    }
}

fn done(tag: u32, ctx: u16) -> DriverEvent<'static> {
    DriverEvent::Done(Done {
        tag,
        ctx,
        status: CqeStatus::Ok,
        finish: Finish::Length,
        tokens: &[7],
        n_tokens: 1,
        fabric_us: 10,
        intact: true,
    })
}

#[test]
fn a_single_request_is_not_starved_by_a_flood() {
    let now = Instant::now();
    let mut s = State::new(views(&["m"]), 1);
    let mut rxs = Vec::new();
    for i in 0..500 {
        let (a, rx) = adm(i, "flood", "m", now);
        s.admit(a, now).expect("admit");
        rxs.push(rx);
    }
    let (a, mut lone_rx) = adm(1000, "lone", "m", now);
    s.admit(a, now).expect("admit");
    // One context: the flood's first request runs, then the lone one.
    let first = s.dispatch_now(now);
    assert_eq!(first.len(), 1);
    s.on_driver(done(first[0].0, first[0].1));
    let second = s.dispatch_now(now);
    assert_eq!(second.len(), 1);
    assert_eq!(lone_rx.try_recv(), Some(ReqEvent::Queued));
    assert!(matches!(lone_rx.try_recv(), Some(ReqEvent::Started { .. })));
}

#[test]
fn within_a_client_order_is_kept() {
    let now = Instant::now();
    let mut s = State::new(views(&["m"]), 1);
    let mut rxs = Vec::new();
    for i in 0..3 {
        let (a, rx) = adm(i, "c", "m", now);
        s.admit(a, now).expect("admit");
        rxs.push(rx);
    }
    for (expected, rx) in rxs.iter_mut().enumerate() {
        let started = s.dispatch_now(now);
        let (tag, ctx) = started[0];
        assert_eq!(rx.try_recv(), Some(ReqEvent::Queued));
        assert!(
            matches!(rx.try_recv(), Some(ReqEvent::Started { .. })),
            "request {expected} next"
        );
        s.on_driver(done(tag, ctx));
    }
}

#[test]
fn deadlines_answer_queued_and_cancel_running() {
    let now = Instant::now();
    let mut s = State::new(views(&["m"]), 1);
    let (mut a, mut rx_run) = adm(1, "a", "m", now);
    a.request.deadline = now + Duration::from_millis(5);
    s.admit(a, now).expect("admit");
    let (mut b, mut rx_wait) = adm(2, "b", "m", now);
    b.request.deadline = now + Duration::from_millis(5);
    s.admit(b, now).expect("admit");
    let (tag, ctx) = s.dispatch_now(now)[0];
    let later = now + Duration::from_millis(6);
    let mut cancels = Vec::new();
    s.expire(later, &mut cancels);
    assert_eq!(cancels, [(ctx, tag)]);
    assert_eq!(rx_run.try_recv(), Some(ReqEvent::Queued));
    assert!(matches!(rx_run.try_recv(), Some(ReqEvent::Started { .. })));
    assert!(matches!(
        rx_run.try_recv(),
        Some(ReqEvent::Failed(Outcome::DeadlineExceeded { .. }))
    ));
    assert_eq!(rx_wait.try_recv(), Some(ReqEvent::Queued));
    assert!(matches!(
        rx_wait.try_recv(),
        Some(ReqEvent::Failed(Outcome::DeadlineExceeded { .. }))
    ));
    assert_eq!(s.queued(), 0);
    // The context stays held until the fabric confirms the cancel.
    assert_eq!(s.free_contexts(), 0);
    s.on_driver(DriverEvent::Done(Done {
        status: CqeStatus::Cancelled,
        ..match done(tag, ctx) {
            DriverEvent::Done(d) => d,
            _ => unreachable!(),
        }
    }));
    assert_eq!(s.free_contexts(), 1);
    assert!(rx_run.try_recv().is_none(), "no second answer");
}

#[test]
fn a_cancelled_request_frees_its_context() {
    let now = Instant::now();
    let mut s = State::new(views(&["m"]), 2);
    let (a, _rx) = adm(1, "a", "m", now);
    s.admit(a, now).expect("admit");
    let (tag, ctx) = s.dispatch_now(now)[0];
    assert_eq!(s.cancel(1), Some((ctx, tag)));
    s.on_driver(done(tag, ctx));
    assert_eq!(s.free_contexts(), 2);
    // A queued one is just dropped.
    let (a, _rx) = adm(2, "a", "m", now);
    let (b, _rx2) = adm(3, "a", "m", now);
    let mut s = State::new(views(&["m"]), 1);
    s.admit(a, now).expect("admit");
    s.admit(b, now).expect("admit");
    s.dispatch_now(now);
    assert!(s.cancel(3).is_none());
    assert_eq!(s.queued(), 0);
}

#[test]
fn a_request_whose_client_went_away_never_reaches_the_fabric() {
    let now = Instant::now();
    let mut s = State::new(views(&["m"]), 1);
    // Gone before its admission arrived (its cancel overtook it).
    let (a, ra) = adm(1, "a", "m", now);
    drop(ra);
    assert!(s.cancel(1).is_none());
    s.admit(a, now).expect("admit");
    assert_eq!(s.queued(), 0);
    // Gone while it waited: skipped, the next one gets the context.
    let (b, rb) = adm(2, "a", "m", now);
    let (c, _rc) = adm(3, "b", "m", now);
    s.admit(b, now).expect("admit");
    s.admit(c, now).expect("admit");
    drop(rb);
    let started = s.dispatch_now(now);
    assert_eq!(started.len(), 1);
    assert_eq!(
        s.running.values().map(|r| r.adm.id).collect::<Vec<_>>(),
        [3]
    );
    assert_eq!(s.next_deadline(), Some(now + Duration::from_secs(10)));
    assert_eq!(s.deadlines.len(), 1, "the skipped one's deadline is gone");
}

#[test]
fn each_model_goes_to_its_slot_and_unloaded_ones_are_refused() {
    let now = Instant::now();
    let mut s = State::new(views(&["kjv", "fortunes"]), 2);
    let (a, _ra) = adm(1, "x", "fortunes", now);
    s.admit(a, now).expect("admit");
    let started = s.dispatch_now(now);
    assert_eq!(started[0].1 / 2, 1, "a context of slot 1");
    let (b, _rb) = adm(2, "x", "other", now);
    let refusal = s.admit(b, now).expect_err("not loaded");
    assert!(matches!(refusal.outcome, Outcome::ModelNotLoaded { .. }));
}

#[test]
fn bounced_requests_go_back_to_the_head() {
    let now = Instant::now();
    let mut s = State::new(views(&["m"]), 1);
    let (a, mut ra) = adm(1, "a", "m", now);
    let (b, _rb) = adm(2, "a", "m", now);
    s.admit(a, now).expect("admit");
    s.admit(b, now).expect("admit");
    let (tag, ctx) = s.dispatch_now(now)[0];
    let mut d = match done(tag, ctx) {
        DriverEvent::Done(d) => d,
        _ => unreachable!(),
    };
    d.status = CqeStatus::SlotNotReady;
    s.on_driver(DriverEvent::Done(d));
    assert_eq!(s.queued(), 2);
    assert_eq!(ra.try_recv(), Some(ReqEvent::Queued));
    assert!(matches!(ra.try_recv(), Some(ReqEvent::Started { .. })));
    s.dispatch_now(now);
    assert!(
        matches!(ra.try_recv(), Some(ReqEvent::Started { .. })),
        "request 1 runs again first"
    );
}

#[test]
fn the_tables_give_back_a_bursts_room_once_nothing_waits() {
    let now = Instant::now();
    let mut s = State::new(views(&["m"]), 4);
    let mut rxs = Vec::new();
    for i in 0..2000 {
        let (a, rx) = adm(i, &format!("c{}", i % 500), "m", now);
        s.admit(a, now).expect("admit");
        rxs.push(rx);
    }
    let grown = s.waiting.capacity();
    assert!(grown >= 2000);
    // Still waiting: the room stays.
    s.tick(now);
    assert_eq!(s.waiting.capacity(), grown);
    loop {
        let started = s.dispatch_now(now);
        if started.is_empty() {
            break;
        }
        for (tag, ctx) in started {
            s.on_driver(done(tag, ctx));
        }
    }
    assert_eq!(s.queued(), 0);
    s.tick(now);
    assert!(s.waiting.capacity() <= 2 * KEEP, "{}", s.waiting.capacity());
    let q = &s.queues[&Arc::from("m")];
    assert!(
        q.capacity() <= 2 * KEEP,
        "the queue's lines keep {}",
        q.capacity()
    );
}
