//! `list_recordings` over the index: a page sorted by time is chosen from
//! the keys alone; a search (`query`, `tool`, `server`) or the `name`
//! sort reads every recording's line from the file, and a line is parsed
//! only when its raw text can match (the words, the tool and the server
//! all appear in it). Either way only the entries up to the end of the
//! page are put in order, and only the page's are turned into JSON.

use std::cmp::Ordering;

use super::keys::{self, Key};
use super::{Entry, Page, PutLine, State};
use crate::protocol::recording::{ListReq, RecordingSort};

pub(super) fn page(st: &State, req: &ListReq) -> Page {
    let words: Vec<String> = req
        .query
        .as_deref()
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_lowercase)
        .collect();
    let search = !words.is_empty() || req.tool.is_some() || req.server.is_some();
    let ks = st.keys.as_slice();
    let mut problems = Vec::new();
    // A hit is its sort time and its key's place (16 bytes).
    let mut hits: Vec<(i64, u32)> = Vec::new();
    let mut read: Vec<Key> = Vec::new();
    for (i, k) in ks.iter().enumerate() {
        if k.problem() {
            read.push(*k);
            continue;
        }
        if let Some(s) = &req.since {
            if !s.admits(&keys::rfc3339(k.created)) {
                continue;
            }
        }
        let time = if req.sort == RecordingSort::Updated {
            k.updated
        } else {
            k.created
        };
        hits.push((time, i as u32));
    }
    for e in st.entries(&read).into_iter().flatten() {
        problems.extend(e.problem);
    }
    problems.sort();
    let id = |i: u32| ks[i as usize].id;
    let (total, shown) = if req.sort == RecordingSort::Name {
        let mut named = filter(st, &hits, req, &words, true);
        let total = named.len();
        let shown = window(&mut named, req, |a, b| {
            a.0.cmp(&b.0).then_with(|| id(a.1).cmp(&id(b.1)))
        });
        (total, shown)
    } else {
        if search {
            hits = filter(st, &hits, req, &words, false)
                .into_iter()
                .map(|(_, h)| hits[h as usize])
                .collect();
        }
        let total = hits.len();
        let shown = if req.sort == RecordingSort::Oldest {
            window(&mut hits, req, |a, b| {
                a.0.cmp(&b.0).then_with(|| id(a.1).cmp(&id(b.1)))
            })
        } else {
            window(&mut hits, req, |a, b| {
                b.0.cmp(&a.0).then_with(|| id(a.1).cmp(&id(b.1)))
            })
        };
        (total, shown)
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

/// The key places of the page: only the hits up to its end are put in
/// order (the rest is split off in linear time); ties go by id, so pages
/// never overlap.
fn window<T>(
    hits: &mut [(T, u32)],
    req: &ListReq,
    order: impl Fn(&(T, u32), &(T, u32)) -> Ordering,
) -> Vec<u32> {
    let end = req
        .page
        .offset
        .saturating_add(req.page.limit())
        .min(hits.len());
    if end > 0 && end < hits.len() {
        hits.select_nth_unstable_by(end - 1, &order);
    }
    hits[..end].sort_unstable_by(&order);
    hits[..end]
        .iter()
        .skip(req.page.offset)
        .map(|h| h.1)
        .collect()
}

/// The hits whose entries match the search (each line read, and parsed
/// only when its raw text can match), each with its lowercase name when
/// `by_name` (else an empty one) and its place in `hits`.
fn filter(
    st: &State,
    hits: &[(i64, u32)],
    req: &ListReq,
    words: &[String],
    by_name: bool,
) -> Vec<(String, u32)> {
    let ks = st.keys.as_slice();
    let mut spans: Vec<(u64, u32, usize)> = Vec::with_capacity(hits.len());
    let mut pending = Vec::new();
    for (h, hit) in hits.iter().enumerate() {
        let k = &ks[hit.1 as usize];
        if k.offset == keys::NOT_WRITTEN {
            pending.push(h);
        } else {
            spans.push((k.offset, k.len, h));
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
    let exact: Vec<&[u8]> = [req.tool.as_deref(), req.server.as_deref()]
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
    };
    let mut kept: Vec<(String, u32)> = Vec::new();
    let mut take = |h: usize, e: &Entry| {
        if admits(e) {
            let name = if by_name {
                e.name.to_lowercase()
            } else {
                String::new()
            };
            kept.push((name, h as u32));
        }
    };
    let mut folded = Vec::new();
    st.file.each_line(&mut spans, |h, line| {
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
            take(h, &p.entry);
        }
    });
    for h in pending {
        if let Some(e) = st.pending.get(&ks[hits[h].1 as usize].id) {
            take(h, e);
        }
    }
    if by_name {
        // The hit's place becomes its key's place.
        for k in kept.iter_mut() {
            k.1 = hits[k.1 as usize].1;
        }
    }
    kept
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}
