//! amcast's native data path: the per-datagram wire work (sealing, opening, the replay
//! guard, decoding the data-plane datagram, encoding it) in Rust, bound to Python with PyO3 as the
//! module `amcast_native`; and the ToTo total-order engine (`ordering`). The Python core (`amcast.protocols.wire`) stays the
//! reference: the differential tests in `tests/native/` feed both the same datagrams and
//! require the same decisions.



/// The interface this build implements: the Python package uses the extension only where
/// this is the number it expects (`amcast.protocols.extension.INTERFACE`), and runs its
/// pure-Python core otherwise. Bumped with every change to the surface or the behaviour
/// the package relies on, so a stale build is refused whole, with the reason, instead of
/// misbehaving.
pub const INTERFACE: u32 = 6;

pub mod auth;
pub mod batch_io;
pub mod datagram;
pub mod encode;
pub mod error;
pub mod membership;
pub mod msgpack;
pub mod ordering;
pub mod reliable;
pub mod pyrepr;
pub mod replay;

#[cfg(feature = "python")]
mod python;
#[cfg(feature = "python")]
mod python_encode;
#[cfg(feature = "python")]
mod python_engine;
#[cfg(feature = "python")]
mod python_io;
#[cfg(feature = "python")]
mod python_reliable;
