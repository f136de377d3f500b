//! The opener under arbitrary bytes and under damaged copies of genuine datagrams.
//!
//! Input: `mode u8 | position u16 | xor u8 | body...`. Mode bit 0: the bytes are opened
//! as they are by a receiver whose keys the harness never seals with (nobody sealed
//! them: they must be refused, never panic; with the sender's keys the fuzzer would
//! rebuild the sender's genuine datagrams, which are deterministic). Otherwise a key
//! holder seals `body`, the copy gets `xor` at `position` (and is cut there with mode
//! bit 1): the receiver must accept the intact datagram once with its body, refuse its
//! replay, and refuse any changed or cut copy.
#![no_main]

use amcast_native::auth::Authenticator;
use libfuzzer_sys::fuzz_target;

const WALL: i64 = 1_800_000_000_000;

fn node(session: u8, key: u8) -> Authenticator {
    Authenticator::new(Some(vec![(1, vec![key; 32]), (2, vec![key + 1; 32])]), [session; 16], 30_000, 4)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (mode, position, xor) = (data[0], u16::from_be_bytes([data[1], data[2]]), data[3]);
    let body = &data[4..];
    if mode & 1 == 1 {
        assert!(node(2, 100).open(body, WALL).is_err(), "accepted bytes nobody sealed");
        return;
    }
    let mut receiver = node(2, 7);
    let mut sender = node(1, 7);
    let sealed = sender.seal(body, WALL).expect("seal");
    let mut copy = sealed.clone();
    let at = usize::from(position) % copy.len();
    if mode & 2 == 2 {
        copy.truncate(at);
    } else {
        copy[at] ^= xor;
    }
    let changed = copy != sealed;
    let got = receiver.open(&copy, WALL + 1);
    if changed {
        assert!(got.is_err(), "accepted a changed datagram");
    } else {
        assert_eq!(got.expect("genuine"), body);
        assert_eq!(receiver.open(&sealed, WALL + 2).unwrap_err().reason, "replayed");
    }
});
