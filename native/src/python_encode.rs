//! `amcast_native.Encoder`: `codec.encode_body`, the body of a data-plane `Datagram`
//! (DATA, ACK_ONLY, NACK, REPAIR, HEARTBEAT), written natively from the Python core's own
//! `Datagram`, `Vertex` and `Fragment` objects, byte for byte what msgpack-python writes
//! for the Python encoder's arrays (`encode::Writer`). It writes only what holds exactly the
//! types the protocol builds (the classes themselves, plain `int`, `float`, `bytes`,
//! tuples and lists, a `Kind` and a `ServiceLevel` member); anything else (a subclass, a
//! `bool`, an int msgpack cannot hold, another kind) goes to `fallback` (the Python
//! encoder), which writes it or raises as it always did: the native side never raises.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyFloat, PyInt, PyList, PyTuple};

use crate::encode::{Writer, MAX_LEN};

/// Not written natively: the Python encoder takes the datagram.
struct Fallback;

impl From<PyErr> for Fallback {
    fn from(_: PyErr) -> Self {
        Fallback
    }
}

type Enc<T> = Result<T, Fallback>;

/// A plain tuple or list (what `chain.from_iterable` and msgpack take alike here).
enum Seq<'py> {
    Tuple(Bound<'py, PyTuple>),
    List(Bound<'py, PyList>),
}

impl<'py> Seq<'py> {
    fn of(obj: Bound<'py, PyAny>) -> Enc<Self> {
        if obj.is_exact_instance_of::<PyTuple>() {
            Ok(Seq::Tuple(obj.downcast_into::<PyTuple>().map_err(|_| Fallback)?))
        } else if obj.is_exact_instance_of::<PyList>() {
            Ok(Seq::List(obj.downcast_into::<PyList>().map_err(|_| Fallback)?))
        } else {
            Err(Fallback)
        }
    }

    fn len(&self) -> usize {
        match self {
            Seq::Tuple(t) => t.len(),
            Seq::List(l) => l.len(),
        }
    }

    fn get(&self, i: usize) -> Enc<Bound<'py, PyAny>> {
        Ok(match self {
            Seq::Tuple(t) => t.get_item(i)?,
            Seq::List(l) => l.get_item(i)?,
        })
    }
}

fn int(w: &mut Writer, obj: &Bound<'_, PyAny>) -> Enc<()> {
    if !obj.is_exact_instance_of::<PyInt>() {
        return Err(Fallback);
    }
    if let Ok(v) = obj.extract::<i64>() {
        w.int(v);
    } else {
        w.uint(obj.extract::<u64>()?);
    }
    Ok(())
}

fn bin(w: &mut Writer, obj: &Bound<'_, PyAny>) -> Enc<()> {
    let bytes = obj.downcast::<PyBytes>().map_err(|_| Fallback)?;
    let data = bytes.as_bytes();
    if data.len() > MAX_LEN {
        return Err(Fallback);
    }
    w.bin(data);
    Ok(())
}

/// `list(chain.from_iterable(obj))` of a sequence of int sequences (acks, nacks).
fn flat(w: &mut Writer, obj: Bound<'_, PyAny>) -> Enc<()> {
    let outer = Seq::of(obj)?;
    let mut inner = Vec::with_capacity(outer.len());
    let mut total = 0usize;
    for i in 0..outer.len() {
        let seq = Seq::of(outer.get(i)?)?;
        total += seq.len();
        inner.push(seq);
    }
    if total > MAX_LEN {
        return Err(Fallback);
    }
    w.array(total);
    for seq in &inner {
        for j in 0..seq.len() {
            int(w, &seq.get(j)?)?;
        }
    }
    Ok(())
}

/// The data-plane encoder: `Encoder(kinds, services, vertex, datagram, fragment,
/// fallback)`, called with a datagram it returns `codec.encode_plain(dg)`.
#[pyclass(name = "Encoder", module = "amcast_native", frozen)]
pub struct PyEncoder {
    kinds: Vec<Py<PyAny>>,
    services: Vec<Py<PyAny>>,
    vertex: Py<PyAny>,
    datagram: Py<PyAny>,
    fragment: Py<PyAny>,
    fallback: Py<PyAny>,
}

impl PyEncoder {
    fn position(py: Python<'_>, members: &[Py<PyAny>], obj: &Bound<'_, PyAny>) -> Enc<u64> {
        members.iter().position(|m| m.bind(py).is(obj)).map(|i| i as u64).ok_or(Fallback)
    }

