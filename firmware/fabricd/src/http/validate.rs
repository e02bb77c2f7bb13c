//! Validation at the edge: a body becomes a [`sched::Request`], or an outcome naming the field.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fabric_model::tokenizer::EOS;

use hyper::header::{HeaderName, CONTENT_LENGTH, CONTENT_TYPE};

use super::instant::{self, Instant, Looked};
use super::ledger::{Joining, Ledger, Prepared, Ticket};
use super::reply::Failure;
use super::{request, App, DEFAULT_MODEL};
use crate::sched::{self, Admission, ClientKey, Events, Outcome, SessionKey};
use crate::typing::cache::CacheKey;
use crate::typing::sessions::Compat;

/// What a completion's head says besides its body: the deadline header
/// and the session header.
#[derive(Debug, Default)]
pub(super) struct Head {
    pub(super) deadline_ms: Option<u64>,
    pub(super) session: Option<String>,
    pub(super) session_seq: Option<u64>,
}

// Named once: a lookup by `&str` parses and checks the name again on every
// request (about 600 x86 instructions a keystroke for these three).
static X_DEADLINE_MS: HeaderName = HeaderName::from_static("x-deadline-ms");
static X_SESSION_ID: HeaderName = HeaderName::from_static("x-session-id");
static X_SESSION_SEQ: HeaderName = HeaderName::from_static("x-session-seq");

/// Checks a completion's head: the daemon is not shutting down, the body
/// is JSON, the deadline header is a number, the session header a session
/// id and the sequence header a sequence number (all returned).
pub(super) fn check_head(app: &App, headers: &hyper::HeaderMap) -> Result<Head, Failure> {
    if app.shutting_down.load(Ordering::Relaxed) {
        return Err(Outcome::ShuttingDown.into());
    }
    // Refused before the body is asked for, so before hyper sends `100
    // Continue` to a client that waits for it.
    if let Some(len) = headers.get(CONTENT_LENGTH) {
        let len = len.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok());
        let limit = app.config.body_limit;
        if len.is_some_and(|len| len > limit as u64) {
            return Err(Failure::BodyTooLarge { limit });
        }
    }
    if let Some(ct) = headers.get(CONTENT_TYPE) {
        let ct = ct.to_str().unwrap_or("");
        let essence = ct.split(';').next().unwrap_or("").trim();
        if !essence.eq_ignore_ascii_case("application/json") {
            return Err(Failure::UnsupportedMediaType {
                found: ct.to_owned(),
            });
        }
    }
    let deadline_ms = headers
        .get(&X_DEADLINE_MS)
        .map(|v| {
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .filter(|&ms| ms > 0)
                .ok_or_else(|| {
                    Failure::from(Outcome::invalid(
                        "x-deadline-ms",
                        "the X-Deadline-Ms header must be a positive integer",
                    ))
                })
        })
        .transpose()?;
    let session = match headers.get(&X_SESSION_ID) {
        None => None,
        Some(v) => {
            let id = v.to_str().map_err(|_| {
                Outcome::invalid(
                    "session",
                    "the X-Session-Id header must be visible ASCII (a session id of 1 to 128 bytes)",
                )
            })?;
            super::request::check_session(Some(id))?;
            Some(id.to_owned())
        }
    };
    let session_seq = headers
        .get(&X_SESSION_SEQ)
        .map(|v| {
            let seq = v
                .to_str()
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    Outcome::invalid(
                        "session_seq",
                        "the X-Session-Seq header must be a non-negative integer",
                    )
                })?;
            super::request::check_session_seq(Some(seq))?;
            Ok::<_, Failure>(seq)
        })
        .transpose()?;
    Ok(Head {
        deadline_ms,
        session,
        session_seq,
    })
}

/// Where validation leaves a request.
// The admission is the common path and is not boxed: moving it costs less
// than an allocation a request.
#[allow(clippy::large_enum_variant)]
pub(super) enum Edge {
    /// To the scheduler.
    Admit(Admission, Prepared),
    /// Answered already, from the cache or by typed forward.
    Answered(Box<Instant>),
}

