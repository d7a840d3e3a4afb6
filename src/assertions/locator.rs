//! Locator heuristics, pure: a description ("the Submit button", "link
//! 'Sign in'", "Email field") becomes a [`Query`]; the candidates the page
//! probe found are ranked by tier (exact, then case-insensitive, then fuzzy)
//! and, within a tier, by strategy (role + accessible name, visible text,
//! aria-label, placeholder, title, alt), in document order; the first
//! visible match wins. A miss says what came closest.
//!
//! Two rules keep an assertion from passing on the wrong element:
//! - the best tier that matches anything decides: an exact match that is
//!   hidden is a miss even when a fuzzy match elsewhere is visible;
//! - a description with a role ("… button") looks at elements of that role
//!   first; others may match only exactly or case-insensitively.

use serde::Deserialize;

use crate::suggest::levenshtein;

mod role;
pub use self::role::Role;
use self::role::ROLE_WORDS;

/// Words between a role and a name that carry nothing ("button labeled Save").
const FILLER: &[&str] = &[
    "with the text",
    "with text",
    "with label",
    "labeled",
    "labelled",
    "named",
    "called",
    "titled",
    "that says",
    "saying",
    "reading",
    "for",
];

/// What a description asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub role: Option<Role>,
    /// The name as written (case kept: the exact tier is case-sensitive);
    /// empty when the description is only a role ("the dialog").
    pub name: String,
}

impl Query {
    /// Read a description: a quoted part is the name; a role word at the end
    /// or the start is the role; articles and filler words are dropped.
    pub fn parse(description: &str) -> Query {
        let d = norm(description);
        let quoted = quoted_part(&d);
        let rest = match &quoted {
            Some((_, start, end)) => format!("{} {}", &d[..*start], &d[*end..]),
            None => d.clone(),
        };
        let mut words: Vec<&str> = rest.split_whitespace().collect();
        while words
            .first()
            .is_some_and(|w| ["the", "a", "an"].contains(&w.to_lowercase().as_str()))
        {
            words.remove(0);
        }
        let role = take_role(&mut words, true).or_else(|| take_role(&mut words, false));
        strip_filler(&mut words);
        let name = match quoted {
            Some((q, _, _)) => q,
            None => words.join(" "),
        };
        Query { role, name }
    }

    /// Lower-case fragments the probe uses to skip elements that cannot
    /// match: each word of the name, a long word as its first and last four
    /// letters (so a typo in the middle still gets through).
    pub fn needles(&self) -> Vec<String> {
        needles(&self.name)
    }
}

