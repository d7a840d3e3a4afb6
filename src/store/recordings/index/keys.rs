//! What the recordings index keeps in memory: one fixed-size [`Key`] per
//! recording (56 bytes, nothing on the heap), in a vector sorted by id.
//! Everything else of an entry (name, description, tags, tools, servers,
//! the end) stays in the index file and is read on demand through the
//! key's `offset` and `len`.
//!
//! A hub-made id (`rec-` and 32 hex digits) is kept as its 128-bit number,
//! so it is known without reading the file; any other valid id is kept as
//! the first 128 bits of its SHA-256 (a collision is as likely as a
//! random UUID repeating) and read from the file when it is needed. The
//! vector grows by an eighth at a time, so at most ~1/8 of it is slack:
//! ~63 bytes a recording, 6.3 MB for 100,000.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// A recording id as kept in memory (see the module doc).
pub type Id = (u64, u64);

/// The id's 128 bits are the hub's own hex id (`rec-…`).
const HEX_ID: u8 = 1;
/// The recording cannot be read (listed in `problems`).
const PROBLEM: u8 = 2;
/// Its folder was seen by the check against the files when this bit
/// equals the check's round (it flips each round).
const SEEN: u8 = 4;

/// A key whose line is not in the file (its write failed): the entry is
/// held in the index's `pending` map instead.
pub const NOT_WRITTEN: u64 = u64::MAX;

/// One recording in memory: what a page, the `since` filter, the time
/// sorts and the check against the files need, and where the rest is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub id: Id,
    /// `createdAt` and `updatedAt` in ms since the epoch (`i64::MIN` when
    /// not a time).
    pub created: i64,
    pub updated: i64,
    /// Where the entry's line starts in the index file, and its length
    /// (without the newline).
    pub offset: u64,
    pub len: u32,
    /// [`stamp`] of the recording file's size and modification time.
    pub stamp: u64,
    flags: u8,
}

impl Key {
    pub fn new(id: &str, created: &str, updated: &str, stamp: u64, problem: bool) -> Key {
        let (id, hex) = id_of(id);
        Key {
            id,
            created: ms_of(created),
            updated: ms_of(updated),
            offset: NOT_WRITTEN,
            len: 0,
            stamp,
            flags: if hex { HEX_ID } else { 0 } | if problem { PROBLEM } else { 0 },
        }
    }

    pub fn problem(&self) -> bool {
        self.flags & PROBLEM != 0
    }

    pub fn seen(&self) -> bool {
        self.flags & SEEN != 0
    }

    pub fn set_seen(&mut self, round: bool) {
        self.flags = (self.flags & !SEEN) | if round { SEEN } else { 0 };
    }

    /// The id as text when it is the hub's own form (no read needed).
    pub fn hex_id(&self) -> Option<String> {
        (self.flags & HEX_ID != 0).then(|| format!("rec-{:016x}{:016x}", self.id.0, self.id.1))
    }
}

/// The part of an entry the key is made of (the rest is passed over).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Lite<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow, default)]
    created_at: Cow<'a, str>,
    #[serde(borrow, default)]
    updated_at: Cow<'a, str>,
    #[serde(default)]
    size: u64,
    #[serde(default)]
    mtime_ns: u64,
    #[serde(default)]
    problem: Option<IgnoredAny>,
}

/// An index line as the key needs it (a plain struct, not serde's
/// internally tagged enum, which buffers every field first).
#[derive(Deserialize)]
struct LiteLine<'a> {
    #[serde(borrow)]
    op: Cow<'a, str>,
    #[serde(borrow, default)]
    entry: Option<Lite<'a>>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
}

/// The key of the index line at `offset` (`None`: not an index line). A
/// `del` line gives a key marked [`is_del`], kept at its place in the
/// order so that the last line of an id wins ([`Keys::from_lines`]).
pub fn of_line(offset: u64, line: &[u8]) -> Option<Key> {
    let l = serde_json::from_slice::<LiteLine<'_>>(line).ok()?;
    let mut k = match (&*l.op, l.entry, l.id) {
        ("put", Some(e), _) => Key::new(
            &e.id,
            &e.created_at,
            &e.updated_at,
            stamp(e.size, e.mtime_ns),
            e.problem.is_some(),
        ),
        ("del", _, Some(id)) => {
            let mut k = Key::new("", "", "", 0, false);
            k.id = id_of(&id).0;
            k.len = u32::MAX;
            k
        }
        _ => return None,
    };
    k.offset = offset;
    if !is_del(&k) {
        k.len = line.len() as u32;
    }
    Some(k)
}

/// A key [`of_line`] made of a `del` line.
pub fn is_del(k: &Key) -> bool {
    k.len == u32::MAX
}

