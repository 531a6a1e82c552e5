//! One server of a lock: a lazily opened connection, every call bounded by a timeout, and a
//! fresh connection after any failure (a server that was killed, restarted or paused).
//!
//! A server is a `redis://` URL, or a Redis Sentinel service (`redis+sentinel://`, see
//! `sentinel.rs`): then each new connection goes to the primary the sentinels name; any
//! failure, a `-READONLY` reply (a primary demoted to a replica) included, drops it, and so
//! does the sentinels naming another primary (asked again at most once a second).

use std::sync::Mutex as SyncMutex;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{Client, FromRedisValue, Script};
use tokio::sync::Mutex;

use crate::error::LockError;
use crate::sentinel::{SentinelUrl, Sentinels, SENTINEL_SCHEME};

/// What a call to one server can end with, short of a reply.
#[derive(Debug)]
pub(crate) enum NodeFailure {
    /// No connection, a dropped connection, or no answer in time: the server may or may not
    /// have run the command. Also a primary demoted to a replica (`-READONLY`).
    Unreachable(String),
    /// An answer that is an error reply or of the wrong shape.
    Protocol(String),
    /// The write was done, but fewer replicas than asked acknowledged it within the time
    /// allowed (`WAIT`): it does not count.
    NotReplicated { acked: i64, needed: u32 },
}

impl NodeFailure {
    pub(crate) fn into_error(self, server: &str) -> LockError {
        match self {
            NodeFailure::Unreachable(detail) => LockError::Unreachable {
                server: server.to_string(),
                detail,
            },
            NodeFailure::Protocol(detail) => LockError::Protocol {
                server: server.to_string(),
                detail,
            },
            NodeFailure::NotReplicated { acked, needed } => LockError::NotReplicated {
                server: server.to_string(),
                acked: u32::try_from(acked.max(0)).unwrap_or(0),
                needed,
            },
        }
    }

    pub(crate) fn detail(&self) -> String {
        match self {
            NodeFailure::Unreachable(detail) | NodeFailure::Protocol(detail) => detail.clone(),
            NodeFailure::NotReplicated { acked, needed } => {
                format!("{acked} of {needed} replicas acknowledged the write")
            }
        }
    }
}

/// `WAIT replicas timeout` after a write, on the connection that wrote.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReplicaWait {
    pub(crate) replicas: u32,
    pub(crate) timeout: Duration,
}

enum Target {
    /// One server.
    Direct { client: Client, name: String },
    /// The primary of a Sentinel service.
    Sentinel(Sentinels),
}

pub(crate) struct Node {
    target: Target,
    connection: Mutex<Option<MultiplexedConnection>>,
    /// Whether the server has Latch's LOCK.* commands (asked once per connection).
    native: SyncMutex<Option<bool>>,
    /// The primary the sentinels named last (`host:port`), and when they last confirmed it.
    primary: SyncMutex<Option<(String, Instant)>>,
}

/// How often a Sentinel node asks the sentinels whether its connection still goes to the
/// primary they name (at most; only when it makes a call).
const RECHECK: Duration = Duration::from_secs(1);

