//! The reliable causal layer of one view (`amcast.protocols.reliable.layer.ReliableLayer`)
//! in Rust, PyO3-free: causal release (`causal.py`), stability (`stability.py`), nack
//! and repair timers (`repair.py`), the ack deadline, the heartbeat grid, nack attaching
//! and the outgoing queue. The Python layer (whose module docstrings are the theory of
//! operation) stays the reference: `tests/native/test_native_reliable.py` drives both
//! with the same traces and requires the same returns, datagrams, timers, counters and
//! drops.
//!
//! What the layer shares with the rest of the node stays with the caller, behind `Env`:
//! the rng (every draw the Python layer makes, in the same order), the lateness
//! estimate, the per-peer rate limiter and the drop callback. Members are indexed
//! `0 .. n-1` in member order; vertices are the caller's objects (`V`) with the fields
//! the layer reads (`VRec`).

#![forbid(unsafe_code)]

pub mod omap;
pub mod pyset;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use omap::OrderedMap;
use pyset::IntSet;

/// The fields of a vertex the layer reads, and the caller's object.
#[derive(Debug)]
pub struct VRec<V> {
    pub origin: i64,
    pub seq: i64,
    pub acks: Vec<(i64, i64)>,
    pub has_items: bool,
    /// `layer.repair_size`: bytes of a REPAIR datagram carrying this vertex alone.
    pub repair_size: i64,
    pub obj: V,
}

pub type Vtx<V> = Arc<VRec<V>>;

/// Why a call failed where the Python layer raises.
#[derive(Debug, Clone, PartialEq)]
pub enum Fail {
    /// `KeyError(key)`: a node that is no member, where the Python layer indexes by it.
    Key(i64),
}

/// What the layer shares with its caller (the Python layer's collaborators).
pub trait Env<V> {
    /// `rng.uniform(lo, hi)`.
    fn uniform(&mut self, lo: f64, hi: f64) -> f64;
    /// `rng.random()`.
    fn random(&mut self) -> f64;
    /// `lateness.allowance(now)`.
    fn allowance(&mut self, now: f64) -> f64;
    /// `lateness.sample(late, now)`.
    fn sample(&mut self, late: f64, now: f64);
    /// `lateness.waited_again += 1`.
    fn waited_again(&mut self);
    /// `limiter.allow_nack(peer, now)`.
    fn allow_nack(&mut self, peer: i64, now: f64) -> bool;
    /// `limiter.allow_repair(peer, nbytes, now)`.
    fn allow_repair(&mut self, peer: i64, nbytes: i64, now: f64) -> bool;
    /// `drop(reason, detail)`.
    fn drop(&mut self, reason: &str, detail: String);
    /// The caller's object of our new ack-only vertex `(me, seq, acks, AGREED, now, ())`.
    fn ack_only(&mut self, seq: i64, acks: &[(i64, i64)], now: f64) -> V;
}

/// `ReliableConfig`, read once.
#[derive(Debug, Clone)]
pub struct Config {
    pub ack_delay: f64,
    pub lazy_ack_delay: f64,
    pub quiet_ack_delay: f64,
    pub heartbeat_interval: f64,
    pub nack_delay: f64,
    pub nack_retry: f64,
    pub repair_delay: f64,
    pub repair_holdoff: f64,
    pub datagram_budget: i64,
    pub receive_window: i64,
    pub max_held_vertices: i64,
    pub max_nack_ranges: i64,
    pub max_repair_per_nack: i64,
    /// `wire.limits`' overheads (the ack-only vertex's repair size, nack room).
    pub fixed_overhead: i64,
    pub ack_overhead: i64,
    pub nack_range_overhead: i64,
}

/// Counter increments since the caller last took them (`ReliableCounters`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Counters {
    pub duplicates: i64,
    pub retransmissions: i64,
    pub vertices_released: i64,
    pub vertices_sent: i64,
    pub own_losses: i64,
    pub own_bytes_stable: i64,
    /// `loss_signals[member] = value`, in order.
    pub loss_signals: Vec<(i64, i64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Data,
    AckOnly,
    Nack,
    Repair,
    Heartbeat,
}

/// An outgoing datagram (`Datagram(kind, me, view, hb_seq, nacks, vertices, acks)`).
#[derive(Debug)]
pub struct Out<V> {
    pub kind: Kind,
    pub hb_seq: i64,
    pub nacks: Vec<(i64, i64, i64)>,
    pub vertex: Option<Vtx<V>>,
    /// HEARTBEAT: what we released of each member, by member id.
    pub holds: Vec<(i64, i64)>,
}

/// An incoming datagram of this view.
#[derive(Debug)]
pub struct Incoming<V> {
    pub repair: bool,
    pub sender: i64,
    pub hb_seq: i64,
    pub acks: Vec<(i64, i64)>,
    pub nacks: Vec<(i64, i64, i64)>,
    pub vertices: Vec<Vtx<V>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Held,
    Duplicate,
    BeyondWindow,
    BufferFull,
    BeyondLimit,
}

