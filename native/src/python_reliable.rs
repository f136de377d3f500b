//! The Python binding of the reliable causal layer: `amcast_native.ReliableLayer`, a
//! drop-in for `amcast.protocols.reliable.layer.ReliableLayer` (constructed with the same
//! arguments; the same methods, returns and attributes the session, the membership layer
//! and the node read). Vertices are the caller's own `Vertex` objects, read once and
//! kept as they are; datagrams taken are the Python core's `Datagram`s. What the Python
//! layer shares (the rng, the `Lateness`, the `PeerLimiter`, the `ReliableCounters`, the
//! drop callback) stays the caller's Python object and is called the same way, in the
//! same order, so that a simulation draws the same numbers. `releaser` and `acks` are
//! views of the layer with the attributes read of `CausalReleaser` and `AckMatrix`.

use std::collections::VecDeque;
use std::sync::Arc;

use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple, PyType};
use pyo3::{PyTraverseError, PyVisit};

use crate::python_engine::PyEngine;
use crate::reliable::pyset::IntSet;
use crate::reliable::{Config, Env, Fail, Incoming, Kind, Layer, Out, VRec, Vtx};

type Obj = Py<PyAny>;

static CONFIGURATION_ERROR: GILOnceCell<Py<PyType>> = GILOnceCell::new();

fn configuration_error(py: Python<'_>, detail: String) -> PyErr {
    match CONFIGURATION_ERROR.import(py, "amcast.protocols.errors", "ConfigurationError") {
        Ok(cls) => match cls.call1((detail,)) {
            Ok(value) => PyErr::from_value(value),
            Err(err) => err,
        },
        Err(err) => err,
    }
}

fn fail(f: Fail) -> PyErr {
    match f {
        Fail::Key(k) => PyKeyError::new_err(k),
    }
}

/// An int: its value, saturated to the i64 range; `TypeError` for a non-int.
fn saturated(value: &Bound<'_, PyAny>) -> PyResult<i64> {
    match value.extract::<i64>() {
        Ok(v) => Ok(v),
        Err(err) => {
            if !value.is_instance_of::<pyo3::types::PyInt>() {
                return Err(err);
            }
            Ok(if value.gt(0)? { i64::MAX } else { i64::MIN })
        }
    }
}

fn pair(item: &Bound<'_, PyAny>) -> PyResult<(i64, i64)> {
    let (a, b): (Bound<'_, PyAny>, Bound<'_, PyAny>) = if let Ok(t) = item.downcast::<PyTuple>() {
        if t.len() != 2 {
            return Err(PyTypeError::new_err("an ack is a (node, seq) pair"));
        }
        (t.get_item(0)?, t.get_item(1)?)
    } else {
        item.extract()?
    };
    Ok((saturated(&a)?, saturated(&b)?))
}

fn pairs(obj: &Bound<'_, PyAny>) -> PyResult<Vec<(i64, i64)>> {
    let mut out = Vec::new();
    if let Ok(t) = obj.downcast::<PyTuple>() {
        out.reserve(t.len());
        for item in t.iter() {
            out.push(pair(&item)?);
        }
    } else {
        for item in obj.try_iter()? {
            out.push(pair(&item?)?);
        }
    }
    Ok(out)
}

/// `object.__new__` and the slot descriptors' `__set__` of `Vertex`'s and `Datagram`'s
/// fields in order: how `codec` and the native decoder build them (the frozen
/// dataclasses' constructors cost about twice as much).
struct Slots {
    new: Obj,
    vertex: Vec<Obj>,
    datagram: Vec<Obj>,
}

/// A `cls(*args)` built through `slots` (`new` and the setters of `cls`'s fields) where
/// the class takes `object.__new__`, else by its constructor.
fn build<'py, const N: usize>(py: Python<'py>, cls: &Bound<'py, PyAny>,
                               slots: Option<(&Obj, &[Obj])>, args: [Bound<'py, PyAny>; N])
    -> PyResult<Bound<'py, PyAny>> {
    match slots {
        Some((new, setters)) => {
            let obj = new.bind(py).call1((cls,))?;
            for (setter, arg) in setters.iter().zip(args) {
                setter.bind(py).call1((&obj, arg))?;
            }
            Ok(obj)
        }
        None => cls.call1(PyTuple::new(py, args)?),
    }
}

/// The Python classes and constants the layer builds with.
struct Classes {
    vertex: Obj,
    datagram: Obj,
    /// `None` where the classes refuse `object.__new__` (a compiled core).
    slots: Option<Arc<Slots>>,
    /// `Kind.DATA, ACK_ONLY, NACK, REPAIR, HEARTBEAT`.
    kinds: [Obj; 5],
    agreed: Obj,
    /// `ServiceLevel.CAUSAL` and `SAFE` (the fused release reads a vertex's service).
    causal: Obj,
    safe: Obj,
    /// `CausalMessage`, built only where an insert is refused (its error's detail).
    causal_message: Obj,
    availability: Obj,
    held_vertex: Obj,
    item_overhead: i64,
    fragment_overhead: i64,
}

/// The caller's collaborators, for one call; the first Python error is kept.
struct PyEnv<'py> {
    py: Python<'py>,
    rng: Bound<'py, PyAny>,
    lateness: Bound<'py, PyAny>,
    limiter: Bound<'py, PyAny>,
    drop: Bound<'py, PyAny>,
    vertex: Bound<'py, PyAny>,
    slots: Option<Arc<Slots>>,
    agreed: Bound<'py, PyAny>,
    node_id: Bound<'py, PyAny>,
    now: Option<Bound<'py, PyAny>>,
    err: Option<PyErr>,
}

