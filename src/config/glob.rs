//! Tool-name globs of the safety rules (`safety.rules[].tool`).

/// `*` matches any run of characters (also none), `?` exactly one; everything
/// else is literal. Iterative with one backtrack point, so linear-ish.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    // Every call is checked against every rule: the common patterns ("*",
    // a plain name) are answered without collecting chars.
    if pattern == "*" {
        return true;
    }
    if !pattern.contains(['*', '?']) {
        return pattern == text;
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matching() {
        assert!(glob_match("*", ""));
        assert!(glob_match("*run_command*", "builtin.run_command"));
        assert!(glob_match("run_command", "run_command"));
        assert!(!glob_match("run_command", "run_commands"));
        assert!(glob_match("browser_?lick", "browser_click"));
        assert!(glob_match("a*b*c", "aXbYbZc"));
        assert!(!glob_match("a*b*c", "aXbYbZ"));
        assert!(!glob_match("?", ""));
    }
}
