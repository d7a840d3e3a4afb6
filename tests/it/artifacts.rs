//! `get_artifact`: a stored image of a run or a recording comes back as
//! base64 with its media type; a path that would leave the owner's folder
//! (`..`, absolute, a symlink), a folder, a missing file and a file over the
//! cap get an error with errorType, message and suggestion.

use serde_json::{json, Value};

use crate::runs::{create_and_set, hub_with_t, run_dir};
use crate::support::Client;

async fn artifact(c: &mut Client, body: Value) -> Value {
    let mut msg = json!({"type": "get_artifact"});
    for (k, v) in body.as_object().expect("object") {
        msg[k] = v.clone();
    }
    c.request(msg).await
}

/// The error of a refused `get_artifact`, checked to be one a person can act on.
fn refused(r: &Value, class: &str) -> Value {
    assert_eq!(r["type"], "error", "{r}");
    let e = r["error"].clone();
    assert_eq!(e["errorType"], class, "{r}");
    for k in ["message", "suggestion"] {
        assert!(
            e[k].as_str().is_some_and(|s| !s.is_empty()),
            "{k} missing: {r}"
        );
    }
    e
}

fn decode(r: &Value) -> Vec<u8> {
    use std::io::Write;
    // The tests decode with base64(1) rather than the hub's own decoder.
    let mut child = std::process::Command::new("base64")
        .arg("-d")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("base64");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(r["data"].as_str().expect("data").as_bytes())
        .expect("write");
    child.wait_with_output().expect("base64 -d").stdout
}

#[tokio::test]
async fn a_runs_screenshot_and_a_recordings_image_come_back_as_base64() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let id = create_and_set(&mut c, "artifacts").await;
    c.send(
        json!({"type": "tool_call", "id": "i1", "tool": "t__image", "params": {},
                  "saveImages": "front page"}),
    )
    .await;
    let r = c.recv_where("i1", |v| v["replyTo"] == "i1").await;
    assert_eq!(r["success"], true, "{r}");
    let run = c
        .request(json!({"type": "get_run", "runId": id, "tail": 5}))
        .await;
    let path = run["entries"][0]["data"]["screenshot"]
        .as_str()
        .unwrap_or_else(|| panic!("no screenshot in {run}"))
        .to_string();
    assert_eq!(path, "screenshots/001_front-page.png");
    let r = artifact(&mut c, json!({"runId": id, "path": path})).await;
    assert_eq!(r["type"], "artifact", "{r}");
    assert_eq!(r["runId"], id.as_str());
    assert_eq!(r["path"], path.as_str());
    assert_eq!(r["mimeType"], "image/png");
    let on_disk = std::fs::read(run_dir(&hub, &id).join(&path)).expect("png");
    assert_eq!(r["bytes"], on_disk.len());
    assert_eq!(decode(&r), on_disk, "the bytes are the stored file's");

    // A recording's image item, stored beside its JSONL.
    let started = c
        .request(json!({"type": "start_recording", "name": "image"}))
        .await;
    let rec = started["recordingId"].as_str().expect("id").to_string();
    assert_eq!(c.call("t__image", json!({})).await["success"], true);
    c.request(json!({"type": "stop_recording"})).await;
    let got = c
        .request(json!({"type": "get_recording", "recordingId": rec}))
        .await;
    let img = got["recording"]["steps"][0]["images"][0]
        .as_str()
        .unwrap_or_else(|| panic!("no image in {got}"))
        .to_string();
    let r = artifact(&mut c, json!({"recordingId": rec, "path": img})).await;
    assert_eq!(r["type"], "artifact", "{r}");
    assert_eq!(r["recordingId"], rec.as_str());
    assert_eq!(r["mimeType"], "image/png");
    assert_eq!(&decode(&r)[1..4], b"PNG");
}

#[tokio::test]
async fn get_artifact_stays_inside_the_owners_folder() {
    let (hub, mut c) = hub_with_t(json!({})).await;
    let id = create_and_set(&mut c, "confined").await;
    let other = c
        .request(json!({"type": "create_run", "theme": "other"}))
        .await["run"]["runId"]
        .as_str()
        .expect("runId")
        .to_string();
    let dir = run_dir(&hub, &id);
    std::fs::write(
        run_dir(&hub, &other).join("outputs/secret.txt"),
        "other run's",
    )
    .expect("write");
    std::fs::write(hub.path().join("outside.txt"), "outside").expect("write");

    // Lexical escapes: refused before the filesystem is asked.
    for path in [
        format!("../{other}/outputs/secret.txt"),
        "outputs/../../../outside.txt".to_string(),
        hub.path().join("outside.txt").display().to_string(),
        "/etc/passwd".to_string(),
        "".to_string(),
    ] {
        let r = artifact(&mut c, json!({"runId": id, "path": path})).await;
        let e = refused(&r, "INVALID_PARAMS");
        assert!(
            e["message"]
                .as_str()
                .unwrap_or("")
                .contains("inside the folder"),
            "{path}: {r}"
        );
    }
    // A symlink inside the folder that points out of it.
    std::os::unix::fs::symlink(hub.path().join("outside.txt"), dir.join("outputs/link.txt"))
        .expect("symlink");
    std::os::unix::fs::symlink(hub.path(), dir.join("outputs/up")).expect("symlink");
    for path in ["outputs/link.txt", "outputs/up/outside.txt"] {
        let r = artifact(&mut c, json!({"runId": id, "path": path})).await;
        let e = refused(&r, "PERMISSION");
        assert!(
            e["message"].as_str().unwrap_or("").contains("outside"),
            "{path}: {r}"
        );
    }
    // A hostile owner id never names a folder.
    let r = artifact(&mut c, json!({"runId": "../x", "path": "a.png"})).await;
    refused(&r, "INVALID_PARAMS");
    let r = artifact(&mut c, json!({"recordingId": "../x", "path": "a.png"})).await;
    refused(&r, "INVALID_MESSAGE");
    // A folder, a missing file, an unknown run.
    let r = artifact(&mut c, json!({"runId": id, "path": "outputs"})).await;
    refused(&r, "INVALID_PARAMS");
    let r = artifact(&mut c, json!({"runId": id, "path": "outputs/nope.png"})).await;
    refused(&r, "NOT_FOUND");
    let r = artifact(&mut c, json!({"runId": "no-such-run", "path": "a.png"})).await;
    refused(&r, "NOT_FOUND");
    // Exactly one owner.
    let r = artifact(
        &mut c,
        json!({"runId": id, "recordingId": "rec-1", "path": "a"}),
    )
    .await;
    refused(&r, "INVALID_MESSAGE");
    let r = artifact(&mut c, json!({"path": "a"})).await;
    refused(&r, "INVALID_MESSAGE");
    // Over the cap (8 MiB): refused, naming the cap and where the file is.
    let big = dir.join("outputs/big.bin");
    std::fs::write(&big, vec![0u8; 8 * 1024 * 1024 + 1]).expect("write");
    let r = artifact(&mut c, json!({"runId": id, "path": "outputs/big.bin"})).await;
    let e = refused(&r, "LIMIT_EXCEEDED");
    assert!(
        e["message"].as_str().unwrap_or("").contains("8388608"),
        "{r}"
    );
    assert!(
        e["suggestion"].as_str().unwrap_or("").contains("big.bin"),
        "{r}"
    );
    // The connection is still fine afterwards.
    let r = artifact(&mut c, json!({"runId": id, "path": ".metadata.json"})).await;
    assert_eq!(r["mimeType"], "application/json", "{r}");
}
