//! The replay guard against a model: a counter is admitted at most once per session, and
//! only fresh. Input: records of `session u8 | counter delta i16 | skew i16 | advance u8`.
#![no_main]

use std::collections::HashSet;

use amcast_native::replay::ReplayGuard;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut guard = ReplayGuard::new(2_000, 3);
    let mut seen: HashSet<([u8; 16], u64)> = HashSet::new();
    let mut counters = [1_000_000u64; 4];
    let mut wall: i64 = 1_800_000_000_000;
    for record in data.chunks_exact(6) {
        let who = usize::from(record[0] % 4);
        let session = [who as u8; 16];
        let delta = i64::from(i16::from_be_bytes([record[1], record[2]]));
        let skew = i64::from(i16::from_be_bytes([record[3], record[4]]));
        wall += i64::from(record[5]) * 10;
        let counter = (counters[who] as i64 + delta) as u64;
        let sent = (wall + skew) as u64;
        if guard.get(&session).is_none() {
            // a session forgotten (swept or evicted) starts afresh: the freshness bound,
            // not the window, refuses its old datagrams (their send times are old)
            seen.retain(|(s, _)| *s != session);
        }
        if guard.check(&session, counter, sent, wall).is_ok() {
            assert!((sent as i64 - wall).abs() <= 2_000, "admitted a stale or future datagram");
            assert!(seen.insert((session, counter)), "admitted a counter twice");
            guard.admit(&session, counter, sent, wall, 1, 1);
            counters[who] = counters[who].max(counter);
        }
        assert!(guard.len() <= 3);
    }
});
