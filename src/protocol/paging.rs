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

/// A lower bound on a creation time: an RFC 3339 time with any offset
/// (`2026-11-22T03:00:00Z`, `2026-11-22T05:00:00+02:00`, fractions allowed)
/// or a date (`2026-11-22`, midnight UTC), parsed by chrono and kept in the
/// hub's own timestamp shape (`util::rfc3339`: UTC, `…:SS.mmmZ`) so that
/// comparing strings compares instants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Since(String);

impl Since {
    pub fn parse(s: &str) -> Option<Since> {
        use chrono::{DateTime, SecondsFormat, Utc};
        // A date is midnight UTC; chrono's RFC 3339 parser checks its digits.
        let at = if s.len() == 10 {
            DateTime::parse_from_rfc3339(&format!("{s}T00:00:00Z"))
        } else {
            DateTime::parse_from_rfc3339(s)
        };
        let utc = at.ok()?.with_timezone(&Utc);
        Some(Since(utc.to_rfc3339_opts(SecondsFormat::Millis, true)))
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
                "{s:?} is not a time: expected an RFC 3339 time like \"2026-11-22T03:00:00Z\" or \"2026-11-22T05:00:00+02:00\", or a date like \"2026-11-22\""
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
            "2026-11-22T03:49",
            "2026-1-2",
            "",
            "2026-11-22T03:49:36.Z",
            "2026-11-22T03:49:36",
        ] {
            assert!(Since::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn since_takes_any_offset_and_rejects_impossible_dates() {
        let east = Since::parse("2026-11-22T05:49:36+02:00").unwrap();
        assert_eq!(east, Since::parse("2026-11-22T03:49:36Z").unwrap());
        assert!(east.admits("2026-11-22T03:49:36.000Z"));
        assert!(!east.admits("2026-11-22T03:49:35.999Z"));
        let west = Since::parse("2026-11-21T23:30:00.25-04:30").unwrap();
        assert!(west.admits("2026-11-22T04:00:00.250Z"));
        assert!(!west.admits("2026-11-22T04:00:00.249Z"));
        for bad in [
            "2026-13-01",
            "2026-13-01T00:00:00Z",
            "2026-02-30",
            "2026-11-31T00:00:00Z",
            "2026-11-22T24:00:00Z",
            "2026-11-22T03:60:00Z",
            "2026-11-22T03:49:36+25:00",
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
