//! `latch lock status NAME`: what each server says about a lock.

use std::process::ExitCode;

use latch_lock::Locker;

use super::{StatusArgs, EXIT_UNAVAILABLE};

pub async fn status(args: StatusArgs) -> ExitCode {
    let locker = match Locker::new(&args.servers) {
        Ok(locker) => locker,
        Err(err) => {
            eprintln!("latch: {err}");
            return ExitCode::from(2);
        }
    };
    let statuses = locker.status(&args.name).await;
    let mut holders: Vec<&str> = Vec::new();
    let mut answered = 0;
    for status in &statuses {
        println!("server {}", status.server);
        if let Some(error) = &status.error {
            println!("  error          {error}");
            continue;
        }
        answered += 1;
        match (&status.holder, status.ttl_ms) {
            (Some(holder), ttl_ms) => {
                holders.push(holder);
                println!("  holder token   {holder}");
                match ttl_ms {
                    Some(ms) if ms >= 0 => {
                        println!("  remaining ttl  {}.{:03} s", ms / 1000, ms % 1000)
                    }
                    _ => println!("  remaining ttl  none (the key never expires)"),
                }
            }
            (None, _) if !status.shared.is_empty() => {
                println!("  shared by      {} holders", status.shared.len());
                for (token, ms) in &status.shared {
                    println!("    {token}  {}.{:03} s left", ms / 1000, ms % 1000);
                }
            }
            (None, _) => println!("  holder token   (free)"),
        }
        match status.fencing_token {
            Some(token) => println!("  fencing token  {token} (the last granted)"),
            None => println!("  fencing token  (never granted)"),
        }
        if let Some(waiters) = &status.waiters {
            println!("  waiters        {}", waiters.len());
            for (position, (id, ms)) in waiters.iter().enumerate() {
                println!(
                    "    {:>3}. client {id} waiting {}.{:03} s",
                    position + 1,
                    ms / 1000,
                    ms % 1000
                );
            }
        }
    }
    let quorum = locker.quorum();
    // The token held by the most servers.
    let best = holders
        .iter()
        .map(|holder| (holders.iter().filter(|h| *h == holder).count(), *holder))
        .max();
    let shared = statuses.iter().map(|s| s.shared.len()).max().unwrap_or(0);
    match best {
        _ if shared > 0 && answered >= quorum => {
            println!("lock {:?}: shared by {shared} holders", args.name);
            ExitCode::SUCCESS
        }
        Some((count, holder)) if count >= quorum => {
            println!(
                "lock {:?}: held by {holder} on {count} of {} servers",
                args.name,
                statuses.len()
            );
            ExitCode::SUCCESS
        }
        _ if answered < quorum => {
            println!(
                "lock {:?}: unknown ({answered} of {} servers answered)",
                args.name,
                statuses.len()
            );
            ExitCode::from(EXIT_UNAVAILABLE)
        }
        _ => {
            println!("lock {:?}: free", args.name);
            ExitCode::from(1)
        }
    }
}
