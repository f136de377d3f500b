use super::*;

/// A deterministic environment: a linear congruential rng, no lateness, no limits.
struct TestEnv {
    state: u64,
    drops: Vec<(String, String)>,
    draws: usize,
    allow: bool,
}

impl TestEnv {
    fn new() -> Self {
        TestEnv { state: 12345, drops: Vec::new(), draws: 0, allow: true }
    }
}

impl Env<u32> for TestEnv {
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.random()
    }
    fn random(&mut self) -> f64 {
        self.draws += 1;
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
    fn drop(&mut self, reason: &str, detail: String) {
        self.drops.push((reason.into(), detail));
    }
    fn ack_only(&mut self, seq: i64, _acks: &[(i64, i64)], _now: f64) -> u32 {
        seq as u32
    }
}

fn cfg() -> Config {
    Config {
        ack_delay: 0.01,
        lazy_ack_delay: 0.05,
        quiet_ack_delay: 0.02,
        heartbeat_interval: 0.5,
        nack_delay: 0.02,
        nack_retry: 0.1,
        repair_delay: 0.04,
        repair_holdoff: 0.05,
        datagram_budget: 1400,
        receive_window: 64,
        max_held_vertices: 100,
        max_nack_ranges: 8,
        max_repair_per_nack: 16,
        fixed_overhead: 100,
        ack_overhead: 14,
        nack_range_overhead: 23,
    }
}

fn vtx(origin: i64, seq: i64, acks: &[(i64, i64)], data: bool) -> Vtx<u32> {
    Arc::new(VRec { origin, seq, acks: acks.to_vec(), has_items: data, repair_size: 120,
                    obj: (origin * 1000 + seq) as u32 })
}

fn data(sender: i64, hb: i64, vertices: Vec<Vtx<u32>>) -> Incoming<u32> {
    Incoming { repair: false, sender, hb_seq: hb, acks: vec![], nacks: vec![], vertices }
}

fn ids(out: &[Vtx<u32>]) -> Vec<(i64, i64)> {
    out.iter().map(|v| (v.origin, v.seq)).collect()
}

#[test]
fn refuses_duplicate_members_and_outsiders() {
    assert!(Layer::<u32>::new(&[1, 2, 1], 1, cfg(), 0.0).is_err());
    assert!(Layer::<u32>::new(&[1, 2], 3, cfg(), 0.0).is_err());
}

#[test]
fn releases_in_causal_order_and_holds_what_waits() {
    let mut env = TestEnv::new();
    let mut l = Layer::new(&[1, 2, 3], 1, cfg(), 0.0).unwrap();
    let mut out = Vec::new();
    // 3's vertex 1 acks 2's vertex 1, which has not come yet
    l.receive(&mut env, &data(3, 1, vec![vtx(3, 1, &[(2, 1)], true)]), 0.1, &mut out).unwrap();
    assert!(out.is_empty());
    assert_eq!(l.held_count, 1);
    l.receive(&mut env, &data(2, 1, vec![vtx(2, 1, &[], true)]), 0.2, &mut out).unwrap();
    assert_eq!(ids(&out), vec![(2, 1), (3, 1)]);
    assert_eq!(l.held_count, 0);
    // a duplicate is counted, a self-ack dropped
    out.clear();
    l.receive(&mut env, &data(2, 1, vec![vtx(2, 1, &[], true), vtx(2, 2, &[(2, 1)], true)]),
              0.3, &mut out).unwrap();
    assert!(out.is_empty());
    assert_eq!(l.counters.duplicates, 1);
    assert_eq!(env.drops[0].0, "self_ack");
    assert_eq!(env.drops[0].1, "vertex (2, 2) acks its own sender");
    assert_eq!(l.receive(&mut env, &data(9, 1, vec![]), 0.3, &mut out), Err(Fail::Key(9)));
}

