//! config.json hot reload: validate fully, keep the old config on any error,
//! and apply a valid one per server (unchanged servers are left alone).

use std::time::Duration;

use super::Hub;
use crate::config;

/// Watch the config file until shutdown; each settled change is one reload.
pub fn spawn_watcher(hub: Hub) {
    let path = hub.config().path.clone();
    let mut rx = match config::reload::spawn_watcher(path.clone(), Duration::from_millis(300)) {
        Ok(rx) => rx,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot watch config; hot reload is off");
            return;
        }
    };
    tokio::spawn(async move {
        loop {
            tokio::select! {
                            _ = hub.shutdown.cancelled() => break,
                            ev = rx.recv() => match ev {
            Some(()) => {
                                    let span = tracing::info_span!("reload", path = %path.display());
                                    tracing::Instrument::instrument(hub.reload_config(), span).await;
                                }
                                None => break,
                            },
                        }
        }
    });
}

impl Hub {
    /// Re-read config.json and apply it; returns the error text when refused.
    pub async fn reload_config(&self) -> Option<String> {
        let old = self.config();
        let loaded = match config::load(&old.path) {
            Ok(l) => l,
            Err(e) => {
                let msg = e.to_string();
                tracing::error!(error = %msg, "config reload refused; the previous config stays in force");
                self.set_config_error(Some(msg.clone()));
                return Some(msg);
            }
        };
        for w in &loaded.warnings {
            tracing::warn!("{w}");
        }
        self.set_config_error(None);
        let mut new = loaded.config;
        let restart = config::reload::keep_restart_keys(&self.started_config, &mut new);
        for key in &restart {
            tracing::warn!(key, "{key} changed in the config file: restart needed (the hub keeps the value it started with until then)");
        }
        if let Ok(mut slot) = self.restart_needed.lock() {
            *slot = restart;
        }
        let diff = config::reload::diff_servers(&old, &new);
        let views_before = self.views();
        let views_changed = old.views != new.views;
        self.set_config(new.clone());
        // In-process tools take up their settings (builtin.*) before the
        // tool list is rebuilt below.
        let mounted = match self.local.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        for m in mounted.values() {
            m.reconfigure(&new);
        }
        for name in &diff.removed {
            self.reconfigure_instances(name, None);
            self.stop_server(name, &format!("config reload: server {name} removed"))
                .await;
        }
        for name in &diff.changed {
            self.reconfigure_instances(name, new.mcp_servers.get(name));
            self.stop_server(name, &format!("config reload: server {name} changed"))
                .await;
            if let Some(spec) = new.mcp_servers.get(name) {
                self.spawn_server(spec.clone());
            }
        }
        for name in &diff.added {
            if let Some(spec) = new.mcp_servers.get(name) {
                self.spawn_server(spec.clone());
            }
        }
        self.rebuild_tools("config reload");
        self.report_views(&views_before, "config reload");
        if views_changed {
            // Sessions of a view hear of it; the aggregate's are not told.
            self.broadcast(serde_json::json!({"type": "tools_updated", "_viewsOnly": true, "reason": "config reload"}));
        }
        // Logged once it is in force: whoever reads this line (a person, a
        // test) and asks the hub next sees the new config applied.
        tracing::info!(added = ?diff.added, removed = ?diff.removed, changed = ?diff.changed,
            "config reloaded");
        None
    }
}
