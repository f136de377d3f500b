//! The data-plane datagram decoder of `protocols/wire/codec.py` (`decode_body`): the
//! msgpack layout `[kind, sender, view, hb_seq, nacks, vertices]` of DATA, ACK_ONLY,
//! NACK, REPAIR and HEARTBEAT datagrams (section 1 of the ToTo paper: every datagram
//! is a heartbeat, carries nack ranges and causality-DAG vertices), with every check of
//! the reference decoder `_decode_obj`, in its order and with its refusal reason and
//! detail, and the hard limits of `WireLimits`.
//!
//! MEMBERSHIP datagrams go on to `membership::decode_message`. A body whose kind this
//! decoder does not know (a kind added to the Python core after this one) is not refused here: `decode` says `Foreign`, and the
//! caller hands the body to the Python decoder, which decodes it or raises the precise
//! error. Everything else gets the reference's answer: the same datagram or the same
//! `DecodeError` reason and detail.

#![forbid(unsafe_code)]

use crate::error::Refusal;
use crate::membership::{decode_message, Message, MAX_INCARNATION};
use crate::msgpack::{unpack, UnpackLimits, Value};
use crate::pyrepr::repr40;

pub const MAX_NODE_ID: i128 = (1 << 32) - 1;
pub const MAX_VIEW_ID: i128 = (1 << 63) - 1;
pub const MAX_SEQ: i128 = 1 << 62;

/// The kinds this decoder knows, by wire code (`codec.Kind`).
pub const DATA: u8 = 0;
pub const ACK_ONLY: u8 = 1;
pub const NACK: u8 = 2;
pub const REPAIR: u8 = 3;
pub const HEARTBEAT: u8 = 4;
pub const MEMBERSHIP: u8 = 5;

/// `WireLimits`, the fields the datagram decoder reads.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_datagram_bytes: usize,
    pub max_array_len: usize,
    pub max_members: usize,
    pub max_nack_ranges: usize,
    pub max_vertices: usize,
    pub max_items: usize,
    pub max_message_size: i128,
    pub max_held_report: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_datagram_bytes: 65_507,
            max_array_len: 65_536,
            max_members: 1024,
            max_nack_ranges: 256,
            max_vertices: 64,
            max_items: 65_536,
            max_message_size: 16 * 1024 * 1024,
            max_held_report: 512,
        }
    }
}

/// One application message or one fragment of one (`codec.Item`).
#[derive(Clone, Debug, PartialEq)]
pub enum Item<'a> {
    Whole(&'a [u8]),
    Fragment { total_len: i128, offset: i128, chunk: &'a [u8] },
}

/// `codec.Vertex`; `service` is the wire code (`SERVICE_BY_CODE`).
#[derive(Clone, Debug, PartialEq)]
pub struct Vertex<'a> {
    pub origin: i128,
    pub seq: i128,
    pub acks: Vec<(i128, i128)>,
    pub service: u8,
    pub send_ts: f64,
    pub items: Vec<Item<'a>>,
}

/// `codec.Datagram`; `kind` is the wire code.
#[derive(Clone, Debug, PartialEq)]
pub struct Datagram<'a> {
    pub kind: u8,
    pub sender: i128,
    pub view: i128,
    pub hb_seq: i128,
    pub nacks: Vec<(i128, i128, i128)>,
    pub vertices: Vec<Vertex<'a>>,
    pub acks: Vec<(i128, i128)>,
}

/// What `decode` makes of a body.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded<'a> {
    Datagram(Datagram<'a>),
    /// `codec.MembershipDatagram`.
    Membership { sender: i128, view: i128, incarnation: i128, message: Box<Message<'a>> },
    /// A well-framed body of a kind this decoder does not know: the Python decoder's.
    Foreign,
}

pub(crate) fn bad(detail: impl Into<String>) -> Refusal {
    Refusal::new("bad_field", detail)
}

/// `fields.read_int`.
pub(crate) fn read_int(value: &Value<'_>, lo: i128, hi: i128, what: &str) -> Result<i128, Refusal> {
    match value {
        Value::Int(i) if lo <= *i && *i <= hi => Ok(*i),
        _ => Err(bad(format!("{what}={}", repr40(value)))),
    }
}

/// `fields.read_list`.
pub(crate) fn read_list<'v, 'a>(value: &'v Value<'a>, what: &str) -> Result<&'v [Value<'a>], Refusal> {
    match value {
        Value::Array(items) => Ok(items),
        _ => Err(bad(format!("{what} is not an array"))),
    }
}

