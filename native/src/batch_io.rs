//! Batched datagram I/O on a UDP socket: `recvmmsg` and `sendmmsg` in place of one
//! `recvfrom` or `sendto` per datagram.
//!
//! Theory of operation. The daemon's transports (`daemon/transport.py`,
//! `daemon/unicast.py`) open, configure and close their sockets in Python; this module
//! borrows a socket's descriptor for the data path only. A wake-up of the event loop
//! drains the receive socket in calls of up to [`SLOTS`] datagrams each (one call where
//! the Python reader made one `recvfrom` per datagram and a last one that found the
//! socket empty), leaves out the datagrams whose source is one of this daemon's own send
//! sockets (the loopback copies of its multicasts) and hands the rest to the caller in
//! arrival order. A send of a pump's datagrams goes out in calls of up to [`SLOTS`]
//! datagrams, each to every destination (one for multicast, every peer in send order for
//! unicast), datagram-major as the Python loop sent them. A datagram the kernel refuses
//! is counted by its errno and skipped, never retried here: the reliable layer repairs
//! it, as it repairs any loss. The socket is non-blocking; `EAGAIN` on receive ends the
//! drain, on send it is a refusal like any other (`send_eagain`, as before).
//!
//! The calls are nix's safe wrappers; this module has no `unsafe` of its own.

#![forbid(unsafe_code)]

use std::io::{IoSlice, IoSliceMut};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

use nix::errno::Errno;
use nix::sys::socket::{
    recvmmsg, sendmmsg, ControlMessage, MsgFlags, MultiHeaders, SockaddrStorage,
};

/// Datagrams per system call.
pub const SLOTS: usize = 32;
/// The largest UDP payload; every receive buffer holds one.
pub const MAX_DATAGRAM: usize = 65535;

/// What one drain of the socket found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Received {
    /// Datagrams handed to the caller.
    pub datagrams: usize,
    /// Their bytes.
    pub bytes: usize,
    /// Datagrams left out: sent by one of the skipped addresses.
    pub skipped: usize,
    /// The error that ended the drain, other than `EAGAIN`/`EINTR` (an ICMP error queued
    /// on the socket, say): counted by the caller, never fatal.
    pub error: Option<Errno>,
}

/// What one send of a batch did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sent {
    /// Datagram copies the kernel took (a datagram to three peers is three).
    pub copies: usize,
    /// Their bytes.
    pub bytes: usize,
    /// One errno per copy the kernel refused, in order.
    pub refused: Vec<Errno>,
}

/// A borrowed UDP socket with the buffers of batched I/O. The message headers of each
/// call are built for it (they hold pointers into that call's buffers), so this holds
/// plain data only and may move between threads.
pub struct BatchSocket {
    fd: RawFd,
    buffers: Vec<Vec<u8>>,
    skip: Vec<SocketAddr>,
    destinations: Vec<SocketAddr>,
}

fn socket_addr(storage: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = storage.as_sockaddr_in() {
        return Some(SocketAddr::V4(SocketAddrV4::from(*v4)));
    }
    storage.as_sockaddr_in6().map(|v6| SocketAddr::V6(SocketAddrV6::from(*v6)))
}

/// Do two addresses name one socket? Address and port; an IPv6 address's flow info and
/// scope are not compared (the Python reader compared `addr[:2]`).
fn same_socket(a: &SocketAddr, b: &SocketAddr) -> bool {
    a.ip() == b.ip() && a.port() == b.port()
}

impl BatchSocket {
    /// `fd`: a non-blocking UDP socket that stays open as long as this is used (a closed
    /// descriptor only makes every call fail with `EBADF`).
    pub fn new(fd: RawFd) -> Self {
        BatchSocket {
            fd,
            buffers: (0..SLOTS).map(|_| vec![0u8; MAX_DATAGRAM]).collect(),
            skip: Vec::new(),
            destinations: Vec::new(),
        }
    }

    /// The sources whose datagrams a receive leaves out.
    pub fn set_skip(&mut self, skip: Vec<SocketAddr>) {
        self.skip = skip;
    }

