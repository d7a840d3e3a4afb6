use super::*;

fn scope() -> Arc<str> {
    Arc::from("t")
}

const TTL: Duration = Duration::from_secs(600);

fn b(ttl: Duration, max: usize) -> Bounds {
    Bounds {
        ttl,
        max,
        max_bytes: usize::MAX,
        max_client_bytes: usize::MAX,
    }
}

#[tokio::test]
async fn a_repeat_gets_the_first_answer_and_other_params_conflict() {
    let keys = CallKeys::default();
    let Claim::New(g) = keys.claim(&scope(), "k", "h1", b(TTL, 10)) else {
        panic!("first use claims")
    };
    let Claim::Repeat(waiting) = keys.claim(&scope(), "k", "h1", b(TTL, 10)) else {
        panic!("a repeat")
    };
    assert!(matches!(
        keys.claim(&scope(), "k", "h2", b(TTL, 10)),
        Claim::Conflict
    ));
    // Another token's key of the same name is its own.
    assert!(matches!(
        keys.claim(&Arc::from("other"), "k", "h2", b(TTL, 10)),
        Claim::New(_)
    ));
    let answer = tokio::spawn(waiting.answer());
    g.finish(serde_json::json!({"n": 1}));
    let got = answer.await.unwrap().unwrap();
    assert_eq!(*got, serde_json::json!({"n": 1}));
    let Claim::Repeat(done) = keys.claim(&scope(), "k", "h1", b(TTL, 10)) else {
        panic!("still a repeat")
    };
    assert_eq!(*done.answer().await.unwrap(), serde_json::json!({"n": 1}));
}

#[tokio::test]
async fn a_claim_dropped_without_answer_frees_the_key() {
    let keys = CallKeys::default();
    let Claim::New(g) = keys.claim(&scope(), "k", "h", b(TTL, 10)) else {
        panic!()
    };
    let Claim::Repeat(waiting) = keys.claim(&scope(), "k", "h", b(TTL, 10)) else {
        panic!()
    };
    drop(g);
    assert!(waiting.answer().await.is_none());
    assert!(matches!(
        keys.claim(&scope(), "k", "h", b(TTL, 10)),
        Claim::New(_)
    ));
}

#[test]
fn keys_are_bounded_by_count_and_age() {
    let keys = CallKeys::default();
    for i in 0..5 {
        if let Claim::New(g) = keys.claim(&scope(), &format!("k{i}"), "h", b(TTL, 3)) {
            g.finish(Value::Null);
        } else {
            panic!()
        }
    }
    assert_eq!(keys.len(), 3);
    // The oldest went out: k0 runs again.
    assert!(matches!(
        keys.claim(&scope(), "k0", "h", b(TTL, 3)),
        Claim::New(_)
    ));
    let Claim::New(g) = keys.claim(&scope(), "old", "h", b(Duration::ZERO, 100)) else {
        panic!()
    };
    g.finish(Value::Null);
    assert!(matches!(
        keys.claim(&scope(), "old", "h", b(Duration::ZERO, 100)),
        Claim::New(_)
    ));
}

#[tokio::test]
async fn answers_are_bounded_by_bytes_and_their_keys_still_hold() {
    let keys = CallKeys::default();
    let bounds = Bounds {
        ttl: TTL,
        max: 100,
        max_bytes: 3000,
        max_client_bytes: usize::MAX,
    };
    let big = |i: usize| serde_json::json!({"n": i, "result": "x".repeat(1000), "raw": "y"});
    let mut waiting = Vec::new();
    for i in 0..5 {
        let Claim::New(g) = keys.claim(&scope(), &format!("k{i}"), "h", bounds) else {
            panic!()
        };
        if i == 0 {
            let Claim::Repeat(r) = keys.claim(&scope(), "k0", "h", bounds) else {
                panic!()
            };
            waiting.push(r);
        }
        g.finish(big(i));
        assert!(keys.bytes() <= 3000, "{}", keys.bytes());
    }
    assert_eq!(keys.len(), 5);
    // A waiter and a repeat get the first answer without its result
    // now, and run nothing.
    let first = waiting.pop().unwrap().answer().await.unwrap();
    assert_eq!(first["n"], 0);
    let Claim::Repeat(r) = keys.claim(&scope(), "k0", "h", bounds) else {
        panic!("the key still holds")
    };
    let later = r.answer().await.unwrap();
    assert!(later.get("result").is_none(), "{later}");
    assert_eq!(later["n"], 0);
    assert!(
        later["resultDropped"].as_u64().unwrap_or(0) > 1000,
        "{later}"
    );
    // The newest answers are whole.
    let Claim::Repeat(r) = keys.claim(&scope(), "k4", "h", bounds) else {
        panic!()
    };
    assert_eq!(
        r.answer().await.unwrap()["result"].as_str().map(str::len),
        Some(1000)
    );
}

#[tokio::test]
async fn a_waiter_gets_the_answer_of_a_key_pushed_out_while_it_ran() {
    let keys = CallKeys::default();
    let Claim::New(g) = keys.claim(&scope(), "k", "h", b(TTL, 1)) else {
        panic!()
    };
    let Claim::Repeat(r) = keys.claim(&scope(), "k", "h", b(TTL, 100)) else {
        panic!()
    };
    // A claim under a bound of one pushes "k" out while it runs.
    assert!(matches!(
        keys.claim(&scope(), "other", "h", b(TTL, 1)),
        Claim::New(_)
    ));
    g.finish(serde_json::json!(7));
    assert_eq!(*r.answer().await.unwrap(), serde_json::json!(7));
}

