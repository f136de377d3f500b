//! The msgpack writer of the data-plane encoder (`codec.encode_body`): the bytes
//! msgpack-python's `Packer(use_bin_type=True)` writes for ints, floats, bytes and arrays,
//! each in its smallest format. The Python bindings (`python_encode`) walk the datagram;
//! this is the format alone, testable without Python.

#![forbid(unsafe_code)]

/// A msgpack body under construction.
#[derive(Debug, Default)]
pub struct Writer {
    pub out: Vec<u8>,
}

/// The largest length an array or bin header can say (msgpack's 32-bit lengths).
pub const MAX_LEN: usize = u32::MAX as usize;

impl Writer {
    pub fn new() -> Self {
        Writer { out: Vec::with_capacity(64) }
    }

    /// A non-negative integer (`uint` formats; `0..=127` as a positive fixint).
    pub fn uint(&mut self, v: u64) {
        let out = &mut self.out;
        if v < 0x80 {
            out.push(v as u8);
        } else if v <= 0xff {
            out.extend_from_slice(&[0xcc, v as u8]);
        } else if v <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(v as u16).to_be_bytes());
        } else if v <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(v as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&v.to_be_bytes());
        }
    }

    /// Any integer msgpack holds: non-negative as `uint`, negative in the smallest
    /// signed format (`-32..=-1` as a negative fixint).
    pub fn int(&mut self, v: i64) {
        if v >= 0 {
            self.uint(v as u64);
            return;
        }
        let out = &mut self.out;
        if v >= -32 {
            out.push(v as i8 as u8);
        } else if v >= -128 {
            out.extend_from_slice(&[0xd0, v as i8 as u8]);
        } else if v >= -32768 {
            out.push(0xd1);
            out.extend_from_slice(&(v as i16).to_be_bytes());
        } else if v >= -(1 << 31) {
            out.push(0xd2);
            out.extend_from_slice(&(v as i32).to_be_bytes());
        } else {
            out.push(0xd3);
            out.extend_from_slice(&v.to_be_bytes());
        }
    }

    /// A float, as a double (msgpack-python's default: its bits as they are).
    pub fn float(&mut self, v: f64) {
        self.out.push(0xcb);
        self.out.extend_from_slice(&v.to_bits().to_be_bytes());
    }

    /// An array header of `n` elements (`n <= MAX_LEN`).
    pub fn array(&mut self, n: usize) {
        debug_assert!(n <= MAX_LEN);
        let out = &mut self.out;
        if n < 16 {
            out.push(0x90 | n as u8);
        } else if n <= 0xffff {
            out.push(0xdc);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            out.push(0xdd);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
    }

    /// Bytes, as bin (`use_bin_type=True`; `data.len() <= MAX_LEN`).
    pub fn bin(&mut self, data: &[u8]) {
        debug_assert!(data.len() <= MAX_LEN);
        let n = data.len();
        let out = &mut self.out;
        if n <= 0xff {
            out.extend_from_slice(&[0xc4, n as u8]);
        } else if n <= 0xffff {
            out.push(0xc5);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            out.push(0xc6);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        out.extend_from_slice(data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(f: impl FnOnce(&mut Writer)) -> Vec<u8> {
        let mut w = Writer::new();
        f(&mut w);
        w.out
    }

    #[test]
    fn smallest_formats() {
        assert_eq!(one(|w| w.uint(0)), [0x00]);
        assert_eq!(one(|w| w.uint(127)), [0x7f]);
        assert_eq!(one(|w| w.uint(128)), [0xcc, 0x80]);
        assert_eq!(one(|w| w.uint(256)), [0xcd, 0x01, 0x00]);
        assert_eq!(one(|w| w.uint(65536)), [0xce, 0, 1, 0, 0]);
        assert_eq!(one(|w| w.uint(1 << 32)), [0xcf, 0, 0, 0, 1, 0, 0, 0, 0]);
        assert_eq!(one(|w| w.int(-1)), [0xff]);
        assert_eq!(one(|w| w.int(-32)), [0xe0]);
        assert_eq!(one(|w| w.int(-33)), [0xd0, 0xdf]);
        assert_eq!(one(|w| w.int(-129)), [0xd1, 0xff, 0x7f]);
        assert_eq!(one(|w| w.int(-32769)), [0xd2, 0xff, 0xff, 0x7f, 0xff]);
        assert_eq!(one(|w| w.int(i64::MIN))[0], 0xd3);
        assert_eq!(one(|w| w.array(15)), [0x9f]);
        assert_eq!(one(|w| w.array(16)), [0xdc, 0, 16]);
        assert_eq!(one(|w| w.array(65536)), [0xdd, 0, 1, 0, 0]);
        assert_eq!(one(|w| w.bin(b"ab")), [0xc4, 2, b'a', b'b']);
        assert_eq!(one(|w| w.bin(&[0; 256]))[..3], [0xc5, 1, 0]);
        assert_eq!(one(|w| w.float(1.5)), [0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0]);
    }
}
