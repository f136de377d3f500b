//! The vote state of one activation (`protocols/ordering/votes.py`), as bit masks.

#![forbid(unsafe_code)]

use super::{full, Bits, Mask};

/// VV, nvt, votes, u and Ntail(G) of the current activation.
#[derive(Clone, Debug)]
pub struct Votes {
    pub n: usize,
    /// tail(G): the processors with a message in G.
    pub voted: Mask,
    /// M_G, by sender index.
    pub candidates: Mask,
    /// `voters[c]`: the processors whose first message in G follows candidate c.
    pub voters: Vec<Mask>,
}

impl Votes {
    pub fn new(n: usize) -> Votes {
        Votes { n, voted: 0, candidates: 0, voters: vec![0; n] }
    }

    pub fn reset(&mut self) {
        self.voted = 0;
        self.candidates = 0;
        self.voters.iter_mut().for_each(|v| *v = 0);
    }

    /// Processor `voter`'s first message, which follows candidates `followed`.
    pub fn cast(&mut self, voter: usize, mut followed: Mask, is_candidate: bool) {
        let bit: Mask = 1 << voter;
        self.voted |= bit;
        if is_candidate {
            self.candidates |= bit;
            followed = bit;
        }
        for c in Bits(followed) {
            self.voters[c] |= bit;
        }
    }

    pub fn ntail(&self) -> usize {
        self.voted.count_ones() as usize
    }

    pub fn unseen(&self) -> usize {
        self.n - self.ntail()
    }

    pub fn nvt(&self, c: usize) -> usize {
        self.voters[c].count_ones() as usize
    }

    /// Whether every processor has voted.
    pub fn all_voted(&self) -> bool {
        self.voted == full(self.n)
    }
}
