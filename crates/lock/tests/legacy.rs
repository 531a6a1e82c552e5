//! The seed page's legacy SETNX lock: its C1/C2 race with the naive "DEL then SETNX" takeover,
//! and the GETSET algorithm that closes it.

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use latch_lock::{Attempt, LegacyLock, LockError};
use latch_testkit::{Program, Server};
use redis::AsyncCommands;

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The page's interleaving, step by step: C3 crashed holding the lock; C1 and C2 both read its
/// expired time, then C1 DELs and SETNXes, then C2 DELs and SETNXes. Both succeed.
#[tokio::test]
async fn naive_del_then_setnx_takeover_grants_the_lock_twice() {
    for program in [Program::Latch, Program::Redis] {
        let server = Server::start(program, &[]);
        let mut c1 = common::connection(&server.url()).await;
        let mut c2 = common::connection(&server.url()).await;
        let now = unix_now();
        let _: () = c1.set("lock.foo", now - 10).await.unwrap();

        let seen1: u64 = c1.get("lock.foo").await.unwrap();
        let seen2: u64 = c2.get("lock.foo").await.unwrap();
        assert!(seen1 <= now && seen2 <= now, "both see it expired");
        let _: () = c1.del("lock.foo").await.unwrap();
        let c1_got: bool = c1.set_nx("lock.foo", now + 11).await.unwrap();
        let _: () = c2.del("lock.foo").await.unwrap();
        let c2_got: bool = c2.set_nx("lock.foo", now + 11).await.unwrap();
        assert!(c1_got && c2_got, "the race: both clients hold the lock");
    }
}

/// The same interleaving with GETSET: C1's GETSET returns the expired time (C1 holds it), C2's
/// returns C1's fresh time (C2 must start again).
#[tokio::test]
async fn getset_takeover_grants_it_once() {
    for program in [Program::Latch, Program::Redis] {
        let server = Server::start(program, &[]);
        let mut c1 = common::connection(&server.url()).await;
        let mut c2 = common::connection(&server.url()).await;
        let now = unix_now();
        let _: () = c1.set("lock.foo", now - 10).await.unwrap();
        let got1: bool = c1.set_nx("lock.foo", now + 11).await.unwrap();
        let got2: bool = c2.set_nx("lock.foo", now + 11).await.unwrap();
        assert!(!got1 && !got2);
        let seen1: u64 = c1.get("lock.foo").await.unwrap();
        let seen2: u64 = c2.get("lock.foo").await.unwrap();
        assert!(seen1 <= now && seen2 <= now);
        let old1: u64 = c1.getset("lock.foo", now + 11).await.unwrap();
        let old2: u64 = c2.getset("lock.foo", now + 12).await.unwrap();
        assert!(
            old1 <= now,
            "C1's GETSET finds the expired time: C1 holds the lock"
        );
        assert!(old2 > now, "C2's GETSET finds C1's time: C2 does not");
    }
}

/// The library's legacy lock under contention: each round, eight clients race to take over an
/// expired lock; exactly one wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn library_takeover_has_one_winner_per_round() {
    let server = Server::latch(&[]);
    let url = server.url();
    let mut con = common::connection(&server.url()).await;
    for _round in 0..30 {
        let _: () = con.set("lock.race", unix_now() - 5).await.unwrap();
        let barrier = Arc::new(tokio::sync::Barrier::new(8));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let lock = LegacyLock::new(&url, "lock.race", 10).unwrap();
            let barrier = barrier.clone();
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                lock.attempt().await.unwrap()
            }));
        }
        let mut winners = 0;
        for task in tasks {
            if let Attempt::Acquired(_) = task.await.unwrap() {
                winners += 1;
            }
        }
        assert_eq!(winners, 1);
    }
}

#[tokio::test]
async fn legacy_acquire_wait_and_release_rules() {
    let server = Server::latch(&[]);
    let url = server.url();
    let mut con = common::connection(&server.url()).await;
    let a = LegacyLock::new(&url, "lock.foo", 10).unwrap();
    let lease = a.acquire(None).await.unwrap();
    let stored: u64 = con.get("lock.foo").await.unwrap();
    assert_eq!(stored, lease.expires_at_unix_secs);
    assert!(stored >= unix_now() + 10);

    let b = LegacyLock::new(&url, "lock.foo", 10)
        .unwrap()
        .retry_delay(Duration::from_millis(50));
    assert!(matches!(
        b.acquire(Some(Duration::from_millis(200))).await,
        Err(LockError::NotAcquired { .. })
    ));
    a.release(lease).await.unwrap();
    let lease = b.acquire(None).await.unwrap();

    // A holder whose time has passed must not DEL: the lock may be someone else's now.
    let mut stale = lease;
    stale.expires_at_unix_secs = unix_now() - 1;
    assert!(matches!(
        b.release(stale).await,
        Err(LockError::Lost { .. })
    ));
    let still: bool = con.exists("lock.foo").await.unwrap();
    assert!(still);

    // A value that is not a time (a modern lock's token) is never taken over.
    let _: () = con.set("lock.modern", "a-random-token").await.unwrap();
    let c = LegacyLock::new(&url, "lock.modern", 10).unwrap();
    assert_eq!(c.attempt().await.unwrap(), Attempt::Held);
}
