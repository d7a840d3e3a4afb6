//! One source of truth for whether a server is up: its status. Whoever
//! first sees a connection end (the supervisor waiting on it, a call that
//! failed on it, `health_status` asking its process) moves the state to
//! `restarting` at once, through [`ServerHandle::went_down`]; the
//! supervisor's later events (restart, crash loop) follow from there, and a
//! `running` that was still on its way for the ended connection is dropped.

use super::{ServerHandle, ServerState, ServerStatus};

impl ServerHandle {
    /// A new connection is up (pid `pgid` for a stdio child): its number.
    pub(super) fn begin_life(&self, pgid: Option<i32>) -> u64 {
        let Ok(mut s) = self.status.lock() else {
            return 0;
        };
        s.life += 1;
        s.gone = false;
        s.pid = pgid;
        s.up_since = Some(std::time::SystemTime::now());
        s.life
    }

    /// Connection `life` has ended, for the reason `why`: the first call
    /// moves a `running` server to `restarting`, forgets its pid and
    /// clears its peer so new calls fail fast; later calls change nothing.
    pub(crate) fn went_down(&self, life: u64, why: &str) -> bool {
        {
            let Ok(mut s) = self.status.lock() else {
                return false;
            };
            if s.life != life || s.gone {
                return false;
            }
            s.gone = true;
            if s.state == ServerState::Running {
                s.state = ServerState::Restarting;
            }
            s.pid = None;
            s.up_since = None;
            s.last_error = Some(why.to_string());
        }
        if let Ok(mut p) = self.peer.write() {
            if p.as_ref().is_some_and(|l| l.life == life) {
                *p = None;
            }
        }
        tracing::debug!(server = %self.name, reason = why, "connection ended: state moved to restarting");
        true
    }

    /// Look at the live connection: when its process has exited or its
    /// transport has closed, it went down (and the state says so now, not
    /// when the supervisor gets to it). Cheap: a lock, a clone, one `poll`.
    pub fn observe_exit(&self) {
        let Some(live) = self.live() else {
            return;
        };
        let why = if live.exit.as_ref().is_some_and(|p| p.has_exited()) {
            "the server's process exited"
        } else if live.peer.is_transport_closed() {
            "the server closed its connection (its process exited or closed stdout)"
        } else {
            return;
        };
        self.went_down(live.life, why);
    }

    /// Applied by the hub's event task only (see `Supervisor::set_state`).
    /// A `running` for a connection that has already ended is not.
    pub(crate) fn apply_state(&self, event: &ServerStatus) {
        if let Ok(mut s) = self.status.lock() {
            if event.state == ServerState::Running && (event.life != s.life || s.gone) {
                return;
            }
            s.state = event.state;
        }
    }
}

/// Why a server's connection ended, in words (never a debug dump).
pub(super) fn describe_quit(
    quit: &Result<rmcp::service::QuitReason, tokio::task::JoinError>,
) -> String {
    use rmcp::service::QuitReason;
    match quit {
        Ok(QuitReason::Closed) => {
            "the server closed its connection (its process exited or closed stdout)".into()
        }
        Ok(QuitReason::Cancelled) => "the hub closed the server's connection".into(),
        Ok(QuitReason::JoinError(e)) | Err(e) => {
            format!("the task serving the server's connection failed: {e}")
        }
        Ok(_) => "the server's connection ended".into(),
    }
}