#[test]
fn a_key_is_1_to_200_characters() {
    assert!(check_key("").is_err());
    assert!(check_key(&"é".repeat(200)).is_ok());
    assert!(check_key(&"a".repeat(201)).is_err());
}

fn big(i: usize) -> Value {
    serde_json::json!({"n": i, "result": "x".repeat(1000), "raw": "y"})
}

/// Finish key `k` of `scope` with `answer`.
fn finish(keys: &CallKeys, scope: &Arc<str>, k: &str, bounds: Bounds, answer: Value) {
    let Claim::New(g) = keys.claim(scope, k, "h", bounds) else {
        panic!("{k} is new")
    };
    g.finish(answer);
}

async fn repeat(keys: &CallKeys, scope: &Arc<str>, k: &str, bounds: Bounds) -> Arc<Value> {
    let Claim::Repeat(r) = keys.claim(scope, k, "h", bounds) else {
        panic!("{k} still holds")
    };
    r.answer().await.expect("an answer")
}

#[tokio::test]
async fn answers_past_the_bound_move_to_disk_and_a_repeat_gets_them_whole() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("callkeys");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("7.json"), "left by an earlier run").unwrap();
    // Redaction as a marker of its own: the file and every repeat show it.
    let redact: Redact = Arc::new(|v: &Value| {
        let mut v = v.clone();
        v["n"] = Value::from(v["n"].as_i64().unwrap_or(0) + 100);
        v
    });
    let keys = CallKeys::with_spill(&folder, redact);
    assert!(!folder.join("7.json").exists(), "the folder is emptied");
    let bounds = Bounds {
        ttl: TTL,
        max: 4,
        max_bytes: 3000,
        max_client_bytes: usize::MAX,
    };
    for i in 0..3 {
        finish(&keys, &scope(), &format!("k{i}"), bounds, big(i));
        assert!(keys.bytes() <= 3000, "{}", keys.bytes());
    }
    // k0 is on disk now (or being written): the repeat gets it whole.
    let first = repeat(&keys, &scope(), "k0", bounds).await;
    assert_eq!(
        first["result"].as_str().map(str::len),
        Some(1000),
        "{first}"
    );
    assert_eq!(first["n"], 100, "redacted: {first}");
    assert_eq!(first["redacted"], true, "{first}");
    assert!(first.get(SPILLED).is_none() && first.get("resultDropped").is_none());
    // Once written, it is read from the file: the same answer, private.
    let file = folder.join("1.json");
    jobs_done(&keys, 1).await;
    assert!(file.exists());
    assert_eq!(repeat(&keys, &scope(), "k0", bounds).await, first);
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(&file), mode(&folder)), (0o600, 0o700));
    // Pushed out by count, the key's file goes too.
    finish(&keys, &scope(), "k3", bounds, Value::Null);
    finish(&keys, &scope(), "k4", bounds, Value::Null);
    assert!(matches!(
        keys.claim(&scope(), "k0", "h", bounds),
        Claim::New(_)
    ));
    jobs_done(&keys, 2).await;
    assert!(!file.exists());
}

#[tokio::test]
async fn one_client_past_its_share_gives_up_its_own_answers_first() {
    let keys = CallKeys::default();
    let bounds = Bounds {
        ttl: TTL,
        max: 100,
        max_bytes: 10_000,
        max_client_bytes: 2500,
    };
    let quiet: Arc<str> = Arc::from("quiet");
    finish(&keys, &quiet, "q", bounds, big(0));
    for i in 0..6 {
        finish(&keys, &scope(), &format!("k{i}"), bounds, big(i));
    }
    // The busy client's oldest let go; the quiet client's answer is whole.
    assert_eq!(
        repeat(&keys, &quiet, "q", bounds).await["result"]
            .as_str()
            .map(str::len),
        Some(1000)
    );
    let oldest = repeat(&keys, &scope(), "k0", bounds).await;
    assert!(
        oldest.get("result").is_none() && oldest["resultDropped"].as_u64() > Some(1000),
        "{oldest}"
    );
    let newest = repeat(&keys, &scope(), "k5", bounds).await;
    assert_eq!(newest["result"].as_str().map(str::len), Some(1000));
    assert!(keys.bytes() <= 2500 + 1100, "{}", keys.bytes());
}

/// Once the spill folder has done `n` file jobs (bounded: 10 s).
async fn jobs_done(keys: &CallKeys, n: u64) {
    let spill = keys.spill.as_ref().expect("a spill folder");
    tokio::time::timeout(Duration::from_secs(10), spill.jobs_done(n))
        .await
        .expect("the file jobs ran within 10 s");
}

#[tokio::test]
async fn answers_on_disk_are_bounded_too() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("callkeys");
    let keys = CallKeys::with_spill(&folder, Arc::new(|v: &Value| v.clone()));
    let bounds = Bounds {
        ttl: TTL,
        max: 100,
        max_bytes: 1100,
        max_client_bytes: usize::MAX,
    };
    for i in 0..12 {
        finish(&keys, &scope(), &format!("k{i}"), bounds, big(i));
    }
    // 8 × 1100 bytes fit on disk: eight answers of about 1075.
    jobs_done(&keys, 8).await;
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 8);
    assert!(keys.lock().disk <= DISK_TIMES * 1100);
    let first = repeat(&keys, &scope(), "k0", bounds).await;
    assert_eq!(first["result"].as_str().map(str::len), Some(1000));
    let past = repeat(&keys, &scope(), "k9", bounds).await;
    assert!(past.get("result").is_none() && past["resultDropped"].as_u64() > Some(1000));
    let newest = repeat(&keys, &scope(), "k11", bounds).await;
    assert_eq!(newest["result"].as_str().map(str::len), Some(1000));
}
