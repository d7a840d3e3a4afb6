#![no_main]
//! config.json is edited by hand: any text parses or is refused with an
//! error naming the place, never a panic.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = toolhub::config::parse(
        &text,
        std::path::Path::new("/nonexistent/toolhub/config.json"),
    );
});