impl Status {
    fn reason(self) -> &'static str {
        match self {
            Status::Held => "held",
            Status::Duplicate => "duplicate",
            Status::BeyondWindow => "beyond_receive_window",
            Status::BufferFull => "receive_buffer_full",
            Status::BeyondLimit => "beyond_view_cut",
        }
    }
}

const PRUNE_AT: usize = 4096;
const GRID_EPSILON: f64 = 1e-6;

/// `layer.next_beat`.
pub fn next_beat(after: f64, interval: f64) -> f64 {
    ((after / interval + GRID_EPSILON).floor() + 1.0) * interval
}

/// `layer.heartbeat_due`.
pub fn heartbeat_due(last_sent: f64, interval: f64) -> f64 {
    next_beat(last_sent + interval / 2.0, interval)
}

pub struct Layer<V> {
    pub members: Vec<i64>,
    index: HashMap<i64, usize>,
    by_id: Vec<usize>,
    pub node_id: i64,
    me: usize,
    pub cfg: Config,
    pub counters: Counters,
    // CausalReleaser
    pub released: Vec<i64>,
    pub known: Vec<i64>,
    held: Vec<BTreeMap<i64, Vtx<V>>>,
    blocked_on: HashMap<usize, IntSet>,
    pub held_count: i64,
    pub limit: Option<Vec<i64>>,
    pub final_limit: bool,
    // AckMatrix
    pub vectors: Vec<Vec<i64>>,
    pub acks_held: Vec<Vec<i64>>,
    stable: Vec<i64>,
    at_min: Vec<i64>,
    dirty: Vec<bool>,
    dirty_list: Vec<usize>,
    // NackTimers
    deadlines: OrderedMap<usize, f64>,
    since: HashMap<usize, i64>,
    allowed: Vec<bool>,
    retrying: Vec<bool>,
    noticed: HashMap<usize, f64>,
    // RepairTimers
    pending: OrderedMap<(usize, i64), f64>,
    recent: HashMap<(usize, i64), f64>,
    // the layer
    store: Vec<HashMap<i64, Vtx<V>>>,
    gc_floor: Vec<i64>,
    pub seq: i64,
    unacked_data: i64,
    ack_deadline: Option<f64>,
    prompt: Option<Vec<bool>>,
    last_data_at: f64,
    pub last_sent: f64,
    beat_for: Option<f64>,
    beat_at: f64,
    nack_queue: VecDeque<(i64, i64, i64)>,
    pub outq: Vec<Out<V>>,
    pub frozen: bool,
    pub retired: bool,
    pub quiet: bool,
    flight: VecDeque<(i64, i64)>,
    flight_bytes: i64,
    pub holding: bool,
    released_count: i64,
    reported_count: i64,
    report_due: Option<f64>,
    max_nacks: i64,
}

impl<V> Layer<V> {
    /// The layer of `members` (distinct) for member `node_id`.
    pub fn new(members: &[i64], node_id: i64, cfg: Config, now: f64) -> Result<Self, String> {
        let mut index = HashMap::new();
        for (i, &m) in members.iter().enumerate() {
            if index.insert(m, i).is_some() {
                return Err("member ids must be distinct".into());
            }
        }
        let me = *index
            .get(&node_id)
            .ok_or_else(|| format!("node {node_id} is not a member of the view"))?;
        let n = members.len();
        let mut by_id: Vec<usize> = (0..n).collect();
        by_id.sort_by_key(|&i| members[i]);
        let max_nacks = 1.max(
            cfg.max_nack_ranges
                .min((cfg.datagram_budget.div_euclid(2)).div_euclid(cfg.nack_range_overhead.max(1))),
        );
        Ok(Layer {
            members: members.to_vec(),
            index,
            by_id,
            node_id,
            me,
            cfg,
            counters: Counters::default(),
            released: vec![0; n],
            known: vec![0; n],
            held: (0..n).map(|_| BTreeMap::new()).collect(),
            blocked_on: HashMap::new(),
            held_count: 0,
            limit: None,
            final_limit: false,
            vectors: vec![vec![0; n]; n],
            acks_held: vec![vec![0; n]; n],
            stable: vec![0; n],
            at_min: vec![n as i64; n],
            dirty: vec![false; n],
            dirty_list: Vec::new(),
            deadlines: OrderedMap::new(),
            since: HashMap::new(),
            allowed: vec![false; n],
            retrying: vec![false; n],
            noticed: HashMap::new(),
            pending: OrderedMap::new(),
            recent: HashMap::new(),
            store: (0..n).map(|_| HashMap::new()).collect(),
            gc_floor: vec![0; n],
            seq: 0,
            unacked_data: 0,
            ack_deadline: None,
            prompt: None,
            last_data_at: f64::NEG_INFINITY,
            last_sent: now,
            beat_for: None,
            beat_at: 0.0,
            nack_queue: VecDeque::new(),
            outq: Vec::new(),
            frozen: false,
            retired: false,
            quiet: false,
            flight: VecDeque::new(),
            flight_bytes: 0,
            holding: false,
            released_count: 0,
            reported_count: 0,
            report_due: None,
            max_nacks,
        })
    }

