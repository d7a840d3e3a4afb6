use std::os::unix::fs::{symlink, PermissionsExt};
use std::time::Duration;

use serde_json::json;

use super::*;

fn setup() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = Workspace::new(&dir.path().join("ws"), 1024).expect("workspace");
    (dir, ws)
}

/// Every await in these tests is bounded, so a hang fails instead of blocking CI.
async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .expect("operation did not finish within 10 s")
}

fn err_type(r: Result<Value, HubError>) -> ErrorType {
    r.expect_err("expected an error").error_type
}

#[test]
fn new_creates_and_canonicalises_the_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = Workspace::new(&dir.path().join("a/../b/ws"), 10).expect("workspace");
    assert!(ws.root().is_dir());
    assert_eq!(
        ws.root(),
        fs::canonicalize(dir.path().join("b/ws")).expect("canon")
    );
}

#[test]
fn traversal_and_outside_paths_are_refused() {
    let (dir, ws) = setup();
    fs::create_dir(dir.path().join("ws-other")).expect("mkdir");
    let sibling = dir.path().join("ws-other/f");
    // The sibling is named by an absolute path that is read as
    // workspace-relative, so escape it with `..` to reach it for real.
    let sibling_rel = format!(
        "../{}",
        sibling.strip_prefix(dir.path()).expect("rel").display()
    );
    for bad in [
        "../x",
        "a/../../x",
        "/../etc/passwd",
        "..",
        sibling_rel.as_str(),
    ] {
        let e = ws.resolve(bad).expect_err(bad);
        assert_eq!(e.error_type, ErrorType::Permission, "{bad}");
        assert!(e.message.contains(bad), "{}", e.message);
        assert!(
            e.message.contains(&ws.root().display().to_string()),
            "{}",
            e.message
        );
        assert!(
            e.suggestion.contains("inside the workspace"),
            "{}",
            e.suggestion
        );
    }
    // An absolute path outside the folder is workspace-relative, never outside.
    let inside = ws.resolve("/etc/passwd").expect("virtual root");
    assert_eq!(inside, ws.root().join("etc/passwd"));
    let e = ws.resolve("a\0b").expect_err("nul");
    assert_eq!(e.error_type, ErrorType::InvalidParams);
}

#[test]
fn paths_inside_are_resolved() {
    let (_dir, ws) = setup();
    let root = ws.root().to_path_buf();
    assert_eq!(ws.resolve(".").expect("dot"), root);
    assert_eq!(ws.resolve("a/b/../c").expect("rel"), root.join("a/c"));
    let abs = root.join("x.txt");
    assert_eq!(ws.resolve(abs.to_str().expect("utf8")).expect("abs"), abs);
    // Leaving and coming back lexically is harmless.
    assert_eq!(ws.resolve("../ws/y").expect("back"), root.join("y"));
}

#[tokio::test]
async fn symlinks_leading_outside_are_refused() {
    let (dir, ws) = setup();
    symlink("/etc", ws.root().join("etc")).expect("symlink");
    let outside = dir.path().join("outside.txt");
    // Dangling link whose target would be created outside by a write.
    symlink(&outside, ws.root().join("evil")).expect("symlink");
    for bad in ["etc", "etc/passwd", "etc/newfile"] {
        assert_eq!(
            ws.resolve(bad).expect_err(bad).error_type,
            ErrorType::Permission
        );
    }
    let r = bounded(ws.read_file(&json!({"path": "etc/passwd"}))).await;
    assert_eq!(err_type(r), ErrorType::Permission);
    let r = bounded(ws.write_file(&json!({"path": "evil", "content": "x"}))).await;
    assert_eq!(err_type(r), ErrorType::Permission);
    let r = bounded(ws.write_file(&json!({"path": "evil", "content": "x", "append": true}))).await;
    assert_eq!(err_type(r), ErrorType::Permission);
    assert!(
        !outside.exists(),
        "a write escaped through a dangling symlink"
    );
}

#[tokio::test]
async fn symlinks_inside_the_workspace_work() {
    let (_dir, ws) = setup();
    fs::create_dir(ws.root().join("real")).expect("mkdir");
    fs::write(ws.root().join("real/f.txt"), "hi").expect("write");
    symlink("real", ws.root().join("alias")).expect("symlink");
    let got = bounded(ws.read_file(&json!({"path": "alias/f.txt"}))).await;
    assert_eq!(got.expect("read"), json!("hi"));
}

#[tokio::test]
async fn write_read_list_roundtrip() {
    let (_dir, ws) = setup();
    let w = bounded(ws.write_file(&json!({"path": "notes/a.txt", "content": "héllo\n"}))).await;
    assert_eq!(
        w.expect("write"),
        json!({"path": "notes/a.txt", "bytes": 7})
    );
    let p = json!({"path": "notes/a.txt", "content": "more", "append": true});
    assert_eq!(
        bounded(ws.write_file(&p)).await.expect("append")["bytes"],
        4
    );
    let r = bounded(ws.read_file(&json!({"path": "notes/a.txt"}))).await;
    assert_eq!(r.expect("read"), json!("héllo\nmore"));

    fs::create_dir(ws.root().join("notes/sub")).expect("mkdir");
    symlink("a.txt", ws.root().join("notes/link")).expect("symlink");
    let l = bounded(ws.list_directory(&json!({"path": "notes"})))
        .await
        .expect("list");
    assert_eq!(
        l,
        json!({"path": "notes", "truncated": false, "entries": [
            {"name": "a.txt", "type": "file", "size": 11},
            {"name": "link", "type": "symlink", "size": null},
            {"name": "sub", "type": "dir", "size": null},
        ]})
    );
    let top = bounded(ws.list_directory(&Value::Null))
        .await
        .expect("list root");
    assert_eq!(top["path"], ".");
    assert_eq!(top["entries"][0]["name"], "notes");
}

