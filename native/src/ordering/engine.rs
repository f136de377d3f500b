//! The causality DAG G and its activations (`protocols/ordering/engine.py`).
//!
//! Vertices live in a slab; a vertex that leaves G is removed from its children's
//! predecessor lists (the Python engine keeps it there, marked delivered, and skips it:
//! the same masks), and its slot is reused by a later insertion. A message is checked
//! in full before anything changes, so a refused one leaves the engine as it was.

#![forbid(unsafe_code)]

use std::collections::{HashMap, VecDeque};
use std::fmt;

use super::rules;
use super::votes::Votes;
use super::{Bits, Fired, Mask, Rule, MAX_MEMBERS};

/// Why a message was refused (`ProtocolViolation`); `ack` indexes the message's acks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Violation {
    /// The sender is not a member.
    UnknownSender,
    /// A seq at or below the sender's last inserted one.
    Duplicate { expected: i64 },
    /// A seq past the sender's next one.
    SequenceGap { expected: i64 },
    /// An ack of a non-member.
    AckNonMember { ack: usize },
    /// An ack of a message not inserted (or of seq < 1).
    AckUnknown { ack: usize },
}

impl Violation {
    /// The metric label (`ProtocolViolation.reason`).
    pub fn reason(&self) -> &'static str {
        match self {
            Violation::UnknownSender | Violation::AckNonMember { .. } => "unknown_sender",
            Violation::Duplicate { .. } => "duplicate",
            Violation::SequenceGap { .. } => "sequence_gap",
            Violation::AckUnknown { .. } => "ack_unknown",
        }
    }

    /// The detail as the Python engine words it, for a message of integer fields.
    pub fn detail(&self, sender: i64, seq: i64, acks: &[(i64, i64)]) -> String {
        match *self {
            Violation::UnknownSender => format!("{sender} is not a member"),
            Violation::Duplicate { expected } | Violation::SequenceGap { expected } => {
                format!("({sender}, {seq}) inserted, expected seq {expected}")
            }
            Violation::AckNonMember { ack } => format!("ack of non-member {}", acks[ack].0),
            Violation::AckUnknown { ack } => {
                format!("({sender}, {seq}) acks unseen ({}, {})", acks[ack].0, acks[ack].1)
            }
        }
    }
}

/// A delivered vertex that carries a payload (`MessageDelivered`).
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery<P> {
    /// The sender's index in the member list.
    pub index: usize,
    pub sender: i64,
    pub seq: i64,
    pub payload: P,
    pub position: u64,
    pub activation: u64,
    pub rule: Fired,
    pub ntail: usize,
    pub unseen: usize,
    pub nvt: usize,
}

struct Vertex<P> {
    index: usize,
    seq: i64,
    /// Taken when delivered (a GL-prefix vertex stays in G without it).
    payload: Option<P>,
    ack_only: bool,
    /// Predecessors still in G.
    preds: Vec<u32>,
    children: Vec<u32>,
    pending: u32,
    delivered: bool,
    mask: Mask,
    stamp: u64,
}

enum Lookup {
    /// Members are small non-negative ints: index by id (`-1`: not a member).
    Dense(Vec<i32>),
    Map(HashMap<i64, usize>),
}

impl Lookup {
    fn get(&self, id: i64) -> Option<usize> {
        match self {
            Lookup::Dense(table) => {
                usize::try_from(id).ok().and_then(|i| table.get(i)).and_then(|&k| usize::try_from(k).ok())
            }
            Lookup::Map(map) => map.get(&id).copied(),
        }
    }
}

/// Orders causally released messages with one rule of the ToTo family
/// (`TotalOrderEngine`); `P` is the payload, passed through.
pub struct Engine<P> {
    members: Vec<i64>,
    lookup: Lookup,
    n: usize,
    phi: f64,
    rule: Rule,
    ack_roots_leave: bool,
    slab: Vec<Vertex<P>>,
    free: Vec<u32>,
    chains: Vec<VecDeque<u32>>,
    size: usize,
    payloads: usize,
    inserted: Vec<i64>,
    delivered_seq: Vec<i64>,
    votes: Votes,
    gl_delivered: Mask,
    pub activation: u64,
    pub position: u64,
    pub delivered_vertices: u64,
    pub delivered_ack_only: u64,
    // scratch, kept between insertions to save allocations
    latest: Vec<i64>,
    touched: Vec<usize>,
    stack: Vec<u32>,
    roots: Vec<u32>,
}

