use super::*;
use crate::session::SessionId;
use std::os::unix::fs::PermissionsExt;

fn req(name: &str, text: &str) -> KeepResultReq {
    KeepResultReq {
        name: name.into(),
        text: text.into(),
    }
}

fn security() -> SecurityConfig {
    match crate::config::parse("{}", Path::new("/tmp/x/config.json")) {
        Ok(l) => l.config.security,
        Err(e) => panic!("{e}"),
    }
}

fn caller(client: Option<&str>) -> Caller {
    Caller {
        client: client.map(Arc::from),
        view: None,
        session: SessionId::new(),
    }
}

use std::sync::Arc;

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("meta").permissions().mode() & 0o777
}

#[test]
fn keeps_overwrites_and_refuses_a_linked_folder() {
    let dir = tempfile::tempdir().expect("dir");
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).expect("ws");
    let (s, main) = (security(), caller(None));
    let rules = Rules {
        caller: &main,
        max_bytes: 1 << 20,
        security: &s,
    };
    let (path, chars) = keep(&ws, &req("th-1-s3", "héllo"), &rules).expect("kept");
    assert_eq!(path, ".toolhub/results/th-1-s3.txt");
    assert_eq!(chars, 5);
    assert!(keep(&ws, &req("th-1-s3", "again"), &rules).is_ok());
    let text = std::fs::read_to_string(ws.join(&path)).expect("read");
    assert_eq!(text, "again");
    assert_eq!(mode(&ws.join(&path)), 0o600);
    assert_eq!(mode(&ws.join(RESULTS_DIR)), 0o700);

    let other = tempfile::tempdir().expect("other");
    let ws2 = dir.path().join("ws2");
    std::fs::create_dir_all(ws2.join(".toolhub")).expect("ws2");
    std::os::unix::fs::symlink(other.path(), ws2.join(".toolhub/results")).expect("link");
    let e = keep(&ws2, &req("x", "t"), &rules).expect_err("refused");
    assert_eq!(e.error_type, ErrorType::Permission);
    assert!(!other.path().join("x.txt").exists());
}

#[test]
fn each_principal_has_its_folder_quota_and_count_and_old_results_go() {
    let dir = tempfile::tempdir().expect("dir");
    let ws = dir.path();
    let s = security();
    let (main, ext, odd) = (caller(None), caller(Some("ext")), caller(Some("../x y")));
    let rules = |c| Rules {
        caller: c,
        max_bytes: 100,
        security: &s,
    };
    let (p, _) = keep(ws, &req("a", &"m".repeat(80)), &rules(&main)).expect("main");
    assert_eq!(p, ".toolhub/results/a.txt");
    // The same name from a client is its own file; main's use is not its.
    let (p, _) = keep(ws, &req("a", &"e".repeat(80)), &rules(&ext)).expect("ext");
    assert_eq!(p, ".toolhub/results/clients/ext/a.txt");
    assert_eq!(
        std::fs::read_to_string(ws.join(".toolhub/results/a.txt")).expect("main's"),
        "m".repeat(80)
    );
    let e = keep(ws, &req("b", &"e".repeat(30)), &rules(&ext)).expect_err("over");
    assert_eq!(e.error_type, ErrorType::LimitExceeded, "{e:?}");
    assert!(e.message.contains("server.keptResultsMaxBytes"), "{e:?}");
    assert!(!ws.join(".toolhub/results/clients/ext/b.txt").exists());
    // Replacing its own result counts the new size only.
    assert!(keep(ws, &req("a", &"e".repeat(95)), &rules(&ext)).is_ok());
    let (p, _) = keep(ws, &req("a", "o"), &rules(&odd)).expect("odd name");
    assert!(p.starts_with(".toolhub/results/clients/c-"), "{p}");

    // Count: the oldest go first.
    let many = Rules {
        caller: &main,
        max_bytes: 1 << 20,
        security: &s,
    };
    for i in 0..MAX_COUNT + 3 {
        keep(ws, &req(&format!("n{i}"), "x"), &many).expect("kept");
    }
    assert_eq!(kept_in(&ws.join(RESULTS_DIR)).len(), MAX_COUNT);
    // Age: a week-old result of any principal goes at the next keep.
    let old = ws.join(".toolhub/results/clients/ext/a.txt");
    let week = SystemTime::now() - MAX_AGE - Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&old)
        .and_then(|f| f.set_modified(week))
        .expect("age");
    keep(ws, &req("fresh", "x"), &many).expect("kept");
    assert!(!old.exists());
}

#[test]
fn a_kept_result_is_redacted_as_history_is() {
    let dir = tempfile::tempdir().expect("dir");
    let mut s = security();
    s.secrets = crate::secrets::SecretValues::configured(["hub-token-1234".to_string()]);
    let main = caller(None);
    let rules = Rules {
        caller: &main,
        max_bytes: 1 << 20,
        security: &s,
    };
    let text = r#"{"password": "pw-1", "echo": "token is hub-token-1234"}"#;
    let (p, chars) = keep(dir.path(), &req("r", text), &rules).expect("kept");
    let kept = std::fs::read_to_string(dir.path().join(p)).expect("read");
    assert!(
        !kept.contains("pw-1") && !kept.contains("hub-token-1234"),
        "{kept}"
    );
    assert!(kept.contains("token is ***"), "{kept}");
    assert_eq!(chars, kept.chars().count());
}
