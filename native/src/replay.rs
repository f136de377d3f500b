//! The replay guard: per-session highest counter and a 4096-bit window, a freshness
//! bound on send times, a bounded session table with least-recently-heard eviction and
//! a clock-offset sample per session. Decisions and reasons are those of
//! `protocols/wire/replay.py`, which stays the reference.

#![forbid(unsafe_code)]

use std::collections::HashMap;

use crate::error::Refusal;

/// Counters below a session's highest that the bitmap remembers.
pub const WINDOW: u64 = 4096;
const WORDS: usize = (WINDOW / 64) as usize;
/// A session heard within this many milliseconds counts for the key rollover.
pub const ADVERT_HORIZON_MS: i128 = 3000;
/// A session's clock offset is the largest sample of this period and the one before.
pub const OFFSET_PERIOD_MS: i128 = 1000;

/// A session identifier: 16 random bytes drawn by its sender at start.
pub type Session = [u8; 16];

/// The window of admitted counters: bit `i` is counter `highest - i`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bitmap([u64; WORDS]);

impl Bitmap {
    fn one() -> Self {
        let mut words = [0u64; WORDS];
        words[0] = 1;
        Bitmap(words)
    }

    fn get(&self, bit: u64) -> bool {
        (self.0[(bit / 64) as usize] >> (bit % 64)) & 1 == 1
    }

    fn set(&mut self, bit: u64) {
        self.0[(bit / 64) as usize] |= 1 << (bit % 64);
    }

    /// Shift towards higher bits by `shift` (< `WINDOW`), dropping what leaves the window.
    fn shift_up(&mut self, shift: u64) {
        let word_shift = (shift / 64) as usize;
        let bit_shift = (shift % 64) as u32;
        for i in (0..WORDS).rev() {
            let mut value = 0u64;
            if i >= word_shift {
                let src = i - word_shift;
                value = self.0[src] << bit_shift;
                if bit_shift > 0 && src >= 1 {
                    value |= self.0[src - 1] >> (64 - bit_shift);
                }
            }
            self.0[i] = value;
        }
    }

    /// The bitmap as 512 little-endian bytes (Python: `int.to_bytes(512, "little")`).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.0.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}

/// What the guard remembers of one session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionState {
    pub highest: u64,
    pub bitmap: Bitmap,
    pub last_sent_ms: i128,
    pub last_heard_ms: i128,
    pub key_id: u16,
    pub newest_key: u16,
    /// The largest `sent - received` since `offset_since_ms`.
    pub offset_ms: i128,
    /// The same of the period before.
    pub offset_prev_ms: i128,
    pub offset_since_ms: i128,
    /// Insertion order: eviction breaks ties of `last_heard_ms` as Python's dict order does.
    seq: u64,
}

impl SessionState {
    /// Its sender's clock ahead of this one, in ms (negative: behind).
    pub fn clock_offset_ms(&self) -> i128 {
        self.offset_ms.max(self.offset_prev_ms)
    }
}

/// Per-session anti-replay windows plus a freshness bound on send times.
#[derive(Debug)]
pub struct ReplayGuard {
    pub window_ms: i128,
    pub max_sessions: usize,
    pub evicted: u64,
    sessions: HashMap<Session, SessionState>,
    last_sweep_ms: i128,
    next_seq: u64,
}

