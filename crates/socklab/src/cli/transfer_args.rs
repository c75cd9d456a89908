//! The arguments of `socklab transfer` (send, serve) and its subcommands.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use socklab_lab::workload::transfer;

use socklab_lab::model::params::{Key, Modes};

use super::{merged, DbArg, FlagTable, KeyFlags, LinkArgs, SummaryFormat};

/// `socklab transfer`'s key flags: the transfer workload's keys.
#[derive(Debug, Clone)]
pub struct TransferFlags;

impl FlagTable for TransferFlags {
    const REPS: usize = 5;
    const NAME: &'static str = "transfer";
    fn keys() -> Vec<Key> {
        merged(&[(transfer::KEYS, Modes::ALL)])
    }
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TransferArgs {
    #[command(subcommand)]
    pub action: Option<TransferCommand>,
    /// An emulated link between client and server (see `socklab netem --help`; needs root).
    #[command(flatten)]
    pub link: LinkArgs,
    /// The workload's keys as flags, and the plan flags (--reps, --warmup, --order, --name).
    #[command(flatten)]
    pub keys: KeyFlags<TransferFlags>,
    #[command(flatten)]
    pub format: SummaryFormat,
    /// Where the roles run (another host over SSH).
    #[command(flatten)]
    pub hosts: crate::cli::HostArgs,
    #[command(flatten)]
    pub db: DbArg,
}

#[derive(Debug, Subcommand)]
pub enum TransferCommand {
    /// Receive transfers into a directory until Ctrl-C (or, with --once, one transfer).
    #[command(
        after_help = concat!(
        "Examples:\n",
        "  socklab transfer serve --proto tcp --port 9000 --dir ./incoming\n",
        "  socklab transfer serve --proto rudp --port 9000 --dir ./incoming --once\n",
        "\n",
        "The directory is created if missing. Files are written under a temporary name and renamed once their BLAKE3 hash matches the manifest; names never leave the directory. On Ctrl-C (or SIGTERM) it prints one line per session."
    )
    )]
    Serve(TransferServeArgs),
    /// Send files to a transfer server and print per-file and summary results.
    #[command(
        after_help = concat!(
        "Examples:\n",
        "  socklab transfer send --proto tcp --to 127.0.0.1:9000 a.bin b.bin\n",
        "  socklab transfer send --proto rudp --to 127.0.0.1:9000 --json FILE...\n",
        "\n",
        "Exit codes: 0 every file arrived and was verified; 1 the transfer failed or timed out; 2 bad argument."
    )
    )]
    Send(TransferSendArgs),
}

#[derive(Debug, Args)]
pub struct TransferServeArgs {
    /// tcp, rudp or quic.
    #[arg(long, default_value = "tcp")]
    pub proto: String,
    /// Port to listen on (0: any free port).
    #[arg(long, short, default_value_t = 9000)]
    pub port: u16,
    /// Address to listen on (default: all, IPv4 and IPv6).
    #[arg(long, default_value = "::")]
    pub bind: String,
    /// Directory to write received files into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// TCP: congestion control of accepted connections (cubic, bbr, reno; default cubic).
    #[arg(long, value_name = "CC")]
    pub tcp_cc: Option<String>,
    /// rudp: most sessions one source IP address may hold at once (default 16 of the 64).
    #[arg(long, value_name = "N")]
    pub max_sessions_per_source: Option<usize>,
    /// Stop after the first transfer.
    #[arg(long)]
    pub once: bool,
    /// TCP: most transfers served at once (default 64); further clients are told `server full`.
    #[arg(long, value_name = "N")]
    pub max_sessions: Option<u64>,
    /// TCP: close a session whose client delivers under 16 KiB of whole frames this long
    /// (default 30s).
    #[arg(long, value_name = "DURATION")]
    pub idle_timeout: Option<String>,
    /// Refuse manifests that declare a file larger than this (`off`: no limit).
    #[arg(long, value_name = "SIZE", default_value = "64G")]
    pub max_file_size: String,
    /// At start, remove partial files of unfinished transfers older than this (`off`: keep).
    #[arg(long, value_name = "AGE", default_value = "7d")]
    pub partial_max_age: String,
    /// Print `LISTENING <addr>` on stdout once listening (for scripts and the runner).
    #[arg(long)]
    pub announce: bool,
    /// Do not print the listening and session lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// (internal) Remove --dir and what it holds at exit (a receiving directory the controller
    /// made up on another host).
    #[arg(long, hide = true)]
    pub remove_dir_at_exit: bool,
}

#[derive(Debug, Args)]
pub struct TransferSendArgs {
    /// tcp, rudp or quic.
    #[arg(long, default_value = "tcp")]
    pub proto: String,
    /// The server, HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    pub to: String,
    /// TCP: congestion control of the sending socket (cubic, bbr, reno; default cubic).
    #[arg(long, value_name = "CC")]
    pub tcp_cc: Option<String>,
    /// Give up (exit 1) when the transfer has not finished after this long.
    #[arg(long, default_value = "60s")]
    pub timeout: String,
    /// quic: the server's certificate: its SHA-256 fingerprint (as transfer serve prints it), a
    /// PEM file of CA certificates, or unverified (the default: any certificate whose handshake
    /// signature checks).
    #[arg(long, value_name = "TRUST")]
    pub tls_trust: Option<String>,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// The files to send.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}
