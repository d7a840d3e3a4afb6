#![no_main]
//! Every client frame goes through `protocol::decode`: it must answer
//! Ok or a DecodeError for any text, never panic.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = toolhub::protocol::decode(&text, 1 << 20);
});
