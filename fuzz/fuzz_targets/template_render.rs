#![no_main]
//! Step params are templates rendered with values earlier tools returned:
//! any template against any context renders or fails, never panics or runs
//! away (render steps and output are capped).

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // Split: `<template>\0<context JSON>`; a missing or bad context is a
    // fixed one with nested values, arrays and strings.
    let (tpl, ctx) = match text.split_once('\0') {
        Some((t, c)) => (t.to_string(), serde_json::from_str(c).ok()),
        None => (text.to_string(), None),
    };
    let ctx: Value = ctx.unwrap_or_else(|| {
        json!({"vars": {"user": "ann", "n": 3, "list": [1, "two", {"x": null}]},
               "prev": {"result": {"value": "v", "items": [1, 2, 3]}, "success": true}})
    });
    let templates = toolhub::engine::template::Templates::new();
    let _ = templates.check_params(&json!({"p": tpl}));
    let _ = templates.render_params(&json!({"p": tpl, "n": [tpl]}), &ctx);
});