impl PyEnv<'_> {
    fn keep<T: Default>(&mut self, r: PyResult<T>) -> T {
        match r {
            Ok(v) => v,
            Err(e) => {
                if self.err.is_none() {
                    self.err = Some(e);
                }
                T::default()
            }
        }
    }

    fn done(&mut self) -> PyResult<()> {
        match self.err.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Env<Obj> for PyEnv<'_> {
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let r = self.rng.call_method1(intern!(self.py, "uniform"), (lo, hi)).and_then(|v| v.extract());
        self.keep(r)
    }
    fn random(&mut self) -> f64 {
        let r = self.rng.call_method0(intern!(self.py, "random")).and_then(|v| v.extract());
        self.keep(r)
    }
    fn allowance(&mut self, now: f64) -> f64 {
        let r = self.lateness.call_method1(intern!(self.py, "allowance"), (now,))
            .and_then(|v| v.extract());
        self.keep(r)
    }
    fn sample(&mut self, late: f64, now: f64) {
        let r = self.lateness.call_method1(intern!(self.py, "sample"), (late, now)).map(|_| ());
        self.keep(r)
    }
    fn waited_again(&mut self) {
        let name = intern!(self.py, "waited_again");
        let r = self.lateness.getattr(name)
            .and_then(|v| v.add(1))
            .and_then(|v| self.lateness.setattr(name, v));
        self.keep(r)
    }
    fn allow_nack(&mut self, peer: i64, now: f64) -> bool {
        let r = self.limiter.call_method1(intern!(self.py, "allow_nack"), (peer, now))
            .and_then(|v| v.is_truthy());
        self.keep(r)
    }
    fn allow_repair(&mut self, peer: i64, nbytes: i64, now: f64) -> bool {
        let r = self.limiter.call_method1(intern!(self.py, "allow_repair"), (peer, nbytes, now))
            .and_then(|v| v.is_truthy());
        self.keep(r)
    }
    fn drop(&mut self, reason: &str, detail: String) {
        let r = self.drop.call1((reason, detail)).map(|_| ());
        self.keep(r)
    }
    fn ack_only(&mut self, seq: i64, acks: &[(i64, i64)], now: f64) -> Obj {
        let py = self.py;
        let r = (|| -> PyResult<Obj> {
            let acks = PyTuple::new(py, acks.iter().map(|&(n, s)| (n, s)))?;
            let now = match &self.now {
                Some(o) => o.clone(),
                None => now.into_pyobject(py)?.into_any(),
            };
            let slots = self.slots.as_deref().map(|s| (&s.new, s.vertex.as_slice()));
            Ok(build(py, &self.vertex, slots,
                     [self.node_id.clone(), seq.into_pyobject(py)?.into_any(), acks.into_any(),
                      self.agreed.clone(), now, PyTuple::empty(py).into_any()])?.unbind())
        })();
        match r {
            Ok(v) => v,
            Err(e) => {
                if self.err.is_none() {
                    self.err = Some(e);
                }
                py.None()
            }
        }
    }
}

#[pyclass(name = "ReliableLayer", module = "amcast_native")]
pub struct PyReliableLayer {
    inner: Layer<Obj>,
    view_id: Obj,
    node_id: Obj,
    members: Py<PyTuple>,
    member_objs: Vec<Obj>,
    cfg: Obj,
    counters: Obj,
    limiter: Obj,
    lateness: Obj,
    rng: Obj,
    drop: Obj,
    prompt: Obj,
    cls: Classes,
    /// The vertices last returned as released: `on_release` finds them here.
    recent: VecDeque<Vtx<Obj>>,
}

impl PyReliableLayer {
    fn env<'py>(&self, py: Python<'py>, now: Option<Bound<'py, PyAny>>) -> PyEnv<'py> {
        PyEnv {
            py,
            rng: self.rng.bind(py).clone(),
            lateness: self.lateness.bind(py).clone(),
            limiter: self.limiter.bind(py).clone(),
            drop: self.drop.bind(py).clone(),
            vertex: self.cls.vertex.bind(py).clone(),
            slots: self.cls.slots.clone(),
            agreed: self.cls.agreed.bind(py).clone(),
            node_id: self.node_id.bind(py).clone(),
            now,
            err: None,
        }
    }

    /// Add the counter increments of the last call to the `ReliableCounters`.
    fn flush(&mut self, py: Python<'_>) -> PyResult<()> {
        let c = &mut self.inner.counters;
        if *c == Default::default() {
            return Ok(());
        }
        let c = std::mem::take(c);
        let counters = self.counters.bind(py);
        for (name, delta) in [
            (intern!(py, "duplicates"), c.duplicates),
            (intern!(py, "retransmissions"), c.retransmissions),
            (intern!(py, "vertices_released"), c.vertices_released),
            (intern!(py, "vertices_sent"), c.vertices_sent),
            (intern!(py, "own_losses"), c.own_losses),
            (intern!(py, "own_bytes_stable"), c.own_bytes_stable),
        ] {
            if delta != 0 {
                counters.setattr(name, counters.getattr(name)?.add(delta)?)?;
            }
        }
        if !c.loss_signals.is_empty() {
            let signals = counters.getattr(intern!(py, "loss_signals"))?;
            for (member, value) in c.loss_signals {
                signals.set_item(member, value)?;
            }
        }
        Ok(())
    }

    fn finish<'py>(&mut self, py: Python<'py>, env: &mut PyEnv<'py>, r: Result<(), Fail>)
        -> PyResult<()> {
        let flushed = self.flush(py);
        env.done()?;
        r.map_err(fail)?;
        flushed
    }

