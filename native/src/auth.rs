//! Datagram sealing and opening: AES-256-GCM keyed per sender session, byte for byte as
//! `protocols/wire/auth.py` (the reference). Layout of a sealed datagram, big-endian:
//!
//! ```text
//! version u8 | flags u8 (SEALED) | key id u16 | newest key id u16 | session 16 bytes
//! | counter u64 | sent ms u64 | AES-256-GCM(body) with its 16-byte tag
//! ```
//!
//! The 38-byte header is the associated data; the nonce is four zero bytes and the
//! counter; the subkey is HKDF-SHA256(group key, salt = session, info = "amcast/3 datagram").

#![forbid(unsafe_code)]

use std::collections::HashMap;

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce, Tag};
use hkdf::Hkdf;
use sha2::Sha256;

use crate::error::Refusal;
use crate::replay::{ReplayGuard, Session, SessionState};

pub const WIRE_VERSION: u8 = 3;
pub const FLAG_SEALED: u8 = 0x01;
pub const PREFIX_BYTES: usize = 2;
pub const SEAL_HEADER_BYTES: usize = 38;
pub const TAG_BYTES: usize = 16;
pub const SESSION_BYTES: usize = 16;
pub const HKDF_INFO: &[u8] = b"amcast/3 datagram";
/// Receive-side subkeys cached (one per peer session and key id).
const MAX_CIPHERS: usize = 1024;
/// How often (ms) the sending key is chosen again and the guard swept, as `seal` does.
const CHOOSE_EVERY_MS: i128 = 500;

/// The authenticated header of a sealed datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub key_id: u16,
    pub newest_key: u16,
    pub session: Session,
    pub counter: u64,
    pub sent_ms: u64,
}

impl Header {
    /// Parse the 38 header bytes (the caller checked the length).
    pub fn parse(data: &[u8]) -> Header {
        let mut session = [0u8; 16];
        session.copy_from_slice(&data[6..22]);
        Header {
            key_id: u16::from_be_bytes([data[2], data[3]]),
            newest_key: u16::from_be_bytes([data[4], data[5]]),
            session,
            counter: u64::from_be_bytes(data[22..30].try_into().expect("8 bytes")),
            sent_ms: u64::from_be_bytes(data[30..38].try_into().expect("8 bytes")),
        }
    }

    fn write(&self, out: &mut [u8]) {
        out[0] = WIRE_VERSION;
        out[1] = FLAG_SEALED;
        out[2..4].copy_from_slice(&self.key_id.to_be_bytes());
        out[4..6].copy_from_slice(&self.newest_key.to_be_bytes());
        out[6..22].copy_from_slice(&self.session);
        out[22..30].copy_from_slice(&self.counter.to_be_bytes());
        out[30..38].copy_from_slice(&self.sent_ms.to_be_bytes());
    }
}

/// The AES-256-GCM cipher of one (group key, session): HKDF-SHA256 as `auth.derive`.
pub fn derive(key: &[u8], session: &Session) -> Aes256Gcm {
    let mut subkey = [0u8; 32];
    Hkdf::<Sha256>::new(Some(session), key)
        .expand(HKDF_INFO, &mut subkey)
        .expect("32 bytes is a valid HKDF-SHA256 length");
    Aes256Gcm::new(&subkey.into())
}

fn nonce(counter: u64) -> Nonce<aes_gcm::aead::consts::U12> {
    let mut bytes = [0u8; 12];
    bytes[4..].copy_from_slice(&counter.to_be_bytes());
    bytes.into()
}

/// Seals outgoing bodies and opens incoming datagrams for one node.
pub struct Authenticator {
    keys: Option<Vec<(u16, Vec<u8>)>>,
    newest: u16,
    pub session: Session,
    counter: u64,
    send_ciphers: HashMap<u16, Aes256Gcm>,
    recv_ciphers: HashMap<(u16, Session), Aes256Gcm>,
    pub guard: ReplayGuard,
    pub send_key_id: u16,
    chosen_at_ms: i128,
    /// The session `open` last admitted (`None`: insecure, or nothing admitted yet).
    pub last_admitted: Option<Session>,
}

impl Authenticator {
    /// `keys`: `None` for an insecure node, else the ring's (id, key) pairs, ascending.
    pub fn new(keys: Option<Vec<(u16, Vec<u8>)>>, session: Session, window_ms: i64, max_sessions: usize) -> Self {
        let newest = keys.as_ref().and_then(|k| k.last()).map_or(0, |(id, _)| *id);
        Authenticator {
            keys,
            newest,
            session,
            counter: 0,
            send_ciphers: HashMap::new(),
            recv_ciphers: HashMap::new(),
            guard: ReplayGuard::new(window_ms, max_sessions),
            send_key_id: newest,
            chosen_at_ms: -(1i128 << 62),
            last_admitted: None,
        }
    }

