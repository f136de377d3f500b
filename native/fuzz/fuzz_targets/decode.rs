//! The datagram decoder under arbitrary bodies: it never panics, and what it accepts
//! keeps every rule of `protocols/wire/codec.py` (ranges, limits, the kind's shape).
//!
//! Input: `flags u8 | body...`; flag bit 0 picks small limits (every limit within
//! reach), else the defaults. Whether it accepts exactly what the Python decoder accepts
//! is the differential target's question (`fuzz/targets/native_decode.py`, tests/native).
#![no_main]

use amcast_native::datagram::{
    decode, Decoded, Item, Limits, ACK_ONLY, DATA, HEARTBEAT, MAX_NODE_ID, MAX_SEQ, MAX_VIEW_ID,
    NACK, REPAIR,
};
use libfuzzer_sys::fuzz_target;

const SMALL: Limits = Limits {
    max_datagram_bytes: 512,
    max_array_len: 8,
    max_members: 3,
    max_nack_ranges: 2,
    max_vertices: 2,
    max_items: 3,
    max_message_size: 40,
    max_held_report: 2,
};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, body)) = data.split_first() else { return };
    let limits = if flags & 1 == 1 { SMALL } else { Limits::default() };
    let first = decode(body, &limits);
    assert_eq!(first, decode(body, &limits), "not a function of the body");
    let dg = match first {
        Ok(Decoded::Datagram(dg)) => dg,
        Ok(Decoded::Foreign) | Ok(Decoded::Membership { .. }) => return,
        Err(refusal) => {
            assert!(refusal.reason == "malformed" || refusal.reason == "bad_field");
            return;
        }
    };
    assert!(dg.kind <= HEARTBEAT);
    assert!((0..=MAX_NODE_ID).contains(&dg.sender));
    assert!((0..=MAX_VIEW_ID).contains(&dg.view));
    assert!((0..=MAX_SEQ).contains(&dg.hb_seq));
    assert!(dg.nacks.len() <= limits.max_nack_ranges);
    for &(node, first, last) in &dg.nacks {
        assert!((0..=MAX_NODE_ID).contains(&node) && 1 <= first && first <= last && last <= MAX_SEQ);
    }
    match dg.kind {
        HEARTBEAT => assert!(dg.vertices.is_empty() && dg.acks.len() <= limits.max_members),
        DATA | ACK_ONLY => {
            assert_eq!(dg.vertices.len(), 1);
            let v = &dg.vertices[0];
            assert_eq!((v.origin, v.seq), (dg.sender, dg.hb_seq));
            assert_eq!(v.items.is_empty(), dg.kind == ACK_ONLY);
        }
        REPAIR => assert!(!dg.vertices.is_empty()),
        NACK => assert!(dg.vertices.is_empty() && !dg.nacks.is_empty()),
        _ => unreachable!(),
    }
    if dg.kind != HEARTBEAT {
        assert!(dg.acks.is_empty());
    }
    assert!(dg.vertices.len() <= limits.max_vertices);
    for v in &dg.vertices {
        assert!((0..=MAX_NODE_ID).contains(&v.origin) && (1..=MAX_SEQ).contains(&v.seq));
        assert!(v.service <= 2 && v.send_ts.is_finite());
        assert!(v.acks.len() <= limits.max_members && v.items.len() <= limits.max_items);
        for item in &v.items {
            match *item {
                Item::Whole(b) => assert!(b.len() <= limits.max_datagram_bytes),
                Item::Fragment { total_len, offset, chunk } => {
                    assert_eq!(v.items.len(), 1);
                    assert!(1 <= total_len && total_len <= limits.max_message_size);
                    assert!(!chunk.is_empty() && offset + chunk.len() as i128 <= total_len);
                }
            }
        }
    }
});
