//! The typing features' policy in the scheduler's state: supersede (of a
//! waiting and of a running request, and of one the edge's answer
//! overtook), joins, interactive first, predictive
//! admission and every slot of a model.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric_hw::contract::{CqeStatus, Finish};
use fabric_hw::shell::Params;

use super::events::{events, Events};
use super::request::{Admission, ClientKey, ReqId, Request, SessionKey};
use super::state::tests::views as slots;
use super::{Outcome, Policy, ReqEvent, State};
use crate::fabric::{Done, DriverEvent};

fn session(id: &str) -> Option<SessionKey> {
    Some(SessionKey {
        ip: IpAddr::from([127, 0, 0, 1]),
        id: Arc::from(id),
    })
}

/// A request of `client` for model "m", `max_tokens` long, due in 10 s,
/// hearing every event.
fn req(id: ReqId, client: &str, max_tokens: u32, now: Instant) -> (Admission, Events) {
    let (tx, rx) = events(true);
    let adm = Admission {
        id,
        request: Request {
            model: Arc::from("m"),
            client: ClientKey {
                ip: IpAddr::from([127, 0, 0, 1]),
                user: Some(Arc::from(client)),
            },
            prompt: vec![1, 2],
            params: Params {
                max_tokens,
                temperature: 0.0,
                seed: 0,
                stop_token: 256,
                stream: false,
            },
            announce: false,
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
    };
    (adm, rx)
}

/// Starts what can start: the ids started, in order, and their (tag, ctx).
fn dispatch(s: &mut State, now: Instant) -> Vec<(ReqId, u32, u16)> {
    let mut started = Vec::new();
    s.dispatch(now, &mut started);
    started
        .iter()
        .map(|&t| {
            let r = &s.running[&t];
            (r.adm.id, t, r.ctx)
        })
        .collect()
}

fn done(tag: u32, ctx: u16, status: CqeStatus) -> DriverEvent<'static> {
    DriverEvent::Done(Done {
        tag,
        ctx,
        status,
        finish: Finish::Length,
        tokens: &[7],
        n_tokens: 1,
        fabric_us: 10,
        intact: true,
    })
}

fn last(rx: &mut Events) -> Option<ReqEvent> {
    std::iter::from_fn(|| rx.try_recv()).last()
}

#[test]
fn a_waiting_request_superseded_keeps_its_place_for_the_newer_one() {
    let now = Instant::now();
    let mut s = State::with_policy(slots(&["m"]), 1, Policy::for_contexts(1));
    let (a, _ra) = req(1, "a", 4, now);
    s.admit(a, now).expect("admit");
    let running = dispatch(&mut s, now);
    // The typist's first keystroke waits, then another client's request.
    let (mut k1, mut r1) = req(2, "typist", 4, now);
    k1.request.session = session("s");
    s.admit(k1, now).expect("admit");
    let (x, _rx) = req(3, "x", 4, now);
    s.admit(x, now).expect("admit");
    // The next keystroke supersedes the first and takes its place.
    let (mut k2, _r2) = req(4, "typist", 4, now);
    k2.request.session = session("s");
    s.admit(k2, now).expect("admit");
    assert_eq!(last(&mut r1), Some(ReqEvent::Failed(Outcome::Superseded)));
    assert_eq!(s.queued(), 2);
    let (_, tag, ctx) = running[0];
    s.on_driver(done(tag, ctx, CqeStatus::Ok));
    let next = dispatch(&mut s, now);
    assert_eq!(
        next[0].0, 4,
        "the newer keystroke runs in the first one's place"
    );
    assert_eq!(s.typing_counts().superseded_queued, 1);
    let mut cancels = Vec::new();
    s.take_cancels(&mut cancels);
    assert!(cancels.is_empty(), "nothing to cancel on the fabric");
}

