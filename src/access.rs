//! Who may connect: the token every client must present and the browser
//! origins allowed, resolved from `server.token` and
//! `server.allowedOrigins`. [`SharedAccess`] holds the values in force; the
//! composition root (`app`) owns it and replaces them on a config reload,
//! and the gate (`server::gate`) reads them for every new request, so a
//! changed token or origin list applies to the next connection without a
//! restart. Connections already open stay open: they proved themselves
//! with the token in force when they connected.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use crate::config::{Config, TokenSetting};

/// The values the gate checks, at one moment.
#[derive(Clone, Default)]
pub struct Access {
    /// `None`: no token is required (`server.token: false`, loopback only).
    pub token: Option<String>,
    /// Where a person finds the token, for the 401 body: the token file's
    /// real path, or `server.token` in the config file.
    pub token_source: String,
    pub allowed_origins: Vec<String>,
    /// `clients`: tokens that open only their views.
    pub clients: Vec<ClientAccess>,
    /// The names of the views configured (`/ws/<view>`, `/mcp/<view>`).
    pub views: Vec<String>,
}

/// One client of `clients`, its token resolved.
#[derive(Clone)]
pub struct ClientAccess {
    pub name: String,
    pub token: String,
    pub views: Vec<String>,
}

/// Who a token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// The hub's token (or none required): every view and the aggregate.
    Main,
    /// A client of `clients`: only its views.
    Client { name: String, views: Vec<String> },
}

impl Principal {
    /// The client's name (`None`: the main token).
    pub fn client_name(&self) -> Option<&str> {
        match self {
            Principal::Main => None,
            Principal::Client { name, .. } => Some(name),
        }
    }
}

// By hand, so a logged Access never shows the token.
impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("token_source", &self.token_source)
            .field("allowed_origins", &self.allowed_origins)
            .field(
                "clients",
                &self.clients.iter().map(|c| &c.name).collect::<Vec<_>>(),
            )
            .field("views", &self.views)
            .finish()
    }
}

impl Access {
    /// Resolve the config's access values; a generated token is read from
    /// (or created in) `<stateDir>/token`.
    pub fn resolve(cfg: &Config) -> Result<Access, String> {
        let (token, token_source) = match &cfg.server.token {
            TokenSetting::Fixed(t) => (
                Some(t.clone()),
                format!("server.token in {}", cfg.path.display()),
            ),
            TokenSetting::Disabled => {
                if !cfg.server.listen.ip().is_loopback() {
                    return Err("server.token is false but server.listen is not loopback; set a token or listen on 127.0.0.1".into());
                }
                (None, "nowhere: server.token is false".into())
            }
            TokenSetting::Generate => {
                let path = token_file(cfg);
                (Some(load_or_create(&path)?), path.display().to_string())
            }
        };
        let clients = clients(cfg, token.as_deref())?;
        Ok(Access {
            token,
            token_source,
            allowed_origins: cfg.server.allowed_origins.clone(),
            clients,
            views: cfg.views.keys().cloned().collect(),
        })
    }

    /// The warnings worth logging about these values.
    pub fn warnings(&self) -> Vec<&'static str> {
        let mut w = Vec::new();
        if self.token.is_none() {
            w.push("server.token is false: any local process can use this hub");
        }
        if self
            .allowed_origins
            .iter()
            .any(|o| o == "chrome-extension://*")
        {
            w.push("server.allowedOrigins contains the wildcard chrome-extension://*: any installed extension may connect; pin your extension's id (chrome-extension://<id>)");
        }
        w
    }
}

/// The client tokens: a `tokenFile` is read now; a token shared with the
/// hub's or another client's is refused (it could not say who presents it).
fn clients(cfg: &Config, main: Option<&str>) -> Result<Vec<ClientAccess>, String> {
    use crate::config::views::{ClientToken, MIN_TOKEN_LEN};
    if main.is_none() && !cfg.clients.is_empty() {
        // The config loader refuses this already; the gate must never see
        // it, as it admits everyone as the main token when there is none.
        return Err("clients need a hub token: server.token is false, so every request would count as the main token's; set server.token or delete clients".into());
    }
    let mut out: Vec<ClientAccess> = Vec::new();
    for c in cfg.clients.values() {
        let token = match &c.token {
            ClientToken::Fixed(t) => t.clone(),
            ClientToken::File(p) => {
                let t = std::fs::read_to_string(p).map_err(|e| {
                    format!(
                        "clients.{}.tokenFile {} cannot be read: {e}; expected a file holding the client's token",
                        c.name,
                        p.display()
                    )
                })?;
                let t = t.trim().to_string();
                if t.chars().count() < MIN_TOKEN_LEN {
                    return Err(format!(
                        "clients.{}.tokenFile {} holds a token shorter than {MIN_TOKEN_LEN} characters",
                        c.name,
                        p.display()
                    ));
                }
                t
            }
        };
        if main == Some(token.as_str()) {
            return Err(format!(
                "clients.{}: its token is the hub's own token; give the client a token of its own",
                c.name
            ));
        }
        if let Some(other) = out.iter().find(|o| o.token == token) {
            return Err(format!(
                "clients.{} and clients.{} have the same token; give each client its own",
                other.name, c.name
            ));
        }
        out.push(ClientAccess {
            name: c.name.clone(),
            token,
            views: c.views.clone(),
        });
    }
    Ok(out)
}

/// Where a generated token is kept.
pub fn token_file(cfg: &Config) -> PathBuf {
    cfg.task_engine.state_dir.join("token")
}

/// The access values in force, shared by the gate (reader) and the
/// composition root (writer). The lock is held only to clone or swap the
/// `Arc`, never across an `.await`.
#[derive(Clone, Default)]
pub struct SharedAccess(Arc<RwLock<Arc<Access>>>);

impl SharedAccess {
    pub fn new(access: Access) -> SharedAccess {
        SharedAccess(Arc::new(RwLock::new(Arc::new(access))))
    }

    pub fn current(&self) -> Arc<Access> {
        match self.0.read() {
            Ok(a) => a.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn replace(&self, access: Access) {
        match self.0.write() {
            Ok(mut a) => *a = Arc::new(access),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(access),
        }
    }
}

fn load_or_create(path: &Path) -> Result<String, String> {
    if let Ok(existing) = std::fs::read_to_string(path) {
        let t = existing.trim().to_string();
        if t.len() >= 32 {
            tracing::info!(path = %path.display(), "using the token stored in the state dir");
            return Ok(t);
        }
    }
    if let Some(dir) = path.parent() {
        crate::store::private::dir(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let bytes: [u8; 32] = rand::random();
    let token = hex::encode(bytes);
    write_private(path, &token).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    tracing::info!(path = %path.display(), "generated a new token (256 bits); clients must present it");
    Ok(token)
}

fn write_private(path: &Path, token: &str) -> std::io::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut f = opts.open(&tmp)?;
    f.write_all(token.as_bytes())?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}
