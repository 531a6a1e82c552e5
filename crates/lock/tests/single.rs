//! The single-server lock against Latch and against Debian's redis-server: each test runs on
//! both, so the library is shown to work with any Redis, not only ours.

mod common;

use std::time::{Duration, Instant};

use latch_lock::{fence_key, LockError, LockOptions, LockState, Locker, LostReason};
use latch_testkit::{Program, Server};
use redis::AsyncCommands;

/// Runs `body` once against Latch and once against redis-server.
macro_rules! on_both {
    ($name:ident, $body:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            for program in [Program::Latch, Program::Redis] {
                let server = Server::start(program, &[]);
                let body = $body;
                body(&server).await;
                drop(server);
            }
        }
    };
}

/// Options with a short TTL and a per-server timeout of two thirds of it: the default, a
/// tenth (30 ms for 300), is what Redlock wants in production, but a loaded test machine
/// can take longer than that to answer, and these tests are about expiry and renewal.
fn short_ttl(ms: u64) -> LockOptions {
    let mut options = LockOptions::new(Duration::from_millis(ms));
    options.node_timeout = Some(Duration::from_millis(ms * 2 / 3));
    options
}

on_both!(acquire_refuse_release, |server: &Server| {
    let server = server.url();
    async move {
        let a =
            Locker::with_options(&[&server], LockOptions::new(Duration::from_secs(10))).unwrap();
        let b =
            Locker::with_options(&[&server], LockOptions::new(Duration::from_secs(10))).unwrap();
        let guard = a.try_lock("res").await.unwrap();
        assert_eq!(guard.token().len(), 40);
        match b.try_lock("res").await {
            Err(LockError::NotAcquired { name, .. }) => assert_eq!(name, "res"),
            other => panic!("expected NotAcquired, got {other:?}"),
        }
        // The key holds the holder's token with a TTL of at most 10 s.
        let mut con = common::connection(&server).await;
        let value: String = con.get("res").await.unwrap();
        assert_eq!(value, guard.token());
        let pttl: i64 = con.pttl("res").await.unwrap();
        assert!((9_000..=10_000).contains(&pttl), "pttl {pttl}");
        guard.release().await.unwrap();
        let exists: bool = con.exists("res").await.unwrap();
        assert!(!exists);
        b.try_lock("res").await.unwrap().release().await.unwrap();
    }
});

on_both!(fencing_tokens_grow_across_holders, |server: &Server| {
    let url = server.url();
    async move {
        let mut last = 0;
        for _ in 0..5 {
            let locker = Locker::new(&[&url]).unwrap();
            let guard = locker.try_lock("fenced").await.unwrap();
            assert!(
                guard.fencing_token() > last,
                "{} after {last}",
                guard.fencing_token()
            );
            last = guard.fencing_token();
            guard.release().await.unwrap();
        }
        // The counter is at least the server's clock in microseconds.
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64;
        assert!(last > now_us - 60_000_000 && last < now_us + 60_000_000);
        let mut con = common::connection(&url).await;
        let stored: u64 = con.get(fence_key("fenced")).await.unwrap();
        assert_eq!(stored, last);
    }
});

on_both!(
    release_never_deletes_another_holders_lock,
    |server: &Server| {
        let url = server.url();
        async move {
            let options = short_ttl(300).no_renewal();
            let a = Locker::with_options(&[&url], options.clone()).unwrap();
            let b = Locker::with_options(&[&url], options).unwrap();
            let first = a.try_lock("shared").await.unwrap();
            tokio::time::sleep(Duration::from_millis(400)).await;
            assert!(matches!(
                first.ensure_held(),
                Err(LockError::Lost {
                    reason: LostReason::Expired,
                    ..
                })
            ));
            let second = b.try_lock("shared").await.unwrap();
            assert!(second.fencing_token() > first.fencing_token());
            // The first holder's release must fail and leave the second's lock alone.
            assert!(matches!(first.release().await, Err(LockError::Lost { .. })));
            second.ensure_held().unwrap();
            second.check().await.unwrap();
            second.release().await.unwrap();
        }
    }
);

