use super::*;

/// A home with secrets and toolchains, and a hub folder (config, state,
/// workspace), under one canonical temp root.
struct Tree {
    _dir: tempfile::TempDir,
    home: PathBuf,
    cfg: PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().expect("dir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    let home = root.join("home");
    let cfg = root.join("hub");
    for (path, text) in [
        (".ssh/id_ed25519", "KEY"),
        (".config/gcloud/x", "G"),
        (".config/other/ok", "ok"),
        (".cargo/bin/tool", "tool"),
        ("notes.txt", "n"),
    ] {
        let p = home.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
    }
    std::fs::create_dir_all(cfg.join("state/tmp")).expect("state");
    std::fs::create_dir_all(cfg.join("workspace")).expect("ws");
    std::fs::write(cfg.join("config.json"), "{}").expect("config");
    std::fs::write(cfg.join("state/token"), "T").expect("token");
    std::os::unix::fs::symlink(home.join(".ssh"), home.join("keys")).expect("symlink");
    Tree {
        _dir: dir,
        home,
        cfg,
    }
}

impl Tree {
    fn policy(&self) -> ReadPolicy {
        ReadPolicy {
            deny: vec![
                self.home.join(".ssh"),
                self.home.join(".config/gcloud"),
                self.home.join(".aws"),
            ],
            allow: Vec::new(),
            private: vec![self.cfg.join("config.json"), self.cfg.join("state")],
        }
    }

    fn writable(&self) -> Vec<PathBuf> {
        vec![self.cfg.join("state/tmp"), self.cfg.join("workspace")]
    }
}

/// What Landlock would let a command do with `path` under `rules`: read
/// its contents (a rule on it or above it that reads), list it (any rule
/// on it or above it), write it.
fn can(rules: &[Rule], path: &Path) -> (bool, bool, bool) {
    let above: Vec<&Rule> = rules.iter().filter(|r| path.starts_with(&r.path)).collect();
    let read = above
        .iter()
        .any(|r| matches!(r.level, Level::Read | Level::Write));
    let write = above
        .iter()
        .any(|r| matches!(r.level, Level::Write | Level::WriteAncestor));
    (read, !above.is_empty(), write)
}

#[test]
fn reads_are_granted_around_the_denied_paths() {
    let t = tree();
    let rules = plan(&t.policy(), &t.writable());
    let read = |p: &Path| can(&rules, p).0;
    for ok in [
        "notes.txt",
        ".config/other/ok",
        ".cargo/bin/tool",
        ".config/other",
    ] {
        assert!(read(&t.home.join(ok)), "{ok} should be readable");
    }
    for denied in [".ssh/id_ed25519", ".ssh", ".config/gcloud/x"] {
        assert!(!read(&t.home.join(denied)), "{denied} should be refused");
    }
    assert!(!read(&t.cfg.join("config.json")));
    assert!(!read(&t.cfg.join("state/token")));
    assert!(read(Path::new("/etc/hostname")) || !Path::new("/etc").exists());
    // Listing the home folder (and the denied folder's names) works.
    assert!(can(&rules, &t.home).1);
    assert!(can(&rules, &t.home.join(".ssh")).1);
    // The writable folders: the workspace, and the temp dir inside the
    // denied state dir.
    assert_eq!(
        can(&rules, &t.cfg.join("workspace/new")),
        (true, true, true)
    );
    assert_eq!(can(&rules, &t.cfg.join("state/tmp/x")), (true, true, true));
    assert!(!can(&rules, &t.home.join("notes.txt")).2);
    // Ancestors get a listing rule; files get file rules; no rule for a
    // symbolic link (the kernel checks where it leads) or a denied path.
    let rule = |p: PathBuf| rules.iter().find(|r| r.path == p).cloned();
    assert_eq!(
        rule(t.home.clone()).map(|r| r.level),
        Some(Level::ReadAncestor)
    );
    assert_eq!(
        rule(t.home.join(".config")).map(|r| r.level),
        Some(Level::ReadAncestor)
    );
    assert_eq!(rule(t.home.join("notes.txt")).map(|r| r.dir), Some(false));
    assert_eq!(rule(t.home.join("keys")), None);
    assert!(!rules
        .iter()
        .any(|r| r.path.starts_with(t.home.join(".ssh"))));
    assert!(!rules.iter().any(|r| r.path == t.cfg.join("state")));
}

#[test]
fn allowed_paths_come_back_but_never_the_hub_s_own_files() {
    let t = tree();
    let mut policy = t.policy();
    policy.allow = vec![
        t.home.join(".config/gcloud/x"),
        t.cfg.join("state/token"),
        t.home.join("missing"),
    ];
    let rules = plan(&policy, &t.writable());
    assert!(can(&rules, &t.home.join(".config/gcloud/x")).0);
    assert!(!can(&rules, &t.cfg.join("state/token")).0);
    assert_eq!(policy.denial(&t.home.join(".config/gcloud/x")), None);
    assert_eq!(
        policy.denial(&t.cfg.join("state/token")),
        Some(Denial::Private(t.cfg.join("state")))
    );
    assert_eq!(
        policy.denial(&t.home.join(".ssh/id_ed25519")),
        Some(Denial::Listed(t.home.join(".ssh")))
    );
    // Through the symbolic link, the same file.
    assert_eq!(
        policy.denial(&t.home.join("keys/id_ed25519")),
        Some(Denial::Listed(t.home.join(".ssh")))
    );
    assert_eq!(policy.denial(&t.home.join("notes.txt")), None);
    assert_eq!(
        policy.denial(&t.home.join(".aws/credentials")),
        Some(Denial::Listed(t.home.join(".aws")))
    );
}

#[test]
fn a_writable_folder_holding_a_denied_path_is_written_around_it() {
    let t = tree();
    let rules = plan(&t.policy(), std::slice::from_ref(&t.home));
    assert_eq!(
        rules
            .iter()
            .find(|r| r.path == t.home && r.level != Level::ReadAncestor)
            .map(|r| r.level),
        Some(Level::WriteAncestor)
    );
    assert_eq!(
        can(&rules, &t.home.join(".cargo/bin/tool")),
        (true, true, true)
    );
    let (read, _, _) = can(&rules, &t.home.join(".ssh/id_ed25519"));
    assert!(!read);
}
