//! `list_recordings` over the index: a page sorted by time is chosen from
//! the keys alone; a search (`query`, `tool`, `server`) or the `name`
//! sort reads every recording's line from the file, and a line is parsed
//! only when its raw text can match (the words, the tool and the server
//! all appear in it). Either way only the entries up to the end of the
//! page are put in order, and only the page's are turned into JSON.

use std::cmp::Ordering;

use super::keys::{self, Id, Key};
use super::{Entry, Page, PutLine, State};
use crate::protocol::recording::{ListReq, RecordingSort};

/// One match: what it sorts by and which key it is.
struct Hit {
    /// `created` or `updated` (the time sorts), or the lowercase name.
    time: i64,
    name: String,
    id: Id,
    key: usize,
}

pub(super) fn page(st: &State, req: &ListReq) -> Page {
    let words: Vec<String> = req
        .query
        .as_deref()
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_lowercase)
        .collect();
    let search = !words.is_empty() || req.tool.is_some() || req.server.is_some();
    let by_name = req.sort == RecordingSort::Name;
    let keys: Vec<&Key> = st.keys.iter().collect();
    let mut problems = Vec::new();
    let mut hits: Vec<Hit> = Vec::new();
    let mut read: Vec<Key> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        if k.problem() {
            read.push(**k);
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
        hits.push(Hit {
            time,
            name: String::new(),
            id: k.id,
            key: i,
        });
    }
    for e in st.entries(&read).into_iter().flatten() {
        problems.extend(e.problem);
    }
    if search || by_name {
        hits = filter(st, &keys, hits, req, &words, by_name);
    }
    let order = order_of(req.sort);
    let end = req
        .page
        .offset
        .saturating_add(req.page.limit())
        .min(hits.len());
    if end > 0 && end < hits.len() {
        hits.select_nth_unstable_by(end - 1, order);
    }
    hits[..end].sort_unstable_by(order);
    problems.sort();
    let shown: Vec<Key> = hits
        .iter()
        .skip(req.page.offset)
        .take(req.page.limit())
        .map(|h| *keys[h.key])
        .collect();
    Page {
        total: hits.len(),
        items: st
            .entries(&shown)
            .into_iter()
            .flatten()
            .map(|e| e.to_json())
            .collect(),
        problems,
    }
}

/// Keep the hits whose entries match the search (reading each line), and
/// give each its lowercase name when sorting by name.
fn filter(
    st: &State,
    keys: &[&Key],
    hits: Vec<Hit>,
    req: &ListReq,
    words: &[String],
    by_name: bool,
) -> Vec<Hit> {
    let mut spans: Vec<(u64, u32, usize)> = Vec::with_capacity(hits.len());
    let mut pending = Vec::new();
    for (h, hit) in hits.iter().enumerate() {
        let k = keys[hit.key];
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
    let mut keep = vec![false; hits.len()];
    let mut names: Vec<String> = vec![String::new(); if by_name { hits.len() } else { 0 }];
    let mut folded = Vec::new();
    let mut take = |h: usize, e: &Entry| {
        if admits(e) {
            keep[h] = true;
            if by_name {
                names[h] = e.name.to_lowercase();
            }
        }
    };
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
        let k = keys[hits[h].key];
        if let Some(e) = st.pending.get(&k.id) {
            take(h, e);
        }
    }
    hits.into_iter()
        .zip(
            keep.into_iter()
                .zip(names.into_iter().chain(std::iter::repeat_with(String::new))),
        )
        .filter(|(_, (k, _))| *k)
        .map(|(mut hit, (_, name))| {
            hit.name = name;
            hit
        })
        .collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

type Order = fn(&Hit, &Hit) -> Ordering;

/// How `sort` orders two hits (ties by id, so pages never overlap).
fn order_of(sort: RecordingSort) -> Order {
    match sort {
        RecordingSort::Newest | RecordingSort::Updated => {
            |a, b| b.time.cmp(&a.time).then_with(|| a.id.cmp(&b.id))
        }
        RecordingSort::Oldest => |a, b| a.time.cmp(&b.time).then_with(|| a.id.cmp(&b.id)),
        RecordingSort::Name => |a, b| a.name.cmp(&b.name).then_with(|| a.id.cmp(&b.id)),
    }
}
