//! The Python bindings: `amcast_native.Authenticator`, `amcast_native.ReplayGuard` and
//! `amcast_native.Decoder`, with the methods and refusals
//! (`amcast.protocols.errors.DecodeError`, same reason and detail) of
//! `protocols/wire/auth.py`, `protocols/wire/replay.py` and `protocols/wire/codec.py`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::buffer::PyBuffer;
use pyo3::types::{PyBytes, PyString, PyTuple, PyType};

use crate::auth::{Authenticator, SESSION_BYTES};
use crate::datagram::{self, Decoded, Item, Limits};
use crate::membership::{self, Message};
use crate::error::Refusal;
use crate::replay::{ReplayGuard, Session, SessionState};

static DECODE_ERROR: GILOnceCell<Py<PyType>> = GILOnceCell::new();

/// The refusal as the Python core's `DecodeError(reason, detail)`.
fn decode_error(py: Python<'_>, refusal: Refusal) -> PyErr {
    match DECODE_ERROR.import(py, "amcast.protocols.errors", "DecodeError") {
        Ok(cls) => match cls.call1((refusal.reason, refusal.detail)) {
            Ok(value) => PyErr::from_value(value),
            Err(err) => err,
        },
        Err(err) => err,
    }
}

fn session_of(session: &[u8]) -> PyResult<Session> {
    session
        .try_into()
        .map_err(|_| PyValueError::new_err(format!("a session is {SESSION_BYTES} bytes")))
}

fn window_ms(window_s: f64) -> i64 {
    // Python's int(window_s * 1000): truncated towards zero
    (window_s * 1000.0) as i64
}

/// `(highest, bitmap as 512 little-endian bytes, last_sent_ms, last_heard_ms, key_id,
/// newest_key, offset_ms, offset_prev_ms, offset_since_ms)`.
type StateTuple = (u64, Vec<u8>, i128, i128, u16, u16, i128, i128, i128);

fn state_tuple(state: &SessionState) -> StateTuple {
    (
        state.highest,
        state.bitmap.to_le_bytes(),
        state.last_sent_ms,
        state.last_heard_ms,
        state.key_id,
        state.newest_key,
        state.offset_ms,
        state.offset_prev_ms,
        state.offset_since_ms,
    )
}

/// Seals outgoing bodies and opens incoming datagrams for one node (`auth.Authenticator`).
#[pyclass(name = "Authenticator", module = "amcast_native")]
struct PyAuthenticator {
    inner: Authenticator,
}

#[pymethods]
impl PyAuthenticator {
    /// `keys`: the ring's `(id, key)` pairs ascending (`Keyring.keys`), `None`: insecure.
    #[new]
    #[pyo3(signature = (keys, session, *, replay_window_s = 30.0, max_sessions = 1024))]
    fn new(keys: Option<Vec<(u16, Vec<u8>)>>, session: &[u8], replay_window_s: f64,
           max_sessions: usize) -> PyResult<Self> {
        if keys.as_ref().is_some_and(|k| k.is_empty()) {
            return Err(PyValueError::new_err("the key ring is empty"));
        }
        let session = session_of(session)?;
        Ok(PyAuthenticator {
            inner: Authenticator::new(keys, session, window_ms(replay_window_s), max_sessions),
        })
    }

    #[getter]
    fn secure(&self) -> bool {
        self.inner.secure()
    }

