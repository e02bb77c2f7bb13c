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

/// A typing session: the id a request named, within the client's address
/// (the same id from another address is another session, so no one can
/// supersede another's requests by guessing its id).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    pub ip: IpAddr,
    pub id: Arc<str>,
}

/// A request checked at the edge: a model of the catalog, a prompt of
/// tokens within the fabric's limits, the fabric's parameters. The HTTP
/// layer builds it (its errors name the field); the scheduler hands its
/// prompt and parameters to the rings as they are, without a copy.
#[derive(Debug, Clone)]
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
    /// Its typing session: a newer request of it supersedes this one.
    pub session: Option<SessionKey>,
    /// Take over this earlier request of the session if it is decoding
    /// (its prompt is a start of this one's): the fabric's work for it is
    /// not repeated. If it is not decoding, this one is queued as usual.
    pub join: Option<ReqId>,
    /// Queue at the head of its client's turn: it has had its turn already
    /// (a join whose output turned out not to fit).
    pub front: bool,
    /// How long after `received` its typing session counts as paused, if
    /// it is typing: until then the request is held back (see `held`).
    pub pause_after: Option<Duration>,
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
