//! One server of a lock: a lazily opened connection, every call bounded by a timeout, and a
//! fresh connection after any failure (a server that was killed, restarted or paused).

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{Client, FromRedisValue, Script};
use tokio::sync::Mutex;

use crate::error::LockError;

/// What a call to one server can end with, short of a reply.
#[derive(Debug)]
pub(crate) enum NodeFailure {
    /// No connection, a dropped connection, or no answer in time: the server may or may not
    /// have run the command.
    Unreachable(String),
    /// An answer that is an error reply or of the wrong shape.
    Protocol(String),
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
        }
    }
}

pub(crate) struct Node {
    /// The address for messages (`host:port`, no password).
    pub(crate) name: String,
    client: Client,
    connection: Mutex<Option<MultiplexedConnection>>,
}

impl Node {
    pub(crate) fn open(url: &str) -> Result<Node, LockError> {
        let client = Client::open(url)
            .map_err(|err| LockError::InvalidArgument(format!("server URL {url:?}: {err}")))?;
        let name = match &client.get_connection_info().addr {
            redis::ConnectionAddr::Tcp(host, port) => format!("{host}:{port}"),
            redis::ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port}"),
            redis::ConnectionAddr::Unix(path) => path.display().to_string(),
        };
        Ok(Node {
            name,
            client,
            connection: Mutex::new(None),
        })
    }

    /// The cached connection, or a new one opened within `timeout`.
    async fn connection(&self, timeout: Duration) -> Result<MultiplexedConnection, NodeFailure> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref() {
            return Ok(connection.clone());
        }
        let connect = self.client.get_multiplexed_tokio_connection();
        match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(connection)) => {
                *slot = Some(connection.clone());
                Ok(connection)
            }
            Ok(Err(err)) => Err(NodeFailure::Unreachable(err.to_string())),
            Err(_) => Err(NodeFailure::Unreachable(format!(
                "no connection within {timeout:?}"
            ))),
        }
    }

    /// Forgets the connection, so the next call opens a new one.
    async fn reset(&self) {
        *self.connection.lock().await = None;
    }

    /// Runs `script` with `keys` and `args`, all within `timeout`.
    pub(crate) async fn run<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[&str],
        timeout: Duration,
    ) -> Result<T, NodeFailure> {
        let call = async {
            let mut connection = self.connection(timeout).await?;
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
        self.finish(tokio::time::timeout(timeout, call).await, timeout)
            .await
    }

    /// Runs a plain command (or an atomic pipeline) within `timeout`.
    pub(crate) async fn query<T: FromRedisValue>(
        &self,
        pipeline: &redis::Pipeline,
        timeout: Duration,
    ) -> Result<T, NodeFailure> {
        let call = async {
            let mut connection = self.connection(timeout).await?;
            pipeline
                .query_async::<T>(&mut connection)
                .await
                .map_err(classify)
        };
        self.finish(tokio::time::timeout(timeout, call).await, timeout)
            .await
    }

    async fn finish<T>(
        &self,
        outcome: Result<Result<T, NodeFailure>, tokio::time::error::Elapsed>,
        timeout: Duration,
    ) -> Result<T, NodeFailure> {
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(NodeFailure::Unreachable(detail))) => {
                self.reset().await;
                Err(NodeFailure::Unreachable(detail))
            }
            Ok(Err(failure)) => Err(failure),
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
}

/// Server error replies are protocol failures; everything else (I/O, a closed connection) means
/// the server may not have seen the command.
fn classify(err: redis::RedisError) -> NodeFailure {
    let unreachable = err.is_io_error()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_timeout()
        || matches!(
            err.kind(),
            redis::ErrorKind::BusyLoadingError | redis::ErrorKind::TryAgain
        )
        || err.code() == Some("RESTARTDELAY");
    if unreachable {
        NodeFailure::Unreachable(err.to_string())
    } else {
        NodeFailure::Protocol(err.to_string())
    }
}
