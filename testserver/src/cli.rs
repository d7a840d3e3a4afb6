//! The test server's command line.

/// Parsed command line.
#[derive(Debug, Default, PartialEq)]
pub struct Cli {
    pub name: String,
    pub log: Option<std::path::PathBuf>,
    pub state_dir: Option<std::path::PathBuf>,
    pub extra_tools: Vec<String>,
    pub conformance: bool,
    /// `--mrtr`: the 2026-07-28 MRTR fixtures, that revision only.
    pub mrtr: bool,
    /// Wait this long before answering the MCP handshake (a slow starter).
    pub start_delay_ms: u64,
}

pub fn parse_cli(mut args: impl Iterator<Item = String>) -> Result<Cli, String> {
    let mut cli = Cli {
        name: "testserver".to_owned(),
        ..Cli::default()
    };
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{flag} needs a value, expected `{flag} VALUE`"))
        };
        match flag.as_str() {
            "--name" => cli.name = value()?,
            "--log" => cli.log = Some(value()?.into()),
            "--state-dir" => cli.state_dir = Some(value()?.into()),
            "--extra-tool" => cli.extra_tools.push(value()?),
            "--conformance" => cli.conformance = true,
            "--mrtr" => cli.mrtr = true,
            "--start-delay-ms" => {
                let v = value()?;
                cli.start_delay_ms = v.parse().map_err(|_| {
                    format!("--start-delay-ms {v}: expected a whole number of milliseconds")
                })?;
            }
            other => {
                return Err(format!(
                "unknown argument `{other}`, expected --name, --log, --state-dir, --extra-tool, --conformance, --mrtr or --start-delay-ms"
            ))
            }
        }
    }
    Ok(cli)
}