    #[getter]
    fn session<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.session)
    }

    #[getter]
    fn send_key_id(&self) -> u16 {
        self.inner.send_key_id
    }

    /// Datagrams sealed so far (the next nonce).
    #[getter]
    fn counter(&self) -> u64 {
        self.inner.counter()
    }

    /// Sessions the replay guard evicted to stay within `max_sessions`.
    #[getter]
    fn evicted(&self) -> u64 {
        self.inner.guard.evicted
    }

    /// Sessions the replay guard holds.
    #[getter]
    fn sessions(&self) -> usize {
        self.inner.guard.len()
    }

    /// The session `open` last admitted (`None`: insecure, or none yet).
    #[getter]
    fn last_admitted<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.inner.last_admitted.as_ref().map(|s| PyBytes::new(py, s))
    }

    /// The replay guard's state of `session` (see `ReplayGuard.state`).
    fn session_state(&self, session: &[u8]) -> PyResult<Option<StateTuple>> {
        Ok(self.inner.guard.get(&session_of(session)?).map(state_tuple))
    }

    /// A reloaded key ring (rollover).
    fn set_keys(&mut self, keys: Vec<(u16, Vec<u8>)>, wall_ms: i64) -> PyResult<()> {
        if keys.is_empty() {
            return Err(PyValueError::new_err("the key ring is empty"));
        }
        self.inner.set_keys(keys, wall_ms).map_err(PyValueError::new_err)
    }

    /// The sealed datagram of `body`, sent at `wall_ms`.
    fn seal<'py>(&mut self, py: Python<'py>, body: &[u8], wall_ms: i64) -> PyResult<Bound<'py, PyBytes>> {
        let inner = &mut self.inner;
        PyBytes::new_with(py, inner.sealed_len(body.len()), |out| {
            inner.seal_into(body, wall_ms, out).map_err(PyValueError::new_err)
        })
    }

    /// The body of an authentic, fresh, first-seen datagram; `DecodeError` otherwise.
    fn open<'py>(&mut self, py: Python<'py>, data: &[u8], wall_ms: i64) -> PyResult<Bound<'py, PyBytes>> {
        let inner = &mut self.inner;
        let header = inner.open_check(data, wall_ms).map_err(|r| decode_error(py, r))?;
        let len = Authenticator::body_len(header.as_ref(), data.len());
        PyBytes::new_with(py, len, |out| {
            inner.open_finish(header.as_ref(), data, wall_ms, out).map_err(|r| decode_error(py, r))
        })
    }

    /// `open`, and the session it admitted (`None`: insecure) with whether that
    /// admission created the session's replay state (the Node's call: it binds a
    /// session to its sender, `native.NativeSealer`).
    #[allow(clippy::type_complexity)]
    fn open_session<'py>(&mut self, py: Python<'py>, data: &[u8], wall_ms: i64)
        -> PyResult<(Bound<'py, PyBytes>, Option<Bound<'py, PyBytes>>, bool)> {
        let inner = &mut self.inner;
        let header = inner.open_check(data, wall_ms).map_err(|r| decode_error(py, r))?;
        let created = header.as_ref().is_some_and(|h| inner.guard.get(&h.session).is_none());
        let len = Authenticator::body_len(header.as_ref(), data.len());
        let body = PyBytes::new_with(py, len, |out| {
            inner.open_finish(header.as_ref(), data, wall_ms, out).map_err(|r| decode_error(py, r))
        })?;
        Ok((body, header.map(|h| PyBytes::new(py, &h.session)), created))
    }

    /// Check the tag and decrypt without the replay check (`auth.Authenticator.unseal`):
    /// the header as `(key_id, newest_key, session, counter, sent_ms)` (`None`:
    /// insecure) and the body.
    #[allow(clippy::type_complexity)]
    fn unseal<'py>(&mut self, py: Python<'py>, data: &[u8])
        -> PyResult<(Option<(u16, u16, Bound<'py, PyBytes>, u64, u64)>, Bound<'py, PyBytes>)> {
        let (header, body) = self.inner.unseal(data).map_err(|r| decode_error(py, r))?;
        let header = header.map(|h| (h.key_id, h.newest_key, PyBytes::new(py, &h.session),
                                     h.counter, h.sent_ms));
        Ok((header, PyBytes::new(py, &body)))
    }

    /// The replay check and record of a datagram `unseal` opened
    /// (`auth.Authenticator.admit`): whether it created its session's state.
    #[allow(clippy::too_many_arguments)]
    fn admit(&mut self, py: Python<'_>, key_id: u16, newest_key: u16, session: &[u8], counter: u64,
             sent_ms: u64, wall_ms: i64) -> PyResult<bool> {
        let header = crate::auth::Header { key_id, newest_key, session: session_of(session)?, counter,
                                           sent_ms };
        self.inner.admit(&header, wall_ms).map_err(|r| decode_error(py, r))
    }

    /// Every session of the replay guard with its state (see `ReplayGuard.state`).
    fn session_states<'py>(&self, py: Python<'py>) -> Vec<(Bound<'py, PyBytes>, StateTuple)> {
        self.inner.guard.iter().map(|(s, st)| (PyBytes::new(py, s), state_tuple(st))).collect()
    }
}