#[test]
fn an_edge_answer_that_overtakes_its_sessions_older_request_makes_it_stale() {
    let now = Instant::now();
    let mut s = State::with_policy(slots(&["m"]), 1, Policy::for_contexts(1));
    // The edge answered request 5 of the session (from the cache) before
    // request 4's admission got here.
    s.supersede_session(&session("s").expect("a session"), 5);
    let (mut k4, mut r4) = req(4, "typist", 4, now);
    k4.request.session = session("s");
    s.admit(k4, now).expect("admit");
    assert_eq!(last(&mut r4), Some(ReqEvent::Failed(Outcome::Superseded)));
    assert!(
        dispatch(&mut s, now).is_empty(),
        "the stale request reached the fabric"
    );
    // A newer one runs, and the mark leaves with it.
    let (mut k6, _r6) = req(6, "typist", 4, now);
    k6.request.session = session("s");
    s.admit(k6, now).expect("admit");
    assert_eq!(dispatch(&mut s, now).len(), 1);
    assert!(s.floors.is_empty());
}

#[test]
fn a_running_request_superseded_is_cancelled_on_the_fabric() {
    let now = Instant::now();
    let mut s = State::with_policy(slots(&["m"]), 1, Policy::for_contexts(1));
    let (mut k1, mut r1) = req(1, "typist", 4, now);
    k1.request.session = session("s");
    s.admit(k1, now).expect("admit");
    let (_, tag, ctx) = dispatch(&mut s, now)[0];
    let (mut k2, mut r2) = req(2, "typist", 4, now);
    k2.request.session = session("s");
    s.admit(k2, now).expect("admit");
    assert_eq!(last(&mut r1), Some(ReqEvent::Failed(Outcome::Superseded)));
    let mut cancels = Vec::new();
    s.take_cancels(&mut cancels);
    assert_eq!(cancels, [(ctx, tag)]);
    // Its context is held until the fabric confirms; then the newer runs.
    assert!(dispatch(&mut s, now).is_empty());
    s.on_driver(done(tag, ctx, CqeStatus::Cancelled));
    assert!(r1.try_recv().is_none(), "answered once");
    assert_eq!(dispatch(&mut s, now)[0].0, 2);
    assert!(r2.try_recv().is_none(), "the newer one waits for its end");
    assert_eq!(s.typing_counts().superseded_running, 1);
}

#[test]
fn a_request_that_arrives_after_a_newer_one_of_its_session_is_the_stale_one() {
    let now = Instant::now();
    let mut s = State::with_policy(slots(&["m"]), 1, Policy::for_contexts(1));
    let (mut newer, mut rn) = req(5, "typist", 4, now);
    newer.request.session = session("s");
    s.admit(newer, now).expect("admit");
    let (mut older, mut ro) = req(4, "typist", 4, now);
    older.request.session = session("s");
    s.admit(older, now).expect("answered");
    assert_eq!(last(&mut ro), Some(ReqEvent::Failed(Outcome::Superseded)));
    assert!(rn.try_recv().is_none());
    assert_eq!(s.queued(), 1);
    // Another session, or none, supersedes nothing.
    let (mut other, _r) = req(6, "typist", 4, now);
    other.request.session = session("t");
    s.admit(other, now).expect("admit");
    assert_eq!(s.queued(), 2);
}

#[test]
fn with_supersede_off_a_session_changes_nothing() {
    let now = Instant::now();
    let policy = Policy {
        supersede: false,
        ..Policy::for_contexts(1)
    };
    let mut s = State::with_policy(slots(&["m"]), 1, policy);
    for id in 1..=3 {
        let (mut k, _r) = req(id, "typist", 4, now);
        k.request.session = session("s");
        s.admit(k, now).expect("admit");
    }
    assert_eq!(s.queued(), 3);
}

#[test]
fn a_join_takes_over_the_decoding_request_without_a_cancel() {
    let now = Instant::now();
    let mut s = State::with_policy(slots(&["m"]), 1, Policy::for_contexts(1));
    let (mut k1, mut r1) = req(1, "typist", 4, now);
    k1.request.session = session("s");
    s.admit(k1, now).expect("admit");
    let (_, tag, ctx) = dispatch(&mut s, now)[0];
    let (mut k2, mut r2) = req(2, "typist", 4, now);
    k2.request.session = session("s");
    k2.request.join = Some(1);
    s.admit(k2, now).expect("admit");
    assert_eq!(last(&mut r1), Some(ReqEvent::Failed(Outcome::Superseded)));
    assert_eq!(r2.try_recv(), Some(ReqEvent::Joined { slot: 0 }));
    let mut cancels = Vec::new();
    s.take_cancels(&mut cancels);
    assert!(cancels.is_empty(), "the fabric's work goes on");
    assert_eq!(s.queued(), 0);
    s.on_driver(done(tag, ctx, CqeStatus::Ok));
    assert!(matches!(r2.try_recv(), Some(ReqEvent::Finished { .. })));
    assert_eq!(s.typing_counts().joined, 1);
    // The session's request is answered: a later one supersedes nothing.
    assert!(s.sessions.is_empty());
}

