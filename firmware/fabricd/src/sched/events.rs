//! A request's own channel: what the scheduler tells it, never waiting on
//! it.

use std::time::Duration;

use fabric_hw::contract::Finish;

use super::outcome::Outcome;

/// The sending end of a request's events. The scheduler never waits on it.
///
/// A request that hears only its end (`Finished` or `Failed`: a whole
/// response without stop sequences, most of them) has a oneshot: one
/// allocation. One that hears more (see [`Request::announce`](super::Request::announce) and
/// `params.stream` of [`Request`](super::Request)) has an unbounded channel, for at most
/// `max_tokens` and 3 more events. `futures-channel` there rather than
/// tokio's mpsc: tokio's allocates a block of 32 slots (about 2 KiB here)
/// for every channel up front, and thousands of requests wait at once;
/// this one allocates per message.
#[derive(Debug)]
pub struct EventSender(Tx);

#[derive(Debug)]
enum Tx {
    /// Taken by the one send.
    One(Option<tokio::sync::oneshot::Sender<ReqEvent>>),
    Many(futures_channel::mpsc::UnboundedSender<ReqEvent>),
}

impl EventSender {
    /// Sends an event; fails if the request's handler has gone (or, for a
    /// request that hears only its end, if that was sent already).
    pub fn try_send(&mut self, ev: ReqEvent) -> Result<(), ReqEvent> {
        match &mut self.0 {
            Tx::One(tx) => match tx.take() {
                Some(tx) => tx.send(ev),
                None => Err(ev),
            },
            Tx::Many(tx) => tx.unbounded_send(ev).map_err(|e| e.into_inner()),
        }
    }

    pub fn is_closed(&self) -> bool {
        match &self.0 {
            Tx::One(Some(tx)) => tx.is_closed(),
            Tx::One(None) => true,
            Tx::Many(tx) => tx.is_closed(),
        }
    }
}

/// The receiving end of a request's events.
#[derive(Debug)]
pub struct Events(Rx);

#[derive(Debug)]
enum Rx {
    One(tokio::sync::oneshot::Receiver<ReqEvent>),
    Many(futures_channel::mpsc::UnboundedReceiver<ReqEvent>),
    /// The one event was taken (a oneshot must not be polled again).
    Over,
}

impl Events {
    /// The next event; `None` once the scheduler dropped the request.
    /// Cancel-safe, so it can sit in a `select!`.
    pub async fn recv(&mut self) -> Option<ReqEvent> {
        use futures_core::Stream;
        std::future::poll_fn(|cx| match &mut self.0 {
            Rx::One(rx) => std::future::Future::poll(std::pin::Pin::new(rx), cx).map(|r| {
                self.0 = Rx::Over;
                r.ok()
            }),
            Rx::Many(rx) => std::pin::Pin::new(rx).poll_next(cx),
            Rx::Over => std::task::Poll::Ready(None),
        })
        .await
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Option<ReqEvent> {
        match &mut self.0 {
            Rx::One(rx) => {
                let ev = rx.try_recv().ok()?;
                self.0 = Rx::Over;
                Some(ev)
            }
            Rx::Many(rx) => rx.try_recv().ok(),
            Rx::Over => None,
        }
    }
}

impl Events {
    /// A receiver that hears nothing, for a request not yet (or never)
    /// sent: no allocation.
    pub fn none() -> Events {
        Events(Rx::Over)
    }
}

/// A request's event channel: for its end only, or (`more`) for every
/// event it asked to hear.
pub fn events(more: bool) -> (EventSender, Events) {
    if more {
        let (tx, rx) = futures_channel::mpsc::unbounded();
        (EventSender(Tx::Many(tx)), Events(Rx::Many(rx)))
    } else {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (EventSender(Tx::One(Some(tx))), Events(Rx::One(rx)))
    }
}

/// What a request hears back.
#[derive(Debug, Clone, PartialEq)]
pub enum ReqEvent {
    /// It was admitted into the queue (the answer will be a result or a
    /// typed outcome; a 200 may be sent). Only if it asked to be announced.
    Queued,
    /// It reached the fabric. Only if it asked to be announced.
    Started { slot: u8, queued: Duration },
    /// It took over its session's earlier request, which is decoding (see
    /// [`Request::join`](super::Request::join)): what it hears next is that
    /// request's output, for that request's prompt. Only a request sent to
    /// join hears it, on a channel for every event.
    Joined { slot: u8 },
    /// More output tokens.
    Tokens(Vec<u32>),
    /// The fabric finished it.
    Finished {
        finish: Finish,
        tokens: Vec<u32>,
        n_tokens: u32,
        fabric_us: u32,
        /// Where it ran, and how long it waited for a context.
        slot: u8,
        queued: Duration,
    },
    /// It ended without a result.
    Failed(Outcome),
}
