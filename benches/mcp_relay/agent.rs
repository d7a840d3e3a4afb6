//! The agent pattern: sequential `echo` calls with a pause of 2–50 ms
//! before each (an agent thinks between calls), through `/mcp` (rmcp's
//! Streamable HTTP client) and through `/ws`, measuring the hub's CPU per
//! call (`/proc/<pid>/task/*/schedstat`, nanoseconds, the hub process only)
//! and the p50 latency. With `TOOLHUB_BIN_B` two builds run in turns, a
//! fresh hub each round (A, B, A, B, …), on the same pauses, so a noisy
//! machine hits both alike; read the ratios B/A.

use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::json;

use super::{connect_ws, percentile, start_hub, ws_echo};

/// The pauses before each call: 2–50 ms, the same sequence every round.
fn pauses(n: usize) -> Vec<Duration> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            Duration::from_micros(2_000 + x % 48_001)
        })
        .collect()
}

/// CPU time of every live thread of `pid`, in nanoseconds (the first
/// field of each `schedstat`: time spent running).
fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// One endpoint's figures in one round.
#[derive(Clone, Copy)]
struct Figures {
    cpu_us_per_call: f64,
    p50_us: f64,
}

async fn over_mcp(url: &str, pid: u32, pauses: &[Duration]) -> Figures {
    let client =
        ().serve(StreamableHttpClientTransport::from_uri(url.to_string()))
            .await
            .expect("init");
    let peer = client.peer().clone();
    let args = json!({"message": "m"})
        .as_object()
        .cloned()
        .unwrap_or_default();
    let call = || CallToolRequestParams::new("t__echo").with_arguments(args.clone());
    for _ in 0..50 {
        peer.call_tool(call()).await.expect("warm-up call");
    }
    let mut times = Vec::with_capacity(pauses.len());
    let before = cpu_ns(pid);
    for pause in pauses {
        tokio::time::sleep(*pause).await;
        let t = Instant::now();
        peer.call_tool(call()).await.expect("call");
        times.push(t.elapsed());
    }
    let cpu = cpu_ns(pid).saturating_sub(before);
    let _ = client.cancel().await;
    figures(times, cpu)
}

async fn over_ws(url: &str, pid: u32, pauses: &[Duration]) -> Figures {
    let mut ws = connect_ws(url).await;
    for i in 0..50 {
        ws_echo(&mut ws, i).await;
    }
    let mut times = Vec::with_capacity(pauses.len());
    let before = cpu_ns(pid);
    for (i, pause) in pauses.iter().enumerate() {
        tokio::time::sleep(*pause).await;
        times.push(ws_echo(&mut ws, 50 + i).await);
    }
    figures(times, cpu_ns(pid).saturating_sub(before))
}

fn figures(mut times: Vec<Duration>, cpu_ns: u64) -> Figures {
    times.sort();
    Figures {
        cpu_us_per_call: cpu_ns as f64 / 1e3 / times.len().max(1) as f64,
        p50_us: percentile(&times, 0.5).as_secs_f64() * 1e6,
    }
}

/// One round's figures: `/mcp`, `/ws`.
type Round = (Figures, Figures);
/// A column of the summary: its label and how to read it from a round.
type Column = (&'static str, fn(&Round) -> f64);

/// One round of one build: a fresh hub, `/mcp` then `/ws`.
fn round(rt: &tokio::runtime::Runtime, bin: &str, pauses: &[Duration]) -> Round {
    let (mut hub, url, dir) = start_hub(bin);
    let pid = hub.id();
    let ws_url = url.replace("http://", "ws://").replace("/mcp", "/ws");
    let out = rt.block_on(async {
        let m = over_mcp(&url, pid, pauses).await;
        let w = over_ws(&ws_url, pid, pauses).await;
        (m, w)
    });
    let _ = hub.kill();
    let _ = hub.wait();
    let _ = std::fs::remove_dir_all(&dir);
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

pub fn run(full: bool) {
    let a = std::env::var("TOOLHUB_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_toolhub").into());
    let b = std::env::var("TOOLHUB_BIN_B").ok();
    let rounds: usize = std::env::var("AGENT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if full { 3 } else { 1 });
    let calls: usize = std::env::var("AGENT_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if full { 300 } else { 10 });
    let pauses = pauses(calls);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let builds: Vec<(&str, &str)> = match &b {
        Some(b) => vec![("A", a.as_str()), ("B", b.as_str())],
        None => vec![("A", a.as_str())],
    };
    println!(
        "agent pattern: {calls} sequential echo calls, 2–50 ms apart, {rounds} round(s); A = {a}{}",
        b.as_deref()
            .map(|b| format!(", B = {b}"))
            .unwrap_or_default()
    );
    println!("round build | /mcp cpu µs/call  p50 µs | /ws cpu µs/call  p50 µs");
    let mut got: Vec<Vec<Round>> = vec![Vec::new(); builds.len()];
    for r in 0..rounds {
        for (i, (name, bin)) in builds.iter().enumerate() {
            let (m, w) = round(&rt, bin, &pauses);
            println!(
                "{:>5} {name:>5} | {:>16.0} {:>7.0} | {:>15.0} {:>7.0}",
                r + 1,
                m.cpu_us_per_call,
                m.p50_us,
                w.cpu_us_per_call,
                w.p50_us
            );
            got[i].push((m, w));
        }
    }
    let med = |i: usize, f: fn(&Round) -> f64| median(got[i].iter().map(f).collect());
    let cols: [Column; 4] = [
        ("/mcp cpu µs/call", |x| x.0.cpu_us_per_call),
        ("/mcp p50 µs", |x| x.0.p50_us),
        ("/ws cpu µs/call", |x| x.1.cpu_us_per_call),
        ("/ws p50 µs", |x| x.1.p50_us),
    ];
    for (label, f) in cols {
        let a = med(0, f);
        match builds.len() {
            2 => {
                let b = med(1, f);
                println!(
                    "median {label}: A {a:.0}, B {b:.0}, B/A {:.2}",
                    b / a.max(1e-9)
                );
            }
            _ => println!("median {label}: {a:.0}"),
        }
    }
}
