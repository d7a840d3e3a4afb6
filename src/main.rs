//! The `toolhub` binary: parse the command line, load the config (exit 2 on a
//! bad file), bind, and run until SIGINT/SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

const USAGE: &str = "usage: toolhub [--config PATH] [--listen HOST:PORT]\n       toolhub stdio [--config PATH] [--url URL] [--view NAME] [--token-file PATH]\n       toolhub ui [--config PATH] [--listen HOST:PORT]\n\n  --config PATH      config file (default ./config.json)\n  --listen HOST:PORT override server.listen (e.g. 127.0.0.1:0 for an ephemeral port)\n\n  stdio              serve MCP over stdin/stdout, relayed to the running hub's /mcp\n                     (its address and token come from the config; --url overrides the address,\n                     --view relays to /mcp/NAME, --token-file presents a client's own token)\n  ui                 print the dashboard's link (http://ADDR/ui#token=…) for a browser\n";

fn main() -> ExitCode {
    let mut config_path = PathBuf::from("config.json");
    let mut listen: Option<String> = None;
    let mut url: Option<String> = None;
    let mut view: Option<String> = None;
    let mut token_file: Option<PathBuf> = None;
    let mut stdio = false;
    let mut ui = false;
    let mut args = std::env::args().skip(1).peekable();
    match args.peek().map(String::as_str) {
        Some("stdio") => stdio = true,
        Some("ui") => ui = true,
        _ => {}
    }
    if stdio || ui {
        args.next();
    }
    while let Some(a) = args.next() {
        match a.as_str() {
            "--url" if stdio => match args.next() {
                Some(u) => url = Some(u),
                None => return usage_error("--url needs a URL such as http://127.0.0.1:8765/mcp"),
            },
            "--view" if stdio => match args.next() {
                Some(v) => view = Some(v),
                None => {
                    return usage_error(
                        "--view needs the name of a view in config.json's \"views\"",
                    )
                }
            },
            "--token-file" if stdio => match args.next() {
                Some(p) => token_file = Some(PathBuf::from(p)),
                None => {
                    return usage_error(
                        "--token-file needs the path of a file holding a client's token",
                    )
                }
            },
            "--config" | "-c" => match args.next() {
                Some(p) => config_path = PathBuf::from(p),
                None => return usage_error("--config needs a path"),
            },
            "--listen" => match args.next() {
                Some(l) => listen = Some(l),
                None => return usage_error("--listen needs HOST:PORT"),
            },
            "--help" | "-h" => {
                print!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            "--version" | "-V" => {
                println!("toolhub {}", env!("CARGO_PKG_VERSION"));
                return ExitCode::SUCCESS;
            }
            other => return usage_error(&format!("unknown argument {other:?}")),
        }
    }
    // stdout carries MCP in stdio mode: logs stay on stderr, and quieter.
    let default_filter = if stdio { "warn" } else { "info" };
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    // rmcp logs each handshake at info as a Rust debug dump
    // ("peer_info=Some(ServerPeerInfo { … })"); the hub says in words which
    // server started. Its lines still show when RUST_LOG names rmcp.
    if !std::env::var("RUST_LOG").is_ok_and(|v| v.contains("rmcp")) {
        if let Ok(quiet) = "rmcp=warn".parse() {
            filter = filter.add_directive(quiet);
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Every line passes the secret-value mask (toolhub::secrets).
        .with_writer(|| MaskedStderr)
        // Colours only for a person at a terminal, never in files or pipes.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let loaded = match toolhub::config::load(&config_path) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("toolhub: {e}");
            return ExitCode::from(2);
        }
    };
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    let mut config = loaded.config;
    if stdio {
        return run_stdio(&config, url, view, token_file);
    }
    if let Some(l) = listen {
        match l.parse() {
            Ok(addr) => config.server.listen = addr,
            Err(e) => return usage_error(&format!("--listen {l:?}: {e}")),
        }
    }
    if ui {
        return match toolhub::server::ui::link(&config) {
            Ok(link) => {
                println!("{link}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("toolhub ui: {e}");
                ExitCode::FAILURE
            }
        };
    }
    toolhub::trim::limit_arenas(config.server.runtime_workers());
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.server.runtime_workers())
        .thread_name("toolhub-worker")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("toolhub: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(config.server.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("toolhub: cannot listen on {}: {e} (is another hub running? change server.listen)", config.server.listen);
                return ExitCode::FAILURE;
            }
        };
        let shutdown = CancellationToken::new();
        tokio::spawn(on_signal(shutdown.clone()));
        match toolhub::run(listener, config, shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("toolhub: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

/// `toolhub stdio`: relay MCP on stdin/stdout to the running hub.
fn run_stdio(
    config: &toolhub::config::Config,
    url: Option<String>,
    view: Option<String>,
    token_file: Option<PathBuf>,
) -> ExitCode {
    let target = match toolhub::server::stdio::Target::from_config(config, url, view, token_file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("toolhub stdio: {e}");
            return ExitCode::FAILURE;
        }
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("toolhub stdio: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let relayed = rt.block_on(toolhub::server::stdio::run(target));
    // A read of stdin may still be blocked in its thread: do not wait for it.
    rt.shutdown_background();
    match relayed {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolhub stdio: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage_error(msg: &str) -> ExitCode {
    eprintln!("toolhub: {msg}\n{USAGE}");
    ExitCode::from(2)
}

async fn on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
    }
    shutdown.cancel();
}

/// stderr with every known secret value masked. The fmt layer writes each
/// event in one `write_all`, so a value is never split across two writes.
struct MaskedStderr;

impl std::io::Write for MaskedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let masked = toolhub::secrets::mask_log_text(&text);
        std::io::stderr().write_all(masked.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