impl ReplayGuard {
    /// `window_ms` is Python's `int(window_s * 1000)`.
    pub fn new(window_ms: i64, max_sessions: usize) -> Self {
        ReplayGuard {
            window_ms: window_ms.into(),
            max_sessions,
            evicted: 0,
            sessions: HashMap::new(),
            last_sweep_ms: 0,
            next_seq: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Every session with its state, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&Session, &SessionState)> {
        self.sessions.iter()
    }

    pub fn get(&self, session: &Session) -> Option<&SessionState> {
        self.sessions.get(session)
    }

    /// Refuse a datagram that is not fresh or was seen before; cheap, runs before the tag
    /// is checked (the caller admits only after it).
    pub fn check(&self, session: &Session, counter: u64, sent_ms: u64, wall_ms: i64) -> Result<(), Refusal> {
        let sent = i128::from(sent_ms);
        let wall = i128::from(wall_ms);
        if sent < wall - self.window_ms {
            return Err(Refusal::new("stale", format!("sent {} ms ago", wall - sent)));
        }
        if sent > wall + self.window_ms {
            return Err(Refusal::new("future", format!("sent {} ms ahead of this clock", sent - wall)));
        }
        let Some(state) = self.sessions.get(session) else {
            return Ok(());
        };
        let behind = i128::from(state.highest) - i128::from(counter);
        if behind >= i128::from(WINDOW) {
            return Err(Refusal::new("too_old", format!("counter {behind} behind the session's newest")));
        }
        if behind >= 0 && state.bitmap.get(behind as u64) {
            return Err(Refusal::new("replayed", format!("counter {counter} seen before")));
        }
        Ok(())
    }

    /// Record an authentic datagram that passed `check`.
    pub fn admit(&mut self, session: &Session, counter: u64, sent_ms: u64, wall_ms: i64, key_id: u16,
                 newest_key: u16) -> &SessionState {
        let sent = i128::from(sent_ms);
        let wall = i128::from(wall_ms);
        let offset = sent - wall;
        if !self.sessions.contains_key(session) {
            if self.sessions.len() >= self.max_sessions {
                self.sweep(wall_ms, true);
            }
            let seq = self.next_seq;
            self.next_seq += 1;
            let state = SessionState {
                highest: counter,
                bitmap: Bitmap::one(),
                last_sent_ms: sent,
                last_heard_ms: wall,
                key_id,
                newest_key,
                offset_ms: offset,
                offset_prev_ms: offset,
                offset_since_ms: wall,
                seq,
            };
            return self.sessions.entry(*session).or_insert(state);
        }
        let state = self.sessions.get_mut(session).expect("present");
        let behind = i128::from(state.highest) - i128::from(counter);
        if behind < 0 {
            let shift = -behind;
            if shift < i128::from(WINDOW) {
                state.bitmap.shift_up(shift as u64);
                state.bitmap.set(0);
            } else {
                state.bitmap = Bitmap::one();
            }
            state.highest = counter;
        } else {
            state.bitmap.set(behind as u64);
        }
        if sent > state.last_sent_ms {
            state.last_sent_ms = sent;
        }
        state.last_heard_ms = wall;
        if wall - state.offset_since_ms >= OFFSET_PERIOD_MS {
            // the period before counts only if it was the last one
            state.offset_prev_ms = if wall - state.offset_since_ms < 2 * OFFSET_PERIOD_MS {
                state.offset_ms
            } else {
                offset
            };
            state.offset_ms = offset;
            state.offset_since_ms = wall;
        } else if offset > state.offset_ms {
            state.offset_ms = offset;
        }
        state.key_id = key_id;
        state.newest_key = newest_key;
        state
    }

    /// Forget sessions that can no longer admit anything; with `force` and a full table,
    /// also the least recently heard one (counted in `evicted`).
    pub fn sweep(&mut self, wall_ms: i64, force: bool) {
        let wall = i128::from(wall_ms);
        let horizon = wall - self.window_ms;
        self.sessions.retain(|_, st| st.last_sent_ms >= horizon);
        self.last_sweep_ms = wall;
        if force && !self.sessions.is_empty() && self.sessions.len() >= self.max_sessions {
            let oldest = *self
                .sessions
                .iter()
                .min_by_key(|(_, st)| (st.last_heard_ms, st.seq))
                .map(|(s, _)| s)
                .expect("not empty");
            self.sessions.remove(&oldest);
            self.evicted += 1;
        }
    }

    pub fn maybe_sweep(&mut self, wall_ms: i64) {
        if i128::from(wall_ms) - self.last_sweep_ms >= 1000 {
            self.sweep(wall_ms, false);
        }
    }

    /// The lowest newest-key id advertised by sessions heard lately (`own` excluded).
    pub fn newest_of_peers(&self, wall_ms: i64, own: &Session) -> Option<u16> {
        let wall = i128::from(wall_ms);
        self.sessions
            .iter()
            .filter(|(s, st)| *s != own && wall - st.last_heard_ms <= ADVERT_HORIZON_MS)
            .map(|(_, st)| st.newest_key)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Session = [7; 16];

    #[test]
    fn admits_once_and_refuses_replays() {
        let mut guard = ReplayGuard::new(30_000, 4);
        guard.check(&S, 5, 1000, 1000).unwrap();
        guard.admit(&S, 5, 1000, 1000, 1, 1);
        assert_eq!(guard.check(&S, 5, 1000, 1000).unwrap_err().reason, "replayed");
        guard.check(&S, 4, 1000, 1000).unwrap();
        guard.admit(&S, 5000, 1000, 1000, 1, 1);
        assert_eq!(guard.check(&S, 5000 - 4096, 1000, 1000).unwrap_err().reason, "too_old");
        assert_eq!(guard.check(&S, 5, 1000, 1000).unwrap_err().reason, "too_old");
        guard.check(&S, 5000 - 4095, 1000, 1000).unwrap();
    }

    #[test]
    fn freshness() {
        let guard = ReplayGuard::new(30_000, 4);
        assert_eq!(guard.check(&S, 0, 0, 30_001).unwrap_err().reason, "stale");
        assert_eq!(guard.check(&S, 0, 60_002, 30_001).unwrap_err().reason, "future");
        guard.check(&S, 0, 1, 30_001).unwrap();
    }

    #[test]
    fn shift_keeps_bits() {
        let mut bitmap = Bitmap::one();
        bitmap.shift_up(70);
        assert!(bitmap.get(70) && !bitmap.get(0));
        bitmap.shift_up(4025);
        assert!(bitmap.get(4095));
        bitmap.shift_up(1);
        assert_eq!(bitmap, Bitmap([0; WORDS]));
    }

    #[test]
    fn evicts_least_recently_heard() {
        let mut guard = ReplayGuard::new(30_000, 2);
        guard.admit(&[1; 16], 0, 100, 100, 1, 1);
        guard.admit(&[2; 16], 0, 100, 100, 1, 1);
        guard.admit(&[3; 16], 0, 100, 100, 1, 1);
        assert_eq!(guard.evicted, 1);
        assert!(guard.get(&[1; 16]).is_none());
    }
}