    pub fn index_of(&self, node: i64) -> Option<usize> {
        self.index.get(&node).copied()
    }

    fn idx(&self, node: i64) -> Result<usize, Fail> {
        self.index_of(node).ok_or(Fail::Key(node))
    }

    /// Members sorted by id (indices).
    pub fn by_id(&self) -> &[usize] {
        &self.by_id
    }

    /// `prompt_origins` (None: every sender's data is acked after `ack_delay`).
    pub fn set_prompt(&mut self, prompt: Option<Vec<i64>>) {
        self.prompt = prompt.map(|ids| {
            let mut mask = vec![false; self.members.len()];
            for id in ids {
                if let Some(i) = self.index_of(id) {
                    mask[i] = true;
                }
            }
            mask
        });
    }

    // ------------------------------------------------------------------ releaser

    fn note_known(&mut self, n: usize, seq: i64) {
        if seq > self.known[n] {
            self.known[n] = seq;
        }
    }

    pub fn has_gap(&self, n: usize) -> bool {
        self.known[n] > self.released[n].saturating_add(self.held[n].len() as i64)
    }

    pub fn missing(&self, n: usize, limit: i64) -> Vec<(i64, i64)> {
        let mut ranges = Vec::new();
        let held = &self.held[n];
        let mut top = self.known[n].min(self.released[n].saturating_add(self.cfg.receive_window));
        if let Some(l) = &self.limit {
            top = top.min(l[n]);
        }
        let mut seq = self.released[n] + 1;
        let mut it = held.range(seq..).map(|(k, _)| *k).peekable();
        while seq <= top && (ranges.len() as i64) < limit {
            while let Some(&k) = it.peek() {
                if k < seq {
                    it.next();
                } else {
                    break;
                }
            }
            if it.peek() == Some(&seq) {
                it.next();
                seq += 1;
                continue;
            }
            let first = seq;
            let end = match it.peek() {
                Some(&k) => top.min(k - 1),
                None => top,
            };
            ranges.push((first, end));
            seq = end + 1;
        }
        ranges
    }

    pub fn first_missing(&self, n: usize) -> Option<i64> {
        self.missing(n, 1).first().map(|r| r.0)
    }

    fn offer(&mut self, v: &Vtx<V>, out: &mut Vec<Vtx<V>>) -> Result<Result<Status, (&'static str, String)>, Fail> {
        let o = self.idx(v.origin)?;
        let seq = v.seq;
        if seq <= self.released[o] || self.held[o].contains_key(&seq) {
            return Ok(Ok(Status::Duplicate));
        }
        for &(node, _) in &v.acks {
            if node == v.origin {
                return Ok(Err(("self_ack",
                               format!("vertex ({}, {}) acks its own sender", v.origin, seq))));
            }
            if !self.index.contains_key(&node) {
                return Ok(Err(("unknown_member",
                               format!("vertex ({}, {}) acks node {node}", v.origin, seq))));
            }
        }
        if self.final_limit {
            if let Some(l) = &self.limit {
                if seq > l[o] {
                    return Ok(Ok(Status::BeyondLimit));
                }
            }
        }
        self.note_known(o, seq);
        for &(node, ack) in &v.acks {
            let ni = self.index[&node];
            self.note_known(ni, ack);
        }
        if seq > self.released[o].saturating_add(self.cfg.receive_window) {
            return Ok(Ok(Status::BeyondWindow));
        }
        let next = self.released[o] + 1;
        if self.held_count >= self.cfg.max_held_vertices && seq != next {
            return Ok(Ok(Status::BufferFull));
        }
        self.held[o].insert(seq, v.clone());
        self.held_count += 1;
        if seq == next {
            self.release_from(o, out);
        }
        Ok(Ok(Status::Held))
    }

