//! Test helpers shared by the config tests: parse a text as the config file
//! at [`P`] and expect it to load ([`ok`]) or fail at a place ([`bad`]).

use std::path::Path;

use super::{parse, LoadedConfig};

pub const P: &str = "/tmp/cfgtest/config.json";

pub fn ok(text: &str) -> LoadedConfig {
    match parse(text, Path::new(P)) {
        Ok(l) => l,
        Err(e) => panic!("expected a valid config, got: {e}"),
    }
}

/// (line, column, message) of the error `text` must produce.
pub fn bad(text: &str) -> (usize, usize, String) {
    match parse(text, Path::new(P)) {
        Ok(_) => panic!("expected an error for {text}"),
        Err(e) => {
            let shown = e.to_string();
            assert!(!shown.contains('\n'), "error is not one line: {shown}");
            let (Some(l), Some(c)) = (e.line(), e.column()) else {
                panic!("error has no line:column: {shown}");
            };
            assert!(shown.starts_with(&format!("{P}:{l}:{c}: ")), "{shown}");
            (l, c, e.message())
        }
    }
}
