//! Refusals: why a datagram was dropped, as the Python core's `DecodeError` says it.

#![forbid(unsafe_code)]

/// A refused datagram: `reason` is a metric label, `detail` the human part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub detail: String,
}

impl Refusal {
    pub fn new(reason: &'static str, detail: impl Into<String>) -> Self {
        Refusal { reason, detail: detail.into() }
    }
}