#[test]
fn a_gap_is_nacked_after_its_timer_and_repaired() {
    let mut env = TestEnv::new();
    let mut l = Layer::new(&[1, 2], 1, cfg(), 0.0).unwrap();
    let mut out = Vec::new();
    l.receive(&mut env, &data(2, 3, vec![vtx(2, 3, &[], true)]), 0.1, &mut out).unwrap();
    assert!(l.has_gap(1));
    assert_eq!(l.missing(1, 8), vec![(1, 2)]);
    let t = l.next_timer().unwrap();
    assert!(t <= 0.1 + 0.02);
    l.handle_timer(&mut env, t, &mut out);
    let dgs = l.take_datagrams(t);
    assert_eq!(dgs.len(), 1);
    assert_eq!(dgs[0].kind, Kind::Nack);
    assert_eq!(dgs[0].nacks, vec![(2, 1, 2)]);
    // the repair closes the gap and releases all three
    let mut rep = data(2, 3, vec![vtx(2, 1, &[], true), vtx(2, 2, &[], true)]);
    rep.repair = true;
    l.receive(&mut env, &rep, t + 0.01, &mut out).unwrap();
    assert_eq!(ids(&out), vec![(2, 1), (2, 2), (2, 3)]);
}

#[test]
fn own_vertices_acks_and_stability() {
    let mut env = TestEnv::new();
    let mut l = Layer::new(&[1, 2], 1, cfg(), 0.0).unwrap();
    let mut out = Vec::new();
    let v = vtx(1, 1, &[], true);
    l.new_vertex(v.clone(), Some(50), 0.0);
    l.on_release(&v, 0.0).unwrap();
    assert_eq!(l.unstable(), 1);
    assert_eq!(l.unstable_bytes(), 50);
    // 2 acks it: stable, the window frees its bytes
    l.receive(&mut env, &data(2, 1, vec![vtx(2, 1, &[(1, 1)], true)]), 0.1, &mut out).unwrap();
    for v in out.drain(..) {
        l.on_release(&v, 0.1).unwrap();
    }
    l.collect_garbage();
    assert_eq!(l.unstable(), 0);
    assert_eq!(l.unstable_bytes(), 0);
    assert_eq!(l.counters.own_bytes_stable, 50);
    // 2's data wants an ack: an ack-only vertex at the deadline
    assert_eq!(l.acks_delta(), vec![(2, 1)]);
    let t = l.next_timer().unwrap();
    l.handle_timer(&mut env, t, &mut out);
    assert_eq!(ids(&out), vec![(1, 2)]);
    let dgs = l.take_datagrams(t);
    assert_eq!(dgs.iter().map(|d| d.kind).collect::<Vec<_>>(), vec![Kind::Data, Kind::AckOnly]);
}

#[test]
fn heartbeats_go_on_the_grid() {
    assert_eq!(heartbeat_due(0.0, 0.5), 0.5);
    assert_eq!(heartbeat_due(0.3, 0.5), 1.0);
    assert_eq!(next_beat(1.0, 0.5), 1.5);
    let mut env = TestEnv::new();
    let mut l = Layer::<u32>::new(&[1, 2], 1, cfg(), 0.2).unwrap();
    assert_eq!(l.next_timer(), Some(0.5));
    let mut out = Vec::new();
    l.handle_timer(&mut env, 0.5, &mut out);
    let dgs = l.take_datagrams(0.5);
    assert_eq!(dgs[0].kind, Kind::Heartbeat);
    assert_eq!(dgs[0].holds, vec![(1, 0), (2, 0)]);
    l.quiet = true;
    assert_eq!(l.next_timer(), None);
}