/// Per-session anti-replay windows plus a freshness bound (`replay.ReplayGuard`).
#[pyclass(name = "ReplayGuard", module = "amcast_native")]
struct PyReplayGuard {
    inner: ReplayGuard,
}

#[pymethods]
impl PyReplayGuard {
    #[new]
    fn new(window_s: f64, max_sessions: usize) -> Self {
        PyReplayGuard { inner: ReplayGuard::new(window_ms(window_s), max_sessions) }
    }

    #[getter]
    fn window_ms(&self) -> i128 {
        self.inner.window_ms
    }

    #[getter]
    fn evicted(&self) -> u64 {
        self.inner.evicted
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// `DecodeError` if the datagram is not fresh or was seen before.
    fn check(&self, py: Python<'_>, session: &[u8], counter: u64, sent_ms: u64, wall_ms: i64) -> PyResult<()> {
        self.inner
            .check(&session_of(session)?, counter, sent_ms, wall_ms)
            .map_err(|r| decode_error(py, r))
    }

    /// Record an authentic datagram that passed `check` (Python's `admit` returns the
    /// session's state: read it here with `state`, which builds the tuple only when asked).
    fn admit(&mut self, session: &[u8], counter: u64, sent_ms: u64, wall_ms: i64, key_id: u16,
             newest_key: u16) -> PyResult<()> {
        let session = session_of(session)?;
        self.inner.admit(&session, counter, sent_ms, wall_ms, key_id, newest_key);
        Ok(())
    }

    #[pyo3(signature = (wall_ms, force = false))]
    fn sweep(&mut self, wall_ms: i64, force: bool) {
        self.inner.sweep(wall_ms, force);
    }

    fn maybe_sweep(&mut self, wall_ms: i64) {
        self.inner.maybe_sweep(wall_ms);
    }

    fn newest_of_peers(&self, wall_ms: i64, own: &[u8]) -> PyResult<Option<u16>> {
        Ok(self.inner.newest_of_peers(wall_ms, &session_of(own)?))
    }

    /// `(highest, bitmap as 512 little-endian bytes, last_sent_ms, last_heard_ms, key_id,
    /// newest_key, offset_ms, offset_prev_ms, offset_since_ms)` of `session`, or `None`.
    fn state(&self, session: &[u8]) -> PyResult<Option<StateTuple>> {
        Ok(self.inner.get(&session_of(session)?).map(state_tuple))
    }
}

/// `object.__new__` and the slot descriptors' `__set__` of `Vertex` and `Datagram`, in
/// field order: the objects the constructors build, stored without their `__init__`
/// (`codec._new_vertex`, `codec._new_datagram`).
/// `WireLimits`' `(max_datagram_bytes, max_array_len, max_members, max_nack_ranges,
/// max_vertices, max_items, max_message_size, max_held_report)`.
type LimitArgs = (usize, usize, usize, usize, usize, usize, u64, usize);

/// `slots` as Python passes it: `(object.__new__, Vertex setters, Datagram setters)`.
type SlotArgs = (Py<PyAny>, Vec<Py<PyAny>>, Vec<Py<PyAny>>);

struct Slots {
    new: Py<PyAny>,
    vertex: Vec<Py<PyAny>>,
    datagram: Vec<Py<PyAny>>,
}

/// The datagram decoder of one `WireLimits` (`codec.decode_body`): called with an
/// authentic body, it returns the `Datagram` the Python core returns, or raises its
/// `DecodeError`; a body of a kind it does not know goes to `fallback(body)` (the
/// Python decoder).
#[pyclass(name = "Decoder", module = "amcast_native", frozen)]
struct PyDecoder {
    limits: Limits,
    kinds: Vec<Py<PyAny>>,
    services: Vec<Py<PyAny>>,
    vertex: Py<PyAny>,
    datagram: Py<PyAny>,
    fragment: Py<PyAny>,
    fallback: Py<PyAny>,
    slots: Option<Slots>,
    /// The classes of `membership` (see `MEMBERSHIP_CLASSES`), `None`: MEMBERSHIP
    /// datagrams go to `fallback`.
    membership: Option<Vec<Py<PyAny>>>,
}

/// The order of the membership classes the decoder is given.
const MEMBERSHIP_CLASSES: [&str; 16] = [
    "Ballot", "Member", "ViewRecord", "Proposal", "Settings", "HeldVertex", "Availability",
    "Join", "Prepare", "Promise", "Reject", "Accept", "Accepted", "Install", "Refuse",
    "MembershipDatagram",
];
const BALLOT: usize = 0;
const MEMBER: usize = 1;
const VIEW_RECORD: usize = 2;
const PROPOSAL: usize = 3;
const SETTINGS: usize = 4;
const HELD_VERTEX: usize = 5;
const AVAILABILITY: usize = 6;
const JOIN: usize = 7;
const PREPARE: usize = 8;
const PROMISE: usize = 9;
const REJECT: usize = 10;
const ACCEPT: usize = 11;
const ACCEPTED: usize = 12;
const INSTALL: usize = 13;
const REFUSE: usize = 14;
const MEMBERSHIP_DATAGRAM: usize = 15;

type Obj<'py> = Bound<'py, PyAny>;

fn int<'py>(py: Python<'py>, value: i128) -> PyResult<Obj<'py>> {
    Ok(u64_of(value).into_pyobject(py)?.into_any())
}

