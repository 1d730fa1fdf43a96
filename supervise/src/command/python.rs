//! Parameter values written as W&B's agent writes them: it is Python, so a
//! `--k=v` argument is an f-string of the value (`str`: True, None, 1e-05,
//! `[1, 'a']`) and `${args_json}` is `json.dumps` with its defaults
//! (`ensure_ascii`, `", "` and `": "` separators). Values arrive as JSON, as
//! the W&B server hands them to the agent.

use serde_json::Value;
use std::fmt::Write;

/// Python's `str(v)`: a string as it is, anything else as `repr`.
pub fn str_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => {
            let mut out = String::new();
            repr(other, &mut out);
            out
        }
    }
}

/// Python's `repr(v)`.
fn repr(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => number(n, out),
        Value::String(s) => string_repr(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                repr(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                string_repr(k, out);
                out.push_str(": ");
                repr(item, out);
            }
            out.push('}');
        }
    }
}

/// `json.dumps(v)` with Python's defaults.
pub fn json_dumps(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => number(n, out),
        Value::String(s) => json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                json_dumps(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                json_string(k, out);
                out.push_str(": ");
                json_dumps(item, out);
            }
            out.push('}');
        }
    }
}

/// An int as Python writes it; a float as `float.__repr__` does (which
/// `json.dumps` uses too). JSON holds no NaN or infinity.
fn number(n: &serde_json::Number, out: &mut String) {
    if n.is_f64() {
        out.push_str(&float_repr(n.as_f64().unwrap_or(f64::NAN)));
    } else {
        out.push_str(&n.to_string());
    }
}

/// Python's `repr(float)`: the shortest digits that read back (Rust's
/// `{:e}` finds the same), in positional form with at least one decimal
/// (`2.0`, `0.0001`) unless the decimal exponent is below -4 or at least 16,
/// where it is `1e-05`, `1.5e+16` (a sign and at least two digits).
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    if !(-4..16).contains(&exp) {
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{mantissa}e{esign}{:02}", exp.abs());
    }
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let point = exp + 1; // digits before the decimal point
    let body = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else {
        let point = point as usize;
        if digits.len() > point {
            format!("{}.{}", &digits[..point], &digits[point..])
        } else {
            format!("{digits}{}.0", "0".repeat(point - digits.len()))
        }
    };
    format!("{sign}{body}")
}

/// Python's `repr(str)`: single quotes unless the text holds a single quote
/// and no double one; backslash escapes for the quote, backslash, `\n`,
/// `\r`, `\t`, and `\xNN`/`\uNNNN` for characters Python does not print.
fn string_repr(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if !printable(c) => {
                let n = c as u32;
                let _ = match n {
                    0..=0xff => write!(out, "\\x{n:02x}"),
                    0x100..=0xffff => write!(out, "\\u{n:04x}"),
                    _ => write!(out, "\\U{n:08x}"),
                };
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// Python's `str.isprintable` for the characters a parameter plausibly
/// holds: not the control characters (C0, DEL, C1), separators other than
/// the space, the format characters and the private-use areas. (Python
/// also escapes unassigned code points, which needs its Unicode tables.)
fn printable(c: char) -> bool {
    !matches!(c as u32,
        0..=0x1f | 0x7f..=0xa0 | 0xad
        | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x180e
        | 0x1680 | 0x2000..=0x200f | 0x2028..=0x202f | 0x205f..=0x2064 | 0x2066..=0x206f
        | 0x3000 | 0xd800..=0xf8ff | 0xfeff | 0xfff9..=0xfffb
        | 0x110bd | 0x1bca0..=0x1bca3 | 0x1d173..=0x1d17a
        | 0xe0001 | 0xe0020..=0xe007f | 0xf0000..)
}

/// A JSON string as `json.dumps` writes it (`ensure_ascii`): `\"`, `\\`,
/// the short escapes, and `\uNNNN` (surrogate pairs past the BMP) for
/// anything outside printable ASCII.
fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_as_python_reprs_them() {
        // python3 -c 'print(repr(x))' for each.
        for (x, py) in [
            (0.1, "0.1"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (123456789.0, "123456789.0"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.2345678901234567e16, "1.2345678901234568e+16"),
            (9999999999999998.0, "9999999999999998.0"),
            (-0.0, "-0.0"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (3.0, "3.0"),
            (0.30000000000000004, "0.30000000000000004"),
            (1e22, "1e+22"),
            (100.0, "100.0"),
            (12345.678, "12345.678"),
            (-2.5e-3, "-0.0025"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(float_repr(x), py, "{x:e}");
        }
    }

    #[test]
    fn values_as_python_strs_them() {
        for (v, py) in [
            (json!(true), "True"),
            (json!(null), "None"),
            (json!(-3), "-3"),
            (json!(18446744073709551615u64), "18446744073709551615"),
            (json!(2.0), "2.0"),
            (json!("resnet 50"), "resnet 50"),
            (
                json!(["it's", "a\"b", "both'\"", "\\"]),
                r#"["it's", 'a"b', 'both\'"', '\\']"#,
            ),
            (
                json!(["a\u{1}b\u{7f}c\u{85}d\u{2028}e\n\t\r", "😀", "\u{ad}"]),
                r"['a\x01b\x7fc\x85d\u2028e\n\t\r', '😀', '\xad']",
            ),
            (json!({"k": [1, {"n": null}]}), "{'k': [1, {'n': None}]}"),
        ] {
            assert_eq!(str_of(&v), py);
        }
    }

    #[test]
    fn json_as_python_dumps_it() {
        // python3 -c 'import json; print(json.dumps(x))'.
        let mut out = String::new();
        json_dumps(
            &json!({"a": [1, 2.0, true, null], "s": "\u{7f}\u{1}😀\u{ad}/\"\\\u{8}\u{c}"}),
            &mut out,
        );
        assert_eq!(
            out,
            r#"{"a": [1, 2.0, true, null], "s": "\u007f\u0001\ud83d\ude00\u00ad/\"\\\b\f"}"#
        );
    }
}
