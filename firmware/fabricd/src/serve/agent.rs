//! HAProxy's agent check (`agent-check agent-port N`): for each connection
//! the agent writes one line saying how the board stands and closes it,
//! whatever HAProxy sent (`agent-send`).
//!
//! - `drain`: the operator drained the board (`fabricctl drain`), a
//!   reconfiguration is under way, no model is ready, or the daemon is
//!   shutting down. HAProxy then sends it no new work (sessions already
//!   bound to it excepted), while the board still serves what arrives.
//! - `ready NN%`: otherwise, with the share of the configured weight the
//!   board's free capacity earns: 100% with every context free, down to
//!   10% when all are taken and requests queue, never 0, which HAProxy
//!   would take as a drain. Contexts of a slot that is loading or drained
//!   count as taken, so a board rotating one slot gets about half the work.
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
    pub reconfiguring: bool,
    /// Whether some slot serves a model now.
    pub model_ready: bool,
    /// Contexts of the slots that take work.
    pub ready_contexts: usize,
    /// Contexts of every slot.
    pub contexts: usize,
    /// Requests admitted, waiting or running.
    pub busy: usize,
}

/// The weight a board whose every context is taken still gets.
const FLOOR_PERCENT: usize = 10;

/// The line for `r`.
pub fn answer(r: &Reading) -> String {
    if r.shutting_down || r.drained || r.reconfiguring || !r.model_ready {
        return "drain\n".into();
    }
    let free = r.ready_contexts.saturating_sub(r.busy);
    let share = (100 - FLOOR_PERCENT) * free / r.contexts.max(1);
    format!(
        "ready {}%\n",
        FLOOR_PERCENT + share.min(100 - FLOOR_PERCENT)
    )
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
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            a = listener.accept() => a,
        };
        let mut stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                log::warn!("agent: accept: {e}");
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

    fn serving(busy: usize) -> Reading {
        Reading {
            shutting_down: false,
            drained: false,
            reconfiguring: false,
            model_ready: true,
            ready_contexts: 32,
            contexts: 32,
            busy,
        }
    }

    #[test]
    fn the_weight_follows_free_contexts_and_never_reaches_zero() {
        assert_eq!(answer(&serving(0)), "ready 100%\n");
        assert_eq!(answer(&serving(16)), "ready 55%\n");
        assert_eq!(answer(&serving(32)), "ready 10%\n");
        assert_eq!(answer(&serving(2048)), "ready 10%\n");
        let one_slot_loading = Reading {
            ready_contexts: 16,
            ..serving(0)
        };
        assert_eq!(answer(&one_slot_loading), "ready 55%\n");
    }

    #[test]
    fn any_reason_not_to_take_new_work_drains() {
        let cases = [
            Reading {
                shutting_down: true,
                ..serving(0)
            },
            Reading {
                drained: true,
                ..serving(0)
            },
            Reading {
                reconfiguring: true,
                ..serving(0)
            },
            Reading {
                model_ready: false,
                ..serving(0)
            },
        ];
        for r in cases {
            assert_eq!(answer(&r), "drain\n", "{r:?}");
        }
    }
}