impl<P> Engine<P> {
    /// An engine for `members` (distinct, at most `MAX_MEMBERS`) with threshold `phi`
    /// (already resolved: `OrderingConfig.resolve_phi`).
    pub fn new(members: &[i64], rule: Rule, phi: f64, ack_roots_leave: bool) -> Result<Self, String> {
        let n = members.len();
        if n == 0 {
            return Err("a group needs at least one member".into());
        }
        if n > MAX_MEMBERS {
            return Err(format!("the native engine orders at most {MAX_MEMBERS} members; got {n}"));
        }
        let max = members.iter().copied().max().unwrap_or(0);
        let dense = members.iter().all(|&m| m >= 0) && max < 4096;
        let mut map = HashMap::new();
        for (i, &m) in members.iter().enumerate() {
            if map.insert(m, i).is_some() {
                return Err("member ids must be distinct".into());
            }
        }
        let lookup = if dense {
            let mut table = vec![-1i32; max as usize + 1];
            for (i, &m) in members.iter().enumerate() {
                table[m as usize] = i as i32;
            }
            Lookup::Dense(table)
        } else {
            Lookup::Map(map)
        };
        Ok(Engine {
            members: members.to_vec(),
            lookup,
            n,
            phi,
            rule,
            ack_roots_leave,
            slab: Vec::new(),
            free: Vec::new(),
            chains: (0..n).map(|_| VecDeque::new()).collect(),
            size: 0,
            payloads: 0,
            inserted: vec![0; n],
            delivered_seq: vec![0; n],
            votes: Votes::new(n),
            gl_delivered: 0,
            activation: 0,
            position: 0,
            delivered_vertices: 0,
            delivered_ack_only: 0,
            latest: vec![0; n],
            touched: Vec::new(),
            stack: Vec::new(),
            roots: Vec::new(),
        })
    }

    pub fn n(&self) -> usize {
        self.n
    }

    pub fn phi(&self) -> f64 {
        self.phi
    }

    pub fn members(&self) -> &[i64] {
        &self.members
    }

    /// Vertices in G.
    pub fn pending(&self) -> usize {
        self.size
    }

    /// Vertices in G that carry a payload.
    pub fn pending_payloads(&self) -> usize {
        self.payloads
    }

    /// Ntail(G) of the current activation.
    pub fn ntail(&self) -> usize {
        self.votes.ntail()
    }

    /// The seq the sender of index `index` is expected to insert next.
    pub fn expected_seq(&self, index: usize) -> i64 {
        self.inserted[index].saturating_add(1)
    }

    /// The member index of node id `id`.
    pub fn index_of(&self, id: i64) -> Option<usize> {
        self.lookup.get(id)
    }

    /// Add one causally released message to G; push what is delivered onto `out`.
    pub fn insert(
        &mut self,
        sender: i64,
        seq: i64,
        acks: &[(i64, i64)],
        payload: Option<P>,
        out: &mut Vec<Delivery<P>>,
    ) -> Result<(), Violation> {
        let index = self.check(sender, seq, acks)?;
        let ack_only = payload.is_none();
        let id = self.add_vertex(index, seq, payload);
        let pending = self.slab[id as usize].pending;
        if self.ack_roots_leave && pending == 0 && ack_only {
            self.drop_ack(index); // an ack of delivered messages only: never a candidate
            return Ok(());
        }
        if self.chains[index].len() == 1 {
            self.cast_vote(id);
        } else if self.rule != Rule::Toto {
            return Ok(()); // votes unchanged: only ToTo's tail(m) depends on later messages
        }
        if self.rule == Rule::Gltoto {
            self.evaluate_gltoto(out);
        } else {
            self.evaluate(out);
        }
        Ok(())
    }

    /// Deliver everything left in G, deterministically (end of a view).
    pub fn close(&mut self, out: &mut Vec<Delivery<P>>) {
        while self.size != 0 {
            let mut roots: Mask = 0;
            for (i, chain) in self.chains.iter().enumerate() {
                if let Some(&head) = chain.front() {
                    if self.slab[head as usize].pending == 0 {
                        roots |= 1 << i;
                    }
                }
            }
            self.emit(roots & !self.gl_delivered, Fired::Flush, out);
            self.close_activation(roots | self.gl_delivered);
        }
    }

    // -- the DAG ----------------------------------------------------------------------