/// Needles for a text or a name (see [`Query::needles`]).
pub fn needles(name: &str) -> Vec<String> {
    let lower = name.to_lowercase();
    let mut out: Vec<String> = Vec::new();
    for w in lower.split(|c: char| !c.is_alphanumeric()) {
        let chars: Vec<char> = w.chars().collect();
        let parts = if chars.len() <= 4 {
            vec![w.to_string()]
        } else {
            vec![
                chars[..4].iter().collect(),
                chars[chars.len() - 4..].iter().collect(),
            ]
        };
        for p in parts {
            if p.chars().count() >= 2 && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    if out.is_empty() && !lower.trim().is_empty() {
        out.push(lower.trim().to_string());
    }
    out
}

/// The quoted part of a description ('…', "…", “…”, ‘…’, «…»): its text and
/// the byte range the quotes span.
fn quoted_part(d: &str) -> Option<(String, usize, usize)> {
    const PAIRS: &[(char, char)] = &[
        ('"', '"'),
        ('\'', '\''),
        ('“', '”'),
        ('‘', '’'),
        ('«', '»'),
        ('「', '」'),
    ];
    for (open, close) in PAIRS {
        // An apostrophe inside a word ("don't") is not a quote.
        let start = d.char_indices().find(|(i, c)| {
            *c == *open && (*i == 0 || d[..*i].ends_with(|p: char| !p.is_alphanumeric()))
        });
        let Some((s, _)) = start else { continue };
        let inner = s + open.len_utf8();
        if let Some(len) = d[inner..].find(*close) {
            let text = d[inner..inner + len].trim().to_string();
            if !text.is_empty() {
                return Some((text, s, inner + len + close.len_utf8()));
            }
        }
    }
    None
}

/// Remove a role phrase from the end (`at_end`) or the start of `words`.
fn take_role(words: &mut Vec<&str>, at_end: bool) -> Option<Role> {
    for (phrase, role) in ROLE_WORDS {
        let n = phrase.split(' ').count();
        if words.len() < n {
            continue;
        }
        let range = if at_end {
            words.len() - n..words.len()
        } else {
            0..n
        };
        let found = words[range.clone()].join(" ").to_lowercase();
        if found == *phrase {
            words.drain(range);
            return Some(*role);
        }
        // Chinese writes the role onto the name: 提交按钮.
        if at_end && !phrase.is_ascii() {
            if let Some(last) = words.last_mut() {
                let word = *last;
                if let Some(name) = word.strip_suffix(phrase).filter(|n| !n.is_empty()) {
                    *last = name;
                    return Some(*role);
                }
            }
        }
    }
    None
}

fn strip_filler(words: &mut Vec<&str>) {
    for f in FILLER {
        let n = f.split(' ').count();
        if words.len() > n && words[..n].join(" ").to_lowercase() == *f {
            words.drain(..n);
            return;
        }
    }
}

/// Whitespace collapsed and trimmed.
pub fn norm(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One element the probe found, with what the heuristics read.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Candidate {
    /// ARIA role (explicit or implicit); empty when it has none.
    pub role: String,
    /// Accessible name (approximated by the probe).
    pub name: String,
    /// Its visible text when short.
    pub text: String,
    pub aria_label: String,
    pub placeholder: String,
    pub title: String,
    pub alt: String,
    pub tag: String,
    /// Why it is not visible (`display:none`, `opacity:0`, …); `None` when it is.
    pub hidden: Option<String>,
    pub in_viewport: bool,
}

impl Candidate {
    /// `button "Submit"`: its role (else its tag) and name (else its text).
    pub fn describe(&self) -> String {
        let what = if self.role.is_empty() {
            format!("<{}>", self.tag)
        } else {
            self.role.clone()
        };
        match self.label() {
            Some(l) => format!("{what} \"{}\"", clip(l, 60)),
            None => what,
        }
    }

    /// Its accessible name, else the first of its text, aria-label,
    /// placeholder, title and alt that it has.
    pub fn label(&self) -> Option<&str> {
        [
            &self.name,
            &self.text,
            &self.aria_label,
            &self.placeholder,
            &self.title,
            &self.alt,
        ]
        .into_iter()
        .find(|s| !s.is_empty())
        .map(String::as_str)
    }

    fn field(&self, s: Strategy) -> &str {
        match s {
            Strategy::RoleName => &self.name,
            Strategy::Text => &self.text,
            Strategy::AriaLabel => &self.aria_label,
            Strategy::Placeholder => &self.placeholder,
            Strategy::Title => &self.title,
            Strategy::Alt => &self.alt,
        }
    }
}

/// Where a match was found, in the order they are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    RoleName,
    Text,
    AriaLabel,
    Placeholder,
    Title,
    Alt,
}

impl Strategy {
    const ALL: [Strategy; 6] = [
        Strategy::RoleName,
        Strategy::Text,
        Strategy::AriaLabel,
        Strategy::Placeholder,
        Strategy::Title,
        Strategy::Alt,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Strategy::RoleName => "role and name",
            Strategy::Text => "text",
            Strategy::AriaLabel => "aria-label",
            Strategy::Placeholder => "placeholder",
            Strategy::Title => "title",
            Strategy::Alt => "alt",
        }
    }
}

/// How closely a field matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    Exact,
    CaseInsensitive,
    Fuzzy,
}

impl Tier {
    const ALL: [Tier; 3] = [Tier::Exact, Tier::CaseInsensitive, Tier::Fuzzy];

    pub fn label(self) -> &'static str {
        match self {
            Tier::Exact => "exact",
            Tier::CaseInsensitive => "case-insensitive",
            Tier::Fuzzy => "fuzzy",
        }
    }
}

/// How well `field` matches `name`, if at all.
pub fn tier_of(field: &str, name: &str) -> Option<Tier> {
    let (f, n) = (norm(field), norm(name));
    if f.is_empty() || n.is_empty() {
        return None;
    }
    if f == n {
        return Some(Tier::Exact);
    }
    let (f, n) = (f.to_lowercase(), n.to_lowercase());
    if f == n {
        return Some(Tier::CaseInsensitive);
    }
    let contains = contains_words(&f, &n) || (f.chars().count() >= 3 && contains_words(&n, &f));
    (contains || similarity(&f, &n) >= 0.75).then_some(Tier::Fuzzy)
}

/// `needle`'s words appear in a row among `hay`'s words ("submit" in
/// "submit order", not "go" in "google"). Text without ASCII letters (CJK,
/// written without spaces) is matched as a plain substring.
fn contains_words(hay: &str, needle: &str) -> bool {
    if !needle.chars().any(|c| c.is_ascii_alphabetic()) {
        return !needle.is_empty() && hay.contains(needle);
    }
    let words = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(String::from)
            .collect()
    };
    let (h, n) = (words(hay), words(needle));
    !n.is_empty() && h.windows(n.len()).any(|w| w == n.as_slice())
}

/// 1.0 for equal strings down to 0.0, by edit distance over the longer length.
pub fn similarity(a: &str, b: &str) -> f64 {
    let longest = a.chars().count().max(b.chars().count());
    if longest == 0 {
        return 1.0;
    }
    1.0 - levenshtein(a, b) as f64 / longest as f64
}