/// Validates a body at the edge: its shape, its model, its prompt and
/// limits against the fabric's, each error naming the field. Then the
/// typing features may answer it at once (the cache, typed forward);
/// otherwise it is admitted (its queue permit taken, or `overloaded` now).
pub(super) fn validate(
    app: &Arc<App>,
    bytes: &[u8],
    head: &Head,
    ledger: &mut Ledger,
) -> Result<Edge, Outcome> {
    let received = ledger.received;
    let request = request::parse_completion(bytes)?;
    // `default` follows rotation: the model loaded most recently.
    let current;
    let name: &str = if request.model == DEFAULT_MODEL {
        current = app
            .sched
            .published()
            .view()
            .default_model()
            .ok_or_else(|| Outcome::ModelNotLoaded {
                model: DEFAULT_MODEL.into(),
            })?;
        &current
    } else {
        &request.model
    };
    let model = app.catalog.get(name).map_err(|_| Outcome::ModelNotFound {
        model: request.model.to_string(),
        known: app
            .catalog
            .models
            .iter()
            .map(|m| m.name.to_string())
            .collect(),
    })?;
    let tokenizer = model
        .tokenizer
        .clone()
        .ok_or_else(|| Outcome::ModelNotLoaded {
            model: model.name.to_string(),
        })?;
    // A waiting request keeps only the prompt's tokens.
    let prompt = tokenizer.encode(&request.prompt);
    let info = &app.sched.published().info;
    let model_name = model.name.clone();
    ledger.model = Some(model_name.clone());
    ledger.tokens_in = prompt.len() as u64;
    if prompt.len() > info.max_prompt as usize {
        return Err(Outcome::invalid(
            "prompt",
            format!(
                "the prompt is {} tokens; the fabric takes at most {}",
                prompt.len(),
                info.max_prompt
            ),
        ));
    }
    // A transformer's sequence holds its prompt and its output (contract
    // section 10): what is left of it after the prompt.
    let room = match model.context {
        Some(context) if prompt.len() >= context as usize => {
            return Err(Outcome::invalid(
                "prompt",
                format!(
                    "the prompt is {} tokens; model {} holds {context} positions, for the \
                     prompt and max_tokens together",
                    prompt.len(),
                    model.name
                ),
            ));
        }
        Some(context) => context - prompt.len() as u32,
        None => u32::MAX,
    };
    let max_tokens = request
        .max_tokens
        .unwrap_or(app.config.default_max_tokens.min(info.max_output).min(room));
    if max_tokens > info.max_output {
        return Err(Outcome::invalid(
            "max_tokens",
            format!(
                "max_tokens {max_tokens} is beyond the fabric's limit of {}",
                info.max_output
            ),
        ));
    }
    if max_tokens > room {
        return Err(Outcome::invalid(
            "max_tokens",
            format!(
                "max_tokens {max_tokens} after a prompt of {} tokens passes model {}'s \
                 context of {} positions (the prompt and max_tokens together)",
                prompt.len(),
                model.name,
                prompt.len() as u32 + room
            ),
        ));
    }
    let timeout_ms = request
        .deadline_ms
        .or(head.deadline_ms)
        .unwrap_or(app.config.default_deadline_ms)
        .min(app.config.max_deadline_ms);
    let timeout = Duration::from_millis(timeout_ms);
    let client = ClientKey {
        ip: ledger.ip,
        user: request
            .user
            .as_deref()
            .filter(|u| !u.is_empty())
            .map(Arc::from),
    };
    // The body's session wins over the header's.
    let session = request
        .session
        .as_deref()
        .or(head.session.as_deref())
        .map(|id| SessionKey {
            ip: ledger.ip,
            id: Arc::from(id),
        });
    let session_seq = request.session_seq.or(head.session_seq);
    if session_seq.is_some() && session.is_none() {
        return Err(Outcome::invalid(
            "session_seq",
            "session_seq orders a typing session's requests, and the request names no session \
             (the body's session or the X-Session-Id header)",
        ));
    }
    let next_id = || app.next_id.fetch_add(1, Ordering::Relaxed);
    let typing = &app.typing.settings;
    let (id, pause_after) = match &session {
        // Holding needs supersede too (`TypingSettings::holds`).
        Some(key) if typing.supersede => {
            let arrival = app
                .typing
                .order(key, session_seq, received, next_id)
                .map_err(|_| Outcome::Superseded)?;
            (arrival.id, arrival.pause_after.filter(|_| typing.holds()))
        }
        _ => (next_id(), None),
    };
    // Tokens as they come: a stream, or stop sequences to watch for.
    let progress = request.stream || !request.stop.is_empty();
    let params = fabric_hw::shell::Params {
        max_tokens,
        temperature: request.temperature,
        seed: request.seed.unwrap_or_else(|| random_seed(id)),
        stop_token: if request.ignore_eos {
            fabric_hw::contract::NO_STOP_TOKEN
        } else {
            EOS
        },
        stream: progress,
    };
    let mut prepared = Prepared {
        id,
        model: model_name.clone(),
        tokenizer,
        stream: request.stream,
        include_usage: request.include_usage,
        stop: request.stop,
        prompt_tokens: prompt.len(),
        max_tokens,
        events: Events::none(),
        ticket: None,
    };
    let tracked = session.is_some() && (typing.supersede || typing.typed_forward);
    let cache_key = typing
        .cache
        .then(|| CacheKey::of(&model_name, &prompt, &params, request.seed.is_some()))
        .flatten();
    let mut join = None;
    if tracked || cache_key.is_some() {
        let ticket = Ticket {
            prompt: app.typing.mark(&request.prompt),
            compat: Compat {
                model: model_name.clone(),
                temperature_bits: params.temperature.to_bits(),
                stop_token: params.stop_token,
            },
            session: session.clone().filter(|_| tracked),
            cache_key,
            epoch: app.sched.published().epoch(),
            join: None,
        };
        match instant::lookup(app, &mut prepared, ticket, &request.prompt)? {
            Looked::Answered(answer) => return Ok(Edge::Answered(answer)),
            Looked::Join {
                target,
                base,
                typed,
            } => join = Some((target, base, typed)),
            Looked::Admit => {}
        }
    }
    // Admission: a permit now, or overloaded now.
    let Ok(permit) = app.permits.clone().try_acquire_owned() else {
        return Err(Outcome::Overloaded {
            retry_after: app.sched.published().retry_after(app.nominal_rate),
            reason: format!("the queue is full ({} requests)", app.config.queue_capacity),
        });
    };
    // A join hears `Joined` before its end: a channel for more than one
    // event.
    let (tx, events) = sched::events(progress || join.is_some());
    prepared.events = events;
    let request = sched::Request {
        model: model_name,
        client,
        prompt,
        params,
        // A stream must know before its 200; with stop sequences the
        // answer may end before `Finished`, so it learns its slot early.
        announce: progress,
        deadline: received + timeout,
        timeout,
        received,
        session,
        join: join.as_ref().map(|(target, _, _)| *target),
        front: false,
        pause_after,
    };
    if let Some(ticket) = prepared.ticket.as_mut() {
        if let Some(key) = &ticket.session {
            // What it works on: its own prompt, or the joined request's.
            let base = join.as_ref().map_or(ticket.prompt, |(_, base, _)| *base);
            let joinable = !progress;
            let compat = ticket.compat.clone();
            app.typing
                .sessions()
                .admitted(key.clone(), id, base, joinable, compat);
        }
        if let Some((_, _, typed)) = join {
            ticket.join = Some(Joining {
                typed,
                retry: request.clone(),
            });
        }
    }
    let adm = Admission {
        id,
        request,
        events: tx,
        permit: Some(permit),
    };
    Ok(Edge::Admit(adm, prepared))
}