fn vertex<'a>(obj: &Value<'a>, limits: &Limits) -> Result<Vertex<'a>, Refusal> {
    let fields = read_list(obj, "vertex")?;
    if fields.len() != 6 {
        return Err(bad("vertex arity"));
    }
    let origin = read_int(&fields[0], 0, MAX_NODE_ID, "origin")?;
    let seq = read_int(&fields[1], 1, MAX_SEQ, "seq")?;
    let flat = read_list(&fields[2], "acks")?;
    if flat.len() % 2 != 0 || flat.len() > 2 * limits.max_members {
        return Err(bad("acks length"));
    }
    let mut acks = Vec::with_capacity(flat.len() / 2);
    for pair in flat.chunks_exact(2) {
        acks.push((read_int(&pair[0], 0, MAX_NODE_ID, "ack node")?,
                   read_int(&pair[1], 1, MAX_SEQ, "ack seq")?));
    }
    let service = match fields[3] {
        Value::Int(code @ 0..=2) => code as u8,
        _ => return Err(bad("service")),
    };
    let send_ts = match fields[4] {
        Value::Int(i) => i as f64, // round to nearest, ties to even: Python's float(int)
        Value::Float(f) if f.is_finite() => f,
        _ => return Err(bad("send_ts")),
    };
    let raw_items = read_list(&fields[5], "items")?;
    if raw_items.len() > limits.max_items {
        return Err(bad("too many items"));
    }
    let mut items = Vec::with_capacity(raw_items.len());
    for raw in raw_items {
        if let Value::Bytes(b) = raw {
            items.push(Item::Whole(b));
            continue;
        }
        let frag = read_list(raw, "item")?;
        let chunk = match (frag.len(), raw_items.len(), frag.get(2)) {
            (3, 1, Some(Value::Bytes(chunk))) => *chunk,
            _ => return Err(bad("fragment")),
        };
        let total_len = read_int(&frag[0], 1, limits.max_message_size, "fragment total_len")?;
        let offset = read_int(&frag[1], 0, total_len - 1, "fragment offset")?;
        if chunk.is_empty() || offset + chunk.len() as i128 > total_len {
            return Err(bad("fragment bounds"));
        }
        items.push(Item::Fragment { total_len, offset, chunk });
    }
    Ok(Vertex { origin, seq, acks, service, send_ts, items })
}

