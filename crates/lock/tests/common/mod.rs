//! What the lock tests share: a plain client connection to look at the servers' keys.

use redis::aio::MultiplexedConnection;

/// A connection to the server at `url`, to inspect what the lock library wrote.
pub async fn connection(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .expect("server URL")
        .get_multiplexed_tokio_connection()
        .await
        .expect("connect to the test server")
}