/// The best [`similarity`] of `needle` to any run of words in `text` about
/// as long as it (case-insensitive), so a long text that holds a near miss
/// scores like the near miss.
pub fn closeness(needle: &str, text: &str) -> f64 {
    let (n, t) = (norm(needle).to_lowercase(), norm(text).to_lowercase());
    let words: Vec<&str> = t.split(' ').collect();
    let k = n.split(' ').count();
    let mut best = similarity(&n, &t);
    for size in [k.saturating_sub(1).max(1), k, k + 1] {
        for w in words.windows(size.min(words.len())) {
            best = best.max(similarity(&n, &w.join(" ")));
        }
    }
    best
}

/// A match: the candidate, and by which strategy and tier.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit<'a> {
    pub candidate: &'a Candidate,
    pub strategy: Strategy,
    pub tier: Tier,
}

/// The outcome of [`pick`].
#[derive(Debug, Clone, PartialEq)]
pub enum Pick<'a> {
    /// A visible match.
    Found(Hit<'a>),
    /// The best tier matched only hidden elements; the first of them.
    Hidden(Hit<'a>),
    /// Nothing matched; the candidate most like the name.
    Nearest(&'a Candidate),
    /// Nothing matched and nothing resembles it.
    Nothing,
}

/// Below this [`closeness`] a candidate is not worth naming as "nearest".
const NEAREST_FLOOR: f64 = 0.34;

/// Rank `candidates` (in document order) against `q`.
pub fn pick<'a>(q: &Query, candidates: &'a [Candidate]) -> Pick<'a> {
    let role_ok = |c: &Candidate| q.role.is_none_or(|r| r.accepts(&c.role));
    // Pass 1: elements of the asked role (every element when none is asked).
    if let Some(v) = best_tier(q, candidates.iter().filter(|c| role_ok(c)), &Tier::ALL) {
        return v;
    }
    // Pass 2: a role was asked but nothing of that role matched; others
    // count only by a close (exact or case-insensitive) name.
    if q.role.is_some() && !q.name.is_empty() {
        let close = [Tier::Exact, Tier::CaseInsensitive];
        if let Some(v) = best_tier(q, candidates.iter().filter(|c| !role_ok(c)), &close) {
            return v;
        }
    }
    nearest(q, candidates)
}

fn best_tier<'a>(
    q: &Query,
    candidates: impl Iterator<Item = &'a Candidate> + Clone,
    tiers: &[Tier],
) -> Option<Pick<'a>> {
    for tier in tiers {
        let mut hidden = None;
        for strategy in Strategy::ALL {
            for c in candidates.clone() {
                if matches(q, c, strategy) != Some(*tier) {
                    continue;
                }
                let hit = Hit {
                    candidate: c,
                    strategy,
                    tier: *tier,
                };
                if c.hidden.is_none() {
                    return Some(Pick::Found(hit));
                }
                hidden.get_or_insert(hit);
            }
        }
        if let Some(h) = hidden {
            return Some(Pick::Hidden(h));
        }
    }
    None
}

fn matches(q: &Query, c: &Candidate, s: Strategy) -> Option<Tier> {
    if q.name.is_empty() {
        // Only a role was asked: any element of that role is exact.
        return (s == Strategy::RoleName && q.role.is_some_and(|r| r.accepts(&c.role)))
            .then_some(Tier::Exact);
    }
    if s == Strategy::RoleName && c.role.is_empty() {
        return None;
    }
    tier_of(c.field(s), &q.name)
}

fn nearest<'a>(q: &Query, candidates: &'a [Candidate]) -> Pick<'a> {
    let score = |c: &Candidate| {
        let by_name = Strategy::ALL
            .iter()
            .map(|s| c.field(*s))
            .filter(|f| !f.is_empty())
            .map(|f| closeness(&q.name, f))
            .fold(0.0, f64::max);
        // Of two equally close, the one of the asked role.
        let role_bonus = if q.role.is_some_and(|r| r.accepts(&c.role)) {
            0.01
        } else {
            0.0
        };
        by_name + role_bonus
    };
    let best = candidates
        .iter()
        .map(|c| (score(c), c))
        .filter(|(s, _)| *s >= NEAREST_FLOOR)
        .fold(None::<(f64, &Candidate)>, |acc, (s, c)| match acc {
            Some((bs, _)) if bs >= s => acc,
            _ => Some((s, c)),
        });
    match best {
        Some((_, c)) => Pick::Nearest(c),
        None => Pick::Nothing,
    }
}

/// The text most like `needle` among `texts`, if any is close enough to name.
pub fn nearest_text<'a>(needle: &str, texts: &'a [String]) -> Option<&'a str> {
    texts
        .iter()
        .map(|t| (closeness(needle, t), t))
        .filter(|(s, _)| *s >= NEAREST_FLOOR)
        .fold(None::<(f64, &String)>, |acc, (s, t)| match acc {
            Some((bs, _)) if bs >= s => acc,
            _ => Some((s, t)),
        })
        .map(|(_, t)| t.as_str())
}

/// At most `max` chars, with `…` when cut.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests;