/// `codec.decode_body` of an authentic body: the datagram, `Foreign` for a kind this
/// decoder leaves to the Python core, or the refusal the Python core gives.
pub fn decode<'a>(body: &'a [u8], limits: &Limits) -> Result<Decoded<'a>, Refusal> {
    let unpack_limits = UnpackLimits {
        max_bin_len: limits.max_datagram_bytes,
        max_array_len: limits.max_array_len,
    };
    let obj = unpack(body, unpack_limits).map_err(|name| Refusal::new("malformed", name))?;
    let Value::Array(fields) = &obj else {
        return Ok(Decoded::Foreign); // "datagram is not an array": the reference says it
    };
    if fields.len() != 6 {
        return Ok(Decoded::Foreign);
    }
    let kind = match fields[0] {
        Value::Int(code @ 0..=5) => code as u8,
        _ => return Ok(Decoded::Foreign), // a newer kind, or no kind at all
    };
    let sender = read_int(&fields[1], 0, MAX_NODE_ID, "sender")?;
    let view = read_int(&fields[2], 0, MAX_VIEW_ID, "view")?;
    if kind == MEMBERSHIP {
        let incarnation = read_int(&fields[3], 0, MAX_INCARNATION, "incarnation")?;
        let message = decode_message(&fields[4], &fields[5], limits)?;
        return Ok(Decoded::Membership { sender, view, incarnation, message: Box::new(message) });
    }
    let hb_seq = read_int(&fields[3], 0, MAX_SEQ, "hb_seq")?;
    let flat = read_list(&fields[4], "nacks")?;
    if flat.len() % 3 != 0 || flat.len() > 3 * limits.max_nack_ranges {
        return Err(bad("nacks length"));
    }
    let mut nacks = Vec::with_capacity(flat.len() / 3);
    for triple in flat.chunks_exact(3) {
        let node = read_int(&triple[0], 0, MAX_NODE_ID, "nack node")?;
        let first = read_int(&triple[1], 1, MAX_SEQ, "nack first")?;
        let last = read_int(&triple[2], first, MAX_SEQ, "nack last")?;
        nacks.push((node, first, last));
    }
    if kind == HEARTBEAT {
        let max_len = 2 * limits.max_members;
        let flat = read_list(&fields[5], "heartbeat acks")?;
        if flat.len() > max_len {
            return Err(bad(format!("heartbeat acks has {} > {max_len} entries", flat.len())));
        }
        if flat.len() % 2 != 0 {
            return Err(bad("heartbeat acks length"));
        }
        let mut acks = Vec::with_capacity(flat.len() / 2);
        for pair in flat.chunks_exact(2) {
            acks.push((read_int(&pair[0], 0, MAX_NODE_ID, "ack node")?,
                       read_int(&pair[1], 0, MAX_SEQ, "ack seq")?));
        }
        return Ok(Decoded::Datagram(Datagram {
            kind, sender, view, hb_seq, nacks, vertices: Vec::new(), acks,
        }));
    }
    let raw_vertices = read_list(&fields[5], "vertices")?;
    if raw_vertices.len() > limits.max_vertices {
        return Err(bad("too many vertices"));
    }
    let vertices = raw_vertices
        .iter()
        .map(|v| vertex(v, limits))
        .collect::<Result<Vec<_>, _>>()?;
    match kind {
        DATA | ACK_ONLY => {
            if vertices.len() != 1 || vertices[0].origin != sender || vertices[0].seq != hb_seq {
                return Err(bad("data datagram must carry the sender's latest vertex"));
            }
            if vertices[0].items.is_empty() != (kind == ACK_ONLY) {
                return Err(bad("kind does not match the vertex"));
            }
        }
        REPAIR => {
            if vertices.is_empty() {
                return Err(bad("empty repair"));
            }
        }
        _ => {
            if !vertices.is_empty() {
                return Err(bad("nack carries vertices"));
            }
        }
    }
    if kind == NACK && nacks.is_empty() {
        return Err(bad("empty nack"));
    }
    Ok(Decoded::Datagram(Datagram { kind, sender, view, hb_seq, nacks, vertices, acks: Vec::new() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(body: &[u8]) -> Refusal {
        decode(body, &Limits::default()).expect_err("refused")
    }

    #[test]
    fn a_data_datagram() {
        // [0, 3, 7, 2, [1, 1, 1], [[3, 2, [1, 1], 1, 1.5, [b"hi"]]]]
        let body = b"\x96\x00\x03\x07\x02\x93\x01\x01\x01\x91\x96\x03\x02\x92\x01\x01\x01\xcb\x3f\xf8\0\0\0\0\0\0\x91\xc4\x02hi";
        let Ok(Decoded::Datagram(dg)) = decode(body, &Limits::default()) else { panic!() };
        assert_eq!((dg.kind, dg.sender, dg.view, dg.hb_seq), (DATA, 3, 7, 2));
        assert_eq!(dg.nacks, vec![(1, 1, 1)]);
        assert_eq!(dg.vertices[0].acks, vec![(1, 1)]);
        assert_eq!(dg.vertices[0].send_ts, 1.5);
        assert_eq!(dg.vertices[0].items, vec![Item::Whole(b"hi")]);
    }

    /// A seeded loop beside the cargo-fuzz target: mutated real bodies and raw bytes
    /// never panic, and an accepted one keeps the kind's shape.
    #[test]
    fn mutated_bodies_never_panic() {
        let bodies: [&[u8]; 3] = [
            b"\x96\x00\x03\x07\x02\x93\x01\x01\x01\x91\x96\x03\x02\x92\x01\x01\x01\xcb\x3f\xf8\0\0\0\0\0\0\x91\xc4\x02hi",
            b"\x96\x03\x01\x02\x00\x90\x91\x96\x01\x05\x90\x02\x00\x91\x93\x0a\x02\xc4\x03abc",
            b"\x96\x04\x00\x00\x00\x93\x01\x01\x02\x94\x01\x00\x02\x07",
        ];
        let mut state: u64 = 0x2026_1127;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let small = Limits { max_array_len: 8, max_members: 3, max_nack_ranges: 2,
                             max_vertices: 2, max_items: 3, max_message_size: 40,
                             ..Limits::default() };
        for round in 0..20_000 {
            let mut body = bodies[round % bodies.len()].to_vec();
            for _ in 0..=(next() % 4) {
                let at = (next() as usize) % (body.len() + 1);
                match next() % 4 {
                    0 if at < body.len() => body[at] ^= 1 << (next() % 8),
                    1 => body.insert(at, next() as u8),
                    2 => body.truncate(at),
                    _ if at < body.len() => body[at] = next() as u8,
                    _ => {}
                }
            }
            for limits in [Limits::default(), small] {
                if let Ok(Decoded::Datagram(dg)) = decode(&body, &limits) {
                    assert!(dg.kind <= HEARTBEAT && dg.vertices.len() <= limits.max_vertices);
                    assert!(dg.kind == REPAIR || dg.vertices.len() <= 1);
                }
            }
        }
    }

    #[test]
    fn refusals_as_the_reference() {
        assert_eq!(refusal(b"\xc1"), Refusal::new("malformed", "FormatError"));
        assert_eq!(refusal(b"\x96\x00\xc3\x00\x00\x90\x90"), bad("sender=True"));
        assert_eq!(refusal(b"\x96\x02\x00\x00\x00\x90\x90"), bad("empty nack"));
        assert_eq!(refusal(b"\x96\x02\x00\x00\x00\x93\x00\x02\x01\x90"), bad("nack last=1"));
        assert_eq!(refusal(b"\x96\x03\x00\x00\x00\x90\x90"), bad("empty repair"));
        assert_eq!(refusal(b"\x96\x04\x00\x00\x00\x90\x91\x00"), bad("heartbeat acks length"));
        assert_eq!(refusal(b"\x96\x05\x00\x00\x00\x90\x90"), bad("membership message type"));
        assert_eq!(decode(b"\x96\x06\x00\x00\x00\x90\x90", &Limits::default()), Ok(Decoded::Foreign));
        assert_eq!(decode(b"\x95\x00\x00\x00\x00\x90", &Limits::default()), Ok(Decoded::Foreign));
    }
}
