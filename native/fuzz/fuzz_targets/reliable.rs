//! The reliable causal layer (`reliable::Layer`) of one member on arbitrary sequences of
//! datagrams from the others (data, repairs, acks, nacks, forged and out of range), its
//! own vertices, timers, sends, a freeze and a cut, driven as the node drives it: a
//! datagram of this member's own (its multicast's echo) is dropped by the node, one whose
//! sender, nack nodes or vertex origins are no members by the membership layer's `foreign`
//! check; every vertex released goes to `on_release`
//! in release order, then `collect_garbage`. Checked: no panic, and no failure on a
//! datagram the check let through; every vertex is released at most once, each origin's
//! in seq order from 1 without a gap, after every vertex of a member it acknowledges;
//! what it holds stays within `max_held_vertices` + n; its released marks are what it
//! released; its timer is a number; what it sends names members only and nacks ranges in
//! order.
//!
//! Input: a config byte (n 1 to 6 members, this member's index, the window), then
//! records: `op u8` and its bytes (see `step`).
#![no_main]

use std::sync::Arc;

use amcast_native::reliable::{Config, Env, Incoming, Kind, Layer, VRec, Vtx};
use libfuzzer_sys::fuzz_target;

/// A deterministic environment: a linear congruential rng, no lateness, a limiter the
/// input switches.
struct FuzzEnv {
    state: u64,
    allow: bool,
}

impl Env<u32> for FuzzEnv {
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.random()
    }
    fn random(&mut self) -> f64 {
        self.state = self.state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.state >> 11) as f64 / (1u64 << 53) as f64
    }
    fn allowance(&mut self, _now: f64) -> f64 {
        0.0
    }
    fn sample(&mut self, _late: f64, _now: f64) {}
    fn waited_again(&mut self) {}
    fn allow_nack(&mut self, _peer: i64, _now: f64) -> bool {
        self.allow
    }
    fn allow_repair(&mut self, _peer: i64, _nbytes: i64, _now: f64) -> bool {
        self.allow
    }
    fn drop(&mut self, _reason: &str, _detail: String) {}
    fn ack_only(&mut self, seq: i64, _acks: &[(i64, i64)], _now: f64) -> u32 {
        seq as u32
    }
}

fn config(window: i64) -> Config {
    Config {
        ack_delay: 0.0002,
        lazy_ack_delay: 0.01,
        quiet_ack_delay: 0.0,
        heartbeat_interval: 0.1,
        nack_delay: 0.004,
        nack_retry: 0.02,
        repair_delay: 0.002,
        repair_holdoff: 0.01,
        datagram_budget: 1400,
        receive_window: window,
        max_held_vertices: 2 * window,
        max_nack_ranges: 8,
        max_repair_per_nack: 16,
        fixed_overhead: 100,
        ack_overhead: 14,
        nack_range_overhead: 23,
    }
}

/// Reads the input's bytes; zeros once it is spent.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn i8(&mut self) -> i64 {
        i64::from(self.u8() as i8)
    }
}

struct Model {
    members: Vec<i64>,
    me: usize,
    /// Highest seq released of each member (index), own vertices included.
    released: Vec<i64>,
    now: f64,
    tag: u32,
}

impl Model {
    /// A node id: mostly a member, sometimes not (ids 3i + 1 are the members).
    fn node(&self, b: u8) -> i64 {
        if b & 0x80 != 0 {
            i64::from(b % 24)
        } else {
            self.members[usize::from(b) % self.members.len()]
        }
    }
    fn index(&self, node: i64) -> Option<usize> {
        self.members.iter().position(|&m| m == node)
    }
    /// A seq near what this node has released (gaps, duplicates, the far future).
    fn seq_near(&self, node: i64, delta: i64) -> i64 {
        let top = self.index(node).map_or(0, |k| self.released[k]);
        if delta.abs() > 100 { top + delta * 1000 } else { top + delta % 6 }
    }
    fn acks(&self, input: &mut Bytes<'_>) -> Vec<(i64, i64)> {
        let count = usize::from(input.u8() % 5);
        (0..count)
            .map(|_| {
                let node = self.node(input.u8());
                (node, self.seq_near(node, input.i8()))
            })
            .collect()
    }
    fn vertex(&mut self, origin: i64, seq: i64, acks: Vec<(i64, i64)>, items: bool) -> Vtx<u32> {
        self.tag += 1;
        Arc::new(VRec { origin, seq, acks, has_items: items, repair_size: 120, obj: self.tag })
    }

