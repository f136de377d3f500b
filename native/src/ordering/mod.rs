//! The ToTo total-order engine (`amcast.protocols.ordering`) in Rust: the causality DAG,
//! the votes of an activation and the rules of the ToTo family, PyO3-free. The Python
//! engine (`protocols/ordering/engine.py`, whose docstring is the theory of operation)
//! stays the reference: `tests/native/test_native_engine.py` feeds both the same
//! messages and requires the same deliveries, errors and counters.
//!
//! Processors are indexed `0 .. n-1` in member order and sets of them are `Mask`s, so a
//! group has at most `MAX_MEMBERS` members (the binding refuses more; the selection
//! then runs the Python engine).

#![forbid(unsafe_code)]

pub mod engine;
pub mod rules;
pub mod votes;

pub use engine::{Delivery, Engine, Violation};

/// A set of processor indices.
pub type Mask = u128;

/// The most members a native engine orders (the bits of a `Mask`).
pub const MAX_MEMBERS: usize = Mask::BITS as usize;

/// `OrderingRule`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    Lex,
    Toto,
    Stoto,
    Gtoto,
    Gltoto,
}

impl Rule {
    /// The rule of `OrderingRule`'s value (`lex`, `toto`, ...).
    pub fn parse(value: &str) -> Option<Rule> {
        Some(match value {
            "lex" => Rule::Lex,
            "toto" => Rule::Toto,
            "stoto" => Rule::Stoto,
            "gtoto" => Rule::Gtoto,
            "gltoto" => Rule::Gltoto,
            _ => return None,
        })
    }
}

/// `DeliveryRule`: which rule released a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fired {
    Early,
    Default,
    GlPrefix,
    Flush,
}

/// The set of all `n` processors.
pub fn full(n: usize) -> Mask {
    if n >= MAX_MEMBERS {
        Mask::MAX
    } else {
        (1 << n) - 1
    }
}

/// Iterates the set bits of a mask, lowest first.
pub struct Bits(pub Mask);

impl Iterator for Bits {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let i = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(i)
    }
}