fn text<'py>(py: Python<'py>, ascii: &[u8]) -> Obj<'py> {
    // membership::read_text admits ASCII only
    PyString::new(py, &String::from_utf8_lossy(ascii)).into_any()
}

fn pairs<'py>(py: Python<'py>, pairs: &[(i128, i128)]) -> PyResult<Obj<'py>> {
    Ok(PyTuple::new(py, pairs.iter().map(|&(a, b)| (u64_of(a), u64_of(b))))?.into_any())
}

fn none(py: Python<'_>) -> Obj<'_> {
    py.None().into_bound(py)
}

/// Builds the `membership` objects from the decoder's tree.
struct Builder<'c, 'py> {
    py: Python<'py>,
    classes: &'c [Py<PyAny>],
}

impl<'py> Builder<'_, 'py> {
    fn make(&self, class: usize, args: Vec<Obj<'py>>) -> PyResult<Obj<'py>> {
        self.classes[class].bind(self.py).call1(PyTuple::new(self.py, args)?)
    }

    fn ballot(&self, b: membership::Ballot) -> PyResult<Obj<'py>> {
        self.make(BALLOT, vec![int(self.py, b.0)?, int(self.py, b.1)?])
    }

    fn members(&self, members: &[membership::Member]) -> PyResult<Obj<'py>> {
        let items = members
            .iter()
            .map(|&(n, i)| self.make(MEMBER, vec![int(self.py, n)?, int(self.py, i)?]))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyTuple::new(self.py, items)?.into_any())
    }

    fn view(&self, v: Option<&membership::View>) -> PyResult<Obj<'py>> {
        let Some(v) = v else { return Ok(none(self.py)) };
        let potential = PyTuple::new(self.py, v.potential.iter().map(|&p| u64_of(p)))?;
        let tree = PyTuple::new(self.py, v.tree.iter().map(|&t| u64_of(t)))?;
        self.make(VIEW_RECORD, vec![int(self.py, v.view_id)?, self.members(&v.members)?,
                                   potential.into_any(), int(self.py, v.prev_id)?,
                                   tree.into_any()])
    }

    fn proposal(&self, p: &membership::Proposal) -> PyResult<Obj<'py>> {
        self.make(PROPOSAL, vec![self.view(Some(&p.view))?, self.view(p.prev.as_ref())?,
                                pairs(self.py, &p.cut)?])
    }

    fn settings(&self, s: &membership::Settings<'_>) -> PyResult<Obj<'py>> {
        let py = self.py;
        let phi = match s.phi {
            Some(f) => f.into_pyobject(py)?.into_any(),
            None => none(py),
        };
        let expected = match s.expected {
            Some(e) => int(py, e)?,
            None => none(py),
        };
        let members = PyTuple::new(py, s.members.iter().map(|&m| u64_of(m)))?;
        self.make(SETTINGS, vec![text(py, s.rule), phi, expected, int(py, s.size)?,
                                members.into_any()])
    }

    fn position(&self, p: Option<(i128, i128)>) -> PyResult<Obj<'py>> {
        match p {
            Some((v, s)) => Ok(PyTuple::new(self.py, [u64_of(v), u64_of(s)])?.into_any()),
            None => Ok(none(self.py)),
        }
    }

    fn availability(&self, a: Option<&membership::Availability>) -> PyResult<Obj<'py>> {
        let Some(a) = a else { return Ok(none(self.py)) };
        let held = a
            .held
            .iter()
            .map(|(o, s, acks)| self.make(HELD_VERTEX, vec![int(self.py, *o)?, int(self.py, *s)?,
                                                           pairs(self.py, acks)?]))
            .collect::<PyResult<Vec<_>>>()?;
        self.make(AVAILABILITY, vec![int(self.py, a.view_id)?, pairs(self.py, &a.released)?,
                                    PyTuple::new(self.py, held)?.into_any()])
    }

    fn boolean(&self, b: bool) -> PyResult<Obj<'py>> {
        Ok(b.into_pyobject(self.py)?.to_owned().into_any())
    }

    fn message(&self, m: &Message<'_>) -> PyResult<Obj<'py>> {
        let py = self.py;
        match m {
            Message::Join { settings, known_view, leaving, last } => self.make(JOIN, vec![
                self.settings(settings)?, int(py, *known_view)?, self.boolean(*leaving)?,
                self.position(*last)?]),
            Message::Prepare { ballot, candidates, known } => self.make(PREPARE, vec![
                self.ballot(*ballot)?, self.members(candidates)?, self.view(known.as_ref())?]),
            Message::Promise { ballot, known, installed, accepted, availability, settings,
                               last, held, origin } => {
                let vote = match accepted {
                    Some((b, p)) => PyTuple::new(py, [self.ballot(*b)?, self.proposal(p)?])?
                        .into_any(),
                    None => none(py),
                };
                self.make(PROMISE, vec![
                    self.ballot(*ballot)?, self.view(known.as_ref())?, int(py, *installed)?,
                    vote, self.availability(availability.as_ref())?, self.settings(settings)?,
                    self.position(*last)?, self.boolean(*held)?, int(py, *origin)?])
            }
            Message::Reject { ballot, promised, reason, detail } => self.make(REJECT, vec![
                self.ballot(*ballot)?, self.ballot(*promised)?, text(py, reason),
                text(py, detail)]),
            Message::Accept { ballot, proposal, holder_voted } => self.make(ACCEPT, vec![
                self.ballot(*ballot)?, self.proposal(proposal)?, self.boolean(*holder_voted)?]),
            Message::Accepted { ballot, view_id, held } => {
                let held = match held {
                    Some(h) => self.boolean(*h)?,
                    None => none(py),
                };
                self.make(ACCEPTED, vec![self.ballot(*ballot)?, int(py, *view_id)?, held])
            }
            Message::Install { ballot, proposal } => self.make(INSTALL, vec![
                self.ballot(*ballot)?, self.proposal(proposal)?]),
            Message::Refuse { target, reason, detail } => {
                let target = self.make(MEMBER, vec![int(py, target.0)?, int(py, target.1)?])?;
                self.make(REFUSE, vec![target, text(py, reason), text(py, detail)])
            }
        }
    }
}

