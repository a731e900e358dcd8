//! The `ruvio` binary: `ruvio [server] [flags]` runs the server; `ruvio check-aof [--fix] PATH` checks data files;
//! `ruvio coordinator --config FILE` runs a failover coordinator (Sentinel protocol, see docs/coordinator.md).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

mod lock_cmd;
use ruvio_server::Config;

/// Large blocks (big collections, big tables) on transparent huge pages; everything else as the system allocates.
#[global_allocator]
static ALLOCATOR: ruvio_server::huge_pages::HugePagesForLargeBlocks = ruvio_server::huge_pages::HugePagesForLargeBlocks;

/// `ruvio --version`: the crate version and the git commit it was built from.
const LONG_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (git ", env!("RUVIO_GIT_COMMIT"), ")");

/// The common parameters, for `--help`; every one (and any other redis.conf parameter Ruvio knows) is given as
/// `--name value` or in the config file.
const SERVER_HELP: &str = "\
Common parameters (any redis.conf parameter Ruvio knows works the same way, as --name value or in the file):
  --appendonly yes|no           keep the append-only log (default yes)
  --appendfsync always|everysec|no
                                when the log is fsynced (default everysec)
  --replicaof 'HOST PORT'       start as a replica of that primary
  --durability-timeout MS       how long a durable write (CLIENT DURABILITY REPLICAS n) waits (default 5000)
  --requirepass PASSWORD        password for the default user
  --maxmemory BYTES             refuse writes (OOM) above this much memory (policy noeviction; default 0: none)
  --logfile PATH                log to this file instead of stderr
  --pidfile PATH                write the process id to this file
  --log-format text|json        one line of text, or one JSON object, per log event
  --metrics-port PORT           serve Prometheus metrics on GET /metrics (default 0: off)

Every parameter, with its default and what it does: contrib/ruvio.conf (a commented config file);
at run time: CONFIG GET *. A redis.conf (Debian's stock one included, with daemonize no) is accepted:
directives that do not apply to Ruvio are listed in one warning at start-up.";

#[derive(Parser)]
#[command(name = "ruvio", version = LONG_VERSION, disable_version_flag = true, after_help = SERVER_HELP,
    about = "Ruvio: a Redis-protocol key-value server with fencing-token locks")]
struct Cli {
    /// Print the version and the git commit, then exit.
    #[arg(short = 'v', short_alias = 'V', long = "version", action = clap::ArgAction::Version)]
    version: Option<bool>,
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (the default).
    #[command(after_help = SERVER_HELP)]
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
    /// Run a command while holding a lease: ruvio lock [-h host] [-p port] [-a password] [--user name] NAME
    /// --ttl 30s [--wait 10s] -- COMMAND... (the fencing token is in RUVIO_FENCING_TOKEN; exit codes in
    /// docs/commands.md, "ruvio lock").
    Lock(lock_cmd::LockArgs),
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
    /// Serve Prometheus metrics on GET /metrics at this port (default 0: off).
    #[arg(long = "metrics-port")]
    metrics_port: Option<u16>,
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
    if let Some(v) = a.metrics_port {
        set(vec!["metrics-port".into(), v.to_string()])?;
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
        // openraft's own lines are off by default: at WARN and ERROR it reports every RPC to a peer that timed out
        // or was refused (one per heartbeat while a peer is away, and several on every clean start, when peers come
        // up one after the other) and stale vote responses of ordinary elections. Peer reachability is logged by
        // the coordinator itself, one line per change (+sdown/-sdown sentinel, peers.rs); `loglevel verbose` or
        // RUST_LOG shows openraft's lines.
        _ => "info,openraft=off".to_string(),
    });
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime");
    // SIGTERM/SIGINT end the coordinator with a line in its log (its state is in raft's log on disk, so there is
    // nothing to flush); without this it would vanish without a word.
    let stopped = runtime.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            r = ruvio_coordinator::run(config) => r,
            _ = term.recv() => {
                tracing::info!("received SIGTERM, shutting down");
                Ok(())
            }
            _ = tokio::signal::ctrl_c() => {
                tracing::info!("received SIGINT, shutting down");
                Ok(())
            }
        }
    });
    match stopped {
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
    // As with redis-server, a first argument that is not a flag is the configuration file
    // (`ruvio /etc/redis/redis.conf --port 7000`); flags override it.
    let mut i = 0;
    if let Some(path) = a.extra.first().filter(|f| !f.starts_with("--")) {
        if a.config.is_some() {
            return Err(format!("two configuration files: --config and '{path}'"));
        }
        c.load_file(std::path::Path::new(path)).map_err(|e| e.to_string())?;
        i = 1;
    }
    let mut set = |name: &str, value: String| c.apply_startup(name, &value).map_err(|e| e.to_string());
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
        Some(Command::Lock(a)) => return lock_cmd::run(&a),
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
    if let Err(e) = init_logging(&filter, &config.logfile, &config.log_format) {
        eprintln!("ruvio: {e}");
        return ExitCode::from(2);
    }
    if !config.ignored.is_empty() {
        // One line for all of them, so a whole redis.conf does not bury the log.
        tracing::warn!(
            "accepted but ignored (these redis.conf directives do not apply to Ruvio; see contrib/ruvio.conf): {}",
            config.ignored.join(", ")
        );
    }
    let pidfile = (!config.pidfile.is_empty()).then(|| PathBuf::from(&config.pidfile));
    if let Some(p) = &pidfile {
        if let Err(e) = std::fs::write(p, format!("{}\n", std::process::id())) {
            // Redis only logs this; a supervisor that needs the file will say so itself.
            tracing::warn!("could not write the pidfile {}: {e}", p.display());
        }
    }
    // Connections run on the server's own I/O workers (io-threads); this runtime only accepts and runs the light
    // background tasks, so one thread is enough.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("tokio runtime");
    let result = runtime.block_on(ruvio_server::run(config));
    if let Some(p) = &pidfile {
        let _ = std::fs::remove_file(p);
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("ruvio: {e}");
            eprintln!("ruvio: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The log: stderr (colour only for a person at a terminal; NO_COLOR turns it off) or `logfile` (appended to, plain
/// text), as text lines or one JSON object per line (`log-format json`).
fn init_logging(filter: &str, logfile: &str, format: &str) -> Result<(), String> {
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    let (writer, ansi) = if logfile.is_empty() {
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        (BoxMakeWriter::new(std::io::stderr), ansi)
    } else {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logfile)
            .map_err(|e| format!("cannot open the logfile {logfile}: {e}"))?;
        (BoxMakeWriter::new(std::sync::Mutex::new(file)), false)
    };
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_ansi(ansi);
    if format == "json" {
        builder.json().flatten_event(true).init();
    } else {
        builder.init();
    }
    Ok(())
}
