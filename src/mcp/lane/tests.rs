//! The lane without a process: answers, errors, cancels, line cutting.

use super::pipes::{read_line, LineSink};
use super::writer::{write_loop, Writer};
use super::*;
use futures::FutureExt;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, ReadHalf, SimplexStream};

type Rx = BufReader<ReadHalf<SimplexStream>>;

/// The next line written, whole.
async fn next_line(rx: &mut Rx) -> Vec<u8> {
    let mut line = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), rx.read_until(b'\n', &mut line))
        .await
        .expect("a line within 10 s")
        .expect("read");
    assert_eq!(line.last(), Some(&b'\n'), "a whole line");
    line
}

async fn sent(rx: &mut Rx) -> Value {
    serde_json::from_slice(&next_line(rx).await).expect("json")
}

/// Nothing more has been written (yet).
fn nothing_written(rx: &mut Rx) -> bool {
    rx.fill_buf().now_or_never().is_none()
}

#[tokio::test]
async fn an_answer_reaches_its_call_and_other_lines_pass_on() {
    let (lane, mut rx) = test_lane();
    let l = lane.clone();
    let call = tokio::spawn(async move {
        let mut args = Map::new();
        args.insert("message".into(), "hi".into());
        l.call_tool("echo", Some(&args)).await
    });
    while lane.open.load(Ordering::Relaxed) == 0 {
        tokio::task::yield_now().await;
    }
    let req = sent(&mut rx).await;
    assert_eq!(req["method"], "tools/call");
    assert_eq!(req["params"]["arguments"]["message"], "hi");
    let id = req["id"].as_str().expect("string id").to_string();
    // rmcp's own traffic is not the lane's.
    assert!(!lane.take_answer(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#));
    // A request from the server that mentions a lane id is not an answer.
    let ask = format!(r#"{{"jsonrpc":"2.0","id":"{id}","method":"ping"}}"#);
    assert!(!lane.take_answer(ask.as_bytes()));
    let answer = format!(
        r#"{{"jsonrpc":"2.0","id":"{id}","result":{{"content":[{{"type":"text","text":"hi"}}]}}}}"#
    );
    assert!(lane.take_answer(answer.as_bytes()));
    let got = call.await.expect("join").expect("answered");
    assert_eq!(got["content"][0]["text"], "hi");
    assert_eq!(lane.open.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn an_error_answer_and_a_closed_server_fail_the_call() {
    let (lane, mut rx) = test_lane();
    let l = lane.clone();
    let call = tokio::spawn(async move { l.call_tool("boom", None).await });
    while lane.open.load(Ordering::Relaxed) == 0 {
        tokio::task::yield_now().await;
    }
    let id = sent(&mut rx).await["id"].as_str().expect("id").to_string();
    let answer =
        format!(r#"{{"jsonrpc":"2.0","id":"{id}","error":{{"code":-32602,"message":"bad"}}}}"#);
    assert!(lane.take_answer(answer.as_bytes()));
    match call.await.expect("join") {
        Err(LaneError::Rpc(e)) => assert_eq!(e.code.0, -32602),
        other => panic!("expected the server's error, got {other:?}"),
    }
    // An error of the wrong shape still ends the call.
    let l = lane.clone();
    let call = tokio::spawn(async move { l.call_tool("odd", None).await });
    while lane.open.load(Ordering::Relaxed) == 0 {
        tokio::task::yield_now().await;
    }
    let id = sent(&mut rx).await["id"].as_str().expect("id").to_string();
    let answer = format!(r#"{{"jsonrpc":"2.0","id":"{id}","error":"nope"}}"#);
    assert!(lane.take_answer(answer.as_bytes()));
    match call.await.expect("join") {
        Err(LaneError::Rpc(e)) => assert!(e.message.contains("nope"), "{e:?}"),
        other => panic!("expected an error, got {other:?}"),
    }
    let l = lane.clone();
    let call = tokio::spawn(async move { l.call_tool("slow", None).await });
    while lane.open.load(Ordering::Relaxed) == 0 {
        tokio::task::yield_now().await;
    }
    lane.close();
    assert!(matches!(call.await.expect("join"), Err(LaneError::Closed)));
    assert!(matches!(
        lane.call_tool("after", None).await,
        Err(LaneError::Closed)
    ));
}

#[tokio::test]
async fn giving_up_sends_cancelled_for_the_call() {
    let (lane, mut rx) = test_lane();
    let gave_up =
        tokio::time::timeout(Duration::from_millis(10), lane.call_tool("hang", None)).await;
    assert!(gave_up.is_err());
    let id = sent(&mut rx).await["id"].clone();
    let note = sent(&mut rx).await;
    assert_eq!(note["method"], "notifications/cancelled");
    assert_eq!(note["params"]["requestId"], id);
    assert_eq!(lane.open.load(Ordering::Relaxed), 0);
}

fn test_writer(pipe_bytes: usize) -> (Arc<Writer>, Rx) {
    let (rx, tx) = tokio::io::simplex(pipe_bytes);
    let w = Arc::new(Writer::new(tx));
    tokio::spawn(write_loop(w.clone()));
    (w, BufReader::new(rx))
}

#[tokio::test]
async fn rmcp_writes_leave_as_whole_lines() {
    let (w, mut rx) = test_writer(1 << 16);
    let mut sink = LineSink::new(w);
    sink.write_all(b"{\"a\":").await.expect("write");
    assert!(nothing_written(&mut rx));
    sink.write_all(b"1}\n{\"b\":2}\n{\"c\"")
        .await
        .expect("write");
    assert_eq!(next_line(&mut rx).await, b"{\"a\":1}\n");
    assert_eq!(next_line(&mut rx).await, b"{\"b\":2}\n");
    assert!(nothing_written(&mut rx));
}

#[tokio::test]
async fn a_full_pipe_queues_lines_whole_and_in_order() {
    // The pipe takes 16 bytes at a time: a direct write leaves most of
    // its line to the writer task, and a later direct line must wait
    // behind it, not cut in.
    let (w, mut rx) = test_writer(16);
    let a = format!("{{\"a\":\"{}\"}}\n", "x".repeat(40));
    w.send(a.as_bytes(), true).expect("a");
    w.send(b"{\"b\":2}\n", true).expect("b");
    w.send(b"{\"c\":3}\n", false).expect("c");
    assert_eq!(next_line(&mut rx).await, a.as_bytes());
    assert_eq!(next_line(&mut rx).await, b"{\"b\":2}\n");
    assert_eq!(next_line(&mut rx).await, b"{\"c\":3}\n");
    // Closing writes what is queued, then ends the pipe; later lines fail.
    w.send(b"{\"d\":4}\n", false).expect("d");
    w.close();
    assert!(w.send(b"{\"e\":5}\n", true).is_err());
    assert_eq!(next_line(&mut rx).await, b"{\"d\":4}\n");
    let mut rest = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(&mut rx, &mut rest)
        .await
        .expect("end");
    assert!(rest.is_empty(), "nothing after close: {rest:?}");
}

#[tokio::test]
async fn long_lines_are_cut_and_the_next_line_is_whole() {
    let data = format!("{}\n{{\"ok\":1}}\n", "x".repeat(100));
    let mut r = BufReader::with_capacity(16, data.as_bytes());
    let mut line = Vec::new();
    assert!(read_line(&mut r, &mut line).await.expect("read"));
    assert_eq!(line.len(), 101);
    line.clear();
    assert!(read_line(&mut r, &mut line).await.expect("read"));
    assert_eq!(line, b"{\"ok\":1}\n");
    line.clear();
    assert!(!read_line(&mut r, &mut line).await.expect("eof"));
}