/// The bytes of a `bytes` object without a copy, of another buffer (`memoryview`) copied.
enum Body<'py> {
    Borrowed(Bound<'py, PyBytes>),
    Owned(Vec<u8>),
}

impl Body<'_> {
    fn of<'py>(py: Python<'py>, body: &Bound<'py, PyAny>) -> PyResult<Body<'py>> {
        if let Ok(bytes) = body.downcast::<PyBytes>() {
            return Ok(Body::Borrowed(bytes.clone()));
        }
        Ok(Body::Owned(PyBuffer::<u8>::get(body)?.to_vec(py)?))
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Body::Borrowed(b) => b.as_bytes(),
            Body::Owned(v) => v,
        }
    }
}

fn u64_of(value: i128) -> u64 {
    // the decoder bounds every integer it returns to 0 ..= 2**63 - 1
    value as u64
}

impl PyDecoder {
    fn build<'py>(&self, py: Python<'py>, cls: &Py<PyAny>, setters: Option<&[Py<PyAny>]>,
                  args: Vec<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        match (&self.slots, setters) {
            (Some(slots), Some(setters)) => {
                let obj = slots.new.bind(py).call1((cls.bind(py),))?;
                for (setter, arg) in setters.iter().zip(args) {
                    setter.bind(py).call1((&obj, arg))?;
                }
                Ok(obj)
            }
            _ => cls.bind(py).call1(PyTuple::new(py, args)?),
        }
    }

    fn vertex<'py>(&self, py: Python<'py>, v: &datagram::Vertex<'_>) -> PyResult<Bound<'py, PyAny>> {
        let acks = PyTuple::new(py, v.acks.iter().map(|&(n, s)| (u64_of(n), u64_of(s))))?;
        let mut items = Vec::with_capacity(v.items.len());
        for item in &v.items {
            items.push(match item {
                Item::Whole(b) => PyBytes::new(py, b).into_any(),
                Item::Fragment { total_len, offset, chunk } => self.fragment.bind(py).call1((
                    u64_of(*total_len), u64_of(*offset), PyBytes::new(py, chunk)))?,
            });
        }
        let args = vec![
            u64_of(v.origin).into_pyobject(py)?.into_any(),
            u64_of(v.seq).into_pyobject(py)?.into_any(),
            acks.into_any(),
            self.services[usize::from(v.service)].bind(py).clone(),
            v.send_ts.into_pyobject(py)?.into_any(),
            PyTuple::new(py, items)?.into_any(),
        ];
        self.build(py, &self.vertex, self.slots.as_ref().map(|s| s.vertex.as_slice()), args)
    }

    fn datagram<'py>(&self, py: Python<'py>, dg: &datagram::Datagram<'_>) -> PyResult<Bound<'py, PyAny>> {
        let nacks = PyTuple::new(
            py, dg.nacks.iter().map(|&(n, f, l)| (u64_of(n), u64_of(f), u64_of(l))))?;
        let mut vertices = Vec::with_capacity(dg.vertices.len());
        for v in &dg.vertices {
            vertices.push(self.vertex(py, v)?);
        }
        let acks = PyTuple::new(py, dg.acks.iter().map(|&(n, s)| (u64_of(n), u64_of(s))))?;
        let args = vec![
            self.kinds[usize::from(dg.kind)].bind(py).clone(),
            u64_of(dg.sender).into_pyobject(py)?.into_any(),
            u64_of(dg.view).into_pyobject(py)?.into_any(),
            u64_of(dg.hb_seq).into_pyobject(py)?.into_any(),
            nacks.into_any(),
            PyTuple::new(py, vertices)?.into_any(),
            acks.into_any(),
        ];
        self.build(py, &self.datagram, self.slots.as_ref().map(|s| s.datagram.as_slice()), args)
    }

    fn native<'py>(&self, py: Python<'py>, body: &[u8]) -> PyResult<Option<Bound<'py, PyAny>>> {
        match datagram::decode(body, &self.limits) {
            Ok(Decoded::Datagram(dg)) => Ok(Some(self.datagram(py, &dg)?)),
            Ok(Decoded::Membership { sender, view, incarnation, message }) => {
                let Some(classes) = &self.membership else { return Ok(None) };
                let builder = Builder { py, classes };
                let message = builder.message(&message)?;
                Ok(Some(builder.make(MEMBERSHIP_DATAGRAM, vec![
                    int(py, sender)?, int(py, view)?, int(py, incarnation)?, message])?))
            }
            Ok(Decoded::Foreign) => Ok(None),
            Err(refusal) => Err(decode_error(py, refusal)),
        }
    }
}

