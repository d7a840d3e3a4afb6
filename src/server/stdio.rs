//! `toolhub stdio`: MCP over stdio for clients that can only launch a
//! command, relayed message by message to a running hub's `/mcp` (Streamable
//! HTTP, with the hub's token). It holds no state of its own: the session,
//! the aggregate and every rule live in the hub.

use std::time::Duration;

use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, Transport};
use rmcp::{RoleClient, RoleServer};

use crate::config::{Config, TokenSetting};

/// Where the hub is and how to get in.
#[derive(Debug, Clone)]
pub struct Target {
    pub url: String,
    pub token: Option<String>,
}

impl Target {
    /// From the hub's config (its `server.listen` and token), or `url`;
    /// `view` relays to `/mcp/<view>` (the view's tools only), and
    /// `token_file` presents that token (a client's own, which opens only
    /// its views) instead of the hub's.
    pub fn from_config(
        cfg: &Config,
        url: Option<String>,
        view: Option<String>,
        token_file: Option<std::path::PathBuf>,
    ) -> Result<Target, String> {
        if let Some(v) = &view {
            if v.is_empty()
                || !v
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(format!(
                    "--view {v:?}: a view's name is letters, digits, '_' and '-' (the names under \"views\" in config.json)"
                ));
            }
        }
        if let Some(path) = token_file {
            let token = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read --token-file {}: {e}", path.display()))?
                .trim()
                .to_string();
            if token.is_empty() {
                return Err(format!("--token-file {} is empty", path.display()));
            }
            return Ok(Target {
                url: with_view(Self::default_url(cfg, url), view.as_deref()),
                token: Some(token),
            });
        }
        let token = match &cfg.server.token {
            TokenSetting::Fixed(t) => Some(t.clone()),
            TokenSetting::Disabled => None,
            TokenSetting::Generate => {
                let path = cfg.task_engine.state_dir.join("token");
                match std::fs::read_to_string(&path) {
                    Ok(t) => Some(t.trim().to_string()),
                    Err(e) => {
                        return Err(format!(
                            "cannot read the hub's token at {}: {e} (start the hub once with `toolhub --config <config.json>` to create it)",
                            path.display()
                        ))
                    }
                }
            }
        };
        Ok(Target {
            url: with_view(Self::default_url(cfg, url), view.as_deref()),
            token,
        })
    }

    /// `url`, or the hub's own `/mcp` from its `server.listen`.
    fn default_url(cfg: &Config, url: Option<String>) -> String {
        url.unwrap_or_else(|| {
            let mut addr = cfg.server.listen;
            if addr.ip().is_unspecified() {
                addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            format!("http://{addr}/mcp")
        })
    }

    /// The `host:port` the URL names.
    fn authority(&self) -> Option<String> {
        let rest = self
            .url
            .strip_prefix("http://")
            .or_else(|| self.url.strip_prefix("https://"))?;
        Some(rest.split('/').next()?.to_string())
    }
}

/// `url` (the hub's `/mcp`) narrowed to `view`: `/mcp/<view>`.
fn with_view(url: String, view: Option<&str>) -> String {
    match view {
        Some(v) => format!("{}/{v}", url.trim_end_matches('/')),
        None => url,
    }
}

/// Relay stdin/stdout to the hub until either side closes. Fails at once,
/// with one line saying what to do, when no hub listens at the target.
pub async fn run(target: Target) -> Result<(), String> {
    let authority = target
        .authority()
        .ok_or_else(|| format!("{} is not an http:// URL", target.url))?;
    let reachable = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::TcpStream::connect(authority.as_str()),
    )
    .await;
    if !matches!(reachable, Ok(Ok(_))) {
        return Err(format!(
            "no hub is listening at {} (start one with `toolhub --config <config.json>`, then run `toolhub stdio` again)",
            target.url
        ));
    }
    crate::mcp::upstream::tls_provider();
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(target.url.clone());
    if let Some(t) = &target.token {
        cfg = cfg.auth_header(t.clone());
    }
    let mut hub = StreamableHttpClientTransport::from_config(cfg);
    let (stdin, stdout) = rmcp::transport::stdio();
    let mut client = AsyncRwTransport::<RoleServer, _, _>::new_server(stdin, stdout);
    loop {
        tokio::select! {
            m = Transport::<RoleServer>::receive(&mut client) => match m {
                Some(m) => {
                    if let Err(e) = Transport::<RoleClient>::send(&mut hub, m).await {
                        return Err(format!("the hub at {} stopped answering: {e}", target.url));
                    }
                }
                None => break,
            },
            m = Transport::<RoleClient>::receive(&mut hub) => match m {
                Some(m) => {
                    if let Err(e) = Transport::<RoleServer>::send(&mut client, m).await {
                        return Err(format!("cannot write to stdout: {e}"));
                    }
                }
                None => return Err(format!("the hub at {} closed the session", target.url)),
            },
        }
    }
    let _ = Transport::<RoleClient>::close(&mut hub).await;
    Ok(())
}