impl Node {
    pub(crate) fn open(url: &str) -> Result<Node, LockError> {
        let target = if url.starts_with(SENTINEL_SCHEME) {
            Target::Sentinel(Sentinels::new(SentinelUrl::parse(url)?))
        } else if url.starts_with("rediss+sentinel://") {
            return Err(LockError::InvalidArgument(
                "rediss+sentinel:// (TLS) is not supported".into(),
            ));
        } else {
            let client = Client::open(url)
                .map_err(|err| LockError::InvalidArgument(format!("server URL {url:?}: {err}")))?;
            let name = match &client.get_connection_info().addr {
                redis::ConnectionAddr::Tcp(host, port) => format!("{host}:{port}"),
                redis::ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port}"),
                redis::ConnectionAddr::Unix(path) => path.display().to_string(),
            };
            Target::Direct { client, name }
        };
        Ok(Node {
            target,
            connection: Mutex::new(None),
            native: SyncMutex::new(None),
            primary: SyncMutex::new(None),
        })
    }

    /// The address for messages: `host:port` (no password); for a Sentinel service,
    /// `SERVICE (primary host:port)` once the sentinels named one.
    pub(crate) fn name(&self) -> String {
        match &self.target {
            Target::Direct { name, .. } => name.clone(),
            Target::Sentinel(sentinels) => {
                match self
                    .primary
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_ref()
                {
                    Some((primary, _)) => format!("{} (primary {primary})", sentinels.url.service),
                    None => sentinels.describe(),
                }
            }
        }
    }

    /// The cached connection, or a new one opened within `timeout` (for a Sentinel service:
    /// each sentinel asked, the connection and the ROLE check within `timeout` each).
    async fn connection(&self, timeout: Duration) -> Result<MultiplexedConnection, NodeFailure> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref() {
            if self.still_primary(timeout).await {
                return Ok(connection.clone());
            }
            *slot = None;
        }
        let connection = match &self.target {
            Target::Direct { client, .. } => {
                let connect = client.get_multiplexed_tokio_connection();
                match tokio::time::timeout(timeout, connect).await {
                    Ok(Ok(connection)) => connection,
                    Ok(Err(err)) => return Err(NodeFailure::Unreachable(err.to_string())),
                    Err(_) => {
                        return Err(NodeFailure::Unreachable(format!(
                            "no connection within {timeout:?}"
                        )))
                    }
                }
            }
            Target::Sentinel(sentinels) => {
                let (connection, primary) = sentinels
                    .connect_primary(timeout)
                    .await
                    .map_err(NodeFailure::Unreachable)?;
                *self.primary.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((primary, Instant::now()));
                connection
            }
        };
        *slot = Some(connection.clone());
        Ok(connection)
    }

    /// Whether the cached connection may still be used: always for a direct server. For a
    /// Sentinel service, at most once per [`RECHECK`] the sentinels are asked again, and the
    /// connection goes when they name another primary: a demoted primary that stayed up (a
    /// partition, a second failover) keeps its connections and says `master` until Sentinel
    /// reconfigures it, seconds later. When no sentinel answers, the connection stays.
    async fn still_primary(&self, timeout: Duration) -> bool {
        let Target::Sentinel(sentinels) = &self.target else {
            return true;
        };
        let current = {
            let primary = self.primary.lock().unwrap_or_else(|e| e.into_inner());
            match primary.as_ref() {
                Some((addr, checked)) if checked.elapsed() >= RECHECK => addr.clone(),
                _ => return true,
            }
        };
        match sentinels.primary_addr(timeout).await {
            Ok(named) if named != current => {
                tracing::debug!(service = %sentinels.url.service, from = %current, to = %named,
                    "the sentinels name another primary; reconnecting");
                false
            }
            _ => {
                if let Some((_, checked)) = self
                    .primary
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_mut()
                {
                    *checked = Instant::now();
                }
                true
            }
        }
    }

    /// Forgets the connection, so the next call opens a new one (and asks again whether the
    /// server has LOCK.*: a Sentinel service may have moved to another server).
    async fn reset(&self) {
        *self.connection.lock().await = None;
        *self.native.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Whether the server has Latch's native locks (`COMMAND INFO lock.acquire`), asked
    /// once and remembered until the connection is replaced. A server that cannot be asked
    /// counts as without them (the scripts work everywhere).
    pub(crate) async fn has_native_locks(&self, timeout: Duration) -> bool {
        if let Some(known) = *self.native.lock().unwrap_or_else(|e| e.into_inner()) {
            return known;
        }
        let mut ask = redis::pipe();
        ask.cmd("COMMAND").arg("INFO").arg("lock.acquire");
        let native = match self.query::<Vec<redis::Value>>(&ask, timeout).await {
            Ok(replies) => matches!(
                replies.first(),
                Some(redis::Value::Array(entries)) if matches!(entries.first(), Some(redis::Value::Array(_)))
            ),
            Err(_) => return false,
        };
        *self.native.lock().unwrap_or_else(|e| e.into_inner()) = Some(native);
        native
    }

    /// `LOCK.ACQUIRE name token ttl-ms [WAIT ms]` on a connection of its own (a wait in the
    /// server must not hold up the shared connection's other calls), then `WAIT` for
    /// replicas when asked. `Ok(Some(fencing token))` when granted, `Ok(None)` when the
    /// lock stayed taken until the wait ended. The call may last `wait` plus `timeout`.
    pub(crate) async fn native_acquire(
        &self,
        (name, token, ttl_ms): (&str, &str, u64),
        permits: Option<u64>,
        wait: Option<Duration>,
        timeout: Duration,
        replicas: Option<ReplicaWait>,
    ) -> Result<Option<u64>, NodeFailure> {
        let mut connection = match self.dedicated_connection(timeout).await {
            Ok(connection) => connection,
            Err(failure) => return self.fail(failure).await,
        };
        let mut command = redis::cmd("LOCK.ACQUIRE");
        command.arg(name).arg(token).arg(ttl_ms);
        match permits {
            None => {}
            Some(n) if n >= u64::from(u32::MAX) => {
                command.arg("SHARED");
            }
            Some(n) => {
                command.arg("PERMITS").arg(n);
            }
        }
        if let Some(wait) = wait {
            // WAIT 0 would wait without limit: at least a millisecond.
            command.arg("WAIT").arg(wait.as_millis().max(1) as u64);
        }
        let limit = wait.unwrap_or_default() + timeout;
        let call = async {
            command
                .query_async::<Option<(i64, i64)>>(&mut connection)
                .await
                .map_err(classify)
        };
        let granted = self
            .finish(tokio::time::timeout(limit, call).await, limit)
            .await?;
        let Some((fence, _)) = granted else {
            return Ok(None);
        };
        let fence = u64::try_from(fence).unwrap_or(0);
        if let Some(replicas) = replicas {
            self.await_replicas(&mut connection, replicas, timeout)
                .await?;
        }
        Ok(Some(fence))
    }

    /// A new connection, not shared, to the server (or the service's primary).
    async fn dedicated_connection(
        &self,
        timeout: Duration,
    ) -> Result<MultiplexedConnection, NodeFailure> {
        match &self.target {
            Target::Direct { client, .. } => {
                match tokio::time::timeout(timeout, client.get_multiplexed_tokio_connection()).await
                {
                    Ok(Ok(connection)) => Ok(connection),
                    Ok(Err(err)) => Err(NodeFailure::Unreachable(err.to_string())),
                    Err(_) => Err(NodeFailure::Unreachable(format!(
                        "no connection within {timeout:?}"
                    ))),
                }
            }
            Target::Sentinel(sentinels) => sentinels
                .connect_primary(timeout)
                .await
                .map(|(connection, _)| connection)
                .map_err(NodeFailure::Unreachable),
        }
    }

    /// Runs `script` with `keys` and `args`, within `timeout`.
    pub(crate) async fn run<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[&str],
        timeout: Duration,
    ) -> Result<T, NodeFailure> {
        self.run_replicated(script, keys, args, timeout, None, |_| false)
            .await
    }

    /// Runs `script` with `keys` and `args` within `timeout`; then, when `wait` is given and
    /// `wrote` says the reply means a write, `WAIT` on the same connection:
    /// [`NodeFailure::NotReplicated`] when fewer replicas than asked acknowledged it in time.
    /// (`WAIT` counts every earlier write of the connection, which other calls may share:
    /// that can only make it wait longer.)
    pub(crate) async fn run_replicated<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[&str],
        timeout: Duration,
        wait: Option<ReplicaWait>,
        wrote: impl Fn(&T) -> bool,
    ) -> Result<T, NodeFailure> {
        let (mut connection, deadline) = self.connection_until(timeout).await?;
        let call = async {
            let mut invocation = script.prepare_invoke();
            for key in keys {
                invocation.key(*key);
            }
            for arg in args {
                invocation.arg(*arg);
            }
            invocation
                .invoke_async::<T>(&mut connection)
                .await
                .map_err(classify)
        };
        let value = self
            .finish(
                tokio::time::timeout_at(deadline.into(), call).await,
                timeout,
            )
            .await?;
        if let Some(wait) = wait.filter(|_| wrote(&value)) {
            self.await_replicas(&mut connection, wait, timeout).await?;
        }
        Ok(value)
    }

    /// `WAIT replicas timeout` on `connection` after its write:
    /// [`NodeFailure::NotReplicated`] when fewer replicas acknowledged it in time.
    async fn await_replicas(
        &self,
        connection: &mut MultiplexedConnection,
        wait: ReplicaWait,
        timeout: Duration,
    ) -> Result<(), NodeFailure> {
        let wait_ms = wait.timeout.as_millis().clamp(1, u128::from(u32::MAX)) as u64;
        let limit = wait.timeout + timeout;
        let acked = async {
            redis::cmd("WAIT")
                .arg(wait.replicas)
                .arg(wait_ms)
                .query_async::<i64>(connection)
                .await
                .map_err(classify)
        };
        let acked = self
            .finish(tokio::time::timeout(limit, acked).await, limit)
            .await?;
        if acked < i64::from(wait.replicas) {
            return Err(NodeFailure::NotReplicated {
                acked,
                needed: wait.replicas,
            });
        }
        Ok(())
    }

    /// The connection for a call within `timeout`, and when the call must be answered by. A
    /// direct server's connection and command share the timeout, as they always did;
    /// asking the sentinels has budgets of its own.
    async fn connection_until(
        &self,
        timeout: Duration,
    ) -> Result<(MultiplexedConnection, Instant), NodeFailure> {
        let started = Instant::now();
        let connection = self.connection(timeout).await;
        let deadline = match self.target {
            Target::Direct { .. } => started + timeout,
            Target::Sentinel(_) => Instant::now() + timeout,
        };
        match connection {
            Ok(connection) => Ok((connection, deadline)),
            Err(failure) => self.fail(failure).await,
        }
    }

    /// Runs a plain command (or an atomic pipeline) within `timeout`.
    pub(crate) async fn query<T: FromRedisValue>(
        &self,
        pipeline: &redis::Pipeline,
        timeout: Duration,
    ) -> Result<T, NodeFailure> {
        let (mut connection, deadline) = self.connection_until(timeout).await?;
        let call = async {
            pipeline
                .query_async::<T>(&mut connection)
                .await
                .map_err(classify)
        };
        self.finish(
            tokio::time::timeout_at(deadline.into(), call).await,
            timeout,
        )
        .await
    }

    async fn finish<T>(
        &self,
        outcome: Result<Result<T, NodeFailure>, tokio::time::error::Elapsed>,
        timeout: Duration,
    ) -> Result<T, NodeFailure> {
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(failure)) => self.fail(failure).await,
            Err(_) => {
                // The reply may still come; a new connection keeps it from being read as the
                // answer to a later call.
                self.reset().await;
                Err(NodeFailure::Unreachable(format!(
                    "no reply within {timeout:?}"
                )))
            }
        }
    }

    /// Drops the connection when the failure calls for a new one: one that may be broken,
    /// and for a Sentinel service any failure (the primary may have moved).
    async fn fail<T>(&self, failure: NodeFailure) -> Result<T, NodeFailure> {
        let reset = matches!(
            (&self.target, &failure),
            (_, NodeFailure::Unreachable(_)) | (Target::Sentinel(_), NodeFailure::Protocol(_))
        );
        if reset {
            self.reset().await;
        }
        Err(failure)
    }
}

/// Server error replies are protocol failures; everything else (I/O, a closed connection) means
/// the server may not have seen the command. So are the replies of a server that cannot take
/// the write now but may soon: loading, restart delay, a replica (`READONLY`: a primary that
/// was demoted, the sentinels will name another), too few replicas (`NOREPLICAS`).
fn classify(err: redis::RedisError) -> NodeFailure {
    let unreachable = err.is_io_error()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_timeout()
        || matches!(
            err.kind(),
            redis::ErrorKind::BusyLoadingError
                | redis::ErrorKind::TryAgain
                | redis::ErrorKind::ReadOnly
                | redis::ErrorKind::MasterDown
        )
        || matches!(err.code(), Some("RESTARTDELAY" | "NOREPLICAS"));
    if unreachable {
        NodeFailure::Unreachable(err.to_string())
    } else {
        NodeFailure::Protocol(err.to_string())
    }
}