    fn release_from(&mut self, start: usize, out: &mut Vec<Vtx<V>>) {
        let mut todo = vec![start];
        while let Some(o) = todo.pop() {
            let next = self.released[o] + 1;
            let v = match self.held[o].get(&next) {
                Some(v) => v.clone(),
                None => continue,
            };
            if let Some(l) = &self.limit {
                if v.seq > l[o] {
                    continue;
                }
            }
            let mut blocker = None;
            for &(n, s) in &v.acks {
                let ni = self.index[&n];
                if self.released[ni] < s {
                    blocker = Some(ni);
                    break;
                }
            }
            if let Some(b) = blocker {
                self.blocked_on.entry(b).or_default().add(self.members[o]);
                continue;
            }
            self.held[o].remove(&next);
            self.held_count -= 1;
            self.released[o] = v.seq;
            out.push(v);
            todo.push(o);
            if let Some(waiting) = self.blocked_on.remove(&o) {
                todo.extend(waiting.iter().map(|id| self.index[&id]));
            }
        }
    }

    fn set_limit(&mut self, limit: Vec<i64>, out: &mut Vec<Vtx<V>>, final_limit: bool) {
        if final_limit {
            for (o, &top) in limit.iter().enumerate() {
                let beyond: Vec<i64> = self.held[o].range(top.saturating_add(1)..).map(|(k, _)| *k).collect();
                for s in beyond {
                    self.held[o].remove(&s);
                    self.held_count -= 1;
                }
                let cap = top.max(self.released[o]);
                if self.known[o] > cap {
                    self.known[o] = cap;
                }
            }
        }
        self.limit = Some(limit);
        self.final_limit = final_limit;
        for o in 0..self.members.len() {
            self.release_from(o, out);
        }
    }

    fn set_limit_off(&mut self, out: &mut Vec<Vtx<V>>) {
        self.limit = None;
        self.final_limit = false;
        for o in 0..self.members.len() {
            self.release_from(o, out);
        }
    }

    /// Held vertices, by sender id then seq.
    pub fn held_vertices(&self) -> Vec<Vtx<V>> {
        self.by_id.iter().flat_map(|&o| self.held[o].values().cloned()).collect()
    }

    /// `releaser.holds(cut)`: every sender's vertices up to the cut released (`cut` in
    /// the caller's order; a non-member reached raises).
    pub fn holds(&self, cut: &[(i64, i64)]) -> Result<bool, Fail> {
        for &(node, seq) in cut {
            if self.released[self.idx(node)?] < seq {
                return Ok(false);
            }
        }
        Ok(true)
    }

    // ------------------------------------------------------------------ acks

    fn raise(&mut self, row: usize, n: usize, seq: i64) {
        let old = self.acks_held[row][n];
        self.acks_held[row][n] = seq;
        if old == self.stable[n] {
            self.at_min[n] -= 1;
            if self.at_min[n] == 0 && !self.dirty[n] {
                self.dirty[n] = true;
                self.dirty_list.push(n);
            }
        }
    }

    fn report(&mut self, row: usize, holds: &[(i64, i64)]) {
        for &(node, seq) in holds {
            if let Some(n) = self.index_of(node) {
                if seq > self.acks_held[row][n] {
                    self.raise(row, n, seq);
                }
            }
        }
    }

    pub fn stable_of(&self, n: usize) -> i64 {
        self.stable[n]
    }

    pub fn dirty(&self) -> bool {
        !self.dirty_list.is_empty()
    }

    fn refresh(&mut self) -> Vec<(usize, i64)> {
        let mut advanced = Vec::with_capacity(self.dirty_list.len());
        for n in std::mem::take(&mut self.dirty_list) {
            self.dirty[n] = false;
            let low = self.acks_held.iter().map(|row| row[n]).min().unwrap_or(0);
            self.at_min[n] = self.acks_held.iter().filter(|row| row[n] == low).count() as i64;
            self.stable[n] = low;
            advanced.push((n, low));
        }
        advanced
    }

    pub fn acks_delta(&self) -> Vec<(i64, i64)> {
        let mine = &self.vectors[self.me];
        (0..self.members.len())
            .filter(|&n| n != self.me && self.released[n] > mine[n])
            .map(|n| (self.members[n], self.released[n]))
            .collect()
    }

    // ------------------------------------------------------------------ nack timers

    fn gap_noticed(&mut self, env: &mut dyn Env<V>, n: usize, now: f64, direct: bool, released: i64) {
        self.noticed.entry(n).or_insert(now);
        match self.deadlines.get(&n) {
            None => {
                let mut wait = env.uniform(0.0, self.cfg.nack_delay);
                if !direct {
                    wait += env.allowance(now);
                    self.allowed[n] = true;
                }
                self.deadlines.insert(n, now + wait);
                self.since.insert(n, released);
            }
            Some(at) if direct && self.allowed[n] => {
                self.allowed[n] = false;
                let soon = now + env.uniform(0.0, self.cfg.nack_delay);
                if soon < at {
                    self.deadlines.insert(n, soon);
                }
            }
            _ => {}
        }
    }

    fn gap_closed(&mut self, env: &mut dyn Env<V>, n: usize, now: f64, late_copy: bool) {
        let since = self.noticed.remove(&n);
        if !self.retrying[n] {
            self.deadlines.remove(&n);
            self.since.remove(&n);
            self.allowed[n] = false;
        }
        if late_copy {
            if let Some(t) = since {
                env.sample(now - t, now);
            }
        }
    }

