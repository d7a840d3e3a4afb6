#![no_main]
//! Ids become file names: anything `valid_id` accepts must be one plain path
//! component, never `..`, a separator or a NUL.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let id = String::from_utf8_lossy(data);
    for ok in [
        toolhub::store::valid_id(&id),
        toolhub::store::recordings::valid_id(&id),
    ] {
        if ok {
            assert!(!id.is_empty() && id != "." && id != "..", "{id:?}");
            assert!(!id.contains(['/', '\\', '\0']), "{id:?}");
            let p = std::path::Path::new(id.as_ref());
            assert_eq!(p.components().count(), 1, "{id:?}");
        }
    }
});
