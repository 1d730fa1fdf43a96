//! Numbers as programs print them: Python's and Rust's floats, `nan`, `inf`
//! and `-inf` (Python), `NaN` and `Infinity` (JSON as Python writes it).

/// The number at the start of `s` and the text after it; None when `s` does
/// not start with one. A word (`nan`, `inf`, `infinity`) must end there: the
/// `inf` of `information` is not a number.
pub fn leading(s: &str) -> Option<(f64, &str)> {
    let bytes = s.as_bytes();
    let mut i = 0;
    let negative = match bytes.first() {
        Some(b'-') => {
            i = 1;
            true
        }
        Some(b'+') => {
            i = 1;
            false
        }
        _ => false,
    };
    let sign = if negative { -1.0 } else { 1.0 };
    let rest = &s[i..];
    for (word, value) in [
        ("infinity", f64::INFINITY),
        ("inf", f64::INFINITY),
        ("nan", f64::NAN),
    ] {
        let Some(head) = rest.get(..word.len()) else {
            continue;
        };
        if head.eq_ignore_ascii_case(word) {
            let after = &rest[word.len()..];
            if after.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
                return None;
            }
            return Some((sign * value, after));
        }
    }
    let digits = |from: usize| {
        bytes[from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let int = digits(i);
    let mut end = i + int;
    let mut frac = 0;
    if bytes.get(end) == Some(&b'.') {
        frac = digits(end + 1);
        end += 1 + frac;
    }
    if int + frac == 0 {
        return None;
    }
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let mut j = end + 1;
        if matches!(bytes.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let exp = digits(j);
        if exp > 0 {
            end = j + exp;
        }
    }
    let value: f64 = s[..end].parse().ok()?;
    Some((value, &s[end..]))
}

/// `s` (trimmed) when it is one number and nothing else.
pub fn whole(s: &str) -> Option<f64> {
    match leading(s.trim()) {
        Some((v, "")) => Some(v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_numbers_programs_print() {
        for (text, value, rest) in [
            ("4.12", 4.12, ""),
            ("95s   ✅ NO ERROR", 95.0, "s   ✅ NO ERROR"),
            ("0.000001", 1e-6, ""),
            ("1e-05", 1e-5, ""),
            ("4.5E+3x", 4500.0, "x"),
            ("-3", -3.0, ""),
            ("+.5", 0.5, ""),
            ("7.", 7.0, ""),
            ("2e", 2.0, "e"),
            ("inf", f64::INFINITY, ""),
            ("-inf)", f64::NEG_INFINITY, ")"),
            ("Infinity,", f64::INFINITY, ","),
            ("-Infinity", f64::NEG_INFINITY, ""),
        ] {
            let (v, r) = leading(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!((v, r), (value, rest), "{text}");
        }
        for nan in ["nan", "NaN", "-nan", "NAN |"] {
            assert!(leading(nan).unwrap().0.is_nan(), "{nan}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_number() {
        for text in [
            "",
            "-",
            ".",
            "e5",
            "information",
            "nano",
            "infinityx",
            "x1",
            ".",
        ] {
            assert_eq!(leading(text), None, "{text}");
        }
        assert_eq!(whole(" 5.73 "), Some(5.73));
        assert_eq!(whole("5.73s"), None);
        assert_eq!(whole("1:23"), None);
    }
}
