//! The ToTo engine on arbitrary insert sequences: it never panics; a message it accepts
//! was valid (its seq the sender's next, its acks of inserted messages), one it refuses
//! leaves it unchanged; every payload is delivered at most once, in position order, and
//! `close` empties G. Input: a config byte (rule, n, ack_roots_leave, phi), then records
//! of `sender u8 | seq delta i8 | payload? u8 | ack count u8 | (node u8, seq delta i8)*`.
#![no_main]

use std::collections::HashSet;

use amcast_native::ordering::{Engine, Rule};
use libfuzzer_sys::fuzz_target;

const RULES: [Rule; 5] = [Rule::Lex, Rule::Toto, Rule::Stoto, Rule::Gtoto, Rule::Gltoto];

fuzz_target!(|data: &[u8]| {
    let Some((&head, mut rest)) = data.split_first() else { return };
    let rule = RULES[usize::from(head % 5)];
    let n = usize::from(head / 5 % 8) + 1;
    let leave = head & 0x80 != 0;
    let phi = match rule {
        Rule::Gtoto | Rule::Gltoto => (n as f64 / 2.0).max(1.5),
        _ => n as f64 / 2.0,
    };
    let members: Vec<i64> = (0..n as i64).map(|i| 3 * i + 1).collect();
    let mut engine: Engine<u32> = Engine::new(&members, rule, phi, leave).expect("a valid engine");
    let mut inserted = vec![0i64; n];
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut position = 0u64;
    let mut tag = 0u32;
    while rest.len() >= 4 {
        let (record, tail) = rest.split_at(4);
        rest = tail;
        let sender = i64::from(record[0] % 10);
        let seq_delta = i64::from(record[1] as i8);
        let count = usize::from(record[3] % 8).min(rest.len() / 2);
        let (raw, tail) = rest.split_at(2 * count);
        rest = tail;
        let acks: Vec<(i64, i64)> = raw
            .chunks_exact(2)
            .map(|a| {
                let node = i64::from(a[0] % 10);
                let top = members.iter().position(|&m| m == node).map_or(0, |k| inserted[k]);
                (node, top + i64::from(a[1] as i8 % 4))
            })
            .collect();
        let index = members.iter().position(|&m| m == sender);
        let seq = index.map_or(1, |k| inserted[k]) + seq_delta % 3;
        tag += 1;
        let payload = (record[2] & 1 == 1).then_some(tag);
        let before = (engine.pending(), engine.activation, engine.position);
        out.clear();
        match engine.insert(sender, seq, &acks, payload, &mut out) {
            Ok(()) => {
                let k = index.expect("an accepted sender is a member");
                assert_eq!(seq, inserted[k] + 1);
                for &(node, acked) in &acks {
                    let j = members.iter().position(|&m| m == node).expect("an acked member");
                    assert!(acked >= 1 && acked <= inserted[j]);
                }
                inserted[k] = seq;
            }
            Err(_) => {
                assert!(out.is_empty());
                assert_eq!(before, (engine.pending(), engine.activation, engine.position));
            }
        }
        for d in &out {
            assert!(seen.insert(d.payload), "a payload delivered twice");
            assert_eq!(d.position, position);
            position += 1;
        }
    }
    out.clear();
    engine.close(&mut out);
    for d in &out {
        assert!(seen.insert(d.payload), "a payload delivered twice");
        assert_eq!(d.position, position);
        position += 1;
    }
    assert_eq!(engine.pending(), 0);
    assert_eq!(engine.pending_payloads(), 0);
});