/// The in-memory id of a recording id, and whether it is the hub's hex form.
pub fn id_of(id: &str) -> (Id, bool) {
    let hex = id
        .strip_prefix("rec-")
        .filter(|h| h.len() == 32 && h.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')));
    if let Some(h) = hex {
        if let (Ok(hi), Ok(lo)) = (
            u64::from_str_radix(&h[..16], 16),
            u64::from_str_radix(&h[16..], 16),
        ) {
            return ((hi, lo), true);
        }
    }
    let d = Sha256::digest(id.as_bytes());
    let mut hi = [0u8; 8];
    let mut lo = [0u8; 8];
    hi.copy_from_slice(&d[..8]);
    lo.copy_from_slice(&d[8..16]);
    ((u64::from_be_bytes(hi), u64::from_be_bytes(lo)), false)
}

/// A file's size and modification time folded into 64 bits (compared, never
/// read back: a change is missed only if both change to a colliding pair).
pub fn stamp(size: u64, mtime_ns: u64) -> u64 {
    fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    mix(size.wrapping_add(0x9e37_79b9_7f4a_7c15) ^ mix(mtime_ns))
}

/// Milliseconds since the epoch of an RFC 3339 time (`2026-01-01T00:00:00Z`,
/// any fraction, `Z` or an offset; the hub writes `…:SS.mmmZ`), or
/// `i64::MIN` when `ts` is not one (such recordings sort as the oldest).
pub fn ms_of(ts: &str) -> i64 {
    parse_ms(ts.as_bytes()).unwrap_or(i64::MIN)
}

fn parse_ms(b: &[u8]) -> Option<i64> {
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = b.get(r)?;
        if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(s.iter().fold(0i64, |n, c| n * 10 + i64::from(c - b'0')))
    };
    let sep = |i: usize, c: &[u8]| b.get(i).is_some_and(|x| c.contains(x));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut i = 19;
    let mut ms = 0;
    if sep(i, b".") {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        let digits = &b[start..i.min(start + 3)];
        ms = digits
            .iter()
            .fold(0i64, |n, c| n * 10 + i64::from(c - b'0'))
            * 10i64.pow(3 - digits.len() as u32);
    }
    let offset_min = match b.get(i) {
        None => 0,
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(c @ (b'+' | b'-')) if b.len() == i + 6 && sep(i + 3, b":") => {
            let m = num(i + 1..i + 3)? * 60 + num(i + 4..i + 6)?;
            if *c == b'+' {
                m
            } else {
                -m
            }
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    Some(((days * 86_400 + h * 3600 + mi * 60 + s - offset_min * 60) * 1000) + ms)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm, the inverse of `util::civil_from_days`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A time of a key as the hub writes times (`""` for no time), for the
/// `since` filter.
pub fn rfc3339(ms: i64) -> String {
    match u64::try_from(ms) {
        Ok(ms) => {
            crate::util::rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
        }
        Err(_) => String::new(),
    }
}

/// The keys, sorted by id.
#[derive(Default)]
pub struct Keys {
    v: Vec<Key>,
}

impl Keys {
    /// From keys in any order; of two with one id the later one stays.
    pub fn from_unsorted(mut v: Vec<Key>) -> Keys {
        // A stable sort keeps equal ids in their order: the last one wins.
        v.sort_by_key(|k| k.id);
        let mut out: Vec<Key> = Vec::with_capacity(v.len());
        for k in v {
            match out.last_mut() {
                Some(last) if last.id == k.id => *last = k,
                _ => out.push(k),
            }
        }
        out.shrink_to_fit();
        Keys { v: out }
    }

    /// From the keys of an index file's lines (`del` lines included,
    /// marked [`is_del`]): for each id the line with the highest offset
    /// wins, and a `del` drops it. Sorted in place, no second buffer.
    pub fn from_lines(mut v: Vec<Key>) -> Keys {
        v.sort_unstable_by_key(|k| (k.id, k.offset));
        let mut w = 0;
        for r in 0..v.len() {
            let last_of_id = v.get(r + 1).is_none_or(|n| n.id != v[r].id);
            if last_of_id && !is_del(&v[r]) {
                v[w] = v[r];
                w += 1;
            }
        }
        v.truncate(w);
        v.shrink_to_fit();
        Keys { v }
    }

    pub fn len(&self) -> usize {
        self.v.len()
    }

    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Key> {
        self.v.iter()
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Key> {
        self.v.iter_mut()
    }

    pub fn as_slice(&self) -> &[Key] {
        &self.v
    }

    pub fn get_mut(&mut self, id: Id) -> Option<&mut Key> {
        let i = self.v.binary_search_by_key(&id, |k| k.id).ok()?;
        Some(&mut self.v[i])
    }

    pub fn get(&self, id: Id) -> Option<&Key> {
        self.v
            .binary_search_by_key(&id, |k| k.id)
            .ok()
            .map(|i| &self.v[i])
    }

    /// Set `k` (replacing the key of its id).
    pub fn put(&mut self, k: Key) {
        match self.v.binary_search_by_key(&k.id, |x| x.id) {
            Ok(i) => self.v[i] = k,
            Err(i) => {
                if self.v.len() == self.v.capacity() {
                    // An eighth more, not twice: the slack stays small.
                    self.v.reserve_exact((self.v.len() / 8).max(16));
                }
                self.v.insert(i, k);
            }
        }
    }

    /// Set many keys: one by one when they are few, else one sort.
    pub fn put_many(&mut self, ks: Vec<Key>) {
        if ks.len() < 64 {
            ks.into_iter().for_each(|k| self.put(k));
            return;
        }
        let mut v = std::mem::take(&mut self.v);
        v.extend(ks);
        *self = Keys::from_unsorted(v);
    }

    pub fn remove(&mut self, id: Id) -> Option<Key> {
        let i = self.v.binary_search_by_key(&id, |k| k.id).ok()?;
        let k = self.v.remove(i);
        if self.v.capacity() > 64 && self.v.len() < self.v.capacity() / 2 {
            self.v.shrink_to(self.v.len() + self.v.len() / 8);
        }
        Some(k)
    }

    /// Keep the keys for which `f` is true.
    pub fn retain(&mut self, f: impl FnMut(&Key) -> bool) {
        self.v.retain(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_small_and_a_hub_id_comes_back_from_it() {
        assert_eq!(std::mem::size_of::<Key>(), 56);
        let id = "rec-0123456789abcdef0123456789abcdef";
        let k = Key::new(id, "", "", 0, false);
        assert_eq!(k.hex_id().as_deref(), Some(id));
        let other = Key::new("login-flow", "", "", 0, false);
        assert_eq!(other.hex_id(), None);
        assert_ne!(other.id, Key::new("login-flow2", "", "", 0, false).id);
    }

    #[test]
    fn times_parse_as_instants_and_anything_else_is_oldest() {
        let z = ms_of("2026-11-22T03:49:36.123Z");
        assert_eq!(rfc3339(z), "2026-11-22T03:49:36.123Z");
        assert_eq!(ms_of("2026-11-22T03:49:36Z"), z - 123);
        assert_eq!(ms_of("2026-11-22T04:49:36.1234+01:00"), z);
        assert_eq!(ms_of("1970-01-01T00:00:00.000Z"), 0);
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-11-22T03:49:36.Z",
        ] {
            assert_eq!(ms_of(bad), i64::MIN, "{bad:?}");
        }
        assert_eq!(rfc3339(i64::MIN), "");
    }

    #[test]
    fn keys_stay_sorted_and_the_last_of_an_id_wins() {
        let k = |id: &str, c: &str| Key::new(id, c, c, 0, false);
        let a1 = k("a", "2026-01-01T00:00:00Z");
        let a2 = k("a", "2026-01-02T00:00:00Z");
        let mut keys = Keys::from_unsorted(vec![a1, k("b", ""), a2]);
        assert_eq!(keys.len(), 2);
        assert_eq!(keys.get(a1.id), Some(&a2));
        keys.put(k("c", ""));
        assert!(keys
            .iter()
            .zip(keys.iter().skip(1))
            .all(|(x, y)| x.id < y.id));
        assert!(keys.remove(a1.id).is_some());
        assert_eq!(keys.len(), 2);
    }

    #[test]
    fn of_an_index_files_lines_the_last_of_an_id_wins_and_a_del_drops_it() {
        let line = |id: &str, offset: u64, del: bool| {
            let text = if del {
                format!(r#"{{"op":"del","id":"{id}"}}"#)
            } else {
                format!(r#"{{"op":"put","entry":{{"id":"{id}","size":1}}}}"#)
            };
            of_line(offset, text.as_bytes()).unwrap()
        };
        assert!(is_del(&line("a", 0, true)) && !is_del(&line("a", 0, false)));
        assert!(of_line(0, b"{\"op\":\"put\"}").is_none());
        let keys = Keys::from_lines(vec![
            line("b", 0, false),
            line("a", 10, false),
            line("b", 20, true),
            line("a", 30, true),
            line("a", 40, false),
            line("c", 50, false),
        ]);
        let mut offsets: Vec<u64> = keys.iter().map(|k| k.offset).collect();
        offsets.sort_unstable();
        assert_eq!(offsets, [40, 50], "a put after its del stays, b is gone");
    }
}
