//! The stall check shared by the relay bench and the integration test: a
//! large recording and a run with many screenshots written straight into
//! the hub's stores, and a client that pings every 10 ms on its own thread
//! while another client works on them (issue 32: one client's file work
//! must never stall another's).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// A recording in the store's format: a header, `steps` steps with an
/// inline text result of `result_bytes` each, an end line.
pub fn write_recording(storage: &Path, id: &str, steps: usize, result_bytes: usize) {
    let dir = storage.join(id);
    std::fs::create_dir_all(&dir).expect("recording dir");
    let header = json!({"kind": "header", "schemaVersion": 2, "recordingId": id, "name": "large",
        "createdAt": "2026-01-01T00:00:00Z", "hubVersion": "0.1.0", "servers": []});
    let mut text = format!("{header}\n");
    let payload = "x".repeat(result_bytes);
    for seq in 0..steps {
        let step = json!({"kind": "step", "seq": seq, "source": {"type": "tool_call"},
            "tool": "t__echo", "qualifiedName": "t__echo", "server": "t",
            "params": {"message": format!("call {seq}")}, "timestamp": "2026-01-01T00:00:00Z",
            "tOffsetMs": seq, "durationMs": 1, "success": true, "attempts": 1,
            "result": {"content": [{"type": "text", "text": payload}]}});
        text.push_str(&step.to_string());
        text.push('\n');
    }
    let end = json!({"kind": "end", "stepCount": steps, "totalDurationMs": steps,
        "successRate": 1.0, "stoppedAt": "2026-01-01T00:01:00Z", "reason": "stopped"});
    text.push_str(&format!("{end}\n"));
    std::fs::write(dir.join("recording.jsonl"), text).expect("recording");
}

/// A run folder with `n` small screenshots.
pub fn write_run(runs: &Path, id: &str, n: usize) {
    let dir = runs.join(id);
    std::fs::create_dir_all(dir.join("screenshots")).expect("run dir");
    std::fs::create_dir_all(dir.join("logs")).expect("logs");
    let meta = json!({"run_id": id, "theme_description": "many screenshots",
        "created_at": "2026-01-01T00:00:00Z", "last_accessed": "2026-01-01T00:00:00Z",
        "status": "active", "schema_version": "1.0"});
    std::fs::write(dir.join(".metadata.json"), meta.to_string()).expect("meta");
    let png = [b"\x89PNG\r\n\x1a\n".as_slice(), &[0u8; 4096]].concat();
    for i in 0..n {
        let name = format!("screenshots/{i:04}_shot.png");
        std::fs::write(dir.join(name), &png).expect("png");
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(url: String, token: &str) -> Ws {
    let mut req = url.into_client_request().expect("request");
    let auth = format!("Bearer {token}").parse().expect("header");
    req.headers_mut().insert("Authorization", auth);
    let (ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .expect("connect");
    ws
}

/// The text of the reply to `id`, without parsing anything: the client
/// doing the file work must not spend the cores parsing a 50 MB reply
/// while the other client's pings are timed.
async fn reply_to(ws: &mut Ws, id: &str) -> Option<String> {
    let want = format!("\"replyTo\":\"{id}\"");
    while let Some(Ok(m)) = ws.next().await {
        if let Message::Text(t) = m {
            if t.as_str().contains(&want) {
                return Some(t.as_str().to_string());
            }
        }
    }
    None
}

/// The client doing the file work.
pub struct Worker {
    ws: Ws,
    n: u64,
}

impl Worker {
    pub async fn connect(url: String, token: &str) -> Worker {
        Worker {
            ws: connect(url, token).await,
            n: 0,
        }
    }

    /// Send `msg` with a fresh id; the reply's text, unparsed.
    pub async fn request(&mut self, mut msg: serde_json::Value) -> String {
        self.n += 1;
        let id = format!("w{}", self.n);
        msg["id"] = json!(id);
        let text = msg.to_string();
        self.ws
            .send(Message::Text(text.into()))
            .await
            .expect("send");
        let reply = tokio::time::timeout(Duration::from_secs(120), reply_to(&mut self.ws, &id));
        reply.await.ok().flatten().expect("no reply in time")
    }
}

/// A client pinging every 10 ms on its own thread and runtime, so the
/// other client's work in this process (parsing a 50 MB reply) never
/// delays it; only the hub can.
pub struct Pinger {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<(Instant, Duration)>>,
    /// One message per pong answered.
    pongs: std::sync::mpsc::Receiver<()>,
}

impl Pinger {
    /// Connect to `url` (`ws://…/ws`) with `token` and start pinging;
    /// returns once the first ping was answered, so the work measured
    /// after it cannot delay the connection instead of a ping.
    pub fn start(url: String, token: String) -> Pinger {
        let stop = Arc::new(AtomicBool::new(false));
        let done = stop.clone();
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(ping_until(url, token, done, ready_tx))
        });
        let first = ready.recv_timeout(Duration::from_secs(60));
        assert!(first.is_ok(), "the pinging client never got its first pong");
        Pinger {
            stop,
            thread,
            pongs: ready,
        }
    }

    /// Wait until `n` more pings have been answered (a quiet window
    /// measured in pongs, not in a sleep).
    #[allow(dead_code)]
    pub fn wait_pongs(&self, n: usize) {
        while self.pongs.try_recv().is_ok() {}
        for i in 0..n {
            let got = self.pongs.recv_timeout(Duration::from_secs(60));
            assert!(got.is_ok(), "pong {i} of {n} never came");
        }
    }

    /// Stop; every ping's send time and round trip.
    pub fn stop(self) -> Vec<(Instant, Duration)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("pinger")
    }
}

async fn ping_until(
    url: String,
    token: String,
    stop: Arc<AtomicBool>,
    ready: std::sync::mpsc::Sender<()>,
) -> Vec<(Instant, Duration)> {
    let mut ws = connect(url, &token).await;
    let mut rtts = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        n += 1;
        let id = format!("p{n}");
        let sent = Instant::now();
        let ping = json!({"type": "ping", "id": id}).to_string();
        ws.send(Message::Text(ping.into()))
            .await
            .expect("send ping");
        let pong = tokio::time::timeout(Duration::from_secs(60), reply_to(&mut ws, &id));
        assert!(matches!(pong.await, Ok(Some(_))), "no pong to {id}");
        rtts.push((sent, sent.elapsed()));
        let _ = ready.send(());
    }
    rtts
}

/// The worst round trip of the pings in flight at some point between
/// `from` and `to`, and how many there were.
pub fn worst_between(
    rtts: &[(Instant, Duration)],
    from: Instant,
    to: Instant,
) -> (Duration, usize) {
    let during: Vec<Duration> = rtts
        .iter()
        .filter(|(at, rtt)| *at <= to && *at + *rtt >= from)
        .map(|(_, rtt)| *rtt)
        .collect();
    (
        during.iter().max().copied().unwrap_or_default(),
        during.len(),
    )
}
