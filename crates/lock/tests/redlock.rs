//! Redlock over three independent servers: majorities, failures, validity, and fencing tokens
//! that grow across majorities whose servers' counters disagree.

mod common;

use std::time::Duration;

use latch_lock::{fence_key, LockError, LockOptions, Locker};
use latch_testkit::{Program, Server};
use redis::AsyncCommands;

fn three(program: Program) -> Vec<Server> {
    (0..3).map(|_| Server::start(program, &[])).collect()
}

fn urls(servers: &[Server]) -> Vec<String> {
    servers.iter().map(Server::url).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn majority_grants_and_minority_does_not() {
    for program in [Program::Latch, Program::Redis] {
        let mut servers = three(program);
        let options = LockOptions::new(Duration::from_secs(5));
        let locker = Locker::with_options(&urls(&servers), options.clone()).unwrap();
        assert_eq!(locker.quorum(), 2);

        let guard = locker.try_lock("job").await.unwrap();
        for server in &servers {
            let value: String = common::connection(&server.url())
                .await
                .get("job")
                .await
                .unwrap();
            assert_eq!(value, guard.token());
        }
        // A second client finds it held everywhere.
        let rival = Locker::with_options(&urls(&servers), options.clone()).unwrap();
        assert!(matches!(
            rival.try_lock("job").await,
            Err(LockError::NotAcquired { .. })
        ));
        guard.release().await.unwrap();

        // One server down: two of three still make a majority.
        servers[2].kill();
        let guard = locker.try_lock("job").await.unwrap();
        guard.check().await.unwrap();
        guard.release().await.unwrap();

        // Two down: no majority, and the one grant is undone.
        servers[1].kill();
        match locker.try_lock("job").await {
            Err(LockError::QuorumFailed {
                granted,
                needed,
                failed,
                ..
            }) => {
                assert_eq!((granted, needed, failed), (1, 2, 2));
            }
            other => panic!("expected QuorumFailed, got {other:?}"),
        }
        let left: bool = common::connection(&servers[0].url())
            .await
            .exists("job")
            .await
            .unwrap();
        assert!(!left, "a failed Redlock round releases its partial grant");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minority_holding_a_stale_lock_does_not_block_and_is_not_overwritten() {
    let servers = three(Program::Latch);
    // Someone else holds the lock on one server only.
    let _: () = common::connection(&servers[0].url())
        .await
        .set("split", "other-token")
        .await
        .unwrap();
    let locker = Locker::new(&urls(&servers)).unwrap();
    let guard = locker.try_lock("split").await.unwrap();
    let value: String = common::connection(&servers[0].url())
        .await
        .get("split")
        .await
        .unwrap();
    assert_eq!(value, "other-token");
    guard.release().await.unwrap();
    let value: String = common::connection(&servers[0].url())
        .await
        .get("split")
        .await
        .unwrap();
    assert_eq!(value, "other-token", "release only deletes its own token");
}

/// Servers' counters disagree (one restarted, one far ahead). The largest token of each
/// majority is raised on the majority, so the next grant, on any majority, is larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_grow_across_different_majorities() {
    let mut servers = three(Program::Latch);
    let far_ahead = u64::MAX / 4096; // still an exact Lua number
    let _: () = common::connection(&servers[0].url())
        .await
        .set(fence_key("f"), far_ahead)
        .await
        .unwrap();
    let locker =
        Locker::with_options(&urls(&servers), LockOptions::new(Duration::from_secs(5))).unwrap();
    let first = locker.try_lock("f").await.unwrap();
    assert_eq!(first.fencing_token(), far_ahead + 1);
    first.release().await.unwrap();
    for server in &servers {
        let fence: u64 = common::connection(&server.url())
            .await
            .get(fence_key("f"))
            .await
            .unwrap();
        assert_eq!(fence, far_ahead + 1, "raised everywhere it was granted");
    }
    // The far-ahead server leaves; the other two form the next majority.
    servers[0].kill();
    let second = locker.try_lock("f").await.unwrap();
    assert!(second.fencing_token() > far_ahead + 1);
    second.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_needs_a_majority() {
    let mut servers = three(Program::Latch);
    // A per-server timeout above the default tenth of the TTL: a loaded test machine can
    // take longer than 60 ms to answer (a killed server refuses at once either way).
    let mut options = LockOptions::new(Duration::from_millis(600));
    options.node_timeout = Some(Duration::from_millis(300));
    let locker = Locker::with_options(&urls(&servers), options).unwrap();
    let guard = locker.try_lock("ext").await.unwrap();
    // Renewal runs every 200 ms; with one server gone it still reaches a majority.
    servers[2].kill();
    tokio::time::sleep(Duration::from_millis(900)).await;
    guard.ensure_held().unwrap();
    // With two gone no renewal can succeed: the guard reports the loss when the lease ends.
    servers[1].kill();
    let reason = tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("lost when its validity ran out");
    assert_eq!(reason, latch_lock::LostReason::Expired);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_server_costs_only_its_timeout() {
    let servers = three(Program::Latch);
    let options = LockOptions {
        node_timeout: Some(Duration::from_millis(100)),
        ..LockOptions::new(Duration::from_secs(10))
    };
    let locker = Locker::with_options(&urls(&servers), options).unwrap();
    servers[1].pause();
    let started = std::time::Instant::now();
    let guard = locker.try_lock("paused").await;
    let took = started.elapsed();
    servers[1].resume();
    let guard = guard.unwrap();
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(guard.remaining() > Duration::from_secs(8));
    guard.release().await.unwrap();
}