    fn released_list<'py>(&mut self, py: Python<'py>, out: Vec<Vtx<Obj>>)
        -> PyResult<Bound<'py, PyList>> {
        let list = PyList::new(py, out.iter().map(|v| v.obj.clone_ref(py)))?;
        self.recent.clear();
        self.recent.extend(out);
        Ok(list)
    }

    fn items_sizes(&self, items: &Bound<'_, PyAny>) -> PyResult<(usize, i64, i64)> {
        // (count, payload bytes, item and fragment overheads)
        let mut count = 0;
        let mut payload = 0i64;
        let mut overhead = 0i64;
        for it in items.try_iter()? {
            let it = it?;
            count += 1;
            if let Ok(b) = it.downcast::<PyBytes>() {
                payload += b.as_bytes().len() as i64;
                overhead += self.cls.item_overhead;
            } else {
                payload += it.getattr(intern!(it.py(), "chunk"))?.len()? as i64;
                overhead += self.cls.item_overhead + self.cls.fragment_overhead;
            }
        }
        Ok((count, payload, overhead))
    }

    fn parse_vertex(&self, v: &Bound<'_, PyAny>) -> PyResult<Vtx<Obj>> {
        let py = v.py();
        let origin = saturated(&v.getattr(intern!(py, "origin"))?)?;
        let seq = saturated(&v.getattr(intern!(py, "seq"))?)?;
        let acks = pairs(&v.getattr(intern!(py, "acks"))?)?;
        let items = v.getattr(intern!(py, "items"))?;
        let (count, payload, overhead) = self.items_sizes(&items)?;
        let cfg = &self.inner.cfg;
        let repair_size = cfg.fixed_overhead + cfg.ack_overhead * acks.len() as i64 + payload + overhead;
        Ok(Arc::new(VRec { origin, seq, acks, has_items: count > 0, repair_size,
                           obj: v.clone().unbind() }))
    }

    fn datagram<'py>(&self, py: Python<'py>, d: &Out<Obj>) -> PyResult<Bound<'py, PyAny>> {
        let kind = &self.cls.kinds[match d.kind {
            Kind::Data => 0,
            Kind::AckOnly => 1,
            Kind::Nack => 2,
            Kind::Repair => 3,
            Kind::Heartbeat => 4,
        }];
        let nacks = PyTuple::new(py, d.nacks.iter().copied())?;
        let vertices = match &d.vertex {
            Some(v) => PyTuple::new(py, [v.obj.clone_ref(py)])?,
            None => PyTuple::empty(py),
        };
        let holds = PyTuple::new(py, d.holds.iter().copied())?;
        let slots = self.cls.slots.as_deref().map(|s| (&s.new, s.datagram.as_slice()));
        build(py, self.cls.datagram.bind(py), slots,
              [kind.bind(py).clone(), self.node_id.bind(py).clone(), self.view_id.bind(py).clone(),
               d.hb_seq.into_pyobject(py)?.into_any(), nacks.into_any(), vertices.into_any(),
               holds.into_any()])
    }

    fn index(&self, node: &Bound<'_, PyAny>) -> PyResult<usize> {
        node.extract::<i64>()
            .ok()
            .and_then(|n| self.inner.index_of(n))
            .ok_or_else(|| PyKeyError::new_err(node.clone().unbind()))
    }

    /// What `ViewSession._released` does with `released` up to its delivery of what is
    /// ready, for a native engine: per vertex `on_release`, then the holdback's input
    /// and the engine's insert, then `collect_garbage`. Returns `(work, ordered, error)`:
    /// `work` the holdback's steps in release order, only for vertices with items
    /// (`(v, None)`: `ordered_released`; `(v, vector)`: `offer(v, vector)`, the origin's
    /// ack vector right after `v`) and refused inserts (`(None, ProtocolViolation)`:
    /// dropped); `ordered` the `(vertex, MessageDelivered, frontier)` the engine
    /// decided, in order (`frontier`: the released vector at the decision, for a safe
    /// vertex, else None); `error` what `on_release` raised, the vertices before it
    /// processed (no garbage collected then), else None.
    fn release_into<'py>(&mut self, py: Python<'py>, engine: &Bound<'py, PyAny>,
                         released: Vec<Vtx<Obj>>, now: f64) -> PyResult<Bound<'py, PyTuple>> {
        let engine = engine.downcast::<PyEngine>()?;
        let mut eng = engine.try_borrow_mut()?;
        let causal = self.cls.causal.bind(py);
        let safe = self.cls.safe.bind(py);
        let service = intern!(py, "service");
        let work = PyList::empty(py);
        let ordered = PyList::empty(py);
        let mut error: Option<PyErr> = None;
        for rec in &released {
            if let Err(f) = self.inner.on_release(rec, now) {
                error = Some(fail(f));
                break;
            }
            let obj = rec.obj.bind(py);
            let is_ordered = rec.has_items && !obj.getattr(service)?.is(causal);
            if is_ordered {
                work.append((obj, py.None()))?;
            } else if rec.has_items {
                let o = self.inner.index_of(rec.origin).ok_or_else(|| fail(Fail::Key(rec.origin)))?;
                work.append((obj, self.member_dict(py, &self.inner.vectors[o])?))?;
            }
            let payload = is_ordered.then(|| rec.obj.clone_ref(py));
            if let Err(v) = eng.insert_read(rec.origin, rec.seq, &rec.acks, payload) {
                let acks = PyTuple::new(py, rec.acks.iter().copied())?;
                let acks = obj.getattr(intern!(py, "acks")).unwrap_or(acks.into_any());
                let message = self.cls.causal_message.bind(py).call1((
                    obj.getattr(intern!(py, "origin"))?, obj.getattr(intern!(py, "seq"))?, acks,
                    if is_ordered { obj.clone() } else { py.None().into_bound(py) }))?;
                let err = eng.violation_of(py, &message, v)?;
                work.append((py.None(), err.value(py)))?;
                continue;
            }
            for d in eng.take_decided() {
                let payload = d.payload.clone_ref(py).into_bound(py);
                let frontier = if payload.getattr(service)?.is(safe) {
                    self.member_dict(py, &self.inner.released)?.into_any()
                } else {
                    py.None().into_bound(py)
                };
                let item = eng.delivered(py, d)?;
                ordered.append((payload, item, frontier))?;
            }
        }
        if error.is_none() {
            self.inner.collect_garbage();
        }
        self.flush(py)?;
        let error = match error {
            Some(e) => e.into_value(py).into_any().into_bound(py),
            None => py.None().into_bound(py),
        };
        PyTuple::new(py, [work.into_any(), ordered.into_any(), error])
    }

    fn parse_released(&mut self, vertices: &Bound<'_, PyAny>) -> PyResult<Vec<Vtx<Obj>>> {
        let mut out = Vec::new();
        for v in vertices.try_iter()? {
            let v = v?;
            let pos = self.recent.iter().position(|r| r.obj.is(&v));
            out.push(match pos {
                Some(0) => self.recent.pop_front().expect("present"),
                Some(i) => self.recent.remove(i).expect("present"),
                None => self.parse_vertex(&v)?,
            });
        }
        Ok(out)
    }

    /// `receive`'s work: the vertices released, and whether the datagram carried acks.
    fn receive_vertices<'py>(&mut self, py: Python<'py>, dg: &Bound<'py, PyAny>, now: f64)
        -> PyResult<(Vec<Vtx<Obj>>, bool)> {
        let kind = dg.getattr(intern!(py, "kind"))?;
        let repair = kind.is(self.cls.kinds[3].bind(py)) || kind.eq(self.cls.kinds[3].bind(py))?;
        let sender_o = dg.getattr(intern!(py, "sender"))?;
        let Ok(sender) = sender_o.extract::<i64>() else {
            return Err(PyKeyError::new_err(sender_o.unbind()));
        };
        let hb_seq = saturated(&dg.getattr(intern!(py, "hb_seq"))?)?;
        let acks = pairs(&dg.getattr(intern!(py, "acks"))?)?;
        let mut nacks = Vec::new();
        for nack in dg.getattr(intern!(py, "nacks"))?.try_iter()? {
            let (a, b, c): (Bound<'_, PyAny>, Bound<'_, PyAny>, Bound<'_, PyAny>) = nack?.extract()?;
            nacks.push((saturated(&a)?, saturated(&b)?, saturated(&c)?));
        }
        let vs = dg.getattr(intern!(py, "vertices"))?;
        let mut vertices = Vec::new();
        for v in vs.try_iter()? {
            vertices.push(self.parse_vertex(&v?)?);
        }
        let had_acks = !acks.is_empty();
        let incoming = Incoming { repair, sender, hb_seq, acks, nacks, vertices };
        let mut env = self.env(py, None);
        let mut out = Vec::new();
        let r = self.inner.receive(&mut env, &incoming, now, &mut out);
        self.finish(py, &mut env, r)?;
        Ok((out, had_acks))
    }

    fn member_dict<'py>(&self, py: Python<'py>, values: &[i64]) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (m, v) in self.member_objs.iter().zip(values) {
            d.set_item(m, v)?;
        }
        Ok(d)
    }
}

