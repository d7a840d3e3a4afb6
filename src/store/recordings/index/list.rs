//! `list_recordings` over the index: a page sorted by time is chosen from
//! the keys alone; a search (`query`, `tool`, `server`) or the `name`
//! sort reads every recording's line from the file, and a line is parsed
//! only when its raw text can match (the words, the tool and the server
//! all appear in it). Either way only the entries up to the end of the
//! page are put in order, and only the page's are turned into JSON. A
//! client token's listing (`only`) is a search too: its entries are the
//! ones whose `client` is that client.

use std::cmp::Ordering;

use super::keys::{self, Key};
use super::{Entry, Page, PutLine, State};
use crate::protocol::recording::{ListReq, RecordingSort};

pub(super) fn page(st: &State, req: &ListReq, only: Option<&str>) -> Page {
    let words: Vec<String> = req
        .query
        .as_deref()
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_lowercase)
        .collect();
    let search = !words.is_empty() || req.tool.is_some() || req.server.is_some() || only.is_some();
    let ks = st.keys.as_slice();
    let problem_keys: Vec<Key> = ks.iter().filter(|k| k.problem()).copied().collect();
    let mut problems: Vec<String> = st
        .entries(&problem_keys)
        .into_iter()
        .flatten()
        .filter_map(|e| e.problem)
        .collect();
    problems.sort();
    if only.is_some() {
        problems.clear();
    }
    let listed = |k: &Key| {
        !k.problem()
            && req
                .since
                .as_ref()
                .is_none_or(|s| s.admits(&keys::rfc3339(k.created)))
    };
    let end = req.page.offset.saturating_add(req.page.limit());
    let id = |i: u32| ks[i as usize].id;
    let (total, shown) = if req.sort == RecordingSort::Name {
        let mut best = Best::new(end, |a: &(String, u32), b: &(String, u32)| {
            a.0.cmp(&b.0).then_with(|| id(a.1).cmp(&id(b.1)))
        });
        filter(st, (req, only), &words, listed, |i, e| {
            best.push((e.name.to_lowercase(), i))
        });
        best.page(req.page.offset)
    } else {
        let updated = req.sort == RecordingSort::Updated;
        let time = |i: u32| {
            let k = &ks[i as usize];
            if updated {
                k.updated
            } else {
                k.created
            }
        };
        let oldest = req.sort == RecordingSort::Oldest;
        let mut best = Best::new(end, |a: &(i64, u32), b: &(i64, u32)| {
            let t = if oldest { a.0.cmp(&b.0) } else { b.0.cmp(&a.0) };
            t.then_with(|| id(a.1).cmp(&id(b.1)))
        });
        if search {
            filter(st, (req, only), &words, listed, |i, _| {
                best.push((time(i), i))
            });
        } else {
            for (i, k) in ks.iter().enumerate() {
                if listed(k) {
                    best.push((time(i as u32), i as u32));
                }
            }
        }
        best.page(req.page.offset)
    };
    let shown: Vec<Key> = shown.iter().map(|&i| ks[i as usize]).collect();
    Page {
        total,
        items: st
            .entries(&shown)
            .into_iter()
            .flatten()
            .map(|e| e.to_json())
            .collect(),
        problems,
    }
}

/// The first `end` of everything pushed, in `order`, kept in memory that
/// grows with the page, not with the store: past twice `end` the rest is
/// split off in linear time (ties go by id, so pages never overlap).
struct Best<T, F> {
    v: Vec<T>,
    end: usize,
    order: F,
    total: usize,
}

impl<T, F: Fn(&T, &T) -> Ordering> Best<T, F> {
    fn new(end: usize, order: F) -> Best<T, F> {
        Best {
            v: Vec::new(),
            end,
            order,
            total: 0,
        }
    }

    fn push(&mut self, x: T) {
        self.total += 1;
        if self.end == 0 {
            return;
        }
        self.v.push(x);
        if self.v.len() >= 2 * self.end.max(32) {
            self.cut();
        }
    }

    fn cut(&mut self) {
        if self.v.len() > self.end {
            self.v.select_nth_unstable_by(self.end - 1, &self.order);
            self.v.truncate(self.end);
        }
    }

    /// How many were pushed, and the page after `offset`, in order.
    fn page(mut self, offset: usize) -> (usize, Vec<u32>)
    where
        T: Placed,
    {
        if self.end > 0 {
            self.cut();
        }
        self.v.sort_unstable_by(&self.order);
        let shown = self.v.iter().skip(offset).map(Placed::place).collect();
        (self.total, shown)
    }
}

/// A hit's key place.
trait Placed {
    fn place(&self) -> u32;
}

impl<S> Placed for (S, u32) {
    fn place(&self) -> u32 {
        self.1
    }
}

/// Call `hit(place, entry)` for each listed key whose entry matches the
/// search (and, with `only`, was made by that client), reading each line
/// in the file's order and parsing it only when its raw text can match.
fn filter(
    st: &State,
    (req, only): (&ListReq, Option<&str>),
    words: &[String],
    listed: impl Fn(&Key) -> bool,
    mut hit: impl FnMut(u32, &Entry),
) {
    let ks = st.keys.as_slice();
    let mut spans: Vec<(u64, u32, u32)> = Vec::new();
    let mut pending = Vec::new();
    for (i, k) in ks.iter().enumerate() {
        if !listed(k) {
            continue;
        }
        if k.offset == keys::NOT_WRITTEN {
            pending.push(i as u32);
        } else {
            spans.push((k.offset, k.len, i as u32));
        }
    }
    // What must appear in a line's raw text for it to match, as it appears
    // there (ASCII, nothing JSON escapes); anything else is checked on the
    // parsed entry only.
    let plain = |s: &str| s.is_ascii() && !s.bytes().any(|c| c == b'"' || c == b'\\' || c < 0x20);
    let lower: Vec<&[u8]> = words
        .iter()
        .filter(|w| plain(w))
        .map(|w| w.as_bytes())
        .collect();
    let exact: Vec<&[u8]> = [req.tool.as_deref(), req.server.as_deref(), only]
        .into_iter()
        .flatten()
        .filter(|s| plain(s))
        .map(str::as_bytes)
        .collect();
    let admits = |e: &Entry| {
        e.problem.is_none()
            && e.matches_query(words)
            && req.tool.as_deref().is_none_or(|t| e.used_tool(t))
            && req
                .server
                .as_deref()
                .is_none_or(|s| e.servers.iter().any(|x| x == s))
            && only.is_none_or(|me| e.client.as_deref() == Some(me))
    };
    let mut folded = Vec::new();
    st.file.each_line(&mut spans, |i, line| {
        // A line with non-ASCII text may match through `to_lowercase`:
        // it is always parsed.
        if line.is_ascii() && !(lower.is_empty() && exact.is_empty()) {
            if !exact.iter().all(|x| contains(line, x)) {
                return;
            }
            if !lower.is_empty() {
                folded.clear();
                folded.extend(line.iter().map(u8::to_ascii_lowercase));
                if !lower.iter().all(|w| contains(&folded, w)) {
                    return;
                }
            }
        }
        if let Ok(p) = serde_json::from_slice::<PutLine>(line) {
            if admits(&p.entry) {
                hit(i, &p.entry);
            }
        }
    });
    for i in pending {
        if let Some(e) = st.pending.get(&ks[i as usize].id) {
            if admits(e) {
                hit(i, e);
            }
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}
