//! The Python binding of the ToTo engine: `amcast_native.TotalOrderEngine`, a drop-in
//! for `amcast.protocols.ordering.TotalOrderEngine` (constructed with the members and an
//! `OrderingConfig`; `insert(CausalMessage) -> list[MessageDelivered]`, `close()`, the
//! same attributes). Each message's fields are read once; result objects are built only
//! for delivered payload vertices, with the Python core's own `MessageDelivered` and
//! `DeliveryRule`; payloads pass through as opaque objects. Refusals are the Python
//! core's `ProtocolViolation` with the same reason and detail.

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyList, PySet, PyTuple, PyType};

use crate::ordering::{Delivery, Engine, Fired, Rule, Violation, MAX_MEMBERS};

static PROTOCOL_VIOLATION: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static CONFIGURATION_ERROR: GILOnceCell<Py<PyType>> = GILOnceCell::new();

fn error_of(py: Python<'_>, cell: &'static GILOnceCell<Py<PyType>>, name: &str,
            args: (&str, String)) -> PyErr {
    match cell.import(py, "amcast.protocols.errors", name) {
        Ok(cls) => match cls.call1(args) {
            Ok(value) => PyErr::from_value(value),
            Err(err) => err,
        },
        Err(err) => err,
    }
}

fn configuration_error(py: Python<'_>, detail: String) -> PyErr {
    match CONFIGURATION_ERROR.import(py, "amcast.protocols.errors", "ConfigurationError") {
        Ok(cls) => match cls.call1((detail,)) {
            Ok(value) => PyErr::from_value(value),
            Err(err) => err,
        },
        Err(err) => err,
    }
}

/// An int field: its value, saturated to the i64 range (the comparisons the engine makes
/// with seqs keep their outcome); `TypeError` for a non-int.
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

#[pyclass(name = "TotalOrderEngine", module = "amcast_native")]
pub struct PyEngine {
    inner: Engine<Py<PyAny>>,
    members: Py<PyTuple>,
    member_objs: Vec<Py<PyAny>>,
    config: Py<PyAny>,
    rule: Py<PyAny>,
    /// An id that is no member: what a sender or ack node outside the i64 range maps to.
    outsider: i64,
    delivered_cls: Py<PyAny>,
    /// `object.__new__` and the slot descriptors' `__set__` of `MessageDelivered`'s
    /// fields in order (how `codec` builds its records fast); `None` where the class
    /// refuses `object.__new__` (a compiled core): the constructor then.
    setters: Option<(Py<PyAny>, Vec<Py<PyAny>>)>,
    /// `DeliveryRule.EARLY`, `DEFAULT`, `GL_PREFIX`, `FLUSH`.
    fired: [Py<PyAny>; 4],
    out: Vec<Delivery<Py<PyAny>>>,
    acks: Vec<(i64, i64)>,
}