    fn heard_nack(&mut self, n: usize, now: f64) {
        if let Some(at) = self.deadlines.get(&n) {
            let retry = now + self.cfg.nack_retry;
            self.deadlines.insert(n, if retry > at { retry } else { at });
            self.allowed[n] = false;
            self.retrying[n] = true;
        }
    }

    fn still_arriving(&mut self, env: &mut dyn Env<V>, n: usize, released: i64, now: f64) -> bool {
        if released <= *self.since.get(&n).unwrap_or(&released) {
            return false;
        }
        let mut wait = env.uniform(0.0, self.cfg.nack_delay);
        if self.allowed[n] {
            wait += env.allowance(now);
        }
        self.deadlines.insert(n, now + wait);
        self.since.insert(n, released);
        env.waited_again();
        true
    }

    fn rearm(&mut self, env: &mut dyn Env<V>, n: usize, now: f64, released: i64) {
        let r = env.random();
        self.deadlines.insert(n, now + self.cfg.nack_retry * (1.0 + 0.5 * r));
        self.since.insert(n, released);
        self.allowed[n] = false;
        self.retrying[n] = true;
    }

    fn clear_nack(&mut self, n: usize) {
        self.deadlines.remove(&n);
        self.noticed.remove(&n);
        self.since.remove(&n);
        self.allowed[n] = false;
        self.retrying[n] = false;
    }

    // ------------------------------------------------------------------ repair timers

    fn wants(&self, vid: (usize, i64), now: f64) -> bool {
        !self.pending.contains(&vid)
            && now >= self.recent.get(&vid).copied().unwrap_or(-1.0) + self.cfg.repair_holdoff
    }

    fn nacked(&mut self, env: &mut dyn Env<V>, vid: (usize, i64), now: f64, origin: bool) {
        if !self.wants(vid, now) {
            return;
        }
        let quarter = self.cfg.repair_delay / 4.0;
        let (low, high) = if origin { (0.0, quarter) } else { (quarter, self.cfg.repair_delay) };
        let wait = env.uniform(low, high);
        self.pending.insert(vid, now + wait);
    }

    fn repairs_due(&mut self, now: f64) -> Vec<(usize, i64)> {
        let ready: Vec<(usize, i64)> =
            self.pending.iter().filter(|&(_, at)| at <= now).map(|(vid, _)| vid).collect();
        for vid in &ready {
            self.pending.remove(vid);
            self.recent.insert(*vid, now);
        }
        if self.recent.len() > PRUNE_AT {
            let horizon = now - self.cfg.repair_holdoff;
            self.recent.retain(|_, at| *at >= horizon);
        }
        ready
    }

    // ------------------------------------------------------------------ queries

    pub fn unstable(&self) -> i64 {
        self.seq - self.stable[self.me]
    }

    pub fn unstable_bytes(&mut self) -> i64 {
        if !self.flight.is_empty() {
            let stable = self.stable[self.me];
            let mut freed = 0;
            while let Some(&(s, size)) = self.flight.front() {
                if s > stable {
                    break;
                }
                freed += size;
                self.flight.pop_front();
            }
            if freed != 0 {
                self.flight_bytes -= freed;
                self.counters.own_bytes_stable += freed;
            }
        }
        self.flight_bytes
    }

    pub fn nack_reservation(&self) -> i64 {
        (self.nack_queue.len() as i64).min(self.max_nacks)
    }