/// The client's address: the peer's, or behind a trusted proxy the one its
/// `X-Forwarded-For` names. Each proxy appends the address it heard from,
/// so the list is read from its end, past the trusted proxies' own
/// entries; what comes before is the client's to write and is not
/// believed. Several `X-Forwarded-For` headers are one list, in order.
pub(super) fn client_ip(app: &App, peer: SocketAddr, headers: &hyper::HeaderMap) -> IpAddr {
    forwarded_client(peer.ip(), headers, |ip| app.config.is_trusted_proxy(ip))
}

fn forwarded_client(
    peer: IpAddr,
    headers: &hyper::HeaderMap,
    trusted: impl Fn(IpAddr) -> bool,
) -> IpAddr {
    if !trusted(peer) {
        return peer;
    }
    let mut client = peer;
    let entries: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .collect();
    for entry in entries.iter().rev() {
        match entry.trim().parse::<IpAddr>() {
            // A proxy further out, also trusted, added the next one.
            Ok(ip) if trusted(ip) => client = ip,
            Ok(ip) => return ip,
            // Garbage where an address should be: what the proxies vouch
            // for ends here.
            Err(_) => return client,
        }
    }
    client
}

/// The seed of a request that named none: its id mixed with a key drawn
/// once a process (the clock at the first such request), so that seeds
/// differ from request to request and from run to run. The clock is read
/// once, not a request: on a Cortex-A9 every read is a system call (it has
/// no vDSO clock; results/arm-cost-2026-12-07-run2.md).
pub(super) fn random_seed(id: u64) -> u64 {
    static KEY: OnceLock<u64> = OnceLock::new();
    let key = *KEY.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        nanos ^ (u64::from(std::process::id()) << 32)
    });
    fabric_hw::sampling::SplitMix64(key ^ id).next()
}

