//! The Python bindings: `amcast_native.Authenticator` and `amcast_native.ReplayGuard`,
//! with the methods and refusals (`amcast.protocols.errors.DecodeError`, same reason
//! and detail) of `protocols/wire/auth.py` and `protocols/wire/replay.py`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyType};

use crate::auth::{Authenticator, SESSION_BYTES};
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

/// amcast's native data path (the Python core is the reference).
#[pymodule]
fn amcast_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAuthenticator>()?;
    m.add_class::<PyReplayGuard>()?;
    m.add("WINDOW", crate::replay::WINDOW)?;
    Ok(())
}