    /// `foreign`: why the datagram cannot belong to this view, or None.
    pub fn foreign(&self, sender: i64, nack_nodes: &[i64], origins: &[i64]) -> Option<&'static str> {
        if !self.index.contains_key(&sender) {
            return Some("unknown_sender");
        }
        if nack_nodes.iter().chain(origins).any(|n| !self.index.contains_key(n)) {
            return Some("unknown_member");
        }
        None
    }

    // ------------------------------------------------------------------ receive side

    pub fn receive(&mut self, env: &mut dyn Env<V>, dg: &Incoming<V>, now: f64,
                   out: &mut Vec<Vtx<V>>) -> Result<(), Fail> {
        let s = self.idx(dg.sender)?;
        self.note_known(s, dg.hb_seq);
        if !dg.acks.is_empty() {
            self.report(s, &dg.acks);
        }
        if !dg.nacks.is_empty() {
            let mut refused: Vec<(&'static str, i64)> = Vec::new();
            let losses = self.counters.own_losses;
            let mut failed = None;
            for &(node, first, last) in &dg.nacks {
                match self.on_nack(env, dg.sender, s, node, first, last, now) {
                    Ok(Some(reason)) => match refused.iter_mut().find(|(r, _)| *r == reason) {
                        Some(entry) => entry.1 += 1,
                        None => refused.push((reason, 1)),
                    },
                    Ok(None) => {}
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            if let Some(e) = failed {
                return Err(e);
            }
            if self.counters.own_losses != losses {
                self.counters.loss_signals.push((dg.sender, self.members.len() as i64 - 1));
            }
            for (reason, n) in refused {
                env.drop(reason, format!("{n} nack ranges from {}", dg.sender));
            }
        }
        if self.retired {
            return Ok(());
        }
        let mut touched = IntSet::new();
        touched.add(dg.sender);
        for v in &dg.vertices {
            if v.origin == self.node_id && v.seq > self.released[self.me] {
                // ours by its origin but never sent by us: a forgery, or an impostor's
                // under our id; released, it would take the place of our own next vertex
                env.drop("own_vertex_not_sent",
                         format!("vertex ({}, {}) from {}", v.origin, v.seq, dg.sender));
                continue;
            }
            let status = match self.offer(v, out)? {
                Ok(status) => status,
                Err((reason, detail)) => {
                    env.drop(reason, detail);
                    continue;
                }
            };
            if dg.repair {
                let o = self.index[&v.origin];
                self.pending.remove(&(o, v.seq));
                self.recent.insert((o, v.seq), now);
            }
            if status == Status::Duplicate {
                self.counters.duplicates += 1;
            } else if status != Status::Held {
                env.drop(status.reason(), format!("vertex ({}, {})", v.origin, v.seq));
            }
            touched.add(v.origin);
            for &(node, _) in &v.acks {
                touched.add(node);
            }
        }
        let nodes: Vec<i64> = touched.iter().collect();
        for node in nodes {
            if node == self.node_id {
                continue;
            }
            let Some(n) = self.index_of(node) else { continue };
            if self.has_gap(n) {
                let direct = self.shown_by_origin(dg, n);
                let released = self.released[n];
                self.gap_noticed(env, n, now, direct, released);
            } else if !self.noticed.is_empty() && self.noticed.contains_key(&n) {
                self.gap_closed(env, n, now, !dg.repair);
            }
        }
        Ok(())
    }

    fn shown_by_origin(&self, dg: &Incoming<V>, n: usize) -> bool {
        let Some(first) = self.first_missing(n) else { return true };
        let node = self.members[n];
        if node == dg.sender && dg.hb_seq > first {
            return true;
        }
        dg.vertices.iter().any(|v| v.origin == node && v.seq > first)
    }

    /// `on_release`: `v` was released in causal order (received, or our own).
    pub fn on_release(&mut self, v: &Vtx<V>, now: f64) -> Result<(), Fail> {
        let o = self.idx(v.origin)?;
        let mut acks = Vec::with_capacity(v.acks.len());
        for &(node, seq) in &v.acks {
            acks.push((self.idx(node)?, seq));
        }
        for (n, seq) in acks {
            if seq > self.vectors[o][n] {
                self.vectors[o][n] = seq;
                if seq > self.acks_held[o][n] {
                    self.raise(o, n, seq);
                }
            }
        }
        if v.seq > self.vectors[o][o] {
            self.vectors[o][o] = v.seq;
            if v.seq > self.acks_held[o][o] {
                self.raise(o, o, v.seq);
            }
        }
        if o != self.me && v.seq > self.acks_held[self.me][o] {
            self.raise(self.me, o, v.seq);
        }
        self.store[o].insert(v.seq, v.clone());
        self.counters.vertices_released += 1;
        self.released_count += 1;
        if v.has_items && o != self.me {
            self.unacked_data += 1;
            let cfg = &self.cfg;
            let prompt = match &self.prompt {
                None => true,
                Some(mask) => mask[o],
            };
            let due = if prompt {
                now + if now - self.last_data_at < cfg.heartbeat_interval {
                    cfg.ack_delay
                } else {
                    cfg.quiet_ack_delay
                }
            } else {
                now + cfg.lazy_ack_delay
            };
            if self.ack_deadline.is_none_or(|d| due < d) {
                self.ack_deadline = Some(due);
            }
        }
        Ok(())
    }

    pub fn collect_garbage(&mut self) {
        if self.dirty_list.is_empty() {
            return;
        }
        for (n, stable) in self.refresh() {
            let mut seq = self.gc_floor[n] + 1;
            while seq <= stable {
                self.store[n].remove(&seq);
                self.pending.remove(&(n, seq));
                seq += 1;
            }
            self.gc_floor[n] = stable;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_nack(&mut self, env: &mut dyn Env<V>, peer: i64, p: usize, node: i64, first: i64,
               last: i64, now: f64) -> Result<Option<&'static str>, Fail> {
        if !env.allow_nack(peer, now) {
            return Ok(Some("nack_rate_limited"));
        }
        let own = node == self.node_id;
        if own && last > self.seq {
            return Ok(Some("nack_beyond_sent"));
        }
        let held = self.index_of(node).map_or(0, |n| self.acks_held[p][n]);
        let mut first = first;
        if first <= held {
            first = held + 1;
            if first > last {
                return Ok(None);
            }
        }
        let n = self.idx(node)?;
        let mut reason = None;
        if !self.retired {
            if own {
                self.counters.own_losses += 1;
            } else if let Some(fm) = self.first_missing(n) {
                if first <= fm && fm <= last {
                    self.heard_nack(n, now);
                }
            }
        }
        let low = first.max(self.gc_floor[n] + 1);
        let mut high = last.min(self.released[n]);
        let cap = self.cfg.max_repair_per_nack;
        if high.saturating_sub(low) >= cap {
            high = low + cap - 1;
            reason = Some("nack_range_truncated");
        }
        let mut seq = low;
        while seq <= high {
            let vid = (n, seq);
            seq += 1;
            let size = match self.store[n].get(&vid.1) {
                Some(v) => v.repair_size,
                None => continue,
            };
            if !self.wants(vid, now) {
                continue;
            }
            if !env.allow_repair(peer, size, now) {
                return Ok(Some("repair_rate_limited"));
            }
            self.nacked(env, vid, now, own);
        }
        Ok(reason)
    }

    // ------------------------------------------------------------------ send side

    /// Our next vertex `v` (seq `self.seq + 1`, made by the caller): queue it and
    /// release it locally. `flight`: its bytes in the send window (data), or None.
    pub fn new_vertex(&mut self, v: Vtx<V>, flight: Option<i64>, now: f64) {
        self.seq += 1;
        let seq = self.seq;
        if let Some(size) = flight {
            self.flight.push_back((seq, size));
            self.flight_bytes += size;
            self.last_data_at = now;
        }
        let kind = if v.has_items { Kind::Data } else { Kind::AckOnly };
        self.outq.push(Out { kind, hb_seq: seq, nacks: Vec::new(), vertex: Some(v),
                             holds: Vec::new() });
        self.counters.vertices_sent += 1;
        self.released[self.me] = seq;
        if seq > self.known[self.me] {
            self.known[self.me] = seq;
        }
        self.unacked_data = 0;
        self.ack_deadline = None;
    }

    pub fn handle_timer(&mut self, env: &mut dyn Env<V>, now: f64, out: &mut Vec<Vtx<V>>) {
        if !self.retired {
            let due: Vec<usize> =
                self.deadlines.iter().filter(|&(_, at)| at <= now).map(|(n, _)| n).collect();
            for n in due {
                let ranges = self.missing(n, self.cfg.max_nack_ranges);
                let released = self.released[n];
                if !ranges.is_empty() && self.still_arriving(env, n, released, now) {
                    continue;
                }
                if !ranges.is_empty() {
                    let node = self.members[n];
                    self.nack_queue.extend(ranges.iter().map(|&(f, l)| (node, f, l)));
                    self.rearm(env, n, now, released);
                } else {
                    self.clear_nack(n);
                }
            }
        }
        for (o, s) in self.repairs_due(now) {
            if let Some(v) = self.store[o].get(&s) {
                self.outq.push(Out { kind: Kind::Repair, hb_seq: self.seq, nacks: Vec::new(),
                                     vertex: Some(v.clone()), holds: Vec::new() });
                self.counters.retransmissions += 1;
            }
        }
        if let Some(d) = self.ack_deadline {
            if now >= d {
                self.ack_deadline = None;
                if self.unacked_data != 0 && !self.frozen {
                    let acks = self.acks_delta();
                    let seq = self.seq + 1;
                    let obj = env.ack_only(seq, &acks, now);
                    let repair_size = self.cfg.fixed_overhead + self.cfg.ack_overhead * acks.len() as i64;
                    let v = Arc::new(VRec { origin: self.node_id, seq, acks, has_items: false,
                                            repair_size, obj });
                    self.new_vertex(v.clone(), None, now);
                    out.push(v);
                }
            }
        }
        let report = self.report_due.is_some_and(|d| now >= d);
        if report
            || (!self.retired && !self.quiet && self.outq.is_empty()
                && now >= heartbeat_due(self.last_sent, self.cfg.heartbeat_interval))
        {
            self.report_due = None;
            self.reported_count = self.released_count;
            let holds = self.by_id.iter().map(|&n| (self.members[n], self.released[n])).collect();
            self.outq.push(Out { kind: Kind::Heartbeat, hb_seq: self.seq, nacks: Vec::new(),
                                 vertex: None, holds });
            self.last_sent = now;
        }
    }

    pub fn want_report(&mut self, now: f64) {
        if self.report_due.is_none() && self.released_count != self.reported_count {
            self.report_due = Some(now + self.cfg.ack_delay);
        }
    }

    pub fn next_timer(&mut self) -> Option<f64> {
        let mut best: Option<f64> = None;
        if !(self.retired || self.quiet) {
            let last = self.last_sent;
            if self.beat_for != Some(last) {
                self.beat_for = Some(last);
                self.beat_at = heartbeat_due(last, self.cfg.heartbeat_interval);
            }
            best = Some(self.beat_at);
        }
        let better = |t: f64, best: Option<f64>| best.is_none_or(|b| t < b);
        if let Some(t) = self.ack_deadline {
            if !self.frozen && better(t, best) {
                best = Some(t);
            }
        }
        if let Some(t) = self.report_due {
            if better(t, best) {
                best = Some(t);
            }
        }
        if let Some(t) = min_of(self.deadlines.iter().map(|(_, t)| t)) {
            if better(t, best) {
                best = Some(t);
            }
        }
        if let Some(t) = min_of(self.pending.iter().map(|(_, t)| t)) {
            if better(t, best) {
                best = Some(t);
            }
        }
        best
    }

    pub fn take_datagrams(&mut self, now: f64) -> Vec<Out<V>> {
        if !self.nack_queue.is_empty() {
            self.attach_nacks();
        }
        if self.outq.is_empty() {
            return Vec::new();
        }
        self.last_sent = now;
        std::mem::take(&mut self.outq)
    }

    fn take_nacks(&mut self) -> Vec<(i64, i64, i64)> {
        let k = (self.max_nacks as usize).min(self.nack_queue.len());
        self.nack_queue.drain(..k).collect()
    }

    fn attach_nacks(&mut self) {
        for i in 0..self.outq.len() {
            if self.nack_queue.is_empty() {
                return;
            }
            let dg = &self.outq[i];
            if matches!(dg.kind, Kind::Data | Kind::AckOnly | Kind::Heartbeat) && dg.nacks.is_empty() {
                let take = self.take_nacks();
                // rebuilt without its acks, as the Python layer rebuilds it
                self.outq[i].nacks = take;
                self.outq[i].holds.clear();
            }
        }
        while !self.nack_queue.is_empty() {
            let take = self.take_nacks();
            self.outq.push(Out { kind: Kind::Nack, hb_seq: self.seq, nacks: take, vertex: None,
                                 holds: Vec::new() });
        }
    }

    // ------------------------------------------------------------------ flow control

    pub fn hold_releases(&mut self, on: bool, out: &mut Vec<Vtx<V>>) {
        if on == self.holding {
            return;
        }
        self.holding = on;
        if self.frozen {
            return;
        }
        if on {
            self.set_limit(self.released.clone(), out, false);
        } else {
            self.set_limit_off(out);
        }
    }

    // ------------------------------------------------------------------ view changes

    pub fn freeze(&mut self) {
        if !self.frozen {
            self.frozen = true;
            self.ack_deadline = None;
            let mut sink = Vec::new();
            self.set_limit(self.released.clone(), &mut sink, false);
        }
    }

    /// `close_at`: `cut` per member index.
    pub fn close_at(&mut self, env: &mut dyn Env<V>, cut: Vec<i64>, now: f64, out: &mut Vec<Vtx<V>>) {
        self.freeze();
        self.set_limit(cut.clone(), out, true);
        for (n, &top) in cut.iter().enumerate() {
            if n != self.me && self.released[n] < top {
                self.note_known(n, top);
                let released = self.released[n];
                self.gap_noticed(env, n, now, true, released);
            }
        }
    }

    /// `exceeds`: released a vertex beyond `cut` (per member index; absent: 0).
    pub fn exceeds(&self, cut: &[i64]) -> bool {
        self.released.iter().zip(cut).any(|(r, c)| r > c)
    }

    pub fn retire(&mut self) {
        self.retired = true;
        self.frozen = true;
        self.ack_deadline = None;
        self.deadlines.clear();
        self.noticed.clear();
        self.since.clear();
        self.allowed.iter_mut().for_each(|a| *a = false);
        self.retrying.iter_mut().for_each(|a| *a = false);
        self.nack_queue.clear();
    }

    /// The stored vertices of member `n` (any order).
    pub fn stored(&self, n: usize) -> impl Iterator<Item = (&i64, &Vtx<V>)> {
        self.store[n].iter()
    }

    pub fn stored_count(&self, n: usize) -> usize {
        self.store[n].len()
    }

    pub fn nack_queue(&self) -> impl Iterator<Item = &(i64, i64, i64)> {
        self.nack_queue.iter()
    }
}

fn min_of(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut best: Option<f64> = None;
    for t in values {
        if best.is_none_or(|b| t < b) {
            best = Some(t);
        }
    }
    best
}

#[cfg(test)]
mod tests;
