//! `latch`: a redis-cli-like client, and `latch lock ...`, the lock toolkit's command line.
//!
//! - `client/`: one-shot commands and the interactive prompt (RESP2 and RESP3 replies printed
//!   the way redis-cli prints them).
//! - `lock_cmd/`: `latch lock run` (flock(1) for a fleet of machines) and `latch lock status`.
//! - `connect.rs`: the connection options both share (`-h`, `-p`, `-u`, `-a`, `-n`, `-3`).

mod client;
mod connect;
mod lock_cmd;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

use connect::ConnectOpts;

/// The command line before the command: connection options, then either `lock ...` or a
/// command to send (none: the interactive prompt).
#[derive(Parser, Debug)]
#[command(
    name = "latch",
    version,
    about = "Latch client: send commands to a Redis-compatible server, or run a command under a distributed lock",
    disable_help_flag = true,
    after_help = "Examples:\n  latch SET greeting hello\n  latch -p 6380 -3 HGETALL user:1\n  latch lock run --server redis://10.0.0.1 --name nightly --ttl 30s -- ./backup.sh\n  latch lock status nightly"
)]
struct Cli {
    #[command(flatten)]
    connect: ConnectOpts,

    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,

    /// The command and its arguments (`lock run ...`, `lock status ...`, or any server command).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let is_lock = cli
        .command
        .first()
        .is_some_and(|word| word.eq_ignore_ascii_case("lock"));
    if is_lock {
        lock_cmd::main(&cli.connect, &cli.command[1..])
    } else {
        client::main(&cli.connect, &cli.command)
    }
}
