//! Paging and the `since` filter shared by the listings (`list_recordings`,
//! `list_tasks`): `offset`/`limit` with a default page, and a `since` time
//! checked when the message is decoded.

use serde::{Deserialize, Deserializer};

/// Items in a page when the client gives no `limit` (every listing answers
/// with `total`, so a client that sends no paging params sees there are more).
pub const DEFAULT_LIMIT: usize = 100;
/// The largest page; a bigger `limit` is clipped to it.
pub const MAX_LIMIT: usize = 1000;

/// `offset` and `limit` of a listing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Paging {
    #[serde(default)]
    pub offset: usize,
    #[serde(default)]
    pub limit: Option<usize>,
}

impl Paging {
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT)
    }
}

/// A lower bound on a creation time: an RFC 3339 UTC time
/// (`2026-11-22T03:00:00Z`, fractions allowed) or a date (`2026-11-22`),
/// kept in the hub's own timestamp shape (`…:SS.mmmZ`) so that comparing
/// strings compares instants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Since(String);

impl Since {
    pub fn parse(s: &str) -> Option<Since> {
        let b = s.as_bytes();
        let digits =
            |r: std::ops::Range<usize>| b.get(r).is_some_and(|x| x.iter().all(u8::is_ascii_digit));
        let date = digits(0..4)
            && b.get(4) == Some(&b'-')
            && digits(5..7)
            && b.get(7) == Some(&b'-')
            && digits(8..10);
        if !date {
            return None;
        }
        if b.len() == 10 {
            return Some(Since(format!("{s}T00:00:00.000Z")));
        }
        let time = b[10] == b'T'
            && digits(11..13)
            && b.get(13) == Some(&b':')
            && digits(14..16)
            && b.get(16) == Some(&b':')
            && digits(17..19);
        let rest = s.get(19..)?;
        let frac = match rest.strip_suffix('Z')? {
            "" => "",
            f => f
                .strip_prefix('.')
                .filter(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()))?,
        };
        if !time {
            return None;
        }
        let ms: String = frac.chars().chain("000".chars()).take(3).collect();
        Some(Since(format!("{}.{ms}Z", &s[..19])))
    }

    /// Is a hub timestamp (`util::rfc3339`) at or after this bound?
    pub fn admits(&self, timestamp: &str) -> bool {
        timestamp >= self.0.as_str()
    }
}

impl<'de> Deserialize<'de> for Since {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Since, D::Error> {
        let s = String::deserialize(d)?;
        Since::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{s:?} is not a time: expected an RFC 3339 UTC time like \"2026-11-22T03:00:00Z\" or a date like \"2026-11-22\""
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_dates_and_utc_times_and_compares_as_instants() {
        let s = Since::parse("2026-11-22T03:49:36Z").unwrap();
        assert!(s.admits("2026-11-22T03:49:36.123Z"));
        assert!(s.admits("2026-11-22T03:49:36.000Z"));
        assert!(!s.admits("2026-11-22T03:49:35.999Z"));
        let d = Since::parse("2026-11-22").unwrap();
        assert!(d.admits("2026-11-22T00:00:00.000Z"));
        assert!(!d.admits("2026-11-21T23:59:59.999Z"));
        let f = Since::parse("2026-11-22T03:49:36.5Z").unwrap();
        assert!(!f.admits("2026-11-22T03:49:36.499Z"));
        assert!(f.admits("2026-11-22T03:49:36.500Z"));
        for bad in [
            "yesterday",
            "2026-11-22T03:49:36+02:00",
            "2026-11-22T03:49",
            "2026-1-2",
            "",
            "2026-11-22T03:49:36.Z",
        ] {
            assert!(Since::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_default_page_is_bounded() {
        assert_eq!(Paging::default().limit(), DEFAULT_LIMIT);
        let big = Paging {
            offset: 0,
            limit: Some(1_000_000),
        };
        assert_eq!(big.limit(), MAX_LIMIT);
    }
}