#[pymethods]
impl PyReliableLayer {
    #[new]
    #[pyo3(signature = (view_id, node_id, members, *, config, rng, now, drop, counters,
                        limiter = None, lateness = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(py: Python<'_>, view_id: Bound<'_, PyAny>, node_id: Bound<'_, PyAny>,
           members: &Bound<'_, PyAny>, config: Bound<'_, PyAny>, rng: Bound<'_, PyAny>,
           now: f64, drop: Bound<'_, PyAny>, counters: Bound<'_, PyAny>,
           limiter: Option<Bound<'_, PyAny>>, lateness: Option<Bound<'_, PyAny>>)
        -> PyResult<Self> {
        let members = PyTuple::new(py, members.try_iter()?.collect::<PyResult<Vec<_>>>()?)?;
        let ids = members
            .iter()
            .map(|m| m.extract::<i64>())
            .collect::<PyResult<Vec<i64>>>()
            .map_err(|_| configuration_error(py, "the native reliable layer takes member ids \
                                                  that are 64-bit ints".into()))?;
        let me = node_id.extract::<i64>()
            .map_err(|_| configuration_error(py, "node id is not a 64-bit int".into()))?;
        let limits = py.import("amcast.protocols.wire.limits")?;
        let int = |name: &str| -> PyResult<i64> { limits.getattr(name)?.extract() };
        let f = |name: &str| -> PyResult<f64> { config.getattr(name)?.extract() };
        let i = |name: &str| -> PyResult<i64> { config.getattr(name)?.extract() };
        let cfg = Config {
            ack_delay: f("ack_delay")?,
            lazy_ack_delay: f("lazy_ack_delay")?,
            quiet_ack_delay: f("quiet_ack_delay")?,
            heartbeat_interval: f("heartbeat_interval")?,
            nack_delay: f("nack_delay")?,
            nack_retry: f("nack_retry")?,
            repair_delay: f("repair_delay")?,
            repair_holdoff: f("repair_holdoff")?,
            datagram_budget: i("datagram_budget")?,
            receive_window: i("receive_window")?,
            max_held_vertices: i("max_held_vertices")?,
            max_nack_ranges: i("max_nack_ranges")?,
            max_repair_per_nack: i("max_repair_per_nack")?,
            fixed_overhead: int("FIXED_OVERHEAD")?,
            ack_overhead: int("ACK_OVERHEAD")?,
            nack_range_overhead: int("NACK_RANGE_OVERHEAD")?,
        };
        let inner = Layer::new(&ids, me, cfg, now).map_err(|e| configuration_error(py, e))?;
        let repair = py.import("amcast.protocols.reliable.repair")?;
        let lateness = match lateness {
            Some(l) if !l.is_none() => l,
            _ => repair.getattr("Lateness")?.call1((config.getattr("nack_reorder_max")?,))?,
        };
        let limiter = match limiter {
            Some(l) if !l.is_none() => l,
            _ => py.import("amcast.protocols.reliable.ratelimit")?.getattr("PeerLimiter")?
                .call1((config.call_method1("repair_limits", (members.len(),))?,))?,
        };
        let codec = py.import("amcast.protocols.wire.codec")?;
        let kind = codec.getattr("Kind")?;
        let k = |name: &str| -> PyResult<Obj> { Ok(kind.getattr(name)?.unbind()) };
        let membership = py.import("amcast.protocols.wire.membership")?;
        let service = py.import("amcast.protocols.vocabulary")?.getattr("ServiceLevel")?;
        let vertex_cls = codec.getattr("Vertex")?;
        let datagram_cls = codec.getattr("Datagram")?;
        let new = py.import("builtins")?.getattr("object")?.getattr("__new__")?;
        let slots = if new.call1((&vertex_cls,)).is_ok() && new.call1((&datagram_cls,)).is_ok() {
            let setters = |cls: &Bound<'_, PyAny>, names: &[&str]| -> PyResult<Vec<Obj>> {
                names.iter().map(|f| Ok(cls.getattr(*f)?.getattr("__set__")?.unbind())).collect()
            };
            Some(Arc::new(Slots {
                vertex: setters(&vertex_cls, &["origin", "seq", "acks", "service", "send_ts",
                                               "items"])?,
                datagram: setters(&datagram_cls, &["kind", "sender", "view", "hb_seq", "nacks",
                                                   "vertices", "acks"])?,
                new: new.unbind(),
            }))
        } else {
            None
        };
        let cls = Classes {
            vertex: vertex_cls.unbind(),
            datagram: datagram_cls.unbind(),
            slots,
            kinds: [k("DATA")?, k("ACK_ONLY")?, k("NACK")?, k("REPAIR")?, k("HEARTBEAT")?],
            agreed: service.getattr("AGREED")?.unbind(),
            causal: service.getattr("CAUSAL")?.unbind(),
            safe: service.getattr("SAFE")?.unbind(),
            causal_message: py.import("amcast.protocols.ordering.messages")?
                .getattr("CausalMessage")?.unbind(),
            availability: membership.getattr("Availability")?.unbind(),
            held_vertex: membership.getattr("HeldVertex")?.unbind(),
            item_overhead: int("ITEM_OVERHEAD")?,
            fragment_overhead: int("FRAGMENT_OVERHEAD")?,
        };
        Ok(PyReliableLayer {
            inner,
            view_id: view_id.unbind(),
            node_id: node_id.unbind(),
            member_objs: members.iter().map(|m| m.unbind()).collect(),
            members: members.unbind(),
            cfg: config.unbind(),
            counters: counters.unbind(),
            limiter: limiter.unbind(),
            lateness: lateness.unbind(),
            rng: rng.unbind(),
            drop: drop.unbind(),
            prompt: py.None(),
            cls,
            recent: VecDeque::new(),
        })
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        for obj in [&self.cfg, &self.counters, &self.limiter, &self.lateness, &self.rng,
                    &self.drop, &self.prompt] {
            visit.call(obj)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        Python::with_gil(|py| {
            self.drop = py.None();
            self.rng = py.None();
            self.limiter = py.None();
            self.lateness = py.None();
            self.counters = py.None();
        });
    }