#[cfg(test)]
mod tests {
    use super::{forwarded_client, random_seed};
    use std::collections::HashSet;
    use std::net::IpAddr;

    /// Requests that name no seed each draw their own, and the key mixed
    /// into them is drawn once (no clock read a request).
    #[test]
    fn requests_without_a_seed_get_seeds_of_their_own() {
        let seeds: HashSet<u64> = (0..10_000).map(random_seed).collect();
        assert_eq!(seeds.len(), 10_000, "two requests drew one seed");
        assert_eq!(random_seed(7), random_seed(7));
        assert!(
            (0..100).all(|id| random_seed(id) != id),
            "the id is the seed"
        );
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an address")
    }

    fn client(peer: &str, xff: &[&str]) -> IpAddr {
        let mut headers = hyper::HeaderMap::new();
        for v in xff {
            headers.append("x-forwarded-for", v.parse().expect("a header value"));
        }
        let proxies = [ip("10.0.0.2"), ip("10.0.0.3")];
        forwarded_client(ip(peer), &headers, |a| proxies.contains(&a))
    }

    #[test]
    fn only_a_trusted_proxy_names_the_client_and_only_its_own_entry_counts() {
        // From a client, the header is the client's own writing.
        assert_eq!(client("192.168.1.9", &["1.2.3.4"]), ip("192.168.1.9"));
        // From the proxy: the entry it appended, not what the client sent
        // before it.
        assert_eq!(
            client("10.0.0.2", &["1.2.3.4, 192.168.1.9"]),
            ip("192.168.1.9")
        );
        assert_eq!(
            client("10.0.0.2", &["1.2.3.4", "192.168.1.9"]),
            ip("192.168.1.9")
        );
        // Two trusted proxies in a row: past the inner one's entry.
        assert_eq!(
            client("10.0.0.2", &["192.168.1.9, 10.0.0.3"]),
            ip("192.168.1.9")
        );
        // No header, or garbage where the proxy's entry should be: the
        // nearest trusted hop, never a client-written address.
        assert_eq!(client("10.0.0.2", &[]), ip("10.0.0.2"));
        assert_eq!(client("10.0.0.2", &["1.2.3.4, nonsense"]), ip("10.0.0.2"));
    }
}