#[test]
fn a_join_of_a_request_still_waiting_takes_its_place_instead() {
    let now = Instant::now();
    let mut s = State::with_policy(slots(&["m"]), 1, Policy::for_contexts(1));
    let (a, _ra) = req(1, "a", 4, now);
    s.admit(a, now).expect("admit");
    dispatch(&mut s, now);
    let (mut k1, mut r1) = req(2, "typist", 4, now);
    k1.request.session = session("s");
    s.admit(k1, now).expect("admit");
    let (mut k2, mut r2) = req(3, "typist", 4, now);
    k2.request.session = session("s");
    k2.request.join = Some(2);
    s.admit(k2, now).expect("admit");
    assert_eq!(last(&mut r1), Some(ReqEvent::Failed(Outcome::Superseded)));
    assert!(r2.try_recv().is_none(), "queued, not joined");
    assert_eq!(s.queued(), 1);
}

#[test]
fn long_requests_leave_a_lane_to_short_ones_and_short_ones_go_first() {
    let now = Instant::now();
    // Four contexts (and lanes) a slot: bulk may hold three.
    let mut s = State::with_policy(slots(&["m"]), 4, Policy::for_contexts(4));
    let mut rxs = Vec::new();
    for id in 1..=5 {
        let (b, rx) = req(id, "streamer", 200, now);
        s.admit(b, now).expect("admit");
        rxs.push(rx);
    }
    let bulk = dispatch(&mut s, now);
    assert_eq!(bulk.len(), 3, "a lane stays free");
    // A short request arriving later starts at once on it.
    let (i1, _r) = req(10, "typist", 8, now);
    s.admit(i1, now).expect("admit");
    let started = dispatch(&mut s, now);
    assert_eq!(started.iter().map(|r| r.0).collect::<Vec<_>>(), [10]);
    // With the two bulk ones still waiting, short ones queued after them
    // go first when a context frees.
    let (i2, _r) = req(11, "typist", 8, now);
    s.admit(i2, now).expect("admit");
    let (_, tag, ctx) = bulk[0];
    s.on_driver(done(tag, ctx, CqeStatus::Ok));
    let next = dispatch(&mut s, now);
    assert_eq!(next.iter().map(|r| r.0).collect::<Vec<_>>(), [11]);
    // Without the policy, first come first served, and bulk takes every
    // context.
    let mut s = State::with_policy(slots(&["m"]), 4, Policy::base(4));
    for id in 1..=5 {
        let (b, rx) = req(id, "streamer", 200, now);
        s.admit(b, now).expect("admit");
        rxs.push(rx);
    }
    assert_eq!(dispatch(&mut s, now).len(), 4);
}

#[test]
fn a_bulk_request_waiting_past_the_ageing_goes_before_short_ones() {
    let now = Instant::now();
    let mut s = State::with_policy(slots(&["m"]), 2, Policy::for_contexts(2));
    // Two short ones hold both contexts.
    let mut running = Vec::new();
    let mut rxs = Vec::new();
    for id in 1..=2 {
        let (i, rx) = req(id, "typist", 8, now);
        s.admit(i, now).expect("admit");
        rxs.push(rx);
    }
    running.extend(dispatch(&mut s, now));
    let (b, _rb) = req(3, "streamer", 200, now);
    s.admit(b, now).expect("admit");
    let (i, _ri) = req(4, "typist", 8, now);
    s.admit(i, now).expect("admit");
    // Before the ageing the short one goes first; after it, the bulk one.
    let (_, tag, ctx) = running[0];
    s.on_driver(done(tag, ctx, CqeStatus::Ok));
    assert_eq!(dispatch(&mut s, now)[0].0, 4);
    let (i, _ri) = req(5, "typist", 8, now);
    s.admit(i, now).expect("admit");
    let later = now + s.policy.ageing;
    let (_, tag, ctx) = running[1];
    s.on_driver(done(tag, ctx, CqeStatus::Ok));
    assert_eq!(dispatch(&mut s, later)[0].0, 3);
}