    fn vertex(&self, py: Python<'_>, w: &mut Writer, v: &Bound<'_, PyAny>) -> Enc<()> {
        if !v.get_type().is(self.vertex.bind(py)) {
            return Err(Fallback);
        }
        w.array(6);
        int(w, &v.getattr(intern!(py, "origin"))?)?;
        int(w, &v.getattr(intern!(py, "seq"))?)?;
        flat(w, v.getattr(intern!(py, "acks"))?)?;
        w.uint(Self::position(py, &self.services, &v.getattr(intern!(py, "service"))?)?);
        let ts = v.getattr(intern!(py, "send_ts"))?;
        if !ts.is_exact_instance_of::<PyFloat>() {
            return Err(Fallback);
        }
        w.float(ts.extract::<f64>()?);
        let items = Seq::of(v.getattr(intern!(py, "items"))?)?;
        w.array(items.len());
        let fragment = self.fragment.bind(py);
        for i in 0..items.len() {
            let item = items.get(i)?;
            if item.is_exact_instance_of::<PyBytes>() {
                bin(w, &item)?;
            } else if item.get_type().is(fragment) {
                w.array(3);
                int(w, &item.getattr(intern!(py, "total_len"))?)?;
                int(w, &item.getattr(intern!(py, "offset"))?)?;
                let chunk = item.getattr(intern!(py, "chunk"))?;
                if !chunk.is_exact_instance_of::<PyBytes>() {
                    return Err(Fallback);
                }
                bin(w, &chunk)?;
            } else {
                return Err(Fallback);
            }
        }
        Ok(())
    }

    fn native(&self, py: Python<'_>, dg: &Bound<'_, PyAny>) -> Enc<Vec<u8>> {
        if !dg.get_type().is(self.datagram.bind(py)) {
            return Err(Fallback);
        }
        let code = Self::position(py, &self.kinds, &dg.getattr(intern!(py, "kind"))?)?;
        let mut w = Writer::new();
        w.array(6);
        w.uint(code);
        int(&mut w, &dg.getattr(intern!(py, "sender"))?)?;
        int(&mut w, &dg.getattr(intern!(py, "view"))?)?;
        int(&mut w, &dg.getattr(intern!(py, "hb_seq"))?)?;
        flat(&mut w, dg.getattr(intern!(py, "nacks"))?)?;
        if code == HEARTBEAT {
            flat(&mut w, dg.getattr(intern!(py, "acks"))?)?;
        } else {
            let vertices = Seq::of(dg.getattr(intern!(py, "vertices"))?)?;
            w.array(vertices.len());
            for i in 0..vertices.len() {
                self.vertex(py, &mut w, &vertices.get(i)?)?;
            }
        }
        Ok(w.out)
    }
}

/// The code of `Kind.HEARTBEAT`, which carries acks in place of vertices.
const HEARTBEAT: u64 = 4;

#[pymethods]
impl PyEncoder {
    /// `kinds`: the `Kind` members of codes 0 to 4; `services`: the `ServiceLevel` of
    /// codes 0 to 2; `fallback`: the Python encoder (`wire.native.encode_plain`).
    #[new]
    fn new(kinds: Vec<Py<PyAny>>, services: Vec<Py<PyAny>>, vertex: Py<PyAny>,
           datagram: Py<PyAny>, fragment: Py<PyAny>, fallback: Py<PyAny>) -> PyResult<Self> {
        if kinds.len() != 5 || services.len() != 3 {
            return Err(pyo3::exceptions::PyValueError::new_err("5 kinds and 3 service levels"));
        }
        Ok(PyEncoder { kinds, services, vertex, datagram, fragment, fallback })
    }

    /// The body of `dg` (`encode_plain(dg)`), natively where it can.
    fn __call__<'py>(&self, py: Python<'py>, dg: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        match self.native(py, dg) {
            Ok(out) => Ok(PyBytes::new(py, &out).into_any()),
            Err(Fallback) => self.fallback.bind(py).call1((dg,)),
        }
    }

    /// The native encoder alone: the body, `None` where it would call `fallback`.
    fn encode<'py>(&self, py: Python<'py>, dg: &Bound<'py, PyAny>) -> Option<Bound<'py, PyBytes>> {
        self.native(py, dg).ok().map(|out| PyBytes::new(py, &out))
    }
}
