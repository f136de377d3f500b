//! The binding of `batch_io`: `amcast_native.DatagramIo`, batched receive and send on a
//! UDP socket that a Python transport opened and owns (`daemon/socket_io.py`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use std::net::SocketAddr;

use crate::batch_io::{parse_address, BatchSocket};

fn addresses(pairs: Vec<(String, u16)>) -> PyResult<Vec<SocketAddr>> {
    pairs
        .into_iter()
        .map(|(host, port)| {
            parse_address(&host, port)
                .ok_or_else(|| PyValueError::new_err(format!("not an IP address: {host:?}")))
        })
        .collect()
}

/// Batched I/O on one socket: `DatagramIo(fd)`, `fd` a non-blocking UDP socket's
/// descriptor that stays open while this is used.
#[pyclass(name = "DatagramIo", module = "amcast_native")]
pub struct PyDatagramIo {
    inner: BatchSocket,
}

#[pymethods]
impl PyDatagramIo {
    #[new]
    fn new(fd: i32) -> Self {
        PyDatagramIo { inner: BatchSocket::new(fd) }
    }

    /// Leave out datagrams from these `(ip, port)` sources (this daemon's own send
    /// sockets); `ValueError` for an address that is no IP literal.
    fn set_skip(&mut self, sources: Vec<(String, u16)>) -> PyResult<()> {
        self.inner.set_skip(addresses(sources)?);
        Ok(())
    }

    /// Send every datagram to these `(ip, port)` destinations, in this order.
    fn set_destinations(&mut self, destinations: Vec<(String, u16)>) -> PyResult<()> {
        self.inner.set_destinations(&addresses(destinations)?);
        Ok(())
    }

    /// Drain up to `max` datagrams: `(datagrams, bytes, skipped, errno)`, `errno` 0 or
    /// the error that ended the drain (`EAGAIN` ends it silently).
    fn receive<'py>(&mut self, py: Python<'py>, max: usize)
        -> PyResult<(Bound<'py, PyList>, usize, usize, i32)> {
        let list = PyList::empty(py);
        let mut failed: Option<PyErr> = None;
        let found = self.inner.receive(max, |data| {
            if failed.is_none() {
                if let Err(err) = list.append(PyBytes::new(py, data)) {
                    failed = Some(err);
                }
            }
        });
        if let Some(err) = failed {
            return Err(err);
        }
        Ok((list, found.bytes, found.skipped, found.error.map_or(0, |e| e as i32)))
    }

    /// Send each of `datagrams` (bytes) to every destination: `(copies, bytes, refused)`,
    /// `refused` one errno per refused copy.
    fn send(&mut self, datagrams: Vec<Bound<'_, PyBytes>>) -> (usize, usize, Vec<i32>) {
        let slices: Vec<&[u8]> = datagrams.iter().map(|d| d.as_bytes()).collect();
        let sent = self.inner.send(&slices);
        (sent.copies, sent.bytes, sent.refused.into_iter().map(|e| e as i32).collect())
    }

    /// How many destinations each datagram goes to.
    #[getter]
    fn destinations(&self) -> usize {
        self.inner.destinations()
    }
}
