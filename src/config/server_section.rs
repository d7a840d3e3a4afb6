//! The `server` section: listen address, token, origins and limits.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::ctx::Ctx;
use super::defaults as d;
use super::raw::{RawServerSection, RawToken};
use super::{ConfigError, ServerConfig, TokenSetting};

fn parse_listen(s: &str) -> Option<SocketAddr> {
    if let Ok(a) = s.parse() {
        return Some(a);
    }
    let port = s.strip_prefix("localhost:")?.parse().ok()?;
    Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
}

pub(super) fn server_section(ctx: &Ctx, r: RawServerSection) -> Result<ServerConfig, ConfigError> {
    let listen_text = r.listen.as_deref().unwrap_or(d::LISTEN);
    let listen = parse_listen(listen_text).ok_or_else(|| {
        ctx.err(
            "/server/listen",
            format!("server.listen \"{listen_text}\" is not an address; expected IP:PORT such as 127.0.0.1:8765"),
        )
    })?;
    let token = match r.token {
        None | Some(RawToken::Flag(true)) => TokenSetting::Generate,
        Some(RawToken::Flag(false)) => TokenSetting::Disabled,
        Some(RawToken::Fixed(t)) if t.trim().is_empty() => {
            return Err(ctx.err(
                "/server/token",
                "server.token is an empty string; set a token, remove the key to generate one, or set false (loopback only)",
            ))
        }
        Some(RawToken::Fixed(t)) => TokenSetting::Fixed(t),
    };
    if token == TokenSetting::Disabled && !listen.ip().is_loopback() {
        return Err(ctx.err(
            "/server/token",
            format!("server.token is false but server.listen {listen} is not loopback; set a token or listen on 127.0.0.1"),
        ));
    }
    let allowed_origins = r
        .allowed_origins
        .unwrap_or_else(|| d::ALLOWED_ORIGINS.iter().map(|s| s.to_string()).collect());
    if let Some(i) = allowed_origins.iter().position(|o| o.trim().is_empty()) {
        return Err(ctx.err(
            &format!("/server/allowedOrigins/{i}"),
            "server.allowedOrigins has an empty entry; expected an origin such as chrome-extension://*",
        ));
    }
    Ok(ServerConfig {
        listen,
        allowed_origins,
        token,
        max_message_bytes: ctx.positive(
            r.max_message_bytes,
            d::MAX_MESSAGE_BYTES,
            "/server/maxMessageBytes",
        )?,
        max_connections: ctx.positive(
            r.max_connections,
            d::MAX_CONNECTIONS,
            "/server/maxConnections",
        )?,
        send_queue: ctx.positive(r.send_queue, d::SEND_QUEUE, "/server/sendQueue")?,
        handshake_timeout: ctx.ms(
            r.handshake_timeout,
            d::HANDSHAKE_TIMEOUT_MS,
            "/server/handshakeTimeout",
        )?,
        ping_interval: ctx.ms(r.ping_interval, d::PING_INTERVAL_MS, "/server/pingInterval")?,
        idle_timeout: ctx.ms(r.idle_timeout, d::IDLE_TIMEOUT_MS, "/server/idleTimeout")?,
        max_json_depth: ctx.positive(
            r.max_json_depth,
            d::MAX_JSON_DEPTH,
            "/server/maxJsonDepth",
        )?,
        mcp_endpoint: r.mcp_endpoint.unwrap_or(true),
        mcp_bare_names: r.mcp_bare_names.unwrap_or(false),
        mcp_session_idle: ctx.ms(
            r.mcp_session_idle,
            d::MCP_SESSION_IDLE_MS,
            "/server/mcpSessionIdle",
        )?,
        mcp_stream_poll: std::time::Duration::from_millis(
            r.mcp_stream_poll.unwrap_or(d::MCP_STREAM_POLL_MS),
        ),
        mcp_page_size: ctx.positive(r.mcp_page_size, d::MCP_PAGE_SIZE, "/server/mcpPageSize")?,
        worker_threads: ctx.at_most(
            r.worker_threads,
            d::WORKER_THREADS,
            d::MAX_WORKER_THREADS,
            "/server/workerThreads",
            || {
                format!(
                    "is too many; use 1 (the default), a number up to {}, or 0 for one per CPU core",
                    d::MAX_WORKER_THREADS
                )
            },
        )?,
        session_grace: std::time::Duration::from_millis(r.session_grace_ms.unwrap_or(d::SESSION_GRACE_MS)),
        resume_buffer_bytes: ctx.positive(
            r.resume_buffer_bytes,
            d::RESUME_BUFFER_BYTES,
            "/server/resumeBufferBytes",
        )?,
        call_key_ttl: ctx.ms(r.call_key_ttl_ms, d::CALL_KEY_TTL_MS, "/server/callKeyTtlMs")?,
        call_key_max: ctx.positive(r.call_key_max, d::CALL_KEY_MAX, "/server/callKeyMax")?,
        call_key_max_bytes: ctx.positive(
            r.call_key_max_bytes,
            d::CALL_KEY_MAX_BYTES,
            "/server/callKeyMaxBytes",
        )?,
        call_key_client_max_bytes: ctx.positive(
            r.call_key_client_max_bytes,
            d::CALL_KEY_CLIENT_MAX_BYTES,
            "/server/callKeyClientMaxBytes",
        )?,
        kept_results_max_bytes: ctx.positive(
            r.kept_results_max_bytes,
            d::KEPT_RESULTS_MAX_BYTES,
            "/server/keptResultsMaxBytes",
        )?,
        max_in_flight_per_session: ctx.positive(
            r.max_in_flight_per_session,
            d::MAX_IN_FLIGHT_PER_SESSION,
            "/server/maxInFlightPerSession",
        )?,
        max_unattended_tasks: ctx.positive(
            r.max_unattended_tasks,
            d::MAX_UNATTENDED_TASKS,
            "/server/maxUnattendedTasks",
        )?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{bad, ok};
    use super::*;

    #[test]
    fn semantic_errors_point_at_the_key() {
        let (l, c, m) = bad("{\n  \"server\": {\n      \"listen\": \"nope\"}}");
        assert_eq!((l, c), (3, 7));
        assert!(
            m.contains("server.listen \"nope\" is not an address"),
            "{m}"
        );
    }

    #[test]
    fn token_rules() {
        let (l, c, m) = bad("{\"server\": {\"listen\": \"0.0.0.0:8765\",\n  \"token\": false}}");
        assert_eq!((l, c), (2, 3));
        assert_eq!(
            m,
            "server.token is false but server.listen 0.0.0.0:8765 is not loopback; set a token or listen on 127.0.0.1"
        );
        let (_, _, m) = bad(r#"{"server": {"token": ""}}"#);
        assert!(m.contains("server.token is an empty string"), "{m}");
        let (_, _, m) = bad(r#"{"server": {"token": 5}}"#);
        assert!(m.contains("a token string or false"), "{m}");
        let t = |s: &str| ok(s).config.server.token;
        assert_eq!(t(r#"{"server": {"token": false}}"#), TokenSetting::Disabled);
        assert_eq!(t(r#"{"server": {"token": true}}"#), TokenSetting::Generate);
        assert_eq!(
            t(r#"{"server": {"token": "s3"}}"#),
            TokenSetting::Fixed("s3".into())
        );
        let c = ok(r#"{"server": {"listen": "[::1]:9000", "token": false}}"#).config;
        assert_eq!(c.server.token, TokenSetting::Disabled);
        let c = ok(r#"{"server": {"listen": "localhost:9001"}}"#).config;
        assert_eq!(
            c.server.listen,
            "127.0.0.1:9001".parse::<SocketAddr>().unwrap()
        );
        let c = ok(r#"{"server": {"listen": "0.0.0.0:9002", "token": "t"}}"#).config;
        assert!(!c.server.listen.ip().is_loopback());
    }

    #[test]
    fn worker_threads_default_to_one_and_zero_means_one_per_core() {
        assert_eq!(ok("{}").config.server.worker_threads, 1);
        assert_eq!(ok("{}").config.server.runtime_workers(), 1);
        let c = ok(r#"{"server": {"workerThreads": 0}}"#).config;
        assert!(c.server.runtime_workers() >= 1);
        let c = ok(r#"{"server": {"workerThreads": 4}}"#).config;
        assert_eq!(c.server.runtime_workers(), 4);
        let (_, _, m) = bad(r#"{"server": {"workerThreads": 100000}}"#);
        assert!(m.contains("server.workerThreads 100000 is too many"), "{m}");
    }

    #[test]
    fn a_config_that_still_sets_spin_micros_loads_saying_it_was_removed() {
        for text in [
            r#"{"server": {"spinMicros": 250}}"#,
            r#"{"server": {"spinMicros": "anything"}}"#,
        ] {
            let l = ok(text);
            assert_eq!(l.warnings.len(), 1, "{:?}", l.warnings);
            let w = &l.warnings[0];
            assert!(
                w.contains("server.spinMicros was removed in this version and is ignored: the hub no longer spins")
                    && w.ends_with("; delete it from the file")
                    && !w.contains("unknown key"),
                "{w}"
            );
        }
        assert!(ok("{}").warnings.is_empty());
    }
}
