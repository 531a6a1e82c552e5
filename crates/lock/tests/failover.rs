//! Locks on a replicated Latch primary that Redis Sentinel fails over: a primary and two
//! replicas (all Latch), three sentinels (Debian's `redis-server --sentinel`), and a
//! [`Locker`] over `redis+sentinel://`. The primary is SIGKILLed; the locker follows the
//! sentinels to the promoted replica, and fencing tokens issued after the failover are larger
//! than every token issued before it. With `wait_replicas`, a lock held when the primary dies
//! is still held on the new primary.
//!
//! `cargo test --release -p latch-lock --test failover -- --nocapture` prints the timings.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use latch_lock::{LockError, LockOptions, Locker};
use latch_testkit::{Sentinel, Server};

/// Any server may become the primary; Redis' default diskless sync waits 5 s for more
/// replicas before a transfer.
const SERVER_ARGS: &[&str] = &["--repl-diskless-sync-delay", "0"];

/// A primary, two replicas and three sentinels. When the test fails, dropping it prints the
/// tail of every log.
struct Group {
    primary: Server,
    replicas: Vec<Server>,
    sentinels: Vec<Sentinel>,
}

fn sync_connection(port: u16) -> Option<redis::Connection> {
    let conn = redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .ok()?
        .get_connection_with_timeout(Duration::from_secs(2))
        .ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    Some(conn)
}

fn info_field(port: u16, field: &str) -> Option<String> {
    let mut conn = sync_connection(port)?;
    let text: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut conn)
        .ok()?;
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| *name == field)
        .map(|(_, value)| value.trim().to_string())
}