    /// Validate a message and leave the latest ack per other chain in `latest`/`touched`.
    fn check(&mut self, sender: i64, seq: i64, acks: &[(i64, i64)]) -> Result<usize, Violation> {
        let index = self.lookup.get(sender).ok_or(Violation::UnknownSender)?;
        let expected = self.inserted[index].saturating_add(1);
        if seq != expected {
            return Err(if seq < expected {
                Violation::Duplicate { expected }
            } else {
                Violation::SequenceGap { expected }
            });
        }
        for &j in &self.touched {
            self.latest[j] = 0;
        }
        self.touched.clear();
        for (k, &(node, acked)) in acks.iter().enumerate() {
            let Some(j) = self.lookup.get(node) else {
                return Err(Violation::AckNonMember { ack: k });
            };
            if acked > self.inserted[j] || acked < 1 {
                return Err(Violation::AckUnknown { ack: k });
            }
            if j != index && acked > self.delivered_seq[j] {
                if self.latest[j] == 0 {
                    self.touched.push(j);
                    self.latest[j] = acked;
                } else if acked > self.latest[j] {
                    self.latest[j] = acked;
                }
            }
        }
        Ok(index)
    }

    fn add_vertex(&mut self, index: usize, seq: i64, payload: Option<P>) -> u32 {
        let mut preds = match self.free.last() {
            Some(&slot) => std::mem::take(&mut self.slab[slot as usize].preds),
            None => Vec::new(),
        };
        preds.clear();
        if let Some(&prev) = self.chains[index].back() {
            preds.push(prev);
        }
        for &j in &self.touched {
            let offset = (self.latest[j] - self.delivered_seq[j] - 1) as usize;
            preds.push(self.chains[j][offset]);
        }
        if payload.is_some() {
            self.payloads += 1;
        }
        let vertex = Vertex {
            index,
            seq,
            ack_only: payload.is_none(),
            payload,
            pending: preds.len() as u32,
            preds,
            children: Vec::new(),
            delivered: false,
            mask: 0,
            stamp: u64::MAX,
        };
        let id = match self.free.pop() {
            Some(slot) => {
                let old = &mut self.slab[slot as usize];
                let mut children = std::mem::take(&mut old.children);
                children.clear();
                *old = Vertex { children, ..vertex };
                slot
            }
            None => {
                self.slab.push(vertex);
                (self.slab.len() - 1) as u32
            }
        };
        for k in 0..self.slab[id as usize].preds.len() {
            let pred = self.slab[id as usize].preds[k];
            self.slab[pred as usize].children.push(id);
        }
        self.chains[index].push_back(id);
        self.size += 1;
        self.inserted[index] = seq;
        id
    }

    /// Bit mask of the candidates in vertex `id`'s causal past (memoised per activation).
    fn candidates_below(&mut self, id: u32) -> Mask {
        let stamp = self.activation;
        let slab = &mut self.slab;
        let v = &slab[id as usize];
        if v.stamp == stamp {
            return v.mask;
        }
        if v.pending == 0 {
            let mask = 1 << v.index;
            let v = &mut slab[id as usize];
            v.mask = mask;
            v.stamp = stamp;
            return mask;
        }
        // fast path: every predecessor is a candidate or already known
        let mut mask: Mask = 0;
        let mut fast = true;
        for &p in &v.preds {
            let pred = &slab[p as usize];
            if pred.pending == 0 {
                mask |= 1 << pred.index;
            } else if pred.stamp == stamp {
                mask |= pred.mask;
            } else {
                fast = false;
                break;
            }
        }
        if fast {
            let v = &mut slab[id as usize];
            v.mask = mask;
            v.stamp = stamp;
            return mask;
        }
        let stack = &mut self.stack;
        stack.clear();
        stack.push(id);
        while let Some(&top) = stack.last() {
            let t = &slab[top as usize];
            if t.stamp == stamp {
                stack.pop();
                continue;
            }
            if t.pending == 0 {
                let mask = 1 << t.index;
                let t = &mut slab[top as usize];
                t.mask = mask;
                t.stamp = stamp;
                stack.pop();
                continue;
            }
            let mut mask: Mask = 0;
            let mut ready = true;
            for &p in &t.preds {
                let pred = &slab[p as usize];
                if pred.stamp != stamp {
                    stack.push(p);
                    ready = false;
                } else {
                    mask |= pred.mask;
                }
            }
            if ready {
                let t = &mut slab[top as usize];
                t.mask = mask;
                t.stamp = stamp;
                stack.pop();
            }
        }
        slab[id as usize].mask
    }

    fn cast_vote(&mut self, first: u32) {
        let v = &self.slab[first as usize];
        let (index, is_candidate) = (v.index, v.pending == 0);
        let followed = if is_candidate { 0 } else { self.candidates_below(first) };
        self.votes.cast(index, followed, is_candidate);
    }