#[test]
fn a_request_predicted_late_is_refused_at_once_with_its_wait() {
    let t = Instant::now();
    let mut s = State::with_policy(slots(&["m"]), 1, Policy::for_contexts(1));
    // Saturated for a second, completing 20 a second: the measured rate.
    let mut id = 0;
    let mut next = |s: &mut State, at: Instant| {
        id += 1;
        let (r, rx) = req(id, &format!("c{id}"), 4, at);
        s.admit(r, at).expect("admit");
        rx
    };
    let mut keep = vec![next(&mut s, t), next(&mut s, t)];
    s.tick(t);
    for i in 1..=20u64 {
        let at = t + Duration::from_millis(50 * i);
        for (_, tag, ctx) in dispatch(&mut s, at) {
            s.on_driver(done(tag, ctx, CqeStatus::Ok));
        }
        keep.push(next(&mut s, at));
        s.tick(at);
    }
    let now = t + Duration::from_secs(1);
    // Ten more wait, each of its own client: a new client's turn comes
    // after a dozen, over half a second away.
    for _ in 0..10 {
        keep.push(next(&mut s, now));
    }
    let (mut late, _r) = req(100, "d", 4, now);
    late.request.deadline = now + Duration::from_millis(200);
    late.request.timeout = Duration::from_millis(200);
    let refusal = s.admit(late, now).expect_err("refused");
    let Outcome::PredictedLate {
        predicted_wait,
        deadline,
    } = refusal.outcome
    else {
        panic!("{:?}", refusal.outcome)
    };
    assert_eq!(deadline, Duration::from_millis(200));
    assert!(
        predicted_wait > Duration::from_millis(200) && predicted_wait < Duration::from_secs(2),
        "{predicted_wait:?}"
    );
    assert_eq!(s.typing_counts().predicted_late, 1);
    // With time enough, it is queued.
    let (ok, _r) = req(101, "d", 4, now);
    s.admit(ok, now).expect("admitted");
    // Without the policy, the late one is queued too (to time out there).
    let mut s = State::with_policy(slots(&["m"]), 1, Policy::base(1));
    let (a, _ra) = req(1, "c", 4, now);
    s.admit(a, now).expect("admit");
    let (mut late, _r) = req(2, "d", 4, now);
    late.request.deadline = now + Duration::from_millis(1);
    s.admit(late, now).expect("queued");
}

#[test]
fn a_request_that_starts_at_once_is_never_refused_as_late() {
    let now = Instant::now();
    let mut s = State::with_policy(slots(&["m"]), 1, Policy::for_contexts(1));
    // Longer than its deadline even on an idle fabric: it runs, and its
    // deadline answers it there.
    let (mut r, _rx) = req(1, "c", 200, now);
    r.request.deadline = now + Duration::from_millis(10);
    s.admit(r, now).expect("admitted");
    assert_eq!(dispatch(&mut s, now).len(), 1);
}

#[test]
fn every_slot_holding_the_model_serves_it_only_when_asked() {
    let now = Instant::now();
    let run = |policy: Policy| {
        let mut s = State::with_policy(slots(&["m", "m"]), 2, policy);
        let mut rxs = Vec::new();
        for id in 1..=4 {
            let (r, rx) = req(id, &format!("c{id}"), 4, now);
            s.admit(r, now).expect("admit");
            rxs.push(rx);
        }
        let mut used: Vec<u8> = dispatch(&mut s, now)
            .iter()
            .map(|&(_, tag, _)| s.running[&tag].slot)
            .collect();
        used.sort_unstable();
        used
    };
    assert_eq!(run(Policy::for_contexts(2)), [0, 0, 1, 1]);
    let one = Policy {
        every_slot: false,
        ..Policy::for_contexts(2)
    };
    assert_eq!(run(one), [0, 0]);
}

/// A keystroke of session `s` from client "typist" (request `id`, at
/// `at`), whose session counts as paused 300 ms after it.
fn keystroke(id: ReqId, at: Instant) -> (Admission, Events) {
    let (mut k, rx) = req(id, "typist", 4, at);
    k.request.session = session("s");
    k.request.pause_after = Some(Duration::from_millis(300));
    (k, rx)
}