    pub fn secure(&self) -> bool {
        self.keys.is_some()
    }

    pub fn counter(&self) -> u64 {
        self.counter
    }

    fn key(&self, key_id: u16) -> Option<&[u8]> {
        self.keys.as_ref()?.iter().find(|(id, _)| *id == key_id).map(|(_, k)| k.as_slice())
    }

    /// A reloaded key ring (rollover); `Err` for an insecure node.
    pub fn set_keys(&mut self, keys: Vec<(u16, Vec<u8>)>, wall_ms: i64) -> Result<(), &'static str> {
        if self.keys.is_none() {
            return Err("an insecure node cannot take keys without a restart");
        }
        self.newest = keys.last().map_or(0, |(id, _)| *id);
        self.keys = Some(keys);
        self.send_ciphers.clear();
        self.recv_ciphers.clear();
        self.choose_send_key(wall_ms);
        Ok(())
    }

    fn choose_send_key(&mut self, wall_ms: i64) {
        let Some(keys) = self.keys.as_ref() else { return };
        let mut bound = self.newest;
        if let Some(peers) = self.guard.newest_of_peers(wall_ms, &self.session) {
            if peers < bound {
                bound = peers;
            }
        }
        // the last id of the ring (in its order) that is <= bound, as `Keyring.newest_at_most`
        let chosen = keys.iter().rev().find(|(id, _)| *id <= bound).map(|(id, _)| *id);
        self.send_key_id = chosen.unwrap_or(keys[0].0);
        self.chosen_at_ms = wall_ms.into();
    }

    /// The sealed datagram's length for a body of `body_len` bytes.
    pub fn sealed_len(&self, body_len: usize) -> usize {
        if self.keys.is_some() {
            SEAL_HEADER_BYTES + body_len + TAG_BYTES
        } else {
            PREFIX_BYTES + body_len
        }
    }

    /// Seal `body` into `out` (exactly `sealed_len(body.len())` bytes long).
    pub fn seal_into(&mut self, body: &[u8], wall_ms: i64, out: &mut [u8]) -> Result<(), &'static str> {
        if self.keys.is_none() {
            out[0] = WIRE_VERSION;
            out[1] = 0;
            out[PREFIX_BYTES..].copy_from_slice(body);
            return Ok(());
        }
        let sent_ms = u64::try_from(wall_ms).map_err(|_| "a send time is not negative")?;
        if i128::from(wall_ms) - self.chosen_at_ms >= CHOOSE_EVERY_MS {
            self.choose_send_key(wall_ms);
            self.guard.maybe_sweep(wall_ms);
        }
        let key_id = self.send_key_id;
        if !self.send_ciphers.contains_key(&key_id) {
            let cipher = derive(self.key(key_id).ok_or("the sending key is not in the ring")?, &self.session);
            self.send_ciphers.insert(key_id, cipher);
        }
        let counter = self.counter;
        self.counter = counter.checked_add(1).ok_or("the session's counter is exhausted")?;
        let header = Header { key_id, newest_key: self.newest, session: self.session, counter, sent_ms };
        let (head, rest) = out.split_at_mut(SEAL_HEADER_BYTES);
        header.write(head);
        let (text, tag) = rest.split_at_mut(body.len());
        text.copy_from_slice(body);
        let cipher = &self.send_ciphers[&key_id];
        let computed = cipher
            .encrypt_in_place_detached(&nonce(counter), head, text)
            .map_err(|_| "the body is too long for AES-GCM")?;
        tag.copy_from_slice(&computed);
        Ok(())
    }

    /// Seal `body` (a new vector).
    pub fn seal(&mut self, body: &[u8], wall_ms: i64) -> Result<Vec<u8>, &'static str> {
        let mut out = vec![0u8; self.sealed_len(body.len())];
        self.seal_into(body, wall_ms, &mut out)?;
        Ok(out)
    }

    /// The checks of `unseal` before the tag, for a datagram that is not on the fast path.
    fn refuse_prefix(&self, data: &[u8]) -> Result<(), Refusal> {
        if data.len() < PREFIX_BYTES {
            return Err(Refusal::new("truncated", "shorter than the prefix"));
        }
        if data[0] != WIRE_VERSION {
            return Err(Refusal::new("bad_version", format!("version {}", data[0])));
        }
        let flags = data[1];
        if flags & !FLAG_SEALED != 0 {
            return Err(Refusal::new("bad_flags", format!("flags {flags:#x}")));
        }
        if self.keys.is_none() {
            if flags & FLAG_SEALED != 0 {
                return Err(Refusal::new("auth_unexpected", "sealed datagram, node is insecure"));
            }
            return Ok(());
        }
        if flags & FLAG_SEALED == 0 {
            return Err(Refusal::new("auth_missing", "unsealed datagram, node has a group key"));
        }
        if data.len() < SEAL_HEADER_BYTES + TAG_BYTES {
            return Err(Refusal::new("truncated", "shorter than the sealed header"));
        }
        Ok(())
    }

    /// Check the tag and decrypt into `out` (`data.len() - 54` bytes), no replay check.
    pub fn decrypt_into(&mut self, header: &Header, data: &[u8], out: &mut [u8]) -> Result<(), Refusal> {
        let slot = (header.key_id, header.session);
        let fresh = !self.recv_ciphers.contains_key(&slot);
        let derived;
        let cipher = if fresh {
            let key = self
                .key(header.key_id)
                .ok_or_else(|| Refusal::new("unknown_key", format!("key id {}", header.key_id)))?;
            derived = derive(key, &header.session);
            &derived
        } else {
            &self.recv_ciphers[&slot]
        };
        let tag_at = data.len() - TAG_BYTES;
        out.copy_from_slice(&data[SEAL_HEADER_BYTES..tag_at]);
        let tag = Tag::from_slice(&data[tag_at..]);
        if cipher
            .decrypt_in_place_detached(&nonce(header.counter), &data[..SEAL_HEADER_BYTES], out, tag)
            .is_err()
        {
            return Err(Refusal::new("auth_failed", "bad tag"));
        }
        if fresh {
            // cached only once authentic: forgeries cannot fill the cache
            let cipher = cipher.clone();
            if self.recv_ciphers.len() >= MAX_CIPHERS {
                self.recv_ciphers.clear();
            }
            self.recv_ciphers.insert(slot, cipher);
        }
        Ok(())
    }

    /// Where the body of `data` lies and, sealed, its header: the refusals of `open`
    /// before decryption (prefix, freshness, replay window, own session).
    pub fn open_check(&self, data: &[u8], wall_ms: i64) -> Result<Option<Header>, Refusal> {
        if self.keys.is_none()
            || data.len() < SEAL_HEADER_BYTES + TAG_BYTES
            || data[0] != WIRE_VERSION
            || data[1] != FLAG_SEALED
        {
            // insecure, or a refusal with its reason (a keyed node refuses all of these)
            self.refuse_prefix(data)?;
            return Ok(None);
        }
        let header = Header::parse(data);
        self.guard.check(&header.session, header.counter, header.sent_ms, wall_ms)?;
        if header.session == self.session {
            // a copy of our own datagram: a replay or a reflection
            return Err(Refusal::new("replayed", "own session"));
        }
        Ok(Some(header))
    }

    /// The body length of a datagram that passed `open_check`.
    pub fn body_len(header: Option<&Header>, data_len: usize) -> usize {
        match header {
            Some(_) => data_len - SEAL_HEADER_BYTES - TAG_BYTES,
            None => data_len - PREFIX_BYTES,
        }
    }

    /// Decrypt into `out` and admit a datagram that passed `open_check`.
    pub fn open_finish(&mut self, header: Option<&Header>, data: &[u8], wall_ms: i64, out: &mut [u8]) -> Result<(), Refusal> {
        let Some(header) = header else {
            out.copy_from_slice(&data[PREFIX_BYTES..]);
            self.last_admitted = None;
            return Ok(());
        };
        self.decrypt_into(header, data, out)?;
        self.guard.admit(&header.session, header.counter, header.sent_ms, wall_ms, header.key_id, header.newest_key);
        self.last_admitted = Some(header.session);
        Ok(())
    }

    /// The body of an authentic, fresh, first-seen datagram; the refusal otherwise.
    pub fn open(&mut self, data: &[u8], wall_ms: i64) -> Result<Vec<u8>, Refusal> {
        let header = self.open_check(data, wall_ms)?;
        let mut out = vec![0u8; Self::body_len(header.as_ref(), data.len())];
        self.open_finish(header.as_ref(), data, wall_ms, &mut out)?;
        Ok(out)
    }

    /// Check the tag and decrypt without the replay check (`auth.Authenticator.unseal`,
    /// the simulator's decode-once): the header (`None`: insecure) and the body.
    pub fn unseal(&mut self, data: &[u8]) -> Result<(Option<Header>, Vec<u8>), Refusal> {
        if self.keys.is_none()
            || data.len() < SEAL_HEADER_BYTES + TAG_BYTES
            || data[0] != WIRE_VERSION
            || data[1] != FLAG_SEALED
        {
            // insecure, or a refusal with its reason (a keyed node refuses all of these)
            self.refuse_prefix(data)?;
            return Ok((None, data[PREFIX_BYTES..].to_vec()));
        }
        let header = Header::parse(data);
        let mut out = vec![0u8; data.len() - SEAL_HEADER_BYTES - TAG_BYTES];
        self.decrypt_into(&header, data, &mut out)?;
        Ok((Some(header), out))
    }

    /// The replay check and record of an authentic datagram that `unseal` opened
    /// (`auth.Authenticator.admit`): whether this admission created its session's state.
    pub fn admit(&mut self, header: &Header, wall_ms: i64) -> Result<bool, Refusal> {
        self.guard.check(&header.session, header.counter, header.sent_ms, wall_ms)?;
        if header.session == self.session {
            return Err(Refusal::new("replayed", "own session"));
        }
        let created = self.guard.get(&header.session).is_none();
        self.guard.admit(&header.session, header.counter, header.sent_ms, wall_ms, header.key_id,
                         header.newest_key);
        self.last_admitted = Some(header.session);
        Ok(created)
    }

    /// The replay state of the session `open` last admitted.
    pub fn last_admitted_state(&self) -> Option<&SessionState> {
        self.guard.get(self.last_admitted.as_ref()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Authenticator, Authenticator) {
        let keys = Some(vec![(1u16, vec![9u8; 32])]);
        (Authenticator::new(keys.clone(), [1; 16], 30_000, 16), Authenticator::new(keys, [2; 16], 30_000, 16))
    }

    #[test]
    fn round_trip_and_replay() {
        let (mut a, mut b) = pair();
        let sealed = a.seal(b"hello", 1_000_000).unwrap();
        assert_eq!(sealed.len(), 38 + 5 + 16);
        assert_eq!(b.open(&sealed, 1_000_010).unwrap(), b"hello");
        assert_eq!(b.open(&sealed, 1_000_010).unwrap_err().reason, "replayed");
        assert_eq!(a.open(&sealed, 1_000_010).unwrap_err().reason, "replayed");
    }

    #[test]
    fn forgeries_and_truncation() {
        let (mut a, mut b) = pair();
        let mut sealed = a.seal(b"hello", 1_000_000).unwrap();
        let last = sealed.len() - 1;
        sealed[last] ^= 1;
        assert_eq!(b.open(&sealed, 1_000_000).unwrap_err().reason, "auth_failed");
        assert_eq!(b.open(&sealed[..20], 1_000_000).unwrap_err().reason, "truncated");
        assert_eq!(b.open(&[3, 0, 1], 1_000_000).unwrap_err().reason, "auth_missing");
        assert_eq!(b.open(&[4, 1], 1_000_000).unwrap_err().reason, "bad_version");
        assert_eq!(b.open(&[3, 3], 1_000_000).unwrap_err().reason, "bad_flags");
    }

    #[test]
    fn unseal_then_admit_as_open() {
        let (mut a, mut b) = pair();
        let sealed = a.seal(b"hello", 1_000_000).unwrap();
        let (header, body) = b.unseal(&sealed).unwrap();
        assert_eq!(body, b"hello");
        let header = header.unwrap();
        assert!(b.admit(&header, 1_000_010).unwrap(), "the session's state is created");
        assert_eq!(b.admit(&header, 1_000_010).unwrap_err().reason, "replayed");
        let next = a.seal(b"again", 1_000_020).unwrap();
        let (next, _) = b.unseal(&next).unwrap();
        assert!(!b.admit(&next.unwrap(), 1_000_020).unwrap(), "the state is kept");
        assert_eq!(a.admit(&header, 1_000_010).unwrap_err().reason, "replayed"); // own
        let mut forged = a.seal(b"x", 1_000_030).unwrap();
        forged[40] ^= 1;
        assert_eq!(b.unseal(&forged).unwrap_err().reason, "auth_failed");
    }

    #[test]
    fn insecure() {
        let mut a = Authenticator::new(None, [1; 16], 30_000, 16);
        let sealed = a.seal(b"x", 5).unwrap();
        assert_eq!(sealed, vec![3, 0, b'x']);
        assert_eq!(a.open(&sealed, 5).unwrap(), b"x");
        assert_eq!(a.open(&[3, 1], 5).unwrap_err().reason, "auth_unexpected");
    }
}