#[tokio::test]
async fn replace_is_atomic_and_keeps_permissions() {
    let (_dir, ws) = setup();
    let path = ws.root().join("run.sh");
    fs::write(&path, "old").expect("write");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o751)).expect("chmod");
    bounded(ws.write_file(&json!({"path": "run.sh", "content": "new"})))
        .await
        .expect("write");
    assert_eq!(fs::read_to_string(&path).expect("read"), "new");
    assert_eq!(
        fs::metadata(&path).expect("meta").permissions().mode() & 0o777,
        0o751
    );
    let names: Vec<_> = fs::read_dir(ws.root())
        .expect("ls")
        .map(|e| e.expect("e").file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from("run.sh")],
        "temp file left behind"
    );
}

#[tokio::test]
async fn create_dirs_false_needs_an_existing_folder() {
    let (_dir, ws) = setup();
    let p = json!({"path": "no/such/f", "content": "", "createDirs": false});
    assert_eq!(
        err_type(bounded(ws.write_file(&p)).await),
        ErrorType::NotFound
    );
    assert!(!ws.root().join("no").exists());
    let r = bounded(ws.write_file(&json!({"path": ".", "content": "x"}))).await;
    assert_eq!(err_type(r), ErrorType::InvalidParams);
}

#[tokio::test]
async fn binary_files_need_base64() {
    let (_dir, ws) = setup();
    let bytes = [0u8, 159, 146, 150, 255];
    let p = json!({"path": "b.bin", "content": b64::encode(&bytes), "encoding": "base64"});
    assert_eq!(bounded(ws.write_file(&p)).await.expect("write")["bytes"], 5);
    assert_eq!(fs::read(ws.root().join("b.bin")).expect("read"), bytes);
    let e = bounded(ws.read_file(&json!({"path": "b.bin"})))
        .await
        .expect_err("utf8");
    assert_eq!(e.error_type, ErrorType::InvalidParams);
    assert!(e.suggestion.contains("base64"), "{}", e.suggestion);
    let r = bounded(ws.read_file(&json!({"path": "b.bin", "encoding": "base64"}))).await;
    assert_eq!(r.expect("read"), json!(b64::encode(&bytes)));
}

#[tokio::test]
async fn reads_over_the_limit_are_refused() {
    let (_dir, ws) = setup();
    fs::write(ws.root().join("big"), vec![b'a'; 1025]).expect("write");
    fs::write(ws.root().join("ok"), vec![b'a'; 1024]).expect("write");
    let e = bounded(ws.read_file(&json!({"path": "big"})))
        .await
        .expect_err("limit");
    assert_eq!(e.error_type, ErrorType::LimitExceeded);
    assert!(
        e.message.contains("1025") && e.message.contains("1024"),
        "{}",
        e.message
    );
    assert!(bounded(ws.read_file(&json!({"path": "ok"}))).await.is_ok());
}

#[tokio::test]
async fn bad_params_name_the_field_and_type() {
    let (_dir, ws) = setup();
    let e = bounded(ws.read_file(&json!({})))
        .await
        .expect_err("missing");
    assert_eq!(e.error_type, ErrorType::InvalidParams);
    assert!(
        e.message.contains("'path'") && e.message.contains("string"),
        "{}",
        e.message
    );
    let e = bounded(ws.read_file(&json!({"path": 3})))
        .await
        .expect_err("type");
    assert!(
        e.message.contains("'path'") && e.message.contains("a number"),
        "{}",
        e.message
    );
    let e = bounded(ws.write_file(&json!({"path": "x", "content": "y", "append": "yes"}))).await;
    assert!(e.expect_err("bool").message.contains("'append'"));
    let e = bounded(ws.read_file(&json!({"path": "x", "encoding": "hex"}))).await;
    assert_eq!(err_type(e), ErrorType::InvalidParams);
    let e = bounded(ws.list_directory(&json!([1]))).await;
    assert_eq!(err_type(e), ErrorType::InvalidParams);
}

#[tokio::test]
async fn wrong_kinds_of_files_are_refused_without_hanging() {
    let (_dir, ws) = setup();
    let r = bounded(ws.read_file(&json!({"path": "missing.txt"}))).await;
    assert_eq!(err_type(r), ErrorType::NotFound);
    let r = bounded(ws.read_file(&json!({"path": "."}))).await;
    assert_eq!(err_type(r), ErrorType::InvalidParams);
    let fifo = std::ffi::CString::new(ws.root().join("pipe").into_os_string().into_encoded_bytes())
        .expect("cstring");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let r = bounded(ws.read_file(&json!({"path": "pipe"}))).await;
    assert_eq!(err_type(r), ErrorType::InvalidParams);
    fs::write(ws.root().join("f"), "x").expect("write");
    let r = bounded(ws.list_directory(&json!({"path": "f"}))).await;
    assert_eq!(err_type(r), ErrorType::InvalidParams);
}

#[test]
fn tool_definitions_cover_the_four_tools() {
    let defs = tool_definitions();
    let names: Vec<_> = defs.iter().map(|d| d.0).collect();
    assert_eq!(
        names,
        ["read_file", "write_file", "list_directory", "run_command"]
    );
    for (name, description, schema) in defs {
        assert!(description.len() > 40, "{name}");
        assert_eq!(schema["type"], "object", "{name}");
        assert!(schema["properties"].is_object(), "{name}");
    }
}
