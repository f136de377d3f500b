//! The membership message decoder of `protocols/wire/membership.py` (`decode_message`),
//! behind a MEMBERSHIP datagram `[5, sender, view, incarnation, type, body]`: the view
//! agreement's messages (JOIN, PREPARE, PROMISE, REJECT, ACCEPT, ACCEPTED, INSTALL,
//! REFUSE; the membership protocol's Paxos-like rounds), with every check of the
//! reference in its order (Python evaluates some fields before others: a PROMISE's vote,
//! a PREPARE's candidates, a REFUSE's target come first) and with its refusal details.

#![forbid(unsafe_code)]

use crate::datagram::{bad, read_int, read_list, Limits, MAX_NODE_ID, MAX_SEQ, MAX_VIEW_ID};
use crate::error::Refusal;
use crate::msgpack::Value;

pub const MAX_INCARNATION: i128 = (1 << 63) - 1;
pub const MAX_TEXT_BYTES: usize = 256;

pub type Ballot = (i128, i128);
pub type Member = (i128, i128);
pub type Pairs = Vec<(i128, i128)>;

#[derive(Clone, Debug, PartialEq)]
pub struct View {
    pub view_id: i128,
    pub members: Vec<Member>,
    pub potential: Vec<i128>,
    pub prev_id: i128,
    /// The swap tree (``ViewRecord.tree``): each member's parent, then the hybrid's
    /// virtual root; empty when not written.
    pub tree: Vec<i128>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Proposal {
    pub view: View,
    pub prev: Option<View>,
    pub cut: Pairs,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Settings<'a> {
    pub rule: &'a [u8],
    pub phi: Option<f64>,
    pub expected: Option<i128>,
    pub size: i128,
    pub members: Vec<i128>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Availability {
    pub view_id: i128,
    pub released: Pairs,
    /// `(origin, seq, acks)` of each held vertex.
    pub held: Vec<(i128, i128, Pairs)>,
}

/// `membership.Message`; texts are ASCII bytes. (A PROMISE is much the largest; these
/// are rare, one value at a time: not worth a box.)
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Message<'a> {
    Join { settings: Settings<'a>, known_view: i128, leaving: bool, last: Option<(i128, i128)> },
    Prepare { ballot: Ballot, candidates: Vec<Member>, known: Option<View> },
    Promise {
        ballot: Ballot,
        known: Option<View>,
        installed: i128,
        accepted: Option<(Ballot, Proposal)>,
        availability: Option<Availability>,
        settings: Settings<'a>,
        last: Option<(i128, i128)>,
        held: bool,
        /// The incarnation the promiser's state began with, where that can keep its
        /// vote from counting; 0 where it cannot (an older daemon never says).
        origin: i128,
    },
    Reject { ballot: Ballot, promised: Ballot, reason: &'a [u8], detail: &'a [u8] },
    Accept { ballot: Ballot, proposal: Proposal, holder_voted: bool },
    Accepted { ballot: Ballot, view_id: i128, held: Option<bool> },
    Install { ballot: Ballot, proposal: Proposal },
    Refuse { target: Member, reason: &'a [u8], detail: &'a [u8] },
}

/// `fields.read_list(..., max_len=...)`.
fn read_list_max<'v, 'a>(value: &'v Value<'a>, what: &str, max_len: usize)
    -> Result<&'v [Value<'a>], Refusal> {
    let items = read_list(value, what)?;
    if items.len() > max_len {
        return Err(bad(format!("{what} has {} > {max_len} entries", items.len())));
    }
    Ok(items)
}

fn read_bool(value: &Value<'_>, what: &str) -> Result<bool, Refusal> {
    match value {
        Value::Bool(b) => Ok(*b),
        _ => Err(bad(format!("{what} is not a boolean"))),
    }
}

fn read_text<'a>(value: &Value<'a>, what: &str) -> Result<&'a [u8], Refusal> {
    match value {
        Value::Bytes(b) if b.len() <= MAX_TEXT_BYTES => {
            if b.is_ascii() { Ok(b) } else { Err(bad(format!("{what} is not ascii"))) }
        }
        _ => Err(bad(format!("{what} is not short bytes"))),
    }
}

