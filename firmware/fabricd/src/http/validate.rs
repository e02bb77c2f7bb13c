//! Validation at the edge: a body becomes a [`sched::Request`], or an outcome naming the field.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fabric_model::tokenizer::EOS;

use super::completions::Ledger;
use super::{request, App, DEFAULT_MODEL};
use crate::sched::{self, Admission, ClientKey, Events, Outcome, ReqId};

/// What answering an admitted request needs.
pub(super) struct Prepared {
    pub(super) id: ReqId,
    pub(super) model: Arc<str>,
    pub(super) tokenizer: Arc<fabric_model::Tokenizer>,
    pub(super) stream: bool,
    pub(super) include_usage: bool,
    pub(super) stop: Vec<String>,
    pub(super) prompt_tokens: usize,
    pub(super) events: Events,
}

/// Validates a body at the edge: its shape, its model, its prompt and
/// limits against the fabric's, each error naming the field; and makes its
/// admission (its queue permit taken, or `overloaded` now).
pub(super) fn validate(
    app: &Arc<App>,
    bytes: &[u8],
    header_deadline: Option<u64>,
    ledger: &mut Ledger,
) -> Result<(Admission, Prepared), Outcome> {
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
    let max_tokens = request
        .max_tokens
        .unwrap_or(app.config.default_max_tokens.min(info.max_output));
    if max_tokens > info.max_output {
        return Err(Outcome::invalid(
            "max_tokens",
            format!(
                "max_tokens {max_tokens} is beyond the fabric's limit of {}",
                info.max_output
            ),
        ));
    }
    let timeout_ms = request
        .deadline_ms
        .or(header_deadline)
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
    // Admission: a permit now, or overloaded now.
    let Ok(permit) = app.permits.clone().try_acquire_owned() else {
        return Err(Outcome::Overloaded {
            retry_after: app.sched.published().retry_after(app.nominal_rate),
            reason: format!("the queue is full ({} requests)", app.config.queue_capacity),
        });
    };
    let id = app.next_id.fetch_add(1, Ordering::Relaxed);
    // Tokens as they come: a stream, or stop sequences to watch for.
    let progress = request.stream || !request.stop.is_empty();
    let (tx, events) = sched::events(progress);
    let adm = Admission {
        id,
        request: sched::Request {
            model: model_name.clone(),
            client,
            prompt,
            params: fabric_hw::shell::Params {
                max_tokens,
                temperature: request.temperature,
                seed: request.seed.unwrap_or_else(|| random_seed(id)),
                stop_token: if request.ignore_eos {
                    fabric_hw::contract::NO_STOP_TOKEN
                } else {
                    EOS
                },
                stream: progress,
            },
            // A stream must know before its 200; with stop sequences the
            // answer may end before `Finished`, so it learns its slot early.
            announce: progress,
            deadline: received + timeout,
            timeout,
            received,
        },
        events: tx,
        permit: Some(permit),
    };
    let prepared = Prepared {
        id,
        model: model_name,
        tokenizer,
        stream: request.stream,
        include_usage: request.include_usage,
        stop: request.stop,
        prompt_tokens: adm.request.prompt.len(),
        events,
    };
    Ok((adm, prepared))
}

/// The client's address: the peer, or the first `X-Forwarded-For` entry
/// behind a trusted proxy.
pub(super) fn client_ip(app: &App, peer: SocketAddr, headers: &hyper::HeaderMap) -> IpAddr {
    if app.config.trust_forwarded_for {
        if let Some(fwd) = headers
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(',').next())
            .and_then(|v| v.trim().parse::<IpAddr>().ok())
        {
            return fwd;
        }
    }
    peer.ip()
}

pub(super) fn random_seed(id: u64) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}
