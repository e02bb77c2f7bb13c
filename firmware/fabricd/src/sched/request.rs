//! A request as the scheduler takes it: validated at the edge, in the
//! fabric's own terms.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric_hw::shell::{Params, Submission};
use tokio::sync::OwnedSemaphorePermit;

use super::events::EventSender;

/// A request's id, unique for the daemon's life.
pub type ReqId = u64;

/// Who asked: the fairness key. The client's address, and the request's
/// `user` if it names one (users behind one address, such as a proxy's,
/// take turns as separate clients).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientKey {
    pub ip: IpAddr,
    pub user: Option<Arc<str>>,
}

/// A request checked at the edge: a model of the catalog, a prompt of
/// tokens within the fabric's limits, the fabric's parameters. The HTTP
/// layer builds it (its errors name the field); the scheduler hands its
/// prompt and parameters to the rings as they are, without a copy.
#[derive(Debug)]
pub struct Request {
    pub model: Arc<str>,
    pub client: ClientKey,
    pub prompt: Vec<u32>,
    /// What the fabric generates; `params.stream` when the request wants
    /// tokens as they come (a stream, or stop sequences to watch for).
    pub params: Params,
    /// Whether the request hears `Queued` and `Started` (a stream must know
    /// it was admitted before its 200 goes out). A whole response only
    /// needs its end: one wake-up a request instead of three.
    pub announce: bool,
    pub deadline: Instant,
    /// The deadline as the request gave it, for its answer.
    pub timeout: Duration,
    pub received: Instant,
}

impl Request {
    /// What the rings are given for it.
    pub fn submission(&self, tag: u32, ctx: u16) -> Submission<'_> {
        Submission {
            tag,
            ctx,
            prompt: &self.prompt,
            params: self.params,
        }
    }
}

/// A request admitted by the edge: its id, its channel, and the queue
/// permit it holds until it leaves the scheduler.
#[derive(Debug)]
pub struct Admission {
    pub id: ReqId,
    pub request: Request,
    pub events: EventSender,
    pub permit: Option<OwnedSemaphorePermit>,
}
