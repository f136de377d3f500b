//! The delivery rules of the ToTo family (`protocols/ordering/rules.py`): pure functions
//! of one activation's votes, answering with a mask of candidates to deliver (`None`:
//! the rule does not fire). Counts are compared with phi as Python compares an int with
//! a float (exactly: the counts are small).

#![forbid(unsafe_code)]

use super::votes::Votes;
use super::{Bits, Fired, Mask};

fn gt(count: u32, u: usize, phi: f64) -> bool {
    (count as f64 + u as f64) > phi
}

fn nvt(voters: &[Mask], i: usize) -> u32 {
    voters[i].count_ones()
}

/// S_G of ToTo and S-ToTo: candidates that no candidate can beat in any extension.
pub fn toto_sources(v: &Votes, phi: f64) -> Mask {
    let u = v.unseen();
    if u as f64 > phi {
        return 0;
    }
    let voters = &v.voters;
    let mut threats: Mask = 0;
    for j in Bits(v.candidates) {
        if gt(nvt(voters, j), u, phi) {
            threats |= 1 << j;
        }
    }
    let mut sources: Mask = 0;
    'candidates: for i in Bits(v.candidates) {
        let not_i = !voters[i];
        for j in Bits(threats & !(1 << i)) {
            if gt((voters[j] & not_i).count_ones(), u, phi) {
                continue 'candidates;
            }
        }
        sources |= 1 << i;
    }
    sources
}

/// S_G of G-ToTo: ToTo sources plus every candidate with more than phi votes.
pub fn gtoto_sources(v: &Votes, phi: f64) -> Mask {
    toto_sources(v, phi) | strong(v, v.candidates, phi)
}

/// The candidates of `mask` with more than phi votes.
fn strong(v: &Votes, mask: Mask, phi: f64) -> Mask {
    let mut out = 0;
    for s in Bits(mask) {
        if gt(nvt(&v.voters, s), 0, phi) {
            out |= 1 << s;
        }
    }
    out
}

/// Future(j, i) = {1} for some j in `winners`.
fn lost_to(voters: &[Mask], i: usize, winners: Mask, phi: f64) -> bool {
    let not_i = !voters[i];
    Bits(winners).any(|j| gt((voters[j] & not_i).count_ones(), 0, phi))
}

/// S-ToTo early delivery rule (section 3): the stable source set.
pub fn stoto_early(v: &Votes, phi: f64) -> Option<Mask> {
    if strong(v, v.candidates, phi) == 0 {
        return None;
    }
    let sources = toto_sources(v, phi);
    let strong_sources = strong(v, sources, phi);
    if strong_sources == 0 {
        return None;
    }
    for m in Bits(v.candidates & !sources) {
        if !lost_to(&v.voters, m, strong_sources, phi) {
            return None;
        }
    }
    Some(sources)
}

/// Original ToTo early delivery rule (section 3): S-ToTo plus Ntail(s) >= n - phi.
pub fn toto_early(v: &Votes, phi: f64, mut ntail_of: impl FnMut(usize) -> usize) -> Option<Mask> {
    let sources = stoto_early(v, phi)?;
    let floor = v.n as f64 - phi;
    if Bits(sources).all(|s| ntail_of(s) as f64 >= floor) {
        Some(sources)
    } else {
        None
    }
}

/// G-ToTo early delivery rule (section 4): the stable source set.
pub fn gtoto_early(v: &Votes, phi: f64) -> Option<Mask> {
    let u = v.unseen();
    if ((v.n - u) as f64) < v.n as f64 - phi {
        return None;
    }
    let strong = strong(v, v.candidates, phi);
    if strong == 0 {
        return None;
    }
    let sources = gtoto_sources(v, phi);
    for i in Bits(v.candidates & !sources) {
        if gt(nvt(&v.voters, i), u, phi) || !lost_to(&v.voters, i, strong, phi) {
            return None;
        }
    }
    Some(sources)
}

/// Default rule (sections 2 and 3): once every processor has voted, deliver M_G.
pub fn default_rule(v: &Votes) -> Option<Mask> {
    if v.all_voted() {
        Some(v.candidates)
    } else {
        None
    }
}

/// One GL-ToTo evaluation (`rules.gltoto`): `(Early, S_G)` if `gtoto_early` fires, else
/// `(Default, M_G)` if `default_rule` does, else `(GlPrefix, newly)`, the newly
/// deliverable sources of the stable prefix not in `delivered` (possibly 0).
pub fn gltoto(v: &Votes, phi: f64, delivered: Mask) -> (Fired, Mask) {
    let candidates = v.candidates;
    let voters = &v.voters;
    let n = v.n;
    let u = v.unseen();
    let strong = strong(v, candidates, phi);
    let stable_floor = (n - u) as f64 >= n as f64 - phi;
    let mut sources: Option<Mask> = None;
    if stable_floor && strong != 0 {
        let s = toto_sources(v, phi) | strong;
        sources = Some(s);
        let fires = Bits(candidates & !s)
            .all(|i| !gt(nvt(voters, i), u, phi) && lost_to(voters, i, strong, phi));
        if fires {
            return (Fired::Early, s);
        }
    }
    if v.all_voted() {
        return (Fired::Default, candidates);
    }
    // the paper's loop runs over the processors below the first one that has not voted
    let missing = !v.voted & super::full(n);
    let below = if missing != 0 { (missing & missing.wrapping_neg()) - 1 } else { super::full(n) };
    let mut newly: Mask = 0;
    for i in Bits(candidates & below & !delivered) {
        let bit: Mask = 1 << i;
        let s = *sources.get_or_insert_with(|| toto_sources(v, phi) | strong);
        if s & bit != 0 {
            if strong & bit != 0 || stable_floor {
                newly |= bit;
                continue;
            }
            break;
        }
        if !gt(nvt(voters, i), u, phi) && lost_to(voters, i, strong, phi) {
            continue; // m_i will never become a source in this activation
        }
        break;
    }
    (Fired::GlPrefix, newly)
}