    /// Ntail(m) for candidate sender index `candidate`.
    fn tail_count(&mut self, candidate: usize) -> usize {
        let bit: Mask = 1 << candidate;
        let mut count = 0;
        for i in 0..self.n {
            if let Some(&last) = self.chains[i].back() {
                if self.candidates_below(last) & bit != 0 {
                    count += 1;
                }
            }
        }
        count
    }

    // -- rules and activations --------------------------------------------------------

    fn evaluate(&mut self, out: &mut Vec<Delivery<P>>) {
        let phi = self.phi;
        loop {
            let early = match self.rule {
                Rule::Stoto => rules::stoto_early(&self.votes, phi),
                Rule::Gtoto | Rule::Gltoto => rules::gtoto_early(&self.votes, phi),
                Rule::Toto => {
                    let votes = self.votes.clone();
                    rules::toto_early(&votes, phi, |s| self.tail_count(s))
                }
                Rule::Lex => None,
            };
            let (chosen, fired) = match early {
                Some(chosen) => (Some(chosen), Fired::Early),
                None => (rules::default_rule(&self.votes), Fired::Default),
            };
            match chosen {
                Some(chosen) => {
                    self.emit(chosen & !self.gl_delivered, fired, out);
                    self.close_activation(chosen | self.gl_delivered);
                }
                None => return,
            }
        }
    }

    fn evaluate_gltoto(&mut self, out: &mut Vec<Delivery<P>>) {
        loop {
            let (fired, chosen) = rules::gltoto(&self.votes, self.phi, self.gl_delivered);
            if fired == Fired::GlPrefix {
                if chosen != 0 {
                    self.gl_delivered |= chosen;
                    self.emit(chosen, fired, out);
                }
                return;
            }
            self.emit(chosen & !self.gl_delivered, fired, out);
            self.close_activation(chosen | self.gl_delivered);
            if self.size == 0 {
                return;
            }
        }
    }

    fn emit(&mut self, chosen: Mask, fired: Fired, out: &mut Vec<Delivery<P>>) {
        let ntail = self.votes.ntail();
        let unseen = self.n - ntail;
        for c in Bits(chosen) {
            let head = self.chains[c][0] as usize;
            self.delivered_vertices += 1;
            let v = &mut self.slab[head];
            let Some(payload) = v.payload.take() else {
                self.delivered_ack_only += 1;
                continue;
            };
            out.push(Delivery {
                index: c,
                sender: self.members[c],
                seq: v.seq,
                payload,
                position: self.position,
                activation: self.activation,
                rule: fired,
                ntail,
                unseen,
                nvt: self.votes.nvt(c),
            });
            self.position += 1;
        }
    }

    /// The head of chain `c` leaves G; its children go onto `self.roots`.
    fn leave(&mut self, c: usize) {
        let id = self.chains[c].pop_front().expect("a chain head leaves");
        let slab = &mut self.slab;
        let v = &mut slab[id as usize];
        v.delivered = true;
        if !v.ack_only {
            self.payloads -= 1;
        }
        v.payload = None;
        self.delivered_seq[c] = v.seq;
        self.size -= 1;
        let children = std::mem::take(&mut v.children);
        for &child in &children {
            let ch = &mut slab[child as usize];
            ch.pending -= 1;
            if let Some(k) = ch.preds.iter().position(|&p| p == id) {
                ch.preds.swap_remove(k);
            }
        }
        self.roots.extend_from_slice(&children);
        let v = &mut slab[id as usize];
        v.children = children;
        v.children.clear();
        v.preds.clear();
        self.free.push(id);
    }

    /// The ack-only root at the head of chain `c` leaves G undelivered.
    fn drop_ack(&mut self, c: usize) {
        self.delivered_vertices += 1;
        self.delivered_ack_only += 1;
        self.leave(c);
    }

    /// Remove the delivered candidates from G and open the next activation.
    fn close_activation(&mut self, delivered: Mask) {
        self.roots.clear();
        for c in Bits(delivered) {
            self.leave(c);
        }
        if self.ack_roots_leave {
            while let Some(root) = self.roots.pop() {
                let v = &self.slab[root as usize];
                if v.pending == 0 && !v.delivered && v.ack_only {
                    let c = v.index;
                    self.drop_ack(c);
                }
            }
        }
        self.roots.clear();
        self.activation += 1;
        self.gl_delivered = 0;
        self.votes.reset();
        if self.size != 0 {
            for c in 0..self.n {
                if let Some(&head) = self.chains[c].front() {
                    self.cast_vote(head);
                }
            }
        }
    }
}

