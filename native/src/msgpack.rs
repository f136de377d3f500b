//! A msgpack reader with the acceptance of the Python core's `msgpack.unpackb` as
//! `protocols/wire/codec.py` calls it (`raw=True`, `use_list=True`, strings, maps and
//! extension types limited to length 0, `max_bin_len` and `max_array_len` from the wire
//! limits).
//!
//! It accepts exactly the bytes that call accepts, builds the same tree (a msgpack str is
//! bytes, as with `raw=True`; the only map is the empty one; the only extension value
//! is an empty `ExtType`), and refuses the rest with the name of the exception Python's
//! msgpack raises (`ValueError`, `FormatError`, `StackError`, `ExtraData`): the decoder's
//! `DecodeError("malformed", name)`. The checks run in the byte order of msgpack's own
//! streaming parser (a container's length is checked at its header, a bin, str or
//! extension value's once its bytes are there), so the first defect decides the name.

#![forbid(unsafe_code)]

/// msgpack's `MSGPACK_EMBED_STACK_SIZE`: open non-empty containers at most.
pub const STACK_SIZE: usize = 1024;

/// One unpacked value (borrowing the bytes of the body).
#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    Nil,
    Bool(bool),
    Int(i128),
    Float(f64),
    Bytes(&'a [u8]),
    Array(Vec<Value<'a>>),
    /// `{}`: `max_map_len=0` admits the empty map only.
    EmptyMap,
    /// `ExtType(code, b"")`: `max_ext_len=0` admits empty extension values only, of codes
    /// 0 to 127.
    EmptyExt(i8),
}

/// The limits the unpacker is given (`WireLimits.max_datagram_bytes` and
/// `WireLimits.max_array_len`).
#[derive(Clone, Copy, Debug)]
pub struct UnpackLimits {
    pub max_bin_len: usize,
    pub max_array_len: usize,
}

/// The exception Python's msgpack raises, by name.
pub type UnpackError = &'static str;

const VALUE_ERROR: UnpackError = "ValueError";
const FORMAT_ERROR: UnpackError = "FormatError";
const STACK_ERROR: UnpackError = "StackError";
const EXTRA_DATA: UnpackError = "ExtraData";

enum Step<'a> {
    Value(Value<'a>),
    /// An array of this many items (more than 0) begins.
    Open(usize),
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    limits: UnpackLimits,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], UnpackError> {
        if self.data.len() - self.pos < n {
            return Err(VALUE_ERROR); // incomplete input
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn uint(&mut self, width: usize) -> Result<u64, UnpackError> {
        let bytes = self.take(width)?;
        Ok(bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn length(&mut self, width: usize) -> Result<usize, UnpackError> {
        // widths are 1, 2 or 4 bytes: always within usize on the hosts we build for
        usize::try_from(self.uint(width)?).map_err(|_| VALUE_ERROR)
    }

    fn raw(&mut self, n: usize) -> Result<Value<'a>, UnpackError> {
        // a str (raw=True: bytes) of any length but 0 exceeds max_str_len=0
        self.take(n)?;
        if n > 0 {
            return Err(VALUE_ERROR);
        }
        Ok(Value::Bytes(&[]))
    }

    fn bin(&mut self, n: usize) -> Result<Value<'a>, UnpackError> {
        let bytes = self.take(n)?;
        if n > self.limits.max_bin_len {
            return Err(VALUE_ERROR);
        }
        Ok(Value::Bytes(bytes))
    }

    fn ext(&mut self, n: usize) -> Result<Value<'a>, UnpackError> {
        let code = self.take(1)?[0] as i8;
        self.take(n)?;
        if n > 0 || code < 0 {
            // longer than max_ext_len=0, an empty timestamp (code -1: invalid) or another
            // negative code (`ExtType` takes 0 to 127 only)
            return Err(VALUE_ERROR);
        }
        Ok(Value::EmptyExt(code))
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Step<'a>, UnpackError> {
        if depth >= STACK_SIZE {
            return Err(STACK_ERROR);
        }
        if n > self.limits.max_array_len {
            return Err(VALUE_ERROR);
        }
        if n == 0 {
            return Ok(Step::Value(Value::Array(Vec::new())));
        }
        Ok(Step::Open(n))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value<'a>, UnpackError> {
        if depth >= STACK_SIZE {
            return Err(STACK_ERROR);
        }
        if n > 0 {
            return Err(VALUE_ERROR); // exceeds max_map_len=0
        }
        Ok(Value::EmptyMap)
    }

    /// The whole value, without recursion (nesting goes 1024 deep).
    fn value(&mut self) -> Result<Value<'a>, UnpackError> {
        // the open arrays: the items so far and the length
        let mut open: Vec<(Vec<Value<'a>>, usize)> = Vec::new();
        loop {
            let mut value = match self.step(open.len())? {
                Step::Value(value) => value,
                Step::Open(n) => {
                    // never trust a length for the allocation: an item takes a byte at least
                    open.push((Vec::with_capacity(n.min(self.data.len() - self.pos)), n));
                    continue;
                }
            };
            loop {
                let Some((items, n)) = open.last_mut() else { return Ok(value) };
                items.push(value);
                if items.len() < *n {
                    break;
                }
                let Some((items, _)) = open.pop() else { unreachable!() };
                value = Value::Array(items);
            }
        }
    }

    fn step(&mut self, depth: usize) -> Result<Step<'a>, UnpackError> {
        let head = self.take(1)?[0];
        let value = match head {
            0x00..=0x7f => Value::Int(i128::from(head)),
            0x80..=0x8f => self.map(usize::from(head & 0x0f), depth)?,
            0x90..=0x9f => return self.array(usize::from(head & 0x0f), depth),
            0xa0..=0xbf => self.raw(usize::from(head & 0x1f))?,
            0xc0 => Value::Nil,
            0xc1 => return Err(FORMAT_ERROR),
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4 => {
                let n = self.length(1)?;
                self.bin(n)?
            }
            0xc5 => {
                let n = self.length(2)?;
                self.bin(n)?
            }
            0xc6 => {
                let n = self.length(4)?;
                self.bin(n)?
            }
            0xc7 => {
                let n = self.length(1)?;
                self.ext(n)?
            }
            0xc8 => {
                let n = self.length(2)?;
                self.ext(n)?
            }
            0xc9 => {
                let n = self.length(4)?;
                self.ext(n)?
            }
            0xca => {
                let bits = self.uint(4)? as u32;
                Value::Float(f64::from(f32::from_bits(bits)))
            }
            0xcb => Value::Float(f64::from_bits(self.uint(8)?)),
            0xcc => Value::Int(i128::from(self.uint(1)?)),
            0xcd => Value::Int(i128::from(self.uint(2)?)),
            0xce => Value::Int(i128::from(self.uint(4)?)),
            0xcf => Value::Int(i128::from(self.uint(8)?)),
            0xd0 => Value::Int(i128::from(self.uint(1)? as u8 as i8)),
            0xd1 => Value::Int(i128::from(self.uint(2)? as u16 as i16)),
            0xd2 => Value::Int(i128::from(self.uint(4)? as u32 as i32)),
            0xd3 => Value::Int(i128::from(self.uint(8)? as i64)),
            0xd4 => self.ext(1)?,
            0xd5 => self.ext(2)?,
            0xd6 => self.ext(4)?,
            0xd7 => self.ext(8)?,
            0xd8 => self.ext(16)?,
            0xd9 => {
                let n = self.length(1)?;
                self.raw(n)?
            }
            0xda => {
                let n = self.length(2)?;
                self.raw(n)?
            }
            0xdb => {
                let n = self.length(4)?;
                self.raw(n)?
            }
            0xdc => {
                let n = self.length(2)?;
                return self.array(n, depth);
            }
            0xdd => {
                let n = self.length(4)?;
                return self.array(n, depth);
            }
            0xde => {
                let n = self.length(2)?;
                self.map(n, depth)?
            }
            0xdf => {
                let n = self.length(4)?;
                self.map(n, depth)?
            }
            0xe0..=0xff => Value::Int(i128::from(head as i8)),
        };
        Ok(Step::Value(value))
    }
}