fn arity(fields: &[Value<'_>], n: usize, what: &str) -> Result<(), Refusal> {
    if fields.len() != n {
        return Err(bad(format!("{what} arity")));
    }
    Ok(())
}

fn read_ballot(value: &Value<'_>) -> Result<Ballot, Refusal> {
    let fields = read_list(value, "ballot")?;
    arity(fields, 2, "ballot")?;
    Ok((read_int(&fields[0], 0, MAX_VIEW_ID, "ballot number")?,
        read_int(&fields[1], 0, MAX_NODE_ID, "ballot node")?))
}

fn strictly_increasing(xs: impl Iterator<Item = i128>) -> bool {
    let mut last: Option<i128> = None;
    for x in xs {
        if last.is_some_and(|l| l >= x) {
            return false;
        }
        last = Some(x);
    }
    true
}

fn read_members(value: &Value<'_>, limits: &Limits, what: &str) -> Result<Vec<Member>, Refusal> {
    let flat = read_list_max(value, what, 2 * limits.max_members)?;
    if flat.len() % 2 != 0 {
        return Err(bad(format!("{what} length")));
    }
    let mut members = Vec::with_capacity(flat.len() / 2);
    for pair in flat.chunks_exact(2) {
        members.push((read_int(&pair[0], 0, MAX_NODE_ID, "member node")?,
                      read_int(&pair[1], 0, MAX_INCARNATION, "incarnation")?));
    }
    if !strictly_increasing(members.iter().map(|m| m.0)) {
        return Err(bad(format!("{what} not sorted and distinct")));
    }
    Ok(members)
}

fn read_pairs(value: &Value<'_>, limits: &Limits, what: &str, hi: i128) -> Result<Pairs, Refusal> {
    let flat = read_list_max(value, what, 2 * limits.max_members)?;
    if flat.len() % 2 != 0 {
        return Err(bad(format!("{what} length")));
    }
    let node_what = format!("{what} node");
    let mut pairs = Vec::with_capacity(flat.len() / 2);
    for pair in flat.chunks_exact(2) {
        pairs.push((read_int(&pair[0], 0, MAX_NODE_ID, &node_what)?,
                    read_int(&pair[1], 0, hi, what)?));
    }
    Ok(pairs)
}

fn read_view(value: &Value<'_>, limits: &Limits) -> Result<Option<View>, Refusal> {
    if *value == Value::Nil {
        return Ok(None);
    }
    let fields = read_list(value, "view record")?;
    if fields.len() != 4 && fields.len() != 5 {
        return Err(bad("view record arity"));
    }
    let view_id = read_int(&fields[0], 1, MAX_VIEW_ID, "view id")?;
    let members = read_members(&fields[1], limits, "view members")?;
    if members.is_empty() {
        return Err(bad("a view has members"));
    }
    let raw = read_list_max(&fields[2], "potential", limits.max_members)?;
    let potential = raw
        .iter()
        .map(|x| read_int(x, 0, MAX_NODE_ID, "potential member"))
        .collect::<Result<Vec<_>, _>>()?;
    if potential.is_empty() || !strictly_increasing(potential.iter().copied()) {
        return Err(bad("potential members not sorted and distinct"));
    }
    let prev_id = read_int(&fields[3], 0, view_id - 1, "previous view id")?;
    let mut tree = Vec::new();
    if fields.len() == 5 {
        for x in read_list_max(&fields[4], "swap tree", 2 * limits.max_members)? {
            let t = read_int(x, 0, MAX_NODE_ID, "swap tree")?;
            if !members.iter().any(|m| m.0 == t) {
                return Err(bad("tree: not a member"));
            }
            tree.push(t);
        }
        if tree.len() <= members.len() {
            return Err(bad("tree: too short"));
        }
    }
    Ok(Some(View { view_id, members, potential, prev_id, tree }))
}

fn read_proposal(value: &Value<'_>, limits: &Limits) -> Result<Proposal, Refusal> {
    let fields = read_list(value, "proposal")?;
    arity(fields, 3, "proposal")?;
    let Some(view) = read_view(&fields[0], limits)? else {
        return Err(bad("proposal without a view"));
    };
    let prev = read_view(&fields[1], limits)?;
    if prev.as_ref().is_some_and(|p| p.view_id != view.prev_id) {
        return Err(bad("proposal prev does not match"));
    }
    let cut = read_pairs(&fields[2], limits, "cut", MAX_SEQ)?;
    match &prev {
        Some(p) if !cut.iter().map(|c| c.0).eq(p.members.iter().map(|m| m.0)) => {
            return Err(bad("cut does not cover the previous view's members"));
        }
        None if !cut.is_empty() => return Err(bad("cut without a previous view")),
        _ => {}
    }
    Ok(Proposal { view, prev, cut })
}

type Vote = (Option<(Ballot, Proposal)>, bool);

fn read_accepted(value: &Value<'_>, limits: &Limits) -> Result<Vote, Refusal> {
    if *value == Value::Nil {
        return Ok((None, true));
    }
    let fields = read_list(value, "accepted")?;
    if fields.len() != 2 && fields.len() != 3 {
        return Err(bad("accepted arity"));
    }
    let held = if fields.len() == 3 { read_bool(&fields[2], "accepted held")? } else { true };
    Ok((Some((read_ballot(&fields[0])?, read_proposal(&fields[1], limits)?)), held))
}

fn read_settings<'a>(value: &Value<'a>, limits: &Limits) -> Result<Settings<'a>, Refusal> {
    let fields = read_list(value, "settings")?;
    arity(fields, 5, "settings")?;
    let rule = read_text(&fields[0], "rule")?;
    let phi = match fields[1] {
        Value::Nil => None,
        Value::Float(f) if (0.0..=1e6).contains(&f) => Some(f),
        _ => return Err(bad("phi")),
    };
    let expected = match fields[2] {
        Value::Nil => None,
        ref v => Some(read_int(v, 1, MAX_NODE_ID, "votes")?),
    };
    let size = read_int(&fields[3], 1, 1 << 40, "max_message_size")?;
    let members = read_list_max(&fields[4], "members", limits.max_members)?
        .iter()
        .map(|x| read_int(x, 0, MAX_NODE_ID, "member"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Settings { rule, phi, expected, size, members })
}

