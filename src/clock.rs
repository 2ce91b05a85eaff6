//! Wall-clock time as the store and the protocol want it: RFC 3339 strings
//! in UTC, and milliseconds since the epoch for leases.

use std::time::{SystemTime, UNIX_EPOCH};

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The first and last times [`rfc3339`] writes: years 1 to 9999, the
/// four digits of the format. A time outside (a server's nonsense) is
/// written as the nearer end, never as a year of nine digits.
const FIRST_MS: i64 = -62_135_596_800_000;
const LAST_MS: i64 = 253_402_300_799_999;

/// `2026-11-30T03:57:14.123Z` for a time in milliseconds since the epoch.
pub fn rfc3339(ms: i64) -> String {
    let ms = ms.clamp(FIRST_MS, LAST_MS);
    let seconds = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

pub fn now_rfc3339() -> String {
    rfc3339(now_ms())
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Milliseconds since the epoch of an RFC 3339 time such as
/// `2026-12-02T14:05:00Z`, `2026-12-02T14:05:00.5+01:00` (a space may
/// stand for the `T`); `None` for anything else.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let text = text.trim();
    let number = |range: std::ops::Range<usize>| {
        let part = text.get(range)?;
        part.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| part.parse::<i64>().ok())?
    };
    let separators = text.as_bytes();
    if separators.len() < 20
        || (separators[4], separators[7], separators[13], separators[16])
            != (b'-', b'-', b':', b':')
        || !matches!(separators[10], b'T' | b't' | b' ')
    {
        return None;
    }
    let (month, day) = (number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &text[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        millis = format!("{:0<3}", &fraction[..digits.min(3)]).parse().ok()?;
        rest = &fraction[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let hours: i64 = rest[1..3].parse().ok()?;
            let minutes: i64 = rest[4..6].parse().ok()?;
            sign * (hours * 3600 + minutes * 60)
        }
        _ => return None,
    };
    let days = days_from_civil(number(0..4)?, month, day);
    Some((days * 86_400 + hour * 3600 + minute * 60 + second - offset) * 1000 + millis)
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_formats_and_offsets() {
        for ms in [0, 1_764_684_300_123, 951_782_400_000, -86_400_000] {
            assert_eq!(parse_rfc3339(&rfc3339(ms)), Some(ms));
        }
        let utc = parse_rfc3339("2026-12-02T14:05:00Z").unwrap();
        assert_eq!(parse_rfc3339("2026-12-02T15:05:00+01:00"), Some(utc));
        assert_eq!(parse_rfc3339("2026-12-02 09:05:00-05:00"), Some(utc));
        assert_eq!(parse_rfc3339("2026-12-02T14:05:00.5Z"), Some(utc + 500));
        for bad in [
            "",
            "2026-12-02",
            "2026-12-02T14:05:00",
            "2026-13-02T14:05:00Z",
            "2026-12-02T14:05:00+0100",
            "2026-12-02T14:05:00.Z",
            "2026-12-02T1a:05:00Z",
            "２０２６-12-02T14:05:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(1_796_010_634_123), "2026-11-30T03:50:34.123Z");
        assert_eq!(rfc3339(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
        // Beyond four digits of year: the nearer end, never a panic.
        assert_eq!(rfc3339(i64::MAX), "9999-12-31T23:59:59.999Z");
        assert_eq!(rfc3339(i64::MIN), "0001-01-01T00:00:00.000Z");
        assert_eq!(parse_rfc3339(&rfc3339(i64::MAX)), Some(LAST_MS));
        assert_eq!(parse_rfc3339(&rfc3339(i64::MIN)), Some(FIRST_MS));
    }
}