#[test]
fn the_cut_releases_what_it_allows_and_refuses_the_rest() {
    let mut env = TestEnv::new();
    let mut l = Layer::new(&[1, 2], 1, cfg(), 0.0).unwrap();
    let mut out = Vec::new();
    l.freeze();
    l.receive(&mut env, &data(2, 2, vec![vtx(2, 1, &[], true), vtx(2, 2, &[], true)]), 0.1,
              &mut out).unwrap();
    assert!(out.is_empty()); // frozen at what was released: held
    assert!(!l.exceeds(&[0, 1]));
    l.close_at(&mut env, vec![0, 1], 0.2, &mut out);
    assert_eq!(ids(&out), vec![(2, 1)]);
    assert_eq!(l.held_count, 0);
    out.clear();
    l.receive(&mut env, &data(2, 3, vec![vtx(2, 3, &[], true)]), 0.3, &mut out).unwrap();
    assert_eq!(env.drops.last().unwrap().0, "beyond_view_cut");
    assert!(l.holds(&[(2, 1)]).unwrap());
    assert_eq!(l.holds(&[(5, 1)]), Err(Fail::Key(5)));
    l.retire();
    assert!(l.frozen && l.retired);
}

#[test]
fn nacks_ride_on_outgoing_datagrams_within_the_cap() {
    let mut env = TestEnv::new();
    let mut c = cfg();
    c.max_nack_ranges = 2;
    let mut l = Layer::new(&[1, 2, 3], 1, c, 0.0).unwrap();
    let mut out = Vec::new();
    // gaps at 2 and 3, three ranges each
    for s in [2, 3] {
        l.receive(&mut env, &data(s, 0, vec![vtx(s, 2, &[], true), vtx(s, 4, &[], true),
                                             vtx(s, 6, &[], true)]), 0.1, &mut out).unwrap();
    }
    l.handle_timer(&mut env, 1.0, &mut out);
    assert_eq!(l.nack_reservation(), 2);
    let dgs = l.take_datagrams(1.0);
    let nacks: Vec<_> = dgs.iter().flat_map(|d| d.nacks.iter().copied()).collect();
    assert_eq!(nacks.len(), 4);
    assert!(dgs.iter().all(|d| d.nacks.len() <= 2));
}

#[test]
fn a_nack_of_own_vertices_never_sent_is_refused() {
    let mut env = TestEnv::new();
    let mut l = Layer::new(&[1, 2], 1, cfg(), 0.0).unwrap();
    let mut out = Vec::new();
    let mut dg = data(2, 0, vec![]);
    dg.nacks = vec![(1, 1, 5)];
    l.receive(&mut env, &dg, 0.1, &mut out).unwrap();
    assert_eq!(env.drops, vec![("nack_beyond_sent".into(), "1 nack ranges from 2".into())]);
    env.allow = false;
    l.receive(&mut env, &dg, 0.1, &mut out).unwrap();
    assert_eq!(env.drops[1].0, "nack_rate_limited");
}

#[test]
fn a_vertex_of_our_id_we_never_sent_is_dropped() {
    let mut env = TestEnv::new();
    let mut l = Layer::new(&[1, 2], 1, cfg(), 0.0).unwrap();
    let mut out = Vec::new();
    let mut rep = data(2, 1, vec![vtx(1, 1, &[], true), vtx(2, 1, &[], true)]);
    rep.repair = true;
    l.receive(&mut env, &rep, 0.1, &mut out).unwrap();
    assert_eq!(ids(&out), vec![(2, 1)]);
    assert_eq!(env.drops, vec![("own_vertex_not_sent".into(), "vertex (1, 1) from 2".into())]);
    // the one we send is ours alone; a copy of it coming back is a duplicate
    let own = vtx(1, 1, &[(2, 1)], true);
    l.new_vertex(own.clone(), Some(50), 0.2);
    l.on_release(&own, 0.2).unwrap();
    out.clear();
    l.receive(&mut env, &data(2, 1, vec![own]), 0.3, &mut out).unwrap();
    assert!(out.is_empty());
    assert_eq!(l.counters.duplicates, 1);
    assert_eq!(env.drops.len(), 1);
}
