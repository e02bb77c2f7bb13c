//! HAProxy's agent check (`agent-check agent-port N`): for each connection
//! the agent writes one line saying how the board stands and closes it,
//! whatever HAProxy sent (`agent-send`).
//!
//! - `drain`: the operator drained the board (`fabricctl drain --board`),
//!   a full reconfiguration darkens the fabric, no model is ready, or the
//!   daemon is shutting down. HAProxy then sends it no new work, while the
//!   board still serves what arrives. A load into one slot is not a
//!   drain: the other slots serve on, and the weight says how much of the
//!   board that is (a drain would also take the board off the session
//!   hash ring, and its typing sessions with it).
//! - `ready NN%`: otherwise, with the share of the configured weight its
//!   capacity earns: the share of its contexts in slots that take work
//!   (100% with every slot serving, 50% with one of two drained), never
//!   below 10%, since 0 would be a drain. Not its load: HAProxy's
//!   `leastconn` already weighs what is in flight on each board as it
//!   happens, and a weight that also followed the load, half a second
//!   late, sent the next half second's work to whichever board had
//!   looked idle (p95/p50 1.9 at 64 clients over four boards,
//!   `results/fleet-2026-12-02.md`).
//!
//! The words are HAProxy's (`doc/configuration.txt`, "agent-check"):
//! `ready` also ends a drain the agent itself asked for, and a bare
//! percentage sets the weight.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The operator's drain of the whole board: a word to the balancer, not a
/// refusal (unlike a slot's drain).
#[derive(Debug, Default)]
pub struct BoardDrain(AtomicBool);

impl BoardDrain {
    /// Turns the drain on or off; returns whether it was on.
    pub fn set(&self, on: bool) -> bool {
        self.0.swap(on, Ordering::Relaxed)
    }

    pub fn is_on(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// What the answer is made of, read afresh for every check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub shutting_down: bool,
    pub drained: bool,
    /// A full reconfiguration: the whole fabric is dark.
    pub reconfiguring: bool,
    /// Whether some slot serves a model now.
    pub model_ready: bool,
    /// Contexts of the slots that take work.
    pub ready_contexts: usize,
    /// Contexts of every slot.
    pub contexts: usize,
}

/// The least weight a board that takes work gets.
const FLOOR_PERCENT: usize = 10;

/// The line for `r`.
pub fn answer(r: &Reading) -> String {
    if r.shutting_down || r.drained || r.reconfiguring || !r.model_ready {
        return "drain\n".into();
    }
    let share = 100 * r.ready_contexts.min(r.contexts) / r.contexts.max(1);
    format!("ready {}%\n", share.max(FLOOR_PERCENT))
}

/// Checks answered at once; past it a check's connection is closed
/// unanswered, which HAProxy takes as no opinion (its health check decides).
const AT_ONCE: usize = 64;

/// How long a check may take to read its line.
const WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// Answers checks on `listener` until `stop` fires.
pub async fn serve(
    listener: TcpListener,
    read: impl Fn() -> Reading + Send + 'static,
    stop: CancellationToken,
) {
    let at_once = Arc::new(Semaphore::new(AT_ONCE));
    let mut accept_errors = 0u32;
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            a = listener.accept() => a,
        };
        let mut stream = match accepted {
            Ok((s, _)) => {
                accept_errors = 0;
                s
            }
            Err(e) => {
                // Out of descriptors, usually: log once per burst.
                if accept_errors == 0 {
                    log::warn!("agent: accept: {e}");
                }
                accept_errors += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = at_once.clone().try_acquire_owned() else {
            continue;
        };
        let line = answer(&read());
        tokio::spawn(async move {
            let write = async {
                stream.write_all(line.as_bytes()).await?;
                stream.shutdown().await
            };
            if let Err(e) = tokio::time::timeout(WRITE_TIMEOUT, write)
                .await
                .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
            {
                log::debug!("agent: answering a check: {e}");
            }
            drop(permit);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serving() -> Reading {
        Reading {
            shutting_down: false,
            drained: false,
            reconfiguring: false,
            model_ready: true,
            ready_contexts: 32,
            contexts: 32,
        }
    }

    #[test]
    fn the_weight_is_the_share_of_contexts_that_take_work() {
        assert_eq!(answer(&serving()), "ready 100%\n");
        let one_of_two_slots = Reading {
            ready_contexts: 16,
            ..serving()
        };
        assert_eq!(answer(&one_of_two_slots), "ready 50%\n");
        let one_of_sixteen = Reading {
            ready_contexts: 2,
            ..serving()
        };
        assert_eq!(answer(&one_of_sixteen), "ready 10%\n");
    }

    #[test]
    fn any_reason_not_to_take_new_work_drains() {
        let cases = [
            Reading {
                shutting_down: true,
                ..serving()
            },
            Reading {
                drained: true,
                ..serving()
            },
            Reading {
                reconfiguring: true,
                ..serving()
            },
            Reading {
                model_ready: false,
                ..serving()
            },
        ];
        for r in cases {
            assert_eq!(answer(&r), "drain\n", "{r:?}");
        }
    }
}