#[pymethods]
impl PyDecoder {
    /// `limits`: `LimitArgs`; `kinds`: the `Kind` members of codes 0 to 4; `services`: the
    /// `ServiceLevel` of codes 0 to 2; `slots`: `(object.__new__, Vertex setters,
    /// Datagram setters)` or `None` (the constructors); `membership`: the classes of
    /// `MEMBERSHIP_CLASSES` in that order, or `None` (MEMBERSHIP goes to `fallback`).
    #[new]
    #[pyo3(signature = (limits, kinds, services, vertex, datagram, fragment, fallback, slots = None,
                        membership = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(limits: LimitArgs, kinds: Vec<Py<PyAny>>,
           services: Vec<Py<PyAny>>, vertex: Py<PyAny>, datagram: Py<PyAny>,
           fragment: Py<PyAny>, fallback: Py<PyAny>,
           slots: Option<SlotArgs>, membership: Option<Vec<Py<PyAny>>>) -> PyResult<Self> {
        if membership.as_ref().is_some_and(|m| m.len() != MEMBERSHIP_CLASSES.len()) {
            return Err(PyValueError::new_err(format!(
                "the membership classes: {}", MEMBERSHIP_CLASSES.join(", "))));
        }
        if kinds.len() != 5 || services.len() != 3 {
            return Err(PyValueError::new_err("5 kinds and 3 service levels"));
        }
        let slots = match slots {
            Some((new, v, d)) if v.len() == 6 && d.len() == 7 => Some(Slots { new, vertex: v, datagram: d }),
            Some(_) => return Err(PyValueError::new_err("6 vertex and 7 datagram setters")),
            None => None,
        };
        let (max_datagram_bytes, max_array_len, max_members, max_nack_ranges, max_vertices,
             max_items, max_message_size, max_held_report) = limits;
        Ok(PyDecoder {
            limits: Limits {
                max_datagram_bytes, max_array_len, max_members, max_nack_ranges, max_vertices,
                max_items, max_message_size: i128::from(max_message_size), max_held_report,
            },
            kinds, services, vertex, datagram, fragment, fallback, slots, membership,
        })
    }

    /// The decoded body (`codec.decode_body(body, limits)`), natively where it can.
    fn __call__<'py>(&self, py: Python<'py>, body: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let data = Body::of(py, body)?;
        match self.native(py, data.bytes())? {
            Some(dg) => Ok(dg),
            None => self.fallback.bind(py).call1((body,)),
        }
    }

    /// The native decoder alone: the datagram, `None` where it would call `fallback`.
    fn decode<'py>(&self, py: Python<'py>, body: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let data = Body::of(py, body)?;
        self.native(py, data.bytes())
    }
}

/// amcast's native data path (the Python core is the reference).
#[pymodule]
fn amcast_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAuthenticator>()?;
    m.add_class::<PyReplayGuard>()?;
    m.add_class::<PyDecoder>()?;
    m.add_class::<crate::python_encode::PyEncoder>()?;
    m.add_class::<crate::python_engine::PyEngine>()?;
    m.add_class::<crate::python_io::PyDatagramIo>()?;
    crate::python_reliable::register(m)?;
    m.add("ENGINE_MAX_MEMBERS", crate::ordering::MAX_MEMBERS)?;
    m.add("WINDOW", crate::replay::WINDOW)?;
    m.add("INTERFACE", crate::INTERFACE)?;
    Ok(())
}
