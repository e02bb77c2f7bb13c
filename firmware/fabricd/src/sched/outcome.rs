//! Every way a request can end: the domain's outcomes, and the [`Ending`]
//! each is counted under. No HTTP here: `http::reply` maps each outcome to
//! a status, in one place.

use std::time::Duration;

/// How a request ended, when it did not end with a completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A field of the request is wrong; `param` names it.
    Invalid {
        param: Option<&'static str>,
        code: &'static str,
        message: String,
    },
    /// The request names a model the catalog does not have.
    ModelNotFound { model: String, known: Vec<String> },
    /// The queue (or the connection cap) is full.
    Overloaded {
        retry_after: Duration,
        reason: String,
    },
    /// The model is being loaded, and the load outlasts the deadline.
    ModelLoading {
        model: String,
        retry_after: Duration,
    },
    /// In the catalog, in no slot.
    ModelNotLoaded { model: String },
    /// The request's deadline passed first.
    DeadlineExceeded { deadline: Duration },
    /// Refused before it queued: what waits ahead of it, at the measured
    /// service rate, would finish it past its deadline.
    PredictedLate {
        predicted_wait: Duration,
        deadline: Duration,
    },
    /// A newer request of the same typing session replaced it: its answer
    /// would be stale.
    Superseded,
    /// The fabric refused, corrupted or lost the request, or failed.
    FabricError { message: String },
    /// The daemon is stopping.
    ShuttingDown,
}

impl Outcome {
    /// A field `param` holds a value that is not allowed.
    pub fn invalid(param: &'static str, message: impl Into<String>) -> Outcome {
        Outcome::Invalid {
            param: Some(param),
            code: "invalid_value",
            message: message.into(),
        }
    }

    /// What the request is counted as.
    pub fn ending(&self) -> Ending {
        match self {
            Outcome::Invalid { .. } => Ending::InvalidRequest,
            Outcome::ModelNotFound { .. } => Ending::ModelNotFound,
            Outcome::Overloaded { .. } => Ending::Overloaded,
            Outcome::ModelLoading { .. } => Ending::ModelLoading,
            Outcome::ModelNotLoaded { .. } => Ending::ModelNotLoaded,
            Outcome::DeadlineExceeded { .. } => Ending::DeadlineExceeded,
            Outcome::PredictedLate { .. } => Ending::PredictedLate,
            Outcome::Superseded => Ending::Superseded,
            Outcome::FabricError { .. } => Ending::FabricError,
            Outcome::ShuttingDown => Ending::ShuttingDown,
        }
    }

    /// The human message.
    pub fn message(&self) -> String {
        match self {
            Outcome::Invalid { message, .. } => message.clone(),
            Outcome::ModelNotFound { model, known } => {
                format!(
                    "the model {model:?} does not exist; available: {}",
                    known.join(", ")
                )
            }
            Outcome::Overloaded {
                reason,
                retry_after,
            } => {
                format!("{reason}; retry in {} ms", retry_after.as_millis())
            }
            Outcome::ModelLoading { model, retry_after } => format!(
                "the model {model} is being loaded into the fabric; retry in {} ms",
                retry_after.as_millis()
            ),
            Outcome::ModelNotLoaded { model } => {
                format!("the model {model} is in the catalog but not loaded in any slot")
            }
            Outcome::DeadlineExceeded { deadline } => {
                format!(
                    "the request's deadline of {} ms passed before it completed",
                    deadline.as_millis()
                )
            }
            Outcome::PredictedLate {
                predicted_wait,
                deadline,
            } => format!(
                "refused at once: the requests ahead of it would take about {} ms at the measured service rate, \
                 so it would not finish within its deadline of {} ms",
                predicted_wait.as_millis(),
                deadline.as_millis()
            ),
            Outcome::Superseded => {
                "superseded by a newer request of the same session; this answer would be stale".into()
            }
            Outcome::FabricError { message } => {
                format!("the fabric failed this request: {message}")
            }
            Outcome::ShuttingDown => "the server is shutting down".into(),
        }
    }
}

/// How a request ended, as metrics, stats and logs count it: a completion,
/// a client that went away first, or the kind of its outcome. One enum, so
/// the three cannot disagree and a misspelt label cannot exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ending {
    Ok,
    Cancelled,
    Overloaded,
    DeadlineExceeded,
    /// Refused at once: predicted to finish past its deadline.
    PredictedLate,
    /// Replaced by a newer request of its typing session.
    Superseded,
    /// Bad input of any kind (a field, the body, the path, the method).
    InvalidRequest,
    ModelNotFound,
    ModelLoading,
    ModelNotLoaded,
    FabricError,
    ShuttingDown,
}

impl Ending {
    /// Every ending, in the order metrics list them.
    pub const ALL: [Ending; 12] = [
        Ending::Ok,
        Ending::Cancelled,
        Ending::Overloaded,
        Ending::DeadlineExceeded,
        Ending::PredictedLate,
        Ending::Superseded,
        Ending::InvalidRequest,
        Ending::ModelNotFound,
        Ending::ModelLoading,
        Ending::ModelNotLoaded,
        Ending::FabricError,
        Ending::ShuttingDown,
    ];

    /// Its stable label: the metrics' `outcome` label and the stats' key.
    pub const fn label(self) -> &'static str {
        match self {
            Ending::Ok => "ok",
            Ending::Cancelled => "cancelled",
            Ending::Overloaded => "overloaded",
            Ending::DeadlineExceeded => "deadline_exceeded",
            Ending::PredictedLate => "predicted_late",
            Ending::Superseded => "superseded",
            Ending::InvalidRequest => "invalid_request",
            Ending::ModelNotFound => "model_not_found",
            Ending::ModelLoading => "model_loading",
            Ending::ModelNotLoaded => "model_not_loaded",
            Ending::FabricError => "fabric_error",
            Ending::ShuttingDown => "shutting_down",
        }
    }

    /// Its place in [`Ending::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ending_is_in_its_place_with_its_own_label() {
        for (i, e) in Ending::ALL.iter().enumerate() {
            assert_eq!(e.index(), i, "{e:?}");
        }
        let mut labels: Vec<_> = Ending::ALL.iter().map(|e| e.label()).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), Ending::ALL.len());
    }
}
