//! Optuna's timestamps: Python's `isoformat`, naive. We write UTC; Optuna 5
//! and Rustuna write UTC with its offset (`+00:00`), which replay turns into
//! naive UTC so that every trial's times read alike.

use anyhow::{anyhow, Result};
use std::time::{SystemTime, UNIX_EPOCH};

/// Naive UTC ISO 8601 with microseconds, as Python's
/// `datetime.isoformat(timespec="microseconds")` writes it.
pub(crate) fn iso_utc(t: SystemTime) -> Result<String> {
    let d = t
        .duration_since(UNIX_EPOCH)
        .map_err(|_| anyhow!("a time before 1970"))?;
    let secs = i64::try_from(d.as_secs()).map_err(|_| anyhow!("a time too far ahead"))?;
    Ok(naive(secs, d.subsec_micros()))
}

/// `YYYY-MM-DDTHH:MM:SS.ffffff` of `secs` (since 1970, UTC) and `micros`.
fn naive(secs: i64, micros: u32) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{micros:06}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
    )
}

/// Howard Hinnant's civil_from_days: days since 1970-01-01 -> (y, m, d).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Its inverse (days_from_civil).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A timestamp as replay keeps it: one with a UTC offset (`Z`, `+HH:MM`,
/// `+HHMM`, `+HH:MM:SS`) becomes naive UTC with microseconds, as we write
/// them; a naive one, or anything else, is kept as it is.
pub(super) fn naive_utc(text: &str) -> String {
    parse_with_offset(text).unwrap_or_else(|| text.to_owned())
}

fn parse_with_offset(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = text.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    // YYYY-MM-DDTHH:MM:SS
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut i = 19;
    let mut micros = 0u32;
    if b.get(i) == Some(&b'.') {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        let frac = &text[i + 1..i + 1 + digits.min(6)];
        micros = format!("{frac:0<6}").parse().ok()?;
        i += 1 + digits;
    }
    let offset = match &text[i..] {
        "Z" => 0,
        rest if rest.len() >= 5 && matches!(rest.as_bytes()[0], b'+' | b'-') => {
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            let hm = &rest[1..];
            let (h, m, s) = match hm.len() {
                4 => (hm.get(0..2)?, hm.get(2..4)?, "00"),
                5 if hm.as_bytes()[2] == b':' => (hm.get(0..2)?, hm.get(3..5)?, "00"),
                8 if hm.as_bytes()[2] == b':' && hm.as_bytes()[5] == b':' => {
                    (hm.get(0..2)?, hm.get(3..5)?, hm.get(6..8)?)
                }
                _ => return None,
            };
            let part = |p: &str| -> Option<i64> {
                p.bytes()
                    .all(|c| c.is_ascii_digit())
                    .then(|| p.parse().ok())?
            };
            let (h, m, s) = (part(h)?, part(m)?, part(s)?);
            if h > 23 || m > 59 || s > 59 {
                return None;
            }
            sign * (h * 3600 + m * 60 + s)
        }
        _ => return None,
    };
    let local = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    Some(naive(local - offset, micros))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_python_isoformat() {
        let t = UNIX_EPOCH + Duration::from_micros(1_709_210_096_123_456);
        assert_eq!(iso_utc(t).unwrap(), "2024-02-29T12:34:56.123456");
        assert_eq!(iso_utc(UNIX_EPOCH).unwrap(), "1970-01-01T00:00:00.000000");
    }

    #[test]
    fn times_with_an_offset_become_naive_utc() {
        for (given, kept) in [
            (
                "2026-11-23T21:38:13.179325+00:00",
                "2026-11-23T21:38:13.179325",
            ),
            ("2026-11-23T21:38:13+00:00", "2026-11-23T21:38:13.000000"),
            ("2026-11-23T21:38:13.5Z", "2026-11-23T21:38:13.500000"),
            (
                "2026-11-23T21:38:13.1234567+00:00",
                "2026-11-23T21:38:13.123456",
            ),
            // Across a day, a month, a year and a leap day.
            (
                "2024-03-01T01:30:00.000001+02:00",
                "2024-02-29T23:30:00.000001",
            ),
            (
                "2025-12-31T22:00:00.000000-0300",
                "2026-01-01T01:00:00.000000",
            ),
            (
                "2026-06-30T23:59:59.999999-00:00:01",
                "2026-07-01T00:00:00.999999",
            ),
            (
                "1969-12-31 23:00:00.000000-01:00",
                "1970-01-01T00:00:00.000000",
            ),
        ] {
            assert_eq!(naive_utc(given), kept, "{given}");
        }
        // Naive times (ours, Optuna 4's) and anything unexpected stay as
        // they are.
        for same in [
            "2024-01-01T00:00:00.000000",
            "2024-01-01T00:00:00",
            "2024-01-01",
            "2024-13-01T00:00:00+00:00",
            "2024-01-01T00:00:00+0",
            "2024-01-01T00:00:00.+00:00",
            "yesterday",
            "",
            "2024-01-01T00:00:00+ü0:00",
        ] {
            assert_eq!(naive_utc(same), same);
        }
    }

    #[test]
    fn the_calendar_round_trips() {
        for days in [
            -800_000, -719_468, -1, 0, 1, 59, 60, 10_957, 19_782, 2_932_896,
        ] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
    }
}
