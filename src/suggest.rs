//! "Did you mean …?" for names a person typed: tool names, message types,
//! config keys. Pure functions, shared so every error that names an unknown
//! thing suggests the near misses the same way.

/// How many suggestions [`did_you_mean`] returns at most: more than three is
/// noise in an error message.
const MAX_SUGGESTIONS: usize = 3;

/// Edit distance (insertions, deletions, substitutions) between `a` and `b`,
/// counted in chars, not bytes, so a non-ASCII name is one edit per letter.
pub fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    // One row of the classic DP table: prev[j] = distance(a[..i], b[..j]).
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = substitution.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// Up to three candidates closest to `word`, nearest first (ties by name, so
/// the answer does not depend on the candidates' order). A candidate counts
/// only within distance `max(2, len/3)` of `word`: a short word may have two
/// typos, a long one a third of its letters. Duplicates are returned once.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let limit = (word.chars().count() / 3).max(2);
    let mut near: Vec<(usize, &'a str)> = candidates
        .into_iter()
        .map(|c| (levenshtein(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .collect();
    near.sort_unstable();
    near.dedup_by(|a, b| a.1 == b.1);
    near.into_iter()
        .take(MAX_SUGGESTIONS)
        .map(|(_, c)| c)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levenshtein_counts_edits() {
        assert_eq!(levenshtein("", ""), 0);
        assert_eq!(levenshtein("abc", ""), 3);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("flaw", "lawn"), 2);
        assert_eq!(levenshtein("read_file", "read_file"), 0);
        assert_eq!(levenshtein("read_file", "read_files"), 1);
        assert_eq!(levenshtein("read_file", "raed_file"), 2);
    }

    #[test]
    fn levenshtein_is_symmetric() {
        for (a, b) in [("echo", "ecoh"), ("tool_call", "tool"), ("a", "xyz")] {
            assert_eq!(levenshtein(a, b), levenshtein(b, a), "{a} vs {b}");
        }
    }

    #[test]
    fn levenshtein_counts_chars_not_bytes() {
        // 'é' is two bytes in UTF-8 but one substitution.
        assert_eq!(levenshtein("cafe", "café"), 1);
        assert_eq!(levenshtein("日本", "日本語"), 1);
    }

    #[test]
    fn did_you_mean_returns_nearest_first() {
        let names = ["read_file", "write_file", "read_files", "list_dir"];
        assert_eq!(
            did_you_mean("read_fil", names),
            vec!["read_file", "read_files"]
        );
    }

    #[test]
    fn did_you_mean_caps_at_three_and_orders_ties_by_name() {
        let names = ["ab", "ac", "ad", "ae", "zz"];
        // All of ab..ae are one edit from "aa"; ties are broken by name.
        assert_eq!(did_you_mean("aa", names), vec!["ab", "ac", "ad"]);
        let reversed = ["ae", "ad", "ac", "ab"];
        assert_eq!(did_you_mean("aa", reversed), vec!["ab", "ac", "ad"]);
    }

    #[test]
    fn did_you_mean_respects_distance_limit() {
        // Short word: limit 2.
        assert_eq!(did_you_mean("ecoh", ["echo"]), vec!["echo"]);
        assert!(did_you_mean("xyz", ["echo"]).is_empty());
        // 12-char word: limit 4, so four edits are in and five are out.
        assert_eq!(did_you_mean("abcdefghijkl", ["abcdefghWXYZ"]).len(), 1);
        assert!(did_you_mean("abcdefghijkl", ["abcdefgVWXYZ"]).is_empty());
    }

    #[test]
    fn did_you_mean_dedups_and_handles_empty() {
        assert_eq!(did_you_mean("echo", ["echo", "echo"]), vec!["echo"]);
        assert!(did_you_mean("echo", []).is_empty());
    }
}