/// `msgpack.unpackb(data, ...)` as the codec calls it: the value, or the exception name.
pub fn unpack(data: &[u8], limits: UnpackLimits) -> Result<Value<'_>, UnpackError> {
    let mut reader = Reader { data, pos: 0, limits };
    let value = reader.value()?;
    if reader.pos < data.len() {
        return Err(EXTRA_DATA);
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: UnpackLimits = UnpackLimits { max_bin_len: 100, max_array_len: 10 };

    fn err(data: &[u8]) -> UnpackError {
        unpack(data, LIMITS).expect_err("refused")
    }

    #[test]
    fn values() {
        assert_eq!(unpack(b"\xcf\xff\xff\xff\xff\xff\xff\xff\xff", LIMITS),
                   Ok(Value::Int(i128::from(u64::MAX))));
        assert_eq!(unpack(b"\xd3\x80\0\0\0\0\0\0\0", LIMITS), Ok(Value::Int(i128::from(i64::MIN))));
        assert_eq!(unpack(b"\xff", LIMITS), Ok(Value::Int(-1)));
        assert_eq!(unpack(b"\xa0", LIMITS), Ok(Value::Bytes(b"")));
        assert_eq!(unpack(b"\xc4\x02ab", LIMITS), Ok(Value::Bytes(b"ab")));
        assert_eq!(unpack(b"\xde\0\0", LIMITS), Ok(Value::EmptyMap));
        assert_eq!(unpack(b"\xc8\0\0\x07", LIMITS), Ok(Value::EmptyExt(7)));
        assert_eq!(unpack(b"\x92\xc0\xc3", LIMITS),
                   Ok(Value::Array(vec![Value::Nil, Value::Bool(true)])));
    }

    #[test]
    fn refusals_name_python_exceptions() {
        assert_eq!(err(b""), "ValueError");
        assert_eq!(err(b"\xc1"), "FormatError");
        assert_eq!(err(b"\x91\xc1"), "FormatError");
        assert_eq!(err(b"\x9b\xc1"), "ValueError"); // the array's length comes first
        assert_eq!(err(b"\x01\x02"), "ExtraData");
        assert_eq!(err(b"\xa1a"), "ValueError");
        assert_eq!(err(b"\x81\x01\x02"), "ValueError");
        assert_eq!(err(b"\xc7\x00\xff"), "ValueError");
        assert_eq!(err(b"\xc7\x00\x94\x01"), "ValueError"); // not ExtraData: code -108
        assert_eq!(unpack(b"\xc7\x00\x7f", LIMITS), Ok(Value::EmptyExt(127)));
        assert_eq!(err(b"\xc4\x65"), "ValueError");
        let mut deep = vec![0x91u8; STACK_SIZE + 1];
        deep.push(1);
        assert_eq!(err(&deep), "StackError");
        deep.remove(0);
        assert!(unpack(&deep, LIMITS).is_ok());
    }
}