impl PyEngine {
    fn results<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        if self.out.is_empty() {
            return Ok(PyList::empty(py));
        }
        let list = PyList::empty(py);
        for d in std::mem::take(&mut self.out) {
            list.append(self.delivered(py, d)?)?;
        }
        Ok(list)
    }

    /// The `MessageDelivered` of one delivery.
    pub(crate) fn delivered<'py>(&self, py: Python<'py>, d: Delivery<Py<PyAny>>)
        -> PyResult<Bound<'py, PyAny>> {
        let cls = self.delivered_cls.bind(py);
        let rule = &self.fired[match d.rule {
            Fired::Early => 0,
            Fired::Default => 1,
            Fired::GlPrefix => 2,
            Fired::Flush => 3,
        }];
        let sender = self.member_objs[d.index].clone_ref(py);
        Ok(match &self.setters {
            Some((new, set)) => {
                let obj = new.bind(py).call1((cls,))?;
                let values: [Bound<'py, PyAny>; 9] = [
                    sender.into_bound(py),
                    d.seq.into_pyobject(py)?.into_any(),
                    d.payload.into_bound(py),
                    d.position.into_pyobject(py)?.into_any(),
                    d.activation.into_pyobject(py)?.into_any(),
                    rule.bind(py).clone(),
                    d.ntail.into_pyobject(py)?.into_any(),
                    d.unseen.into_pyobject(py)?.into_any(),
                    d.nvt.into_pyobject(py)?.into_any(),
                ];
                for (setter, value) in set.iter().zip(values) {
                    setter.bind(py).call1((&obj, value))?;
                }
                obj
            }
            None => cls.call1((sender, d.seq, d.payload, d.position, d.activation,
                               rule.clone_ref(py), d.ntail, d.unseen, d.nvt))?,
        })
    }

    /// `insert` of a message already read (the reliable layer's fused release): the
    /// deliveries it decides are left for `take_decided`. `acks` are members' ids (the
    /// reliable layer applied them), so they read as `insert` reads them.
    pub(crate) fn insert_read(&mut self, sender: i64, seq: i64, acks: &[(i64, i64)],
                              payload: Option<Py<PyAny>>) -> Result<(), Violation> {
        self.inner.insert(sender, seq, acks, payload, &mut self.out)
    }

    /// What the last `insert_read` decided, in order.
    pub(crate) fn take_decided(&mut self) -> Vec<Delivery<Py<PyAny>>> {
        std::mem::take(&mut self.out)
    }

    /// The `ProtocolViolation` `insert(message)` raises for `v`.
    pub(crate) fn violation_of(&self, py: Python<'_>, message: &Bound<'_, PyAny>, v: Violation)
        -> PyResult<PyErr> {
        let sender = message.getattr(intern!(py, "sender"))?;
        let acks = message.getattr(intern!(py, "acks"))?;
        Ok(self.violation(py, message, &sender, &acks, v))
    }

    fn violation(&self, py: Python<'_>, message: &Bound<'_, PyAny>, sender: &Bound<'_, PyAny>,
                 acks: &Bound<'_, PyAny>, v: Violation) -> PyErr {
        let detail = (|| -> PyResult<String> {
            let ack = |k: usize| -> PyResult<(Bound<'_, PyAny>, Bound<'_, PyAny>)> {
                acks.try_iter()?.nth(k).expect("the ack exists")?.extract()
            };
            Ok(match v {
                Violation::UnknownSender => format!("{} is not a member", sender.str()?),
                Violation::Duplicate { expected } | Violation::SequenceGap { expected } => {
                    format!("{} inserted, expected seq {expected}",
                            message.getattr(intern!(py, "id"))?.str()?)
                }
                Violation::AckNonMember { ack: k } => format!("ack of non-member {}", ack(k)?.0.str()?),
                Violation::AckUnknown { ack: k } => {
                    let (node, acked) = ack(k)?;
                    format!("{} acks unseen ({}, {})", message.getattr(intern!(py, "id"))?.str()?,
                            node.str()?, acked.str()?)
                }
            })
        })();
        match detail {
            Ok(detail) => error_of(py, &PROTOCOL_VIOLATION, "ProtocolViolation",
                                   (v.reason(), detail)),
            Err(err) => err,
        }
    }
}

