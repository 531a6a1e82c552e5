//! `latch lock run`: take the lock, run the command while renewing it, stop the command if the
//! lock is lost, release it when the command ends.

use std::io::IsTerminal;
use std::process::{ExitCode, ExitStatus};
use std::time::Duration;

use latch_lock::{LockError, LockOptions, Locker};
use tokio::process::{Child, Command};
use tokio::signal::unix::{signal, SignalKind};

use super::signal::Target;
use super::{RunArgs, EXIT_LOST, EXIT_NOT_ACQUIRED, EXIT_UNAVAILABLE};

pub async fn run(args: RunArgs) -> ExitCode {
    let mut options = LockOptions::new(args.ttl);
    options.wait = args.wait;
    options.max_hold = args.max_hold;
    options.native = !args.no_native_locks;
    options.mode = match (args.shared, args.permits) {
        (true, _) => latch_lock::LockMode::Shared,
        (false, Some(n)) => latch_lock::LockMode::Permits(n),
        (false, None) => latch_lock::LockMode::Exclusive,
    };
    if args.wait_replicas > 0 {
        options = options.wait_replicas(args.wait_replicas, args.wait_timeout);
    }
    let locker = match Locker::with_options(&args.servers, options) {
        Ok(locker) => locker,
        Err(err) => {
            eprintln!("latch: {err}");
            return ExitCode::from(2);
        }
    };
    let guard = match locker.lock(&args.name).await {
        Ok(guard) => guard,
        Err(err @ LockError::NotAcquired { .. }) => {
            eprintln!("latch: {err}");
            return ExitCode::from(EXIT_NOT_ACQUIRED);
        }
        Err(err) => {
            eprintln!("latch: {err}");
            return ExitCode::from(EXIT_UNAVAILABLE);
        }
    };

    let interactive = std::io::stdin().is_terminal();
    let (program, program_args) = args.command.split_first().expect("clap requires a command");
    let mut command = Command::new(program);
    command
        .args(program_args)
        .env("LATCH_FENCING_TOKEN", guard.fencing_token().to_string())
        .env("LATCH_LOCK_NAME", &args.name)
        .env("LATCH_LOCK_TOKEN", guard.token());
    if !interactive {
        command.process_group(0);
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            eprintln!("latch: cannot run {}: {err}", program.to_string_lossy());
            let _ = guard.release().await;
            return ExitCode::from(match err.kind() {
                std::io::ErrorKind::NotFound => 127,
                _ => 126,
            });
        }
    };
    let Some(pid) = child.id() else {
        let _ = guard.release().await;
        return ExitCode::FAILURE;
    };
    let target = if interactive {
        Target::Process(pid)
    } else {
        Target::Group(pid)
    };

    let outcome = {
        let lost = guard.lost();
        tokio::pin!(lost);
        supervise(&mut child, target, interactive, &mut lost).await
    };
    match outcome {
        Supervised::Exited(status) => match guard.release().await {
            Ok(()) => ExitCode::from(exit_code(status)),
            Err(err @ LockError::Lost { .. }) => {
                // The command finished, but not all of it ran under the lock.
                eprintln!("latch: {err} before the command finished");
                ExitCode::from(EXIT_LOST)
            }
            Err(err) => {
                // The command ran under the lock; the release did not reach the servers, and
                // the lock runs out at its TTL.
                eprintln!("latch: could not release the lock: {err}");
                ExitCode::from(exit_code(status))
            }
        },
        Supervised::Lost(reason) => {
            eprintln!(
                "latch: lock {:?} lost ({reason}); stopping the command",
                args.name
            );
            stop(&mut child, target, args.grace).await;
            let _ = guard.release().await;
            ExitCode::from(EXIT_LOST)
        }
    }
}

enum Supervised {
    Exited(ExitStatus),
    Lost(latch_lock::LostReason),
}

/// Waits for the command to end or the lock to be lost, forwarding SIGTERM, SIGHUP and SIGINT
/// sent to `latch` itself to the command.
async fn supervise(
    child: &mut Child,
    target: Target,
    interactive: bool,
    lost: &mut (impl std::future::Future<Output = latch_lock::LostReason> + Unpin),
) -> Supervised {
    let mut terminate = signal(SignalKind::terminate()).ok();
    let mut hangup = signal(SignalKind::hangup()).ok();
    let mut interrupt = signal(SignalKind::interrupt()).ok();
    loop {
        tokio::select! {
            status = child.wait() => {
                return match status {
                    Ok(status) => Supervised::Exited(status),
                    Err(err) => {
                        eprintln!("latch: waiting for the command: {err}");
                        Supervised::Exited(std::os::unix::process::ExitStatusExt::from_raw(1 << 8))
                    }
                };
            }
            reason = &mut *lost => return Supervised::Lost(reason),
            Some(()) = recv(&mut terminate) => target.send(libc::SIGTERM),
            Some(()) = recv(&mut hangup) => target.send(libc::SIGHUP),
            // At a terminal, Ctrl-C already reached the command (same process group).
            Some(()) = recv(&mut interrupt) => if !interactive { target.send(libc::SIGINT) },
        }
    }
}

async fn recv(stream: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match stream {
        Some(stream) => stream.recv().await,
        None => std::future::pending().await,
    }
}

/// SIGTERM, then SIGKILL if the command has not ended after `grace`.
async fn stop(child: &mut Child, target: Target, grace: Duration) {
    target.send(libc::SIGTERM);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        target.send(libc::SIGKILL);
        let _ = child.wait().await;
    }
}

/// The command's exit status as ours: its code, or 128 + the signal that killed it.
fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(255),
        (None, None) => 1,
    }
}