    /// Released vertices, in release order: each origin's next, after what it acks.
    fn check_released(&mut self, layer: &mut Layer<u32>, out: &mut Vec<Vtx<u32>>) {
        for v in out.drain(..) {
            let o = self.index(v.origin).expect("a released vertex of a member");
            assert_eq!(v.seq, self.released[o] + 1, "released out of seq order or twice");
            for &(node, seq) in &v.acks {
                if let Some(k) = self.index(node) {
                    if k != o {
                        assert!(seq <= self.released[k], "released before a vertex it acks");
                    }
                }
            }
            self.released[o] = v.seq;
            layer.on_release(&v, self.now).expect("on_release of a released vertex");
        }
        layer.collect_garbage();
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes(data);
    let head = input.u8();
    let n = usize::from(head % 6) + 1;
    let me = usize::from(head / 6 % 6) % n;
    let window = [4, 16, 64][usize::from(head / 36 % 3)];
    let members: Vec<i64> = (0..n as i64).map(|i| 3 * i + 1).collect();
    let mut layer: Layer<u32> = Layer::new(&members, members[me], config(window), 0.0)
        .expect("a valid layer");
    let mut env = FuzzEnv { state: 7, allow: true };
    let mut m = Model { released: vec![0; n], members, me, now: 0.0, tag: 0 };
    let mut out = Vec::new();
    let mut steps = 0;
    while !input.0.is_empty() && steps < 400 {
        steps += 1;
        m.now += f64::from(input.u8()) * 1e-4;
        match input.u8() % 8 {
            0..=2 => {
                // a datagram from someone: its vertices, acks and nacks
                let sender = m.node(input.u8());
                let flags = input.u8();
                let hb_seq = m.seq_near(sender, input.i8());
                let acks = m.acks(&mut input);
                let nacks: Vec<(i64, i64, i64)> = (0..usize::from(flags >> 5 & 3))
                    .map(|_| {
                        let node = m.node(input.u8());
                        let first = m.seq_near(node, input.i8());
                        (node, first, first + i64::from(input.u8() % 8) - 1)
                    })
                    .collect();
                let mut vertices = Vec::new();
                for _ in 0..usize::from(flags & 3) {
                    let origin = if input.u8() & 1 == 0 { sender } else { m.node(input.u8()) };
                    let seq = m.seq_near(origin, input.i8());
                    let vacks = m.acks(&mut input);
                    let items = input.u8() & 1 == 0;
                    vertices.push(m.vertex(origin, seq, vacks, items));
                }
                let origins: Vec<i64> = vertices.iter().map(|v| v.origin).collect();
                let nack_nodes: Vec<i64> = nacks.iter().map(|x| x.0).collect();
                if sender == m.members[m.me] || layer.foreign(sender, &nack_nodes, &origins).is_some() {
                    continue; // the node drops its own echoes, the membership layer the rest
                }
                let dg = Incoming { repair: flags & 4 != 0, sender, hb_seq, acks, nacks, vertices };
                layer.receive(&mut env, &dg, m.now, &mut out)
                    .expect("a datagram of members is never a failure");
                m.check_released(&mut layer, &mut out);
            }
            3 => {
                // (its ack-only vertices are ours, released as the session releases them)
                layer.handle_timer(&mut env, m.now, &mut out);
                m.check_released(&mut layer, &mut out);
            }
            4 if !layer.frozen && layer.unstable() < window => {
                // (the session's send window bounds our unstable vertices)
                // our own vertex, with what we acknowledge now
                let acks = layer.acks_delta();
                let items = input.u8() & 1 == 0;
                let v = m.vertex(m.members[m.me], layer.seq + 1, acks, items);
                layer.new_vertex(v.clone(), Some(50), m.now);
                out.push(v);
                m.check_released(&mut layer, &mut out);
            }
            5 => {
                for dg in layer.take_datagrams(m.now) {
                    for &(node, first, last) in &dg.nacks {
                        assert!(m.index(node).is_some() && first <= last, "a nack out of range");
                    }
                    if let Some(v) = &dg.vertex {
                        assert!(m.index(v.origin).is_some(), "a vertex of no member sent");
                    }
                    if dg.kind == Kind::Heartbeat && dg.nacks.is_empty() {
                        // (one that carries nacks goes without, as the Python layer's)
                        assert_eq!(dg.holds.len(), m.members.len());
                    }
                }
            }
            6 => {
                env.allow = !env.allow;
                layer.hold_releases(input.u8() & 1 == 0, &mut out);
                m.check_released(&mut layer, &mut out);
            }
            _ => {
                if !layer.frozen {
                    layer.freeze();
                } else if !layer.retired {
                    // the cut: at most what each member has shown, at least what we released
                    let cut: Vec<i64> = m.released.iter().map(|&r| r + i64::from(input.u8() % 3)).collect();
                    if !layer.exceeds(&cut) {
                        layer.close_at(&mut env, cut, m.now, &mut out);
                        m.check_released(&mut layer, &mut out);
                    }
                }
            }
        }
        // a sender's next vertex is always taken (no deadlock): max_held + n at most
        assert!(layer.held_count <= 2 * window + n as i64, "held beyond max_held_vertices + n");
        assert_eq!(layer.released.len(), m.members.len());
        for (k, &r) in m.released.iter().enumerate() {
            assert_eq!(layer.released[k], r, "the layer's released marks are what it released");
        }
        if let Some(t) = layer.next_timer() {
            assert!(t.is_finite(), "a timer that is no number");
        }
    }
});