    /// Where every datagram of a send goes, in this order.
    pub fn set_destinations(&mut self, destinations: &[SocketAddr]) {
        self.destinations = destinations.to_vec();
    }

    pub fn destinations(&self) -> usize {
        self.destinations.len()
    }

    /// Receive up to `max` datagrams, handing each one not from a skipped source to
    /// `each`; stops early when the socket is empty.
    pub fn receive(&mut self, max: usize, mut each: impl FnMut(&[u8])) -> Received {
        let mut found = Received::default();
        let mut want = max;
        let mut got: Vec<(usize, Option<SocketAddr>)> = Vec::with_capacity(SLOTS);
        while want > 0 {
            let n = want.min(SLOTS);
            got.clear();
            {
                let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(n, None);
                let mut slices: Vec<[IoSliceMut<'_>; 1]> = self.buffers[..n]
                    .iter_mut()
                    .map(|buffer| [IoSliceMut::new(buffer.as_mut_slice())])
                    .collect();
                match recvmmsg(self.fd, &mut headers, slices.iter_mut(),
                               MsgFlags::MSG_DONTWAIT, None) {
                    Ok(results) => {
                        got.extend(results.map(|r| {
                            (r.bytes, r.address.as_ref().and_then(socket_addr))
                        }));
                    }
                    Err(Errno::EAGAIN | Errno::EINTR) => break,
                    Err(err) => {
                        found.error = Some(err);
                        break;
                    }
                }
            }
            for (slot, (len, source)) in got.iter().enumerate() {
                if let Some(source) = source {
                    if self.skip.iter().any(|own| same_socket(own, source)) {
                        found.skipped += 1;
                        continue;
                    }
                }
                found.datagrams += 1;
                found.bytes += len;
                each(&self.buffers[slot][..*len]);
            }
            if got.len() < n {
                break; // drained
            }
            want -= got.len();
        }
        found
    }

    /// Send every datagram to every destination, datagram-major.
    pub fn send(&mut self, datagrams: &[&[u8]]) -> Sent {
        let mut sent = Sent::default();
        let per = self.destinations.len();
        if per == 0 {
            return sent;
        }
        let total = datagrams.len() * per;
        let mut next = 0; // index of the next copy: datagram next / per, destination next % per
        let no_control: [ControlMessage<'_>; 0] = [];
        while next < total {
            let end = total.min(next + SLOTS);
            let slices: Vec<[IoSlice<'_>; 1]> =
                (next..end).map(|k| [IoSlice::new(datagrams[k / per])]).collect();
            let addresses: Vec<Option<SockaddrStorage>> = (next..end)
                .map(|k| Some(SockaddrStorage::from(self.destinations[k % per])))
                .collect();
            let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(end - next, None);
            match sendmmsg(self.fd, &mut headers, slices.iter(), &addresses,
                           no_control, MsgFlags::MSG_DONTWAIT) {
                Ok(results) => {
                    let mut took = 0;
                    for r in results {
                        sent.bytes += r.bytes;
                        took += 1;
                    }
                    sent.copies += took;
                    next += took;
                    if took == 0 {
                        // nothing taken, no error: count the copy refused rather than spin
                        sent.refused.push(Errno::EAGAIN);
                        next += 1;
                    }
                }
                Err(Errno::EINTR) => {}
                Err(err) => {
                    // the first copy of this call was refused: count it, go on past it
                    sent.refused.push(err);
                    next += 1;
                }
            }
        }
        sent
    }
}

/// The address of an IP literal and a port; `None` where `host` is no IP literal.
pub fn parse_address(host: &str, port: u16) -> Option<SocketAddr> {
    host.parse().ok().map(|ip| SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    fn pair() -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    fn drain(io: &mut BatchSocket, max: usize) -> (Vec<Vec<u8>>, Received) {
        let mut out = Vec::new();
        let found = io.receive(max, |d| out.push(d.to_vec()));
        (out, found)
    }

    #[test]
    fn sends_each_datagram_to_every_destination_in_order() {
        let (tx, rx1) = pair();
        let rx2 = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut io = BatchSocket::new(tx.as_raw_fd());
        io.set_destinations(&[rx1.local_addr().unwrap(), rx2.local_addr().unwrap()]);
        let datagrams: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 10 + i as usize]).collect();
        let refs: Vec<&[u8]> = datagrams.iter().map(Vec::as_slice).collect();
        let sent = io.send(&refs);
        assert_eq!(sent.copies, 80);
        assert_eq!(sent.bytes, 2 * datagrams.iter().map(Vec::len).sum::<usize>());
        assert!(sent.refused.is_empty());
        for rx in [&rx1, &rx2] {
            let mut io = BatchSocket::new(rx.as_raw_fd());
            let (got, found) = drain(&mut io, 256);
            assert_eq!(got, datagrams);
            assert_eq!(found.datagrams, 40);
            assert_eq!(found.error, None);
        }
    }

    #[test]
    fn receive_skips_own_sources_and_respects_max() {
        let (own, rx) = pair();
        let other = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap();
        for i in 0..5u8 {
            own.send_to(&[i], to).unwrap();
            other.send_to(&[100 + i], to).unwrap();
        }
        let mut io = BatchSocket::new(rx.as_raw_fd());
        io.set_skip(vec![own.local_addr().unwrap()]);
        let (got, found) = drain(&mut io, 4);
        assert_eq!(found.skipped + found.datagrams, 4);
        assert!(got.iter().all(|d| d[0] >= 100));
        let (rest, found2) = drain(&mut io, 256);
        assert_eq!(found.datagrams + found2.datagrams, 5);
        assert_eq!(found.skipped + found2.skipped, 5);
        let mut all: Vec<u8> = got.iter().chain(rest.iter()).map(|d| d[0]).collect();
        all.sort();
        assert_eq!(all, vec![100, 101, 102, 103, 104]);
        let (none, found3) = drain(&mut io, 256);
        assert!(none.is_empty());
        assert_eq!(found3, Received::default());
    }

    #[test]
    fn a_refused_copy_is_counted_and_the_rest_go_out() {
        let (tx, rx) = pair();
        let mut io = BatchSocket::new(tx.as_raw_fd());
        // an IPv6 destination on an IPv4 socket is refused (EAFNOSUPPORT or EINVAL)
        let bad: SocketAddr = "[::1]:9".parse().unwrap();
        io.set_destinations(&[bad, rx.local_addr().unwrap()]);
        let sent = io.send(&[b"a", b"bc"]);
        assert_eq!(sent.copies, 2);
        assert_eq!(sent.bytes, 3);
        assert_eq!(sent.refused.len(), 2);
        let mut rio = BatchSocket::new(rx.as_raw_fd());
        let (got, _) = drain(&mut rio, 16);
        assert_eq!(got, vec![b"a".to_vec(), b"bc".to_vec()]);
    }

    #[test]
    fn a_bad_descriptor_is_an_error_not_a_panic() {
        let mut io = BatchSocket::new(-1);
        let (got, found) = drain(&mut io, 8);
        assert!(got.is_empty());
        assert_eq!(found.error, Some(Errno::EBADF));
        io.set_destinations(&["127.0.0.1:9".parse().unwrap()]);
        let sent = io.send(&[b"x"]);
        assert_eq!(sent.copies, 0);
        assert_eq!(sent.refused, vec![Errno::EBADF]);
    }

    #[test]
    fn moves_between_threads() {
        fn is_send<T: Send>() {}
        is_send::<BatchSocket>();
    }

    #[test]
    fn parses_ip_literals_only() {
        assert_eq!(parse_address("127.0.0.1", 5), Some("127.0.0.1:5".parse().unwrap()));
        assert_eq!(parse_address("ff05::4242", 7), Some("[ff05::4242]:7".parse().unwrap()));
        assert_eq!(parse_address("localhost", 7), None);
    }
}