fn read_position(value: &Value<'_>) -> Result<Option<(i128, i128)>, Refusal> {
    if *value == Value::Nil {
        return Ok(None);
    }
    let fields = read_list(value, "position")?;
    arity(fields, 2, "position")?;
    Ok(Some((read_int(&fields[0], 1, MAX_VIEW_ID, "position view")?,
             read_int(&fields[1], 0, MAX_SEQ, "position")?)))
}

fn read_availability(value: &Value<'_>, limits: &Limits) -> Result<Option<Availability>, Refusal> {
    if *value == Value::Nil {
        return Ok(None);
    }
    let fields = read_list(value, "availability")?;
    arity(fields, 3, "availability")?;
    let view_id = read_int(&fields[0], 1, MAX_VIEW_ID, "availability view")?;
    let released = read_pairs(&fields[1], limits, "released", MAX_SEQ)?;
    let mut held = Vec::new();
    for raw in read_list_max(&fields[2], "held", limits.max_held_report)? {
        let h = read_list(raw, "held vertex")?;
        arity(h, 3, "held vertex")?;
        held.push((read_int(&h[0], 0, MAX_NODE_ID, "held origin")?,
                   read_int(&h[1], 1, MAX_SEQ, "held seq")?,
                   read_pairs(&h[2], limits, "held acks", MAX_SEQ)?));
    }
    Ok(Some(Availability { view_id, released, held }))
}