on_both!(blocking_acquire_waits_for_release, |server: &Server| {
    let url = server.url();
    async move {
        let holder = Locker::new(&[&url]).unwrap();
        let guard = holder.try_lock("queue").await.unwrap();
        let waiter = Locker::with_options(
            &[&url],
            LockOptions::new(Duration::from_secs(5)).wait(Duration::from_secs(5)),
        )
        .unwrap();
        let started = Instant::now();
        let releaser = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            guard.release().await.unwrap();
        });
        let second = waiter.lock("queue").await.unwrap();
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(250), "{waited:?}");
        assert!(waited < Duration::from_secs(3), "{waited:?}");
        releaser.await.unwrap();
        second.release().await.unwrap();

        // A wait that runs out reports how long it waited.
        let _held = holder.try_lock("queue").await.unwrap();
        let impatient = Locker::with_options(
            &[&url],
            LockOptions::new(Duration::from_secs(5)).wait(Duration::from_millis(200)),
        )
        .unwrap();
        match impatient.lock("queue").await {
            Err(LockError::NotAcquired { waited, .. }) => {
                assert!(waited >= Duration::from_millis(200), "{waited:?}")
            }
            other => panic!("expected NotAcquired, got {other:?}"),
        }
    }
});

on_both!(renewal_keeps_the_lock_past_its_ttl, |server: &Server| {
    let url = server.url();
    async move {
        let locker = Locker::with_options(&[&url], short_ttl(300)).unwrap();
        let guard = locker.try_lock("long-job").await.unwrap();
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        guard.ensure_held().unwrap();
        guard.check().await.unwrap();
        let other = Locker::new(&[&url]).unwrap();
        assert!(other.try_lock("long-job").await.is_err());
        guard.release().await.unwrap();
    }
});

on_both!(a_replaced_token_is_reported_lost, |server: &Server| {
    let url = server.url();
    async move {
        let locker = Locker::with_options(&[&url], short_ttl(600)).unwrap();
        let guard = locker.try_lock("stolen").await.unwrap();
        let mut con = common::connection(&url).await;
        // An operator (or a buggy client) overwrites the lock.
        let _: () = con.set("stolen", "someone-else").await.unwrap();
        let reason = tokio::time::timeout(Duration::from_secs(2), guard.lost())
            .await
            .expect("the renewal notices within a renewal interval");
        assert_eq!(reason, LostReason::Replaced);
        assert_eq!(guard.state(), LockState::Lost(LostReason::Replaced));
        assert!(guard.ensure_held().is_err());
        // Release does not delete the other value.
        assert!(guard.release().await.is_err());
        let value: String = con.get("stolen").await.unwrap();
        assert_eq!(value, "someone-else");
    }
});

on_both!(max_hold_caps_renewal, |server: &Server| {
    let url = server.url();
    async move {
        let options = short_ttl(300).max_hold(Duration::from_millis(600));
        let locker = Locker::with_options(&[&url], options).unwrap();
        let started = Instant::now();
        let guard = locker.try_lock("capped").await.unwrap();
        let reason = tokio::time::timeout(Duration::from_secs(3), guard.lost())
            .await
            .expect("lost after the cap");
        assert_eq!(reason, LostReason::MaxHoldReached);
        let held = started.elapsed();
        assert!(held >= Duration::from_millis(550), "{held:?}");
        // Another client can take it once the cap is reached and the TTL ran out.
        tokio::time::sleep(Duration::from_millis(50)).await;
        Locker::new(&[&url])
            .unwrap()
            .try_lock("capped")
            .await
            .unwrap();
    }
});

on_both!(dropping_the_guard_releases, |server: &Server| {
    let url = server.url();
    async move {
        let locker = Locker::new(&[&url]).unwrap();
        {
            let _guard = locker.try_lock("scoped").await.unwrap();
        }
        let other = Locker::with_options(
            &[&url],
            LockOptions::new(Duration::from_secs(5)).wait(Duration::from_secs(2)),
        )
        .unwrap();
        let started = Instant::now();
        other.lock("scoped").await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(1));
    }
});

on_both!(scripts_reload_after_script_flush, |server: &Server| {
    let url = server.url();
    async move {
        let locker = Locker::new(&[&url]).unwrap();
        locker.try_lock("a").await.unwrap().release().await.unwrap();
        let mut con = common::connection(&url).await;
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut con)
            .await
            .unwrap();
        // EVALSHA gets NOSCRIPT; the library loads the script and goes on.
        let guard = locker.try_lock("a").await.unwrap();
        guard.release().await.unwrap();
    }
});

