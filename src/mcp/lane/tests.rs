//! The lane without a process: answers, errors, cancels, line cutting.

use super::pipes::{read_line, LineSink};
use super::*;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};

fn line(out: Out) -> Vec<u8> {
    match out {
        Out::Line(l) => l,
        Out::Close => panic!("expected a line, got Close"),
    }
}

fn sent(rx: &mut mpsc::UnboundedReceiver<Out>) -> Value {
    let line = line(rx.try_recv().expect("a line was sent"));
    assert_eq!(line.last(), Some(&b'\n'));
    serde_json::from_slice(&line).expect("json")
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
    let req = sent(&mut rx);
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
    let id = sent(&mut rx)["id"].as_str().expect("id").to_string();
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
    let id = sent(&mut rx)["id"].as_str().expect("id").to_string();
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
    let id = sent(&mut rx)["id"].clone();
    let note = sent(&mut rx);
    assert_eq!(note["method"], "notifications/cancelled");
    assert_eq!(note["params"]["requestId"], id);
    assert_eq!(lane.open.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn rmcp_writes_leave_as_whole_lines() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut sink = LineSink::new(tx);
    sink.write_all(b"{\"a\":").await.expect("write");
    assert!(rx.try_recv().is_err());
    sink.write_all(b"1}\n{\"b\":2}\n{\"c\"")
        .await
        .expect("write");
    assert_eq!(line(rx.try_recv().expect("one")), b"{\"a\":1}\n");
    assert_eq!(line(rx.try_recv().expect("two")), b"{\"b\":2}\n");
    assert!(rx.try_recv().is_err());
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