    // ------------------------------------------------------------------ attributes

    #[getter]
    fn view_id(&self, py: Python<'_>) -> Obj {
        self.view_id.clone_ref(py)
    }
    #[getter]
    fn node_id(&self, py: Python<'_>) -> Obj {
        self.node_id.clone_ref(py)
    }
    #[getter]
    fn members(&self, py: Python<'_>) -> Py<PyTuple> {
        self.members.clone_ref(py)
    }
    #[getter]
    fn cfg(&self, py: Python<'_>) -> Obj {
        self.cfg.clone_ref(py)
    }
    #[getter]
    fn counters(&self, py: Python<'_>) -> Obj {
        self.counters.clone_ref(py)
    }
    #[getter]
    fn limiter(&self, py: Python<'_>) -> Obj {
        self.limiter.clone_ref(py)
    }
    #[getter]
    fn lateness(&self, py: Python<'_>) -> Obj {
        self.lateness.clone_ref(py)
    }
    #[getter]
    fn seq(&self) -> i64 {
        self.inner.seq
    }
    #[getter]
    fn frozen(&self) -> bool {
        self.inner.frozen
    }
    #[getter]
    fn retired(&self) -> bool {
        self.inner.retired
    }
    #[getter]
    fn quiet(&self) -> bool {
        self.inner.quiet
    }
    #[setter]
    fn set_quiet(&mut self, value: bool) {
        self.inner.quiet = value;
    }
    #[getter]
    fn holding(&self) -> bool {
        self.inner.holding
    }
    #[getter]
    fn last_sent(&self) -> f64 {
        self.inner.last_sent
    }
    #[getter]
    fn prompt_origins(&self, py: Python<'_>) -> Obj {
        self.prompt.clone_ref(py)
    }
    #[setter]
    fn set_prompt_origins(&mut self, value: Option<Bound<'_, PyAny>>) -> PyResult<()> {
        let py = match &value {
            Some(v) => v.py(),
            None => return Err(PyTypeError::new_err("can't delete attribute")),
        };
        let value = value.expect("checked");
        if value.is_none() {
            self.inner.set_prompt(None);
        } else {
            let ids = value.try_iter()?
                .map(|n| n.and_then(|n| n.extract::<i64>()))
                .collect::<PyResult<Vec<i64>>>()?;
            self.inner.set_prompt(Some(ids));
        }
        self.prompt = value.unbind();
        let _ = py;
        Ok(())
    }