#[pymethods]
impl PyEngine {
    #[new]
    #[pyo3(signature = (members, config = None))]
    fn new(py: Python<'_>, members: &Bound<'_, PyAny>, config: Option<Bound<'_, PyAny>>)
        -> PyResult<Self> {
        let members = PyTuple::new(py, members.try_iter()?.collect::<PyResult<Vec<_>>>()?)?;
        if PySet::new(py, members.iter())?.len() != members.len() {
            return Err(configuration_error(py, "member ids must be distinct".into()));
        }
        let ordering = py.import("amcast.protocols.ordering")?;
        let config = match config {
            Some(c) if c.is_truthy()? => c,
            _ => ordering.getattr("OrderingConfig")?.call0()?,
        };
        let n = members.len();
        let phi: f64 = config.call_method1("resolve_phi", (n,))?.extract()?;
        let rule = config.getattr("rule")?;
        let value: String = rule.getattr("value")?.extract()?;
        let parsed = Rule::parse(&value)
            .ok_or_else(|| configuration_error(py, format!("unknown ordering rule {value:?}")))?;
        let ack_roots_leave: bool = config.getattr("ack_roots_leave")?.is_truthy()?;
        if n > MAX_MEMBERS {
            return Err(configuration_error(
                py, format!("the native engine orders at most {MAX_MEMBERS} members; got {n}")));
        }
        let ids = members
            .iter()
            .map(|m| m.extract::<i64>())
            .collect::<PyResult<Vec<i64>>>()
            .map_err(|_| configuration_error(py, "the native engine takes member ids that are \
                                                  64-bit ints".into()))?;
        let mut outsider = i64::MIN;
        while ids.contains(&outsider) {
            outsider += 1;
        }
        let inner = Engine::new(&ids, parsed, phi, ack_roots_leave)
            .map_err(|e| configuration_error(py, e))?;
        let rules = ordering.getattr("DeliveryRule")?;
        let fired = [
            rules.getattr("EARLY")?.unbind(),
            rules.getattr("DEFAULT")?.unbind(),
            rules.getattr("GL_PREFIX")?.unbind(),
            rules.getattr("FLUSH")?.unbind(),
        ];
        let delivered_cls = ordering.getattr("MessageDelivered")?;
        let new = py.import("builtins")?.getattr("object")?.getattr("__new__")?;
        let setters = if new.call1((&delivered_cls,)).is_ok() {
            const FIELDS: [&str; 9] = ["sender", "seq", "payload", "position", "activation",
                                       "rule", "ntail", "unseen", "nvt"];
            let set = FIELDS
                .iter()
                .map(|f| Ok(delivered_cls.getattr(*f)?.getattr("__set__")?.unbind()))
                .collect::<PyResult<Vec<_>>>()?;
            Some((new.unbind(), set))
        } else {
            None
        };
        Ok(PyEngine {
            inner,
            setters,
            member_objs: members.iter().map(|m| m.unbind()).collect(),
            members: members.unbind(),
            config: config.unbind(),
            rule: rule.unbind(),
            outsider,
            delivered_cls: delivered_cls.unbind(),
            fired,
            out: Vec::new(),
            acks: Vec::new(),
        })
    }

    #[getter]
    fn members(&self, py: Python<'_>) -> Py<PyTuple> {
        self.members.clone_ref(py)
    }

    #[getter]
    fn config(&self, py: Python<'_>) -> Py<PyAny> {
        self.config.clone_ref(py)
    }

    #[getter]
    fn rule(&self, py: Python<'_>) -> Py<PyAny> {
        self.rule.clone_ref(py)
    }

    #[getter]
    fn n(&self) -> usize {
        self.inner.n()
    }

    #[getter]
    fn phi(&self) -> f64 {
        self.inner.phi()
    }

    #[getter]
    fn activation(&self) -> u64 {
        self.inner.activation
    }

    #[getter]
    fn position(&self) -> u64 {
        self.inner.position
    }

    #[getter]
    fn delivered_vertices(&self) -> u64 {
        self.inner.delivered_vertices
    }

    #[getter]
    fn delivered_ack_only(&self) -> u64 {
        self.inner.delivered_ack_only
    }

    /// Vertices in G (inserted, not yet delivered).
    #[getter]
    fn pending(&self) -> usize {
        self.inner.pending()
    }

    /// Vertices in G that carry a payload.
    #[getter]
    fn pending_payloads(&self) -> usize {
        self.inner.pending_payloads()
    }

    #[getter]
    fn ntail(&self) -> usize {
        self.inner.ntail()
    }

    /// Add one causally released message to G; return what is delivered as a result.
    fn insert<'py>(&mut self, py: Python<'py>, message: &Bound<'py, PyAny>)
        -> PyResult<Bound<'py, PyList>> {
        let sender_o = message.getattr(intern!(py, "sender"))?;
        let seq_o = message.getattr(intern!(py, "seq"))?;
        let acks_o = message.getattr(intern!(py, "acks"))?;
        let payload_o = message.getattr(intern!(py, "payload"))?;
        let sender = sender_o.extract::<i64>().unwrap_or(self.outsider);
        let seq = saturated(&seq_o)?;
        self.acks.clear();
        if let Ok(tuple) = acks_o.downcast::<PyTuple>() {
            for item in tuple.iter() {
                self.acks.push(self.ack(&item)?);
            }
        } else {
            for item in acks_o.try_iter()? {
                let pair = self.ack(&item?)?;
                self.acks.push(pair);
            }
        }
        let payload = if payload_o.is_none() { None } else { Some(payload_o.unbind()) };
        let acks = std::mem::take(&mut self.acks);
        let result = self.inner.insert(sender, seq, &acks, payload, &mut self.out);
        self.acks = acks;
        if let Err(v) = result {
            return Err(self.violation(py, message, &sender_o, &acks_o, v));
        }
        self.results(py)
    }

    /// Deliver everything left in G, deterministically (end of a view).
    fn close<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.inner.close(&mut self.out);
        self.results(py)
    }
}

impl PyEngine {
    fn ack(&self, item: &Bound<'_, PyAny>) -> PyResult<(i64, i64)> {
        let (node, acked) = if let Ok(pair) = item.downcast::<PyTuple>() {
            if pair.len() != 2 {
                return Err(PyTypeError::new_err("an ack is a (node, seq) pair"));
            }
            (pair.get_item(0)?, pair.get_item(1)?)
        } else {
            item.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>()?
        };
        Ok((node.extract::<i64>().unwrap_or(self.outsider), saturated(&acked)?))
    }
}