fn wait_until<V: std::fmt::Debug>(
    timeout: Duration,
    what: &str,
    mut probe: impl FnMut() -> (bool, V),
) -> V {
    let deadline = Instant::now() + timeout;
    loop {
        let (done, value) = probe();
        if done {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}; last: {value:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Group {
    fn start() -> Group {
        let primary = Server::latch(SERVER_ARGS);
        let port = primary.port.to_string();
        let replicas: Vec<Server> = (0..2)
            .map(|_| {
                let mut args = SERVER_ARGS.to_vec();
                args.extend_from_slice(&["--replicaof", "127.0.0.1", &port]);
                Server::latch(&args)
            })
            .collect();
        for replica in &replicas {
            wait_until(Duration::from_secs(20), "replica link up", || {
                let status = info_field(replica.port, "master_link_status");
                (status.as_deref() == Some("up"), status)
            });
        }
        let linked = Instant::now();
        let sentinels = (0..3).map(|_| Sentinel::start(primary.port)).collect();
        let group = Group {
            primary,
            replicas,
            sentinels,
        };
        group.wait_discovery();
        println!("sentinels ready {:?} after the replicas", linked.elapsed());
        group
    }

    /// Until every sentinel lists both replicas (link ok) and the two other sentinels: the
    /// failover needs them.
    fn wait_discovery(&self) {
        for sentinel in &self.sentinels {
            wait_until(
                Duration::from_secs(30),
                "the sentinels to discover the replicas and each other",
                || {
                    let Some(mut conn) = sync_connection(sentinel.port) else {
                        return (false, (0, 0));
                    };
                    let replicas: Vec<BTreeMap<String, String>> = redis::cmd("SENTINEL")
                        .arg("REPLICAS")
                        .arg(Sentinel::SERVICE)
                        .query(&mut conn)
                        .unwrap_or_default();
                    let others: Vec<BTreeMap<String, String>> = redis::cmd("SENTINEL")
                        .arg("SENTINELS")
                        .arg(Sentinel::SERVICE)
                        .query(&mut conn)
                        .unwrap_or_default();
                    let good = replicas
                        .iter()
                        .filter(|r| {
                            r.get("flags").map(String::as_str) == Some("slave")
                                && r.get("master-link-status").map(String::as_str) == Some("ok")
                        })
                        .count();
                    (good == 2 && others.len() == 2, (good, others.len()))
                },
            );
        }
    }

    /// `redis+sentinel://` over the three sentinels, after `extra` sentinel addresses.
    fn url(&self, extra: &[&str]) -> String {
        let mut hosts: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        hosts.extend(self.sentinels.iter().map(Sentinel::addr));
        format!("redis+sentinel://{}/{}", hosts.join(","), Sentinel::SERVICE)
    }

    /// SIGKILLs the primary; returns when every sentinel names another one, with its port.
    fn kill_primary_and_wait_switch(&mut self) -> (u16, Duration) {
        let old = self.primary.port;
        let killed = Instant::now();
        self.primary.kill();
        let mut new_port = 0;
        for sentinel in &self.sentinels {
            new_port = wait_until(Duration::from_secs(30), "the sentinels to switch", || {
                let port = sentinel.primary_port();
                (port.is_some_and(|p| p != old), port)
            })
            .unwrap();
        }
        assert!(
            self.replicas.iter().any(|r| r.port == new_port),
            "promoted {new_port}, not a replica"
        );
        (new_port, killed.elapsed())
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for server in std::iter::once(&self.primary).chain(&self.replicas) {
            let log = server.log();
            let lines: Vec<&str> = log.lines().collect();
            eprintln!(
                "----- server {}:\n{}",
                server.port,
                lines[lines.len().saturating_sub(30)..].join("\n")
            );
        }
        for sentinel in &self.sentinels {
            let log = sentinel.log();
            let lines: Vec<&str> = log.lines().collect();
            eprintln!(
                "----- sentinel {}:\n{}",
                sentinel.port,
                lines[lines.len().saturating_sub(40)..].join("\n")
            );
        }
    }
}

/// Tries `name` until granted (at most 20 s; retryable errors are retried).
async fn lock_soon(locker: &Locker, name: &str) -> latch_lock::LockGuard {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match locker.try_lock(name).await {
            Ok(guard) => return guard,
            Err(err) if err.is_retryable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(err) => panic!("no grant of {name}: {err}"),
        }
    }
}

/// Tries `name` until granted, then releases it.
async fn wait_for_grant(locker: &Locker, name: &str) {
    lock_soon(locker, name).await.release().await.unwrap();
}

/// The tests run one after the other: two groups of six processes failing over side by side
/// on two cores made a sentinel miss a new primary's first PONG within its 1 s
/// down-after-milliseconds, and fail over a second time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A free port nobody listens on: a sentinel address that refuses connections.
fn dead_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("127.0.0.1:{port}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_locker_follows_a_failover_and_tokens_keep_growing() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let mut group = tokio::task::block_in_place(Group::start);
    println!("group up in {:?}", started.elapsed());
    let old_primary = group.primary.port;

    // The first sentinel of the URL is down: the node asks the next one.
    let url = group.url(&[&dead_address()]);
    let options = LockOptions::new(Duration::from_secs(2)).wait(Duration::from_secs(30));
    let locker = Locker::with_options(&[url.as_str()], options).unwrap();

    // A replica refuses the acquire script's writes (READONLY): reported as unreachable, so
    // callers retry (and a Sentinel node asks the sentinels again).
    let on_replica = Locker::new(&[group.replicas[0].url()]).unwrap();
    match on_replica.try_lock("on-a-replica").await {
        Err(err @ LockError::Unreachable { .. }) => {
            assert!(err.is_retryable());
            assert!(err.to_string().contains("read only replica"), "{err}");
        }
        other => panic!("expected Unreachable (READONLY), got {other:?}"),
    }

    let mut before = Vec::new();
    for i in 0..5 {
        let guard = locker.try_lock(&format!("job-{i}")).await.unwrap();
        before.push(guard.fencing_token());
        guard.release().await.unwrap();
    }
    // Many grants of one name, the last held at the kill.
    for _ in 0..5 {
        let guard = locker.try_lock("job-0").await.unwrap();
        before.push(guard.fencing_token());
        guard.release().await.unwrap();
    }
    let held = locker.try_lock("held-at-the-kill").await.unwrap();
    before.push(held.fencing_token());
    let status = locker.status("job-0").await;
    assert!(
        status[0]
            .server
            .contains(&format!("primary 127.0.0.1:{old_primary}")),
        "{status:?}"
    );
    let largest_before = *before.iter().max().unwrap();

    let (new_primary, switch) =
        tokio::task::block_in_place(|| group.kill_primary_and_wait_switch());
    println!("sentinels named {new_primary} (was {old_primary}) {switch:?} after the SIGKILL");

    // The locker keeps working: a new name, waiting through the failover.
    let asked = Instant::now();
    let guard = locker.lock("after-the-failover").await.unwrap();
    println!(
        "first grant after the switch took {:?} ({:?} after the SIGKILL)",
        asked.elapsed(),
        switch + asked.elapsed()
    );
    let status = locker.status("after-the-failover").await;
    assert!(
        status[0]
            .server
            .contains(&format!("primary 127.0.0.1:{new_primary}")),
        "{status:?}"
    );
    assert_eq!(status[0].holder.as_deref(), Some(guard.token()));
    let mut after = vec![guard.fencing_token()];
    guard.release().await.unwrap();
    for i in 0..5 {
        let guard = locker.lock(&format!("job-{i}")).await.unwrap();
        after.push(guard.fencing_token());
        guard.release().await.unwrap();
    }
    println!("tokens before the failover: {before:?}\ntokens after it: {after:?}");
    assert!(
        after.iter().all(|token| *token > largest_before),
        "a token after the failover is not larger than every one before: {after:?} vs {largest_before}"
    );
    // Whether the lock held at the kill survived is up to asynchronous replication here (no
    // wait_replicas); releasing it must not fail for any other reason than losing it.
    match held.release().await {
        Ok(()) | Err(LockError::Lost { .. }) => {}
        Err(err) => panic!("release after the failover: {err}"),
    }
    println!("test took {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_wait_replicas_a_held_lock_survives_the_failover() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let mut group = tokio::task::block_in_place(Group::start);
    println!("group up in {:?}", started.elapsed());
    let url = group.url(&[]);
    let ttl = Duration::from_secs(8);

    // More replicas than there are: the grant does not count, and is released again.
    let greedy = Locker::with_options(
        &[url.as_str()],
        LockOptions::new(ttl).wait_replicas(3, Duration::from_millis(200)),
    )
    .unwrap();
    match greedy.try_lock("greedy").await {
        Err(
            err @ LockError::NotReplicated {
                acked: 2,
                needed: 3,
                ..
            },
        ) => {
            assert!(err.is_retryable())
        }
        other => panic!("expected NotReplicated, got {other:?}"),
    }
    assert_eq!(greedy.status("greedy").await[0].holder, None);

    let options = LockOptions::new(ttl).wait_replicas(1, Duration::from_millis(500));
    let holder = Locker::with_options(&[url.as_str()], options.clone()).unwrap();
    let rival = Locker::with_options(&[url.as_str()], options).unwrap();
    let guard = holder.try_lock("survivor").await.unwrap();
    let token_before = guard.fencing_token();
    let granted = Instant::now();

    let (new_primary, switch) =
        tokio::task::block_in_place(|| group.kill_primary_and_wait_switch());
    let killed = Instant::now() - switch;
    println!("sentinels named {new_primary} {switch:?} after the SIGKILL");

    // The rival reaches the new primary (another name; its grant counts once the other
    // replica follows the new primary and acknowledges it).
    wait_for_grant(&rival, "probe").await;
    println!(
        "the rival got a grant {:?} after the SIGKILL",
        killed.elapsed()
    );
    // Then, for longer than the TTL, it finds "survivor" held: the key survived the failover,
    // and the holder's renewals reach the new primary.
    let mut refusals = 0;
    while granted.elapsed() < ttl + Duration::from_secs(1) {
        match rival.try_lock("survivor").await {
            Err(LockError::NotAcquired { .. }) => refusals += 1,
            Ok(stolen) => panic!(
                "the lock was granted again {:?} after the first grant (token {} then {})",
                granted.elapsed(),
                token_before,
                stolen.fencing_token()
            ),
            Err(err) if err.is_retryable() => {}
            Err(err) => panic!("rival: {err}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(refusals > 10, "{refusals} refusals");
    guard.check().await.unwrap_or_else(|err| {
        panic!("the holder lost its lock in the failover: {err}");
    });
    let status = rival.status("survivor").await;
    assert_eq!(
        status[0].holder.as_deref(),
        Some(guard.token()),
        "{status:?}"
    );
    println!(
        "the lock survived the failover: held {:?} after its grant, {refusals} refusals to the rival",
        granted.elapsed()
    );
    guard.release().await.unwrap();
    let next = lock_soon(&rival, "survivor").await;
    assert!(next.fencing_token() > token_before);
    next.release().await.unwrap();
    println!("test took {:?}", started.elapsed());
}