impl<P> fmt::Debug for Engine<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("n", &self.n)
            .field("rule", &self.rule)
            .field("phi", &self.phi)
            .field("pending", &self.size)
            .field("activation", &self.activation)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Out = Vec<Delivery<&'static str>>;
    type Case = (i64, i64, &'static [(i64, i64)], Violation);

    fn engine(rule: Rule, n: usize, leave: bool) -> Engine<&'static str> {
        let members: Vec<i64> = (1..=n as i64).collect();
        let phi = match rule {
            Rule::Gtoto | Rule::Gltoto => (n as f64 / 2.0).max(1.5),
            _ => n as f64 / 2.0,
        };
        Engine::new(&members, rule, phi, leave).unwrap()
    }

    fn ids(out: &Out) -> Vec<(i64, i64, Fired)> {
        out.iter().map(|d| (d.sender, d.seq, d.rule)).collect()
    }

    #[test]
    fn lex_waits_for_every_member_then_delivers_the_roots_in_id_order() {
        let mut e = engine(Rule::Lex, 3, false);
        let mut out = Out::new();
        e.insert(2, 1, &[], Some("b"), &mut out).unwrap();
        e.insert(1, 1, &[], Some("a"), &mut out).unwrap();
        assert!(out.is_empty());
        e.insert(3, 1, &[(1, 1), (2, 1)], None, &mut out).unwrap();
        assert_eq!(ids(&out), [(1, 1, Fired::Default), (2, 1, Fired::Default)]);
        assert_eq!((out[0].position, out[1].position, out[0].ntail, out[0].nvt), (0, 1, 3, 2));
        assert_eq!((e.pending(), e.pending_payloads(), e.activation), (1, 0, 1));
        out.clear();
        e.close(&mut out);
        assert!(out.is_empty(), "an ack-only vertex delivers nothing");
        assert_eq!((e.pending(), e.delivered_vertices, e.delivered_ack_only), (0, 3, 1));
    }

    #[test]
    fn a_majority_of_votes_delivers_early_and_ack_roots_leave() {
        let mut e = engine(Rule::Gltoto, 3, true);
        let mut out = Out::new();
        e.insert(1, 1, &[], Some("a"), &mut out).unwrap();
        e.insert(2, 1, &[(1, 1)], None, &mut out).unwrap();
        assert_eq!(ids(&out), [(1, 1, Fired::Early)]);
        assert_eq!((out[0].nvt, out[0].unseen), (2, 1));
        // the ack of a delivered message only leaves at once
        assert_eq!(e.pending(), 0);
        out.clear();
        e.insert(3, 1, &[(1, 1)], None, &mut out).unwrap();
        assert_eq!((e.pending(), e.delivered_ack_only), (0, 2));
    }

    #[test]
    fn bad_messages_are_refused_and_change_nothing() {
        let mut e = engine(Rule::Stoto, 3, false);
        let mut out = Out::new();
        e.insert(1, 1, &[], Some("a"), &mut out).unwrap();
        let cases: [Case; 6] = [
            (9, 1, &[], Violation::UnknownSender),
            (1, 1, &[], Violation::Duplicate { expected: 2 }),
            (1, 3, &[], Violation::SequenceGap { expected: 2 }),
            (2, 1, &[(1, 1), (7, 1)], Violation::AckNonMember { ack: 1 }),
            (2, 1, &[(1, 2)], Violation::AckUnknown { ack: 0 }),
            (2, 1, &[(1, 0)], Violation::AckUnknown { ack: 0 }),
        ];
        for (sender, seq, acks, want) in cases {
            assert_eq!(e.insert(sender, seq, acks, Some("x"), &mut out), Err(want));
        }
        assert_eq!(Violation::AckUnknown { ack: 0 }.detail(2, 1, &[(1, 2)]),
                   "(2, 1) acks unseen (1, 2)");
        assert_eq!(Violation::Duplicate { expected: 2 }.reason(), "duplicate");
        assert_eq!((e.pending(), e.pending_payloads()), (1, 1));
        e.close(&mut out);
        assert_eq!(ids(&out), [(1, 1, Fired::Flush)]);
    }

    #[test]
    fn sizes_beyond_the_masks_are_refused() {
        let members: Vec<i64> = (0..129).collect();
        assert!(Engine::<()>::new(&members, Rule::Lex, 64.5, false).is_err());
        let members: Vec<i64> = (0..128).map(|i| i * 1_000_003).collect();
        let mut e = Engine::<()>::new(&members, Rule::Lex, 64.0, false).unwrap();
        let mut out = Vec::new();
        for &m in &members {
            e.insert(m, 1, &[], Some(()), &mut out).unwrap();
        }
        assert_eq!(out.len(), 128, "every member voted: the default rule delivers all roots");
        assert_eq!(out[127].sender, 127 * 1_000_003);
    }
}
