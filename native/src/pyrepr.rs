//! Python's `repr` of an unpacked value, cut to 40 characters: the decoder's refusal
//! details say `f"{what}={value!r:.40}"` (`protocols/wire/fields.py`).

#![forbid(unsafe_code)]

use std::fmt::Write;

use crate::msgpack::Value;

/// Characters of a repr that a detail keeps.
pub const REPR_CHARS: usize = 40;

/// `repr(value)[:40]`.
pub fn repr40(value: &Value<'_>) -> String {
    let mut out = String::new();
    write_repr(value, &mut out);
    out.truncate(REPR_CHARS); // every character written is ASCII
    out
}

fn write_repr(value: &Value<'_>, out: &mut String) {
    if out.len() > REPR_CHARS {
        return; // cut anyway: nested arrays stop early
    }
    match value {
        Value::Nil => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => out.push_str(&float_repr(*f)),
        Value::Bytes(b) => bytes_repr(b, out),
        Value::EmptyMap => out.push_str("{}"),
        Value::EmptyExt(code) => {
            let _ = write!(out, "ExtType(code={code}, data=b'')");
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(item, out);
                if out.len() > REPR_CHARS {
                    return;
                }
            }
            out.push(']');
        }
    }
}

/// `repr(bytes)`: single quotes unless the bytes hold `'` and no `"`.
pub fn bytes_repr(bytes: &[u8], out: &mut String) {
    let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') { b'"' } else { b'\'' };
    out.push('b');
    out.push(char::from(quote));
    for &c in bytes {
        if out.len() > REPR_CHARS {
            return;
        }
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            _ if c == quote => {
                out.push('\\');
                out.push(char::from(c));
            }
            0x20..=0x7e => out.push(char::from(c)),
            _ => {
                let _ = write!(out, "\\x{c:02x}");
            }
        }
    }
    out.push(char::from(quote));
}

/// `repr(float)`: the shortest digits that round-trip, in fixed notation for decimal
/// exponents from -4 to 16, else scientific with a signed exponent of two digits or more.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if f == 0.0 {
        return format!("{sign}0.0");
    }
    // Rust's `{:e}` gives as few digits as round-trip ("d.ddde±x"); where several strings
    // of that many digits do, Python takes the one nearest the value (ties to even), as
    // Rust's exact formatting to that many digits does
    let shortest = format!("{:e}", f.abs());
    let n_digits = shortest.split_once('e').map_or(1, |(m, _)| m.len() - usize::from(m.len() > 1));
    let nearest = format!("{:.*e}", n_digits - 1, f.abs());
    let sci = if nearest.parse::<f64>() == Ok(f.abs()) { nearest } else { shortest };
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let n = digits.len() as i32;
    let decpt = exp + 1; // value = 0.digits × 10^decpt
    if decpt <= -4 || decpt > 16 {
        let mut m = digits[..1].to_string();
        if n > 1 {
            m.push('.');
            m.push_str(&digits[1..]);
        }
        let e = decpt - 1;
        let esign = if e < 0 { '-' } else { '+' };
        return format!("{sign}{m}e{esign}{:02}", e.abs());
    }
    if decpt <= 0 {
        format!("{sign}0.{}{digits}", "0".repeat((-decpt) as usize))
    } else if decpt < n {
        format!("{sign}{}.{}", &digits[..decpt as usize], &digits[decpt as usize..])
    } else {
        format!("{sign}{digits}{}.0", "0".repeat((decpt - n) as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_python() {
        for (f, s) in [(1.0, "1.0"), (1e16, "1e+16"), (1e15, "1000000000000000.0"),
                       (0.0001, "0.0001"), (0.00001, "1e-05"), (-0.0, "-0.0"), (1.5, "1.5"),
                       (123.456, "123.456"), (1.5e300, "1.5e+300"), (5e-324, "5e-324"),
                       (f64::INFINITY, "inf"), (f64::NAN, "nan"), (0.1, "0.1"),
                       (0.5f64.powi(25), "2.9802322387695312e-08")] {
            assert_eq!(float_repr(f), s);
        }
    }

    #[test]
    fn bytes_and_arrays_as_python() {
        assert_eq!(repr40(&Value::Bytes(b"a'b")), "b\"a'b\"");
        assert_eq!(repr40(&Value::Bytes(b"a'\"\\\x00\x7f\n")), "b'a\\'\"\\\\\\x00\\x7f\\n'");
        let long = Value::Array(vec![Value::Int(123_456_789); 10]);
        assert_eq!(repr40(&long), "[123456789, 123456789, 123456789, 123456");
        assert_eq!(repr40(&Value::Array(vec![Value::Nil, Value::EmptyMap, Value::Bool(false)])),
                   "[None, {}, False]");
        assert_eq!(repr40(&Value::EmptyExt(-3)), "ExtType(code=-3, data=b'')");
    }
}