    /// `CausalReleaser`'s attributes, read from the layer.
    #[getter]
    fn releaser(slf: &Bound<'_, Self>) -> ReleaserView {
        ReleaserView { layer: slf.clone().unbind() }
    }

    /// `AckMatrix`'s attributes, read from the layer.
    #[getter]
    fn acks(slf: &Bound<'_, Self>) -> AcksView {
        AcksView { layer: slf.clone().unbind() }
    }

    /// The retransmission store: member -> {seq: vertex} (a copy).
    #[getter]
    fn store<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (n, m) in self.member_objs.iter().enumerate() {
            let inner = PyDict::new(py);
            let mut seqs: Vec<_> = self.inner.stored(n).collect();
            seqs.sort_by_key(|(s, _)| **s);
            for (s, v) in seqs {
                inner.set_item(*s, v.obj.clone_ref(py))?;
            }
            d.set_item(m, inner)?;
        }
        Ok(d)
    }

    /// The datagrams queued, nacks not attached yet (a copy).
    #[getter]
    fn outq<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for d in &self.inner.outq {
            list.append(self.datagram(py, d)?)?;
        }
        Ok(list)
    }

    // ------------------------------------------------------------------ queries

    fn unstable(&self) -> i64 {
        self.inner.unstable()
    }

    fn unstable_bytes(&mut self, py: Python<'_>) -> PyResult<i64> {
        let b = self.inner.unstable_bytes();
        self.flush(py)?;
        Ok(b)
    }

    fn acks_delta<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.acks_delta())
    }

    fn nack_reservation(&self) -> i64 {
        self.inner.nack_reservation()
    }

    fn foreign(&self, dg: &Bound<'_, PyAny>) -> PyResult<Option<&'static str>> {
        let py = dg.py();
        let member = |o: PyResult<Bound<'_, PyAny>>| -> PyResult<bool> {
            Ok(o?.extract::<i64>().ok().and_then(|n| self.inner.index_of(n)).is_some())
        };
        if !member(dg.getattr(intern!(py, "sender")))? {
            return Ok(Some("unknown_sender"));
        }
        for nack in dg.getattr(intern!(py, "nacks"))?.try_iter()? {
            if !member(nack?.get_item(0))? {
                return Ok(Some("unknown_member"));
            }
        }
        for v in dg.getattr(intern!(py, "vertices"))?.try_iter()? {
            if !member(v?.getattr(intern!(py, "origin")))? {
                return Ok(Some("unknown_member"));
            }
        }
        Ok(None)
    }

    // ------------------------------------------------------------------ receive side

    fn receive<'py>(&mut self, py: Python<'py>, dg: &Bound<'py, PyAny>, now: f64)
        -> PyResult<Bound<'py, PyList>> {
        let (out, _) = self.receive_vertices(py, dg, now)?;
        self.released_list(py, out)
    }

    /// `receive`, then, where it released vertices, `release` of them into `engine`
    /// (a native `TotalOrderEngine`); None where nothing was released, the garbage
    /// collected then where the datagram carried acks (`after_stability`'s first step).
    fn receive_release<'py>(&mut self, py: Python<'py>, dg: &Bound<'py, PyAny>, now: f64,
                            engine: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let (out, acks) = self.receive_vertices(py, dg, now)?;
        self.recent.clear();
        if out.is_empty() {
            if acks {
                self.inner.collect_garbage();
            }
            return Ok(None);
        }
        self.release_into(py, engine, out, now).map(Some)
    }

    /// The session's release processing of `vertices` (`receive`'s, `handle_timer`'s,
    /// ... or `new_vertex`'s return) into `engine`, a native `TotalOrderEngine`: what
    /// `on_release` per vertex, the session's engine inserts and `collect_garbage` do,
    /// returning `(work, ordered, error)` for the session's holdback and queue.
    fn release<'py>(&mut self, py: Python<'py>, vertices: &Bound<'py, PyAny>, now: f64,
                    engine: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
        let out = self.parse_released(vertices)?;
        self.release_into(py, engine, out, now)
    }

    /// `any(acks.stable(node) < seq for node, seq in frontier.items())`, in one call (the
    /// session's wait of a safe delivery on a fused release's frontier).
    fn frontier_unstable(&self, frontier: &Bound<'_, PyDict>) -> PyResult<bool> {
        for (node, seq) in frontier.iter() {
            let stable = self.inner.stable_of(self.index(&node)?);
            if seq.gt(stable)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn on_release(&mut self, v: &Bound<'_, PyAny>, now: f64) -> PyResult<()> {
        let py = v.py();
        let pos = self.recent.iter().position(|r| r.obj.is(v));
        let rec = match pos {
            Some(0) => self.recent.pop_front().expect("present"),
            Some(i) => self.recent.remove(i).expect("present"),
            None => self.parse_vertex(v)?,
        };
        let r = self.inner.on_release(&rec, now);
        self.flush(py)?;
        r.map_err(fail)
    }

    fn collect_garbage(&mut self) {
        self.inner.collect_garbage();
    }

    // ------------------------------------------------------------------ send side

    #[pyo3(signature = (service, items, now, acks = None))]
    fn new_vertex<'py>(&mut self, py: Python<'py>, service: &Bound<'py, PyAny>,
                       items: &Bound<'py, PyAny>, now: &Bound<'py, PyAny>,
                       acks: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        let now_f: f64 = now.extract()?;
        let acks_obj = match acks {
            Some(a) if !a.is_none() => a.clone(),
            _ => PyTuple::new(py, self.inner.acks_delta())?.into_any(),
        };
        let ack_list = pairs(&acks_obj)?;
        let (count, payload, overhead) = self.items_sizes(items)?;
        let seq = self.inner.seq + 1;
        let slots = self.cls.slots.as_deref().map(|s| (&s.new, s.vertex.as_slice()));
        let obj = build(py, self.cls.vertex.bind(py), slots,
                        [self.node_id.bind(py).clone(), seq.into_pyobject(py)?.into_any(),
                         acks_obj.clone(), service.clone(), now.clone(), items.clone()])?;
        let cfg = &self.inner.cfg;
        let has_items = items.is_truthy()?;
        let flight = has_items.then(|| {
            payload + cfg.fixed_overhead + self.cls.item_overhead * count as i64
        });
        let repair_size = cfg.fixed_overhead + cfg.ack_overhead * ack_list.len() as i64
            + payload + overhead;
        let v = Arc::new(VRec { origin: self.inner.node_id, seq, acks: ack_list, has_items,
                                repair_size, obj: obj.clone().unbind() });
        self.recent.clear();
        self.recent.push_back(v.clone());
        self.inner.new_vertex(v, flight, now_f);
        self.flush(py)?;
        Ok(obj)
    }

    fn handle_timer<'py>(&mut self, py: Python<'py>, now: &Bound<'py, PyAny>)
        -> PyResult<Bound<'py, PyList>> {
        let now_f: f64 = now.extract()?;
        let mut env = self.env(py, Some(now.clone()));
        let mut out = Vec::new();
        self.inner.handle_timer(&mut env, now_f, &mut out);
        self.finish(py, &mut env, Ok(()))?;
        self.released_list(py, out)
    }

    fn want_report(&mut self, now: f64) {
        self.inner.want_report(now);
    }

    fn next_timer(&mut self) -> Option<f64> {
        self.inner.next_timer()
    }

    fn take_datagrams<'py>(&mut self, py: Python<'py>, now: f64) -> PyResult<Bound<'py, PyList>> {
        let out = self.inner.take_datagrams(now);
        let list = PyList::empty(py);
        for d in &out {
            list.append(self.datagram(py, d)?)?;
        }
        Ok(list)
    }

    // ------------------------------------------------------------------ flow control

    fn hold_releases<'py>(&mut self, py: Python<'py>, on: bool) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::new();
        self.inner.hold_releases(on, &mut out);
        self.released_list(py, out)
    }

    // ------------------------------------------------------------------ view changes

    fn freeze(&mut self) {
        self.inner.freeze();
    }

    fn close_at<'py>(&mut self, py: Python<'py>, cut: &Bound<'py, PyAny>, now: f64)
        -> PyResult<Bound<'py, PyList>> {
        let cut = self.cut_of(cut)?;
        let mut env = self.env(py, None);
        let mut out = Vec::new();
        self.inner.close_at(&mut env, cut, now, &mut out);
        self.finish(py, &mut env, Ok(()))?;
        self.released_list(py, out)
    }

    fn holds(&self, cut: &Bound<'_, PyAny>) -> PyResult<bool> {
        let mut entries = Vec::new();
        for item in cut.call_method0(intern!(cut.py(), "items"))?.try_iter()? {
            let (node, seq): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
            let Ok(n) = node.extract::<i64>() else {
                // a non-int key is no member: a KeyError once reached
                if self.inner.holds(&entries).map_err(fail)? {
                    return Err(PyKeyError::new_err(node.unbind()));
                }
                return Ok(false);
            };
            entries.push((n, saturated(&seq)?));
        }
        self.inner.holds(&entries).map_err(fail)
    }

    fn exceeds(&self, cut: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = cut.py();
        let get = intern!(py, "get");
        let mut values = Vec::with_capacity(self.member_objs.len());
        for m in &self.member_objs {
            values.push(saturated(&cut.call_method1(get, (m, 0))?)?);
        }
        Ok(self.inner.exceeds(&values))
    }

    fn availability<'py>(&self, py: Python<'py>, max_held: i64) -> PyResult<Bound<'py, PyAny>> {
        let released = PyTuple::new(
            py, self.inner.by_id().iter().map(|&n| (self.member_objs[n].clone_ref(py),
                                                    self.inner.released[n])))?;
        let held = self.inner.held_vertices();
        let len = held.len() as i64;
        let end = if max_held < 0 { (len + max_held).max(0) } else { max_held.min(len) } as usize;
        let hv = self.cls.held_vertex.bind(py);
        let mut items = Vec::with_capacity(end);
        for v in &held[..end] {
            let o = v.obj.bind(py);
            items.push(hv.call1((o.getattr(intern!(py, "origin"))?, o.getattr(intern!(py, "seq"))?,
                                 o.getattr(intern!(py, "acks"))?))?);
        }
        self.cls.availability.bind(py).call1((&self.view_id, released, PyTuple::new(py, items)?))
    }

    fn retire(&mut self) {
        self.inner.retire();
    }
}

