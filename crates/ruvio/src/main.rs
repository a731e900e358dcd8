//! The `ruvio` binary: `ruvio [server] [flags]` runs the server; `ruvio check-aof [--fix] PATH` checks data files;
//! `ruvio coordinator --config FILE` runs a failover coordinator (Sentinel protocol, see docs/coordinator.md).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use ruvio_server::Config;

#[derive(Parser)]
#[command(name = "ruvio", version, about = "Ruvio: a Redis-protocol key-value server with fencing-token locks")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (the default).
    Server(ServerArgs),
    /// Check an append-only log file, a snapshot, or every file a manifest lists; --fix cuts a damaged file back
    /// to its last good record.
    CheckAof {
        /// Truncate the file to its last good record.
        #[arg(long)]
        fix: bool,
        /// A `.incr` or `.base` file, or the `.manifest` (then every file it lists is checked).
        path: PathBuf,
    },
    /// Run a failover coordinator (answers the Sentinel protocol; see docs/coordinator.md).
    Coordinator(CoordinatorArgs),
}

#[derive(Args, Clone, Default)]
struct CoordinatorArgs {
    /// A sentinel.conf-style file (sentinel monitor ..., coordinator-peers ...); flags override it.
    #[arg(long, short = 'c')]
    config: Option<PathBuf>,
    /// Addresses to listen on (default 127.0.0.1).
    #[arg(long, num_args = 1..)]
    bind: Vec<String>,
    /// TCP port (default 26379).
    #[arg(long)]
    port: Option<u16>,
    /// Data folder for the consensus log and state (default ./coordinator-data).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Every coordinator of the group as host:port, this one included.
    #[arg(long, num_args = 1..)]
    peers: Vec<String>,
    /// Password clients (and the other coordinators) must send.
    #[arg(long)]
    requirepass: Option<String>,
    /// Log level: debug, verbose, notice, warning, nothing.
    #[arg(long)]
    loglevel: Option<String>,
}

fn build_coordinator_config(a: &CoordinatorArgs) -> Result<ruvio_coordinator::Config, String> {
    let mut c = ruvio_coordinator::Config::default();
    if let Some(path) = &a.config {
        c.load_file(path)?;
    }
    let mut set = |words: Vec<String>| c.apply(&words);
    if !a.bind.is_empty() {
        set([vec!["bind".to_string()], a.bind.clone()].concat())?;
    }
    if let Some(v) = a.port {
        set(vec!["port".into(), v.to_string()])?;
    }
    if let Some(v) = &a.dir {
        set(vec!["dir".into(), v.display().to_string()])?;
    }
    if !a.peers.is_empty() {
        set([vec!["coordinator-peers".to_string()], a.peers.clone()].concat())?;
    }
    if let Some(v) = &a.requirepass {
        set(vec!["requirepass".into(), v.clone()])?;
    }
    if let Some(v) = &a.loglevel {
        set(vec!["loglevel".into(), v.clone()])?;
    }
    c.members()?;
    Ok(c)
}

fn run_coordinator(a: &CoordinatorArgs) -> ExitCode {
    let config = match build_coordinator_config(a) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ruvio coordinator: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| match config.loglevel.as_str() {
        "debug" => "debug,openraft=info".to_string(),
        "verbose" => "info,ruvio_coordinator=debug".to_string(),
        "warning" => "warn".to_string(),
        "nothing" => "off".to_string(),
        _ => "info,openraft=warn".to_string(),
    });
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime");
    match runtime.block_on(ruvio_coordinator::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("ruvio coordinator: {e}");
            eprintln!("ruvio coordinator: {e}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Args, Clone, Default)]
struct ServerArgs {
    /// A redis.conf-style configuration file; flags override it.
    #[arg(long, short = 'c')]
    config: Option<PathBuf>,
    /// Addresses to listen on (default 127.0.0.1).
    #[arg(long, num_args = 1..)]
    bind: Vec<String>,
    /// TCP port (default 6379).
    #[arg(long)]
    port: Option<u16>,
    /// Data folder (default ./ruvio-data, created if missing).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Password for the default user.
    #[arg(long)]
    requirepass: Option<String>,
    /// Number of databases (default 16).
    #[arg(long)]
    databases: Option<usize>,
    /// Maximum simultaneous clients (default 10000).
    #[arg(long)]
    maxclients: Option<usize>,
    /// Close clients idle for this many seconds (0 = never).
    #[arg(long)]
    timeout: Option<u64>,
    /// Log level: debug, verbose, notice, warning, nothing.
    #[arg(long)]
    loglevel: Option<String>,
    /// Any other configuration parameter, redis-server style: `--appendfsync always --hz 20`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    extra: Vec<String>,
}

fn build_config(a: &ServerArgs) -> Result<Config, String> {
    let mut c = Config::default();
    if let Some(path) = &a.config {
        c.load_file(path).map_err(|e| e.to_string())?;
    }
    let mut set = |name: &str, value: String| c.apply(name, &value).map_err(|e| e.to_string());
    if !a.bind.is_empty() {
        set("bind", a.bind.join(" "))?;
    }
    if let Some(v) = a.port {
        set("port", v.to_string())?;
    }
    if let Some(v) = &a.dir {
        set("dir", v.display().to_string())?;
    }
    if let Some(v) = &a.requirepass {
        set("requirepass", v.clone())?;
    }
    if let Some(v) = a.databases {
        set("databases", v.to_string())?;
    }
    if let Some(v) = a.maxclients {
        set("maxclients", v.to_string())?;
    }
    if let Some(v) = a.timeout {
        set("timeout", v.to_string())?;
    }
    if let Some(v) = &a.loglevel {
        set("loglevel", v.clone())?;
    }
    // `--name value [value...]` pairs: the values run until the next `--name`.
    let mut i = 0;
    while i < a.extra.len() {
        let Some(name) = a.extra[i].strip_prefix("--") else {
            return Err(format!("unexpected argument '{}'", a.extra[i]));
        };
        let mut values = Vec::new();
        i += 1;
        while i < a.extra.len() && !a.extra[i].starts_with("--") {
            values.push(a.extra[i].clone());
            i += 1;
        }
        set(name, values.join(" "))?;
    }
    Ok(c)
}

fn tracing_filter(loglevel: &str) -> &'static str {
    match loglevel {
        "debug" => "debug",
        "verbose" => "info,ruvio_server=debug",
        "warning" => "warn",
        "nothing" => "off",
        _ => "info",
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Server(a)) => a,
        Some(Command::CheckAof { fix, path }) => {
            return ExitCode::from(ruvio_server::persistence::check::run(&path, fix) as u8);
        }
        Some(Command::Coordinator(a)) => return run_coordinator(&a),
        None => cli.server,
    };
    let config = match build_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ruvio: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| tracing_filter(&config.loglevel).to_string());
    // Colour only for a person at a terminal: a file, a pipe or journald gets plain text (NO_COLOR turns it off too).
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
    // Connections run on the server's own I/O workers (io-threads); this runtime only accepts and runs the light
    // background tasks, so one thread is enough.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("tokio runtime");
    match runtime.block_on(ruvio_server::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("ruvio: {e}");
            eprintln!("ruvio: {e}");
            ExitCode::FAILURE
        }
    }
}