/// One slot of one context, from `t0` running request 1 of another
/// client: what comes next waits. The running request's (id, tag, ctx)
/// and its events.
fn busy(t0: Instant) -> (State, Vec<(ReqId, u32, u16)>, Events) {
    let mut s = State::with_policy(slots(&["m"]), 1, Policy::for_contexts(1));
    let (filler, rf) = req(1, "other", 4, t0);
    s.admit(filler, t0).expect("admit");
    let running = dispatch(&mut s, t0);
    (s, running, rf)
}

#[test]
fn a_held_keystroke_yields_to_a_paused_session_and_is_superseded_before_the_fabric() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let (mut s, running, _rf) = busy(t0);
    // A typist's keystroke comes while the fabric is busy: held.
    let (k1, mut r1) = keystroke(2, ms(10));
    s.admit(k1, ms(10)).expect("admit");
    // A request whose session is not typing (it says nothing of a pause).
    let (p, _rp) = req(3, "paused", 4, ms(20));
    s.admit(p, ms(20)).expect("admit");
    assert_eq!(s.queued(), 2);
    // The fabric frees a context before the typist's next key: the
    // request that ends a pause takes it, not the keystroke.
    let (_, tag, ctx) = running[0];
    s.on_driver(done(tag, ctx, CqeStatus::Ok));
    let next = dispatch(&mut s, ms(30));
    assert_eq!(next.iter().map(|r| r.0).collect::<Vec<_>>(), [3]);
    // The next keystroke supersedes the held one: it never ran.
    let (k2, _r2) = keystroke(4, ms(200));
    s.admit(k2, ms(200)).expect("admit");
    assert_eq!(last(&mut r1), Some(ReqEvent::Failed(Outcome::Superseded)));
    let c = s.typing_counts();
    assert_eq!((c.held, c.superseded_held, c.superseded_queued), (2, 1, 0));
    // With room and nothing in line, the fabric takes the held keystroke
    // before its session pauses rather than idle.
    let (_, tag, ctx) = next[0];
    s.on_driver(done(tag, ctx, CqeStatus::Ok));
    let last_run = dispatch(&mut s, ms(250));
    assert_eq!(last_run.iter().map(|r| r.0).collect::<Vec<_>>(), [4]);
    assert_eq!(s.typing_counts().held_early, 1);
    assert_eq!(s.queued(), 0);
}

#[test]
fn a_held_keystroke_goes_in_line_when_its_session_pauses_and_never_past_its_deadline() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let (mut s, running, _rf) = busy(t0);
    let (k1, _r1) = keystroke(2, t0);
    s.admit(k1, t0).expect("admit");
    // After its pause, a newer request of another client waits too: the
    // keystroke, in line since its session paused, goes first.
    assert!(dispatch(&mut s, ms(300)).is_empty(), "the fabric is busy");
    let (late, _rl) = req(3, "late", 4, ms(310));
    s.admit(late, ms(310)).expect("admit");
    let (_, tag, ctx) = running[0];
    s.on_driver(done(tag, ctx, CqeStatus::Ok));
    let next = dispatch(&mut s, ms(320));
    assert_eq!(next.iter().map(|r| r.0).collect::<Vec<_>>(), [2]);
    assert_eq!(s.typing_counts().held_early, 0, "it ran as paused");

    // A deadline closer than the pause: held only until the deadline less
    // its service time (4 tokens, 2 prompt tokens).
    let (mut k, _rk) = keystroke(9, t0);
    k.request.deadline = ms(100);
    let service = Policy::for_contexts(1).service_time(2, &k.request.params);
    assert_eq!(s.hold_until(&k.request, t0), Some(ms(100) - service));
    // Due too soon to wait at all, or with holding off: in line at once.
    k.request.deadline = t0 + service;
    assert_eq!(s.hold_until(&k.request, t0), None);
    let off = State::with_policy(
        slots(&["m"]),
        1,
        Policy {
            hold: false,
            ..Policy::for_contexts(1)
        },
    );
    let (k, _rk) = keystroke(10, t0);
    assert_eq!(off.hold_until(&k.request, t0), None);
}
