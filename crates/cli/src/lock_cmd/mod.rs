//! `latch lock run` and `latch lock status`.

mod duration;
mod run;
mod signal;
mod status;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::connect::ConnectOpts;
use duration::parse_duration;

/// Exit status when the lock could not be taken (held by another process; `--wait` ran out).
pub const EXIT_NOT_ACQUIRED: u8 = 75;
/// Exit status when the lock was lost while the command ran (the command was signalled).
pub const EXIT_LOST: u8 = 76;
/// Exit status when the servers could not be reached, or no majority answered.
pub const EXIT_UNAVAILABLE: u8 = 69;

#[derive(Parser, Debug)]
#[command(name = "latch lock", about = "Distributed locks from the command line")]
struct LockCli {
    #[command(subcommand)]
    command: LockCommand,
}

#[derive(Subcommand, Debug)]
enum LockCommand {
    /// Run a command only while holding a lock: flock(1) for a fleet of machines.
    #[command(after_help = "\
The lock is renewed at a third of its TTL while COMMAND runs. COMMAND sees LATCH_FENCING_TOKEN
(send it to the resource you write to, so that it can refuse a stale holder), LATCH_LOCK_NAME
and LATCH_LOCK_TOKEN. With several --server options the lock is a Redlock over all of them.

With --sentinel (repeated, one per sentinel) and --service, the lock lives on the primary that
Redis Sentinel names for the service, and follows it through a failover; the group counts as
one server (a --server URL may also be redis+sentinel://host:port,host:port/SERVICE[/db]).
Replication is asynchronous: a primary that dies right after granting the lock may lose the
grant, and the lock can then be granted twice. --wait-replicas N counts a grant or renewal only
once N replicas acknowledged it (WAIT), so that it survives a failover to one of them.

Exit status: COMMAND's own (128+N when killed by signal N); 75 when the lock is held by
another process (at once without --wait, or after --wait); 76 when the lock was lost while
COMMAND ran (COMMAND got SIGTERM, then SIGKILL after --grace); 69 when the servers could not
be reached (or too few replicas acknowledged the grant); 126/127 when COMMAND could not be
started.")]
    Run(RunArgs),
    /// Show a lock's holder token, fencing token and remaining TTL on each server.
    #[command(
        after_help = "Exit status: 0 when a majority holds the lock, 1 when it is free, 69 when the servers could not be reached."
    )]
    Status(StatusArgs),
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Server URL (redis://host:port/db, or redis+sentinel://host:port,.../SERVICE[/db]);
    /// repeat for Redlock. Default: from -h/-p/-u, unless --sentinel is given.
    #[arg(long = "server", value_name = "URL")]
    pub servers: Vec<String>,

    #[command(flatten)]
    pub sentinel: SentinelArgs,

    /// Count a grant or renewal only once N replicas of the server acknowledged it (WAIT).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub wait_replicas: u32,

    /// How long to wait for the replicas' acknowledgement (shorter than --ttl).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "500ms")]
    pub wait_timeout: Duration,

    /// The lock's name (its key on the servers).
    #[arg(long)]
    pub name: String,

    /// The lock's time to live: how long it outlives a holder that stops renewing it.
    #[arg(long, value_parser = parse_duration)]
    pub ttl: Duration,

    /// Wait up to this long for the lock (default: fail at once when it is held).
    #[arg(long, value_parser = parse_duration)]
    pub wait: Option<Duration>,

    /// Stop renewing after this long; the command is then stopped when the lock runs out.
    #[arg(long, value_parser = parse_duration)]
    pub max_hold: Option<Duration>,

    /// Time between SIGTERM and SIGKILL when the lock is lost.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub grace: Duration,

    /// Take the lock shared with other --shared holders (a read lock): an exclusive holder
    /// waits for all of them. One server only.
    #[arg(long, conflicts_with = "permits")]
    pub shared: bool,

    /// A counting semaphore of N permits: up to N holders at once. One server only.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub permits: Option<u32>,

    /// Never use Latch's native lock commands (LOCK.ACQUIRE ... WAIT): poll with the
    /// scripts every Redis-compatible server runs, as against redis-server.
    #[arg(long)]
    pub no_native_locks: bool,

    /// The command to run and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// The lock's name.
    pub name: String,

    /// Server URL; repeat for a Redlock. Default: from -h/-p/-u, unless --sentinel is given.
    #[arg(long = "server", value_name = "URL")]
    pub servers: Vec<String>,

    #[command(flatten)]
    pub sentinel: SentinelArgs,
}

/// A Redis Sentinel service as one more server.
#[derive(clap::Args, Debug)]
pub struct SentinelArgs {
    /// A sentinel to ask for the primary of --service (HOST:PORT); repeat for each sentinel.
    /// Uses -a and -n for the primary.
    #[arg(long = "sentinel", value_name = "HOST:PORT", requires = "service")]
    pub sentinels: Vec<String>,

    /// The service the sentinels monitor (the NAME of `sentinel monitor NAME ...`).
    #[arg(long, value_name = "NAME", requires = "sentinels")]
    pub service: Option<String>,
}

impl SentinelArgs {
    /// The servers to use: `servers`, plus the Sentinel service as a `redis+sentinel://`
    /// URL, or the default server when there is neither.
    fn servers(&self, connect: &ConnectOpts, mut servers: Vec<String>) -> Vec<String> {
        if let Some(service) = &self.service {
            servers.push(connect.sentinel_url(&self.sentinels, service));
        }
        if servers.is_empty() {
            servers.push(connect.redis_url());
        }
        servers
    }
}

pub fn main(connect: &ConnectOpts, args: &[OsString]) -> ExitCode {
    let argv = std::iter::once(OsString::from("latch lock")).chain(args.iter().cloned());
    let cli = match LockCli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { 2 } else { 0 });
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("latch: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        LockCommand::Run(mut run_args) => {
            let servers = std::mem::take(&mut run_args.servers);
            run_args.servers = run_args.sentinel.servers(connect, servers);
            runtime.block_on(run::run(run_args))
        }
        LockCommand::Status(mut status_args) => {
            let servers = std::mem::take(&mut status_args.servers);
            status_args.servers = status_args.sentinel.servers(connect, servers);
            runtime.block_on(status::status(status_args))
        }
    }
}
