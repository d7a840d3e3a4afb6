//! The limits every template check and render call enforces.

/// Longest template string, in bytes.
pub const MAX_TEMPLATE_BYTES: usize = 64 * 1024;
/// Most text one render call (all string leaves of one params tree) may produce.
pub const MAX_OUTPUT_BYTES: usize = 10 * 1024 * 1024;
/// Deepest params tree (objects and arrays) that is walked.
pub const MAX_PARAMS_DEPTH: usize = 64;
/// Work units (helper calls, loop iterations) one render call may spend.
pub const MAX_RENDER_STEPS: u64 = 200_000;
/// Deepest block or subexpression nesting in one template string.
pub const MAX_NESTING: usize = 32;