on_both!(wrong_type_key_is_a_protocol_error, |server: &Server| {
    let url = server.url();
    async move {
        let mut con = common::connection(&url).await;
        let _: () = con.hset("h", "f", "v").await.unwrap();
        let locker = Locker::new(&[&url]).unwrap();
        // SET NX finds the hash: not granted, and the hash is untouched.
        assert!(matches!(
            locker.try_lock("h").await,
            Err(LockError::NotAcquired { .. })
        ));
        let kind: String = redis::cmd("TYPE")
            .arg("h")
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(kind, "hash");
        // A fencing counter that is no integer makes the script fail after its SET.
        let _: () = con.set(fence_key("bad"), "not a number").await.unwrap();
        assert!(matches!(
            locker.try_lock("bad").await,
            Err(LockError::Protocol { .. })
        ));
        // The failed grant left no lock behind.
        let exists: bool = con.exists("bad").await.unwrap();
        assert!(!exists);
    }
});

on_both!(status_reports_holder_ttl_and_fence, |server: &Server| {
    let url = server.url();
    async move {
        let locker = Locker::new(&[&url]).unwrap();
        let before = locker.status("job").await;
        assert_eq!(before.len(), 1);
        assert_eq!(before[0].holder, None);
        assert_eq!(before[0].fencing_token, None);
        let guard = locker.try_lock("job").await.unwrap();
        let status = locker.status("job").await;
        assert_eq!(status[0].holder.as_deref(), Some(guard.token()));
        assert_eq!(status[0].fencing_token, Some(guard.fencing_token()));
        let ttl = status[0].ttl_ms.unwrap();
        assert!(ttl > 25_000 && ttl <= 30_000, "{ttl}");
        assert_eq!(status[0].error, None);
    }
});

#[tokio::test]
async fn unreachable_server_is_a_typed_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let locker = Locker::new(&[format!("redis://127.0.0.1:{port}")]).unwrap();
    match locker.try_lock("x").await {
        Err(err @ LockError::Unreachable { .. }) => assert!(err.is_retryable()),
        other => panic!("expected Unreachable, got {other:?}"),
    }
    assert!(matches!(
        Locker::new::<&str>(&[]),
        Err(LockError::InvalidArgument(_))
    ));
    assert!(matches!(
        Locker::with_options(&["redis://x"], LockOptions::new(Duration::from_millis(1))),
        Err(LockError::InvalidArgument(_))
    ));
}

/// A server that restarts without its data (no persistence) still hands out larger fencing
/// tokens: the counter never falls below the server's clock.
#[tokio::test]
async fn fencing_tokens_grow_across_a_restart_without_data() {
    let mut server = Server::latch(&["--appendonly", "no"]);
    let locker = Locker::new(&[server.url()]).unwrap();
    let before = locker.try_lock("restart").await.unwrap().fencing_token();
    server.restart(&[]);
    let mut con = common::connection(&server.url()).await;
    let fence: Option<u64> = con.get(fence_key("restart")).await.unwrap();
    assert_eq!(fence, None, "the data is gone");
    let locker = Locker::new(&[server.url()]).unwrap();
    let after = locker.try_lock("restart").await.unwrap().fencing_token();
    assert!(after > before, "{after} after {before}");
}

/// Latch measures relative TTLs on a monotonic clock: a jump of the wall clock does not expire
/// a held lock early (Redis would expire it).
#[tokio::test]
async fn a_wall_clock_jump_does_not_expire_a_lock() {
    let server = Server::latch(&[]);
    let url = server.url();
    let locker = Locker::with_options(
        &[&url],
        LockOptions::new(Duration::from_secs(5)).no_renewal(),
    )
    .unwrap();
    let guard = locker.try_lock("clock").await.unwrap();
    let mut con = common::connection(&server.url()).await;
    let _: () = redis::cmd("DEBUG")
        .arg("JUMP-CLOCK")
        .arg(3_600_000)
        .query_async(&mut con)
        .await
        .unwrap();
    let other = locker.try_lock("clock").await;
    assert!(
        matches!(other, Err(LockError::NotAcquired { .. })),
        "{other:?}"
    );
    guard.check().await.unwrap();
    guard.release().await.unwrap();
}