/// `membership.decode_message(code, obj, limits)`.
pub fn decode_message<'a>(code: &Value<'a>, obj: &Value<'a>, limits: &Limits)
    -> Result<Message<'a>, Refusal> {
    let (name, want) = match code {
        Value::Int(1) => ("join", 4),
        Value::Int(2) => ("prepare", 3),
        Value::Int(3) => ("promise", 7),
        Value::Int(4) => ("reject", 4),
        Value::Int(5) => ("accept", 3),
        Value::Int(6) => ("accepted", 3),
        Value::Int(7) => ("install", 2),
        Value::Int(8) => ("refuse", 3),
        _ => return Err(bad("membership message type")),
    };
    let body = read_list(obj, "membership body")?;
    // older daemons omit an ACCEPT's or ACCEPTED's last field; a PROMISE's origin is
    // written only where it matters
    let optional_last = matches!(name, "accept" | "accepted");
    let optional_more = name == "promise";
    if body.len() != want && !(optional_last && body.len() == want - 1)
        && !(optional_more && body.len() == want + 1) {
        return Err(bad(format!("{name} arity")));
    }
    Ok(match name {
        "join" => Message::Join {
            settings: read_settings(&body[0], limits)?,
            known_view: read_int(&body[1], 0, MAX_VIEW_ID, "known view")?,
            leaving: read_bool(&body[2], "leaving")?,
            last: read_position(&body[3])?,
        },
        "prepare" => {
            let candidates = read_members(&body[1], limits, "candidates")?;
            Message::Prepare {
                ballot: read_ballot(&body[0])?,
                candidates,
                known: read_view(&body[2], limits)?,
            }
        }
        "promise" => {
            let (accepted, held) = read_accepted(&body[3], limits)?;
            Message::Promise {
                ballot: read_ballot(&body[0])?,
                known: read_view(&body[1], limits)?,
                installed: read_int(&body[2], 0, MAX_VIEW_ID, "installed view")?,
                accepted,
                availability: read_availability(&body[4], limits)?,
                settings: read_settings(&body[5], limits)?,
                last: read_position(&body[6])?,
                held,
                origin: if body.len() == 8 {
                    read_int(&body[7], 1, MAX_INCARNATION, "origin")?
                } else {
                    0
                },
            }
        }
        "reject" => Message::Reject {
            ballot: read_ballot(&body[0])?,
            promised: read_ballot(&body[1])?,
            reason: read_text(&body[2], "reason")?,
            detail: read_text(&body[3], "detail")?,
        },
        "accept" => {
            let holder_voted =
                if body.len() == 3 { read_bool(&body[2], "holder voted")? } else { false };
            Message::Accept {
                ballot: read_ballot(&body[0])?,
                proposal: read_proposal(&body[1], limits)?,
                holder_voted,
            }
        }
        "accepted" => {
            let held = if body.len() == 3 { Some(read_bool(&body[2], "held")?) } else { None };
            Message::Accepted {
                ballot: read_ballot(&body[0])?,
                view_id: read_int(&body[1], 1, MAX_VIEW_ID, "view id")?,
                held,
            }
        }
        "install" => Message::Install {
            ballot: read_ballot(&body[0])?,
            proposal: read_proposal(&body[1], limits)?,
        },
        _ => {
            let targets = read_members(&body[0], limits, "refused member")?;
            if targets.len() != 1 {
                return Err(bad("refuse names one member"));
            }
            Message::Refuse {
                target: targets[0],
                reason: read_text(&body[1], "reason")?,
                detail: read_text(&body[2], "detail")?,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(code: i128, body: Vec<Value<'static>>) -> String {
        decode_message(&Value::Int(code), &Value::Array(body), &Limits::default())
            .expect_err("refused")
            .detail
    }

    #[test]
    fn checks_in_the_references_order() {
        assert_eq!(refusal(9, vec![]), "membership message type");
        assert_eq!(refusal(3, vec![Value::Nil; 2]), "promise arity");
        // a PROMISE has 7 fields, or 8 with its origin
        assert_eq!(refusal(3, vec![Value::Nil; 9]), "promise arity");
        assert_eq!(refusal(3, vec![Value::Nil; 6]), "promise arity");
        // Python reads a PROMISE's vote, a PREPARE's candidates, a REFUSE's target first
        assert_eq!(refusal(3, vec![Value::Nil, Value::Nil, Value::Nil, Value::Int(1), Value::Nil,
                                   Value::Nil, Value::Nil]), "accepted is not an array");
        assert_eq!(refusal(2, vec![Value::Nil, Value::Int(1), Value::Nil]),
                   "candidates is not an array");
        assert_eq!(refusal(8, vec![Value::Array(vec![]), Value::Nil, Value::Nil]),
                   "refuse names one member");
        // an older daemon's ACCEPTED (no `held`) is accepted
        let accepted = decode_message(
            &Value::Int(6),
            &Value::Array(vec![Value::Array(vec![Value::Int(3), Value::Int(1)]), Value::Int(2)]),
            &Limits::default());
        assert_eq!(accepted, Ok(Message::Accepted { ballot: (3, 1), view_id: 2, held: None }));
        let members = Value::Array(vec![Value::Int(2), Value::Int(1), Value::Int(1), Value::Int(1)]);
        assert_eq!(refusal(2, vec![Value::Nil, members, Value::Nil]),
                   "candidates not sorted and distinct");
    }
}