impl PyReliableLayer {
    /// A cut as a value per member: `cut[member]` (a `KeyError` if one is missing).
    fn cut_of(&self, cut: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
        self.member_objs.iter().map(|m| saturated(&cut.get_item(m)?)).collect()
    }
}

/// `layer.releaser`: the `CausalReleaser` attributes the rest of the node reads.
#[pyclass(module = "amcast_native", frozen)]
pub struct ReleaserView {
    layer: Py<PyReliableLayer>,
}

#[pymethods]
impl ReleaserView {
    #[getter]
    fn held_count(&self, py: Python<'_>) -> i64 {
        self.layer.borrow(py).inner.held_count
    }
    /// Released seq per member (a copy).
    #[getter]
    fn released<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let l = self.layer.borrow(py);
        l.member_dict(py, &l.inner.released)
    }
    #[getter]
    fn known<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let l = self.layer.borrow(py);
        l.member_dict(py, &l.inner.known)
    }
    #[getter]
    fn limit<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let l = self.layer.borrow(py);
        l.inner.limit.as_ref().map(|lim| l.member_dict(py, lim)).transpose()
    }
    #[getter]
    fn r#final(&self, py: Python<'_>) -> bool {
        self.layer.borrow(py).inner.final_limit
    }
    fn has_gap(&self, py: Python<'_>, node: &Bound<'_, PyAny>) -> PyResult<bool> {
        let l = self.layer.borrow(py);
        Ok(l.inner.has_gap(l.index(node)?))
    }
    fn missing(&self, py: Python<'_>, node: &Bound<'_, PyAny>, limit: i64) -> PyResult<Vec<(i64, i64)>> {
        let l = self.layer.borrow(py);
        Ok(l.inner.missing(l.index(node)?, limit))
    }
    fn first_missing(&self, py: Python<'_>, node: &Bound<'_, PyAny>) -> PyResult<Option<i64>> {
        let l = self.layer.borrow(py);
        Ok(l.inner.first_missing(l.index(node)?))
    }
    fn held_vertices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let l = self.layer.borrow(py);
        PyList::new(py, l.inner.held_vertices().iter().map(|v| v.obj.clone_ref(py)))
    }
    fn holds(&self, py: Python<'_>, cut: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.layer.borrow(py).holds(cut)
    }
}

/// `layer.acks`: the `AckMatrix` attributes the rest of the node reads.
#[pyclass(module = "amcast_native", frozen)]
pub struct AcksView {
    layer: Py<PyReliableLayer>,
}

#[pymethods]
impl AcksView {
    #[getter]
    fn dirty(&self, py: Python<'_>) -> bool {
        self.layer.borrow(py).inner.dirty()
    }
    #[getter]
    fn members(&self, py: Python<'_>) -> Py<PyTuple> {
        self.layer.borrow(py).members.clone_ref(py)
    }
    fn stable(&self, py: Python<'_>, node: &Bound<'_, PyAny>) -> PyResult<i64> {
        let l = self.layer.borrow(py);
        Ok(l.inner.stable_of(l.index(node)?))
    }
    /// Each member's full ack vector, read when indexed (`vectors[m]`: a copy).
    #[getter]
    fn vectors(&self, py: Python<'_>) -> AckRows {
        AckRows { layer: self.layer.clone_ref(py), held: false }
    }
    /// What each member is known to hold (`held[m]`: a copy).
    #[getter]
    fn held(&self, py: Python<'_>) -> AckRows {
        AckRows { layer: self.layer.clone_ref(py), held: true }
    }
}

/// A live mapping member -> row of the ack matrix (each row read when indexed).
#[pyclass(module = "amcast_native", frozen, mapping)]
pub struct AckRows {
    layer: Py<PyReliableLayer>,
    held: bool,
}

#[pymethods]
impl AckRows {
    fn __getitem__<'py>(&self, py: Python<'py>, node: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
        let l = self.layer.borrow(py);
        let n = l.index(node)?;
        let rows = if self.held { &l.inner.acks_held } else { &l.inner.vectors };
        l.member_dict(py, &rows[n])
    }
    fn __len__(&self, py: Python<'_>) -> usize {
        self.layer.borrow(py).member_objs.len()
    }
    fn __contains__(&self, py: Python<'_>, node: &Bound<'_, PyAny>) -> bool {
        self.layer.borrow(py).index(node).is_ok()
    }
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let l = self.layer.borrow(py);
        Ok(l.members.bind(py).as_any().try_iter()?.into_any())
    }
    fn get<'py>(&self, py: Python<'py>, node: &Bound<'py, PyAny>, default: Option<Bound<'py, PyAny>>)
        -> PyResult<Bound<'py, PyAny>> {
        match self.__getitem__(py, node) {
            Ok(d) => Ok(d.into_any()),
            Err(_) => Ok(default.unwrap_or_else(|| py.None().into_bound(py))),
        }
    }
}

/// The iteration order of `set(values)` as the native layer reproduces it (tests check it
/// against CPython's sets).
#[pyfunction]
pub fn set_order(values: Vec<i64>) -> Vec<i64> {
    let mut s = IntSet::new();
    for v in values {
        s.add(v);
    }
    s.iter().collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyReliableLayer>()?;
    m.add_class::<ReleaserView>()?;
    m.add_class::<AcksView>()?;
    m.add_class::<AckRows>()?;
    m.add_function(wrap_pyfunction!(set_order, m)?)?;
    Ok(())
}
