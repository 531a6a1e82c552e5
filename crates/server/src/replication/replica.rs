//! Latch as a replica: the link to the primary (`REPLICAOF host port`, or `replicaof` in
//! the config), kept up by one task that reconnects every second while it is down.
//!
//! 1. **Handshake**, as Redis' replica sends it: PING, AUTH (`masteruser`/`masterauth`),
//!    `REPLCONF listening-port`, `REPLCONF ip-address` (`replica-announce-ip`),
//!    `REPLCONF capa eof capa psync2`.
//! 2. **PSYNC** with this server's history and offset when it has a backlog (a replica
//!    that synced before, or a primary turned replica: Redis' "cached master made from
//!    myself"), else `PSYNC ? -1`.
//! 3. `+CONTINUE [id]`: the stream goes on from this server's offset (a new id shifts the
//!    old one to `replid2`). `+FULLRESYNC id offset`: the RDB (`$<length>` or
//!    `$EOF:<mark>`, after any keepalive newlines) is read whole, the data flushed and the
//!    RDB loaded (keys past their deadline too: the primary expires them), and the stream
//!    starts at the primary's offset.
//! 4. **The stream** runs through the gatekeeper as the primary's link
//!    (`Client::is_primary_link`: no replies, never refused as a replica's write, keys
//!    past their deadline still there). Each command's exact bytes then go into this
//!    server's own feed, so replicas of this replica see the primary's stream, id and
//!    offsets. `REPLCONF GETACK` is answered with `REPLCONF ACK <offset>`, as is a timer
//!    every second.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::{Bytes, BytesMut};
use latch_protocol::{Reply, RequestLimits, RequestParser, Resp};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::{info, warn};

use super::{link, PrimaryAddr};
use crate::server::Server;

/// Starts replicating `primary` (REPLICAOF host port): the old link, if any, stops.
pub fn start(server: &Arc<Server>, primary: PrimaryAddr) {
    let replication = &server.replication;
    if replication.primary().as_ref() == Some(&primary) {
        return;
    }
    server.keyspace.set_replica(true);
    server.persistence.feed.set_proxy(true);
    let epoch = replication.set_primary(Some(primary.clone()));
    let _ = crate::oom_score::apply(&server.config, true);
    // Clients blocked here (BLPOP, lock waiters) were waiting on a primary.
    server.clients.unblock_all_for_role_change();
    replication
        .link
        .status
        .store(link::CONNECTING, Ordering::Relaxed);
    replication
        .link
        .down_since_ms
        .store(replication.now_ms().max(1), Ordering::Relaxed);
    server
        .config
        .set_replicaof(Some((primary.host.clone(), primary.port)));
    kill_primary_link(server);
    // Replicas of this server learn of the change by reconnecting (Redis drops them too).
    disconnect_replicas(server);
    info!("Connecting to MASTER {}:{}", primary.host, primary.port);
    info!("MASTER <-> REPLICA sync started");
    let server = Arc::clone(server);
    tokio::spawn(async move { link_loop(server, primary, epoch).await });
}

/// Stops replicating (REPLICAOF NO ONE): this server continues the primary's history
/// under a new id, keeping the old one as `replid2`, so the other replicas of the old
/// primary can continue from here with a partial resync.
pub fn stop(server: &Arc<Server>) {
    let replication = &server.replication;
    if replication.primary().is_none() {
        return;
    }
    let feed = &server.persistence.feed;
    replication.set_primary(None);
    let _ = crate::oom_score::apply(&server.config, false);
    kill_primary_link(server);
    if feed.is_active() {
        replication.shift_replid(feed.end());
    }
    feed.set_proxy(false);
    feed.reset_db();
    server.keyspace.set_replica(false);
    server.config.set_replicaof(None);
    replication.link.status.store(link::DOWN, Ordering::Relaxed);
    disconnect_replicas(server);
    info!("MASTER MODE enabled (REPLICAOF NO ONE)");
}

fn kill_primary_link(server: &Server) {
    for client in server.clients.list() {
        if client.role.load(Ordering::Relaxed) == crate::client::role::PRIMARY {
            client.kill();
        }
    }
}

fn disconnect_replicas(server: &Server) {
    let ids: Vec<u64> = server
        .replication
        .attached
        .lock()
        .iter()
        .map(|replica| replica.client_id)
        .collect();
    for client in server.clients.list() {
        if ids.contains(&client.id) {
            client.kill();
        }
    }
}

async fn link_loop(server: Arc<Server>, primary: PrimaryAddr, epoch: u64) {
    let replication = &server.replication;
    loop {
        if replication.epoch.load(Ordering::SeqCst) != epoch || server.is_shutting_down() {
            return;
        }
        match sync_and_stream(&server, &primary, epoch).await {
            Ok(()) => {}
            Err(error) => {
                warn!("{error:#} (MASTER {}:{})", primary.host, primary.port);
            }
        }
        if replication.epoch.load(Ordering::SeqCst) != epoch {
            return;
        }
        if replication.link.status.swap(link::DOWN, Ordering::Relaxed) == link::CONNECTED {
            replication
                .link
                .down_since_ms
                .store(replication.now_ms().max(1), Ordering::Relaxed);
            info!("Connection with master lost.");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The connection to the primary, with what it has read but not used yet.
struct Conn {
    stream: TcpStream,
    input: BytesMut,
}

impl Conn {
    async fn fill(&mut self, server: &Server) -> anyhow::Result<()> {
        if self.input.capacity() - self.input.len() < 16 * 1024 {
            self.input.reserve(64 * 1024);
        }
        let timeout = repl_timeout(server);
        let n = tokio::time::timeout(timeout, self.stream.read_buf(&mut self.input))
            .await
            .context("timeout reading from the primary")??;
        if n == 0 {
            bail!("the primary closed the connection");
        }
        let replication = &server.replication;
        replication
            .link
            .last_io_ms
            .store(replication.now_ms(), Ordering::Relaxed);
        server
            .stats
            .net_repl_input_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
        Ok(())
    }

    /// One line, without its CRLF (a bare LF ends one too).
    async fn line(&mut self, server: &Server) -> anyhow::Result<String> {
        loop {
            if let Some(at) = self.input.iter().position(|&b| b == b'\n') {
                let line = self.input.split_to(at + 1);
                let text = String::from_utf8_lossy(&line[..at]);
                return Ok(text.trim_end_matches('\r').to_string());
            }
            if self.input.len() > 64 * 1024 {
                bail!("a line from the primary is too long");
            }
            self.fill(server).await?;
        }
    }

    async fn command(&mut self, server: &Server, args: &[&[u8]]) -> anyhow::Result<String> {
        let mut out = Vec::new();
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        latch_persist::aof::encode_command(&mut out, &args);
        self.stream.write_all(&out).await?;
        self.line(server).await
    }
}

fn repl_timeout(server: &Server) -> Duration {
    Duration::from_secs(server.config.get_i64("repl-timeout").max(1) as u64)
}

async fn sync_and_stream(
    server: &Arc<Server>,
    primary: &PrimaryAddr,
    epoch: u64,
) -> anyhow::Result<()> {
    let replication = &server.replication;
    replication
        .link
        .status
        .store(link::CONNECTING, Ordering::Relaxed);
    let source = server.config.get("bind-source-addr").unwrap_or_default();
    let stream = tokio::time::timeout(
        repl_timeout(server),
        connect_from(&source, &primary.host, primary.port),
    )
    .await
    .context("timeout connecting to the primary")?
    .context("connecting to the primary")?;
    let _ = stream.set_nodelay(true);
    let mut conn = Conn {
        stream,
        input: BytesMut::with_capacity(64 * 1024),
    };
    handshake(server, &mut conn).await?;
    let feed = &server.persistence.feed;
    let (psync_id, psync_offset) = if feed.is_active() {
        (replication.ids().replid, (feed.end() + 1).to_string())
    } else {
        ("?".to_string(), "-1".to_string())
    };
    let handing_over = super::failover::in_progress_to(server, primary);
    let mut psync: Vec<&[u8]> = vec![b"PSYNC", psync_id.as_bytes(), psync_offset.as_bytes()];
    if handing_over {
        // This server is failing over to its replica: the replica takes over on this.
        psync.push(b"FAILOVER");
    }
    let reply = conn.command(server, &psync).await?;
    let reply = skip_newlines(server, &mut conn, reply).await?;
    if handing_over {
        if reply.starts_with("+FULLRESYNC") || reply.starts_with("+CONTINUE") {
            super::failover::finished(server);
        } else {
            super::failover::abort(server, "Failover target rejected psync request");
            bail!("Failover target rejected PSYNC: {reply}");
        }
    }
    if let Some(rest) = reply.strip_prefix("+FULLRESYNC ") {
        let mut parts = rest.split(' ');
        let (Some(replid), Some(offset)) = (parts.next(), parts.next()) else {
            bail!("unexpected reply to PSYNC: {reply}");
        };
        let offset: u64 = offset.parse().context("the offset of +FULLRESYNC")?;
        info!("Full resync from master: {replid}:{offset}");
        full_sync(server, &mut conn, replid, offset, epoch).await?;
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        let new_id = rest.trim();
        if !new_id.is_empty() {
            replication.continue_as(new_id, feed.end());
        }
        feed.reset_db();
        info!("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.");
        info!("Successful partial resynchronization with master.");
    } else {
        bail!("Unexpected reply to PSYNC from master: {reply}");
    }
    if replication.epoch.load(Ordering::SeqCst) != epoch {
        return Ok(());
    }
    let offset = feed.end();
    replication.link.processed.store(offset, Ordering::Relaxed);
    replication.link.read.store(offset, Ordering::Relaxed);
    stream_from(server, conn, epoch).await
}

/// Lines of only newlines are the primary keeping the link alive while it prepares.
async fn skip_newlines(
    server: &Server,
    conn: &mut Conn,
    mut line: String,
) -> anyhow::Result<String> {
    while line.is_empty() {
        line = conn.line(server).await?;
    }
    Ok(line)
}

async fn handshake(server: &Server, conn: &mut Conn) -> anyhow::Result<()> {
    let pong = conn.command(server, &[b"PING"]).await?;
    let auth_needed = pong.starts_with("-NOAUTH");
    if pong.starts_with('-')
        && !auth_needed
        && !pong.starts_with("-NOPERM")
        && !pong.starts_with("-ERR operation not permitted")
    {
        bail!("Error reply to PING from master: '{pong}'");
    }
    if let Some(password) = server.config.text("masterauth") {
        let reply = match server.config.text("masteruser") {
            Some(user) => {
                conn.command(server, &[b"AUTH", user.as_bytes(), password.as_bytes()])
                    .await?
            }
            None => {
                conn.command(server, &[b"AUTH", password.as_bytes()])
                    .await?
            }
        };
        if reply.starts_with('-') {
            bail!("Unable to AUTH to MASTER: {reply}");
        }
    }
    let announced = server.config.get_i64("replica-announce-port");
    let port = if announced > 0 {
        announced.to_string()
    } else {
        server.config.port().to_string()
    };
    // Errors here are not fatal: an older primary may not know the option.
    let _ = conn
        .command(server, &[b"REPLCONF", b"listening-port", port.as_bytes()])
        .await?;
    if let Some(ip) = server.config.text("replica-announce-ip") {
        let _ = conn
            .command(server, &[b"REPLCONF", b"ip-address", ip.as_bytes()])
            .await?;
    }
    let _ = conn
        .command(server, &[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])
        .await?;
    Ok(())
}

/// Reads the RDB the primary sends and loads it in place of this server's data.
async fn full_sync(
    server: &Arc<Server>,
    conn: &mut Conn,
    replid: &str,
    offset: u64,
    epoch: u64,
) -> anyhow::Result<()> {
    let replication = &server.replication;
    let first = conn.line(server).await?;
    let head = skip_newlines(server, conn, first).await?;
    let Some(size) = head.strip_prefix('$') else {
        bail!("bad bulk header from the primary: {head}");
    };
    replication
        .link
        .status
        .store(link::TRANSFER, Ordering::Relaxed);
    replication.link.transfer_read.store(0, Ordering::Relaxed);
    let rdb = if let Some(mark) = size.strip_prefix("EOF:") {
        let mark = mark.as_bytes().to_vec();
        if mark.len() != 40 {
            bail!("bad EOF mark from the primary");
        }
        replication.link.transfer_size.store(-1, Ordering::Relaxed);
        // The mark ends the snapshot; whatever follows it is the stream (Redis' primary
        // waits for an ACK before it streams, but a primary need not).
        let mut searched = 0;
        loop {
            if let Some(at) = find(&conn.input[searched..], &mark) {
                let data = conn.input.split_to(searched + at);
                let _ = conn.input.split_to(mark.len());
                break data;
            }
            searched = conn.input.len().saturating_sub(mark.len() - 1);
            conn.fill(server).await?;
            replication
                .link
                .transfer_read
                .store(conn.input.len() as u64, Ordering::Relaxed);
        }
    } else {
        let size: usize = size.parse().context("the RDB's length")?;
        replication
            .link
            .transfer_size
            .store(size as i64, Ordering::Relaxed);
        while conn.input.len() < size {
            conn.fill(server).await?;
            replication
                .link
                .transfer_read
                .store(conn.input.len().min(size) as u64, Ordering::Relaxed);
        }
        conn.input.split_to(size)
    };
    if replication.epoch.load(Ordering::SeqCst) != epoch {
        return Ok(());
    }
    info!(
        "MASTER <-> REPLICA sync: receiving {} bytes from master",
        rdb.len()
    );
    info!("MASTER <-> REPLICA sync: Loading DB in memory");
    let loader = Arc::clone(server);
    let replid_owned = replid.to_string();
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        let server = loader;
        let feed = &server.persistence.feed;
        let mut view = server.keyspace.lock_all();
        for db in 0..server.keyspace.num_dbs() {
            view.flush_db_freeing(db, true);
        }
        drop(view);
        crate::scripting::flush_functions(&server);
        server.keyspace.set_loading(true);
        let loaded = crate::persistence::snapshot::load_rdb(&server, &rdb, true);
        server.keyspace.set_loading(false);
        let loaded = loaded.context("loading the primary's RDB")?;
        let keys = loaded.keys;
        server.replication.adopt_replid(&replid_owned);
        let backlog_size = server.config.get_i64("repl-backlog-size").max(1) as usize;
        server.persistence.start_feed(backlog_size);
        feed.set_proxy(true);
        feed.reset_to(offset);
        // The stream after the snapshot is in the database the snapshot names.
        feed.set_proxy_db(loaded.repl.map_or(0, |repl| repl.db));
        info!(keys, "the primary's snapshot is loaded");
        Ok(())
    })
    .await
    .context("the loading thread failed")??;
    Ok(())
}

/// Applies the primary's stream until the link breaks or this server stops replicating.
async fn stream_from(server: &Arc<Server>, mut conn: Conn, epoch: u64) -> anyhow::Result<()> {
    let peer = conn
        .stream
        .peer_addr()
        .map(|addr| addr.to_string())
        .unwrap_or_default();
    let local = conn
        .stream
        .local_addr()
        .map(|addr| addr.to_string())
        .unwrap_or_default();
    let mut client = server.clients.connect(
        peer,
        local,
        -1,
        false,
        crate::acl::Acl::internal_user(),
        true,
    );
    client.is_primary_link = true;
    client.db = server.persistence.feed.proxy_db();
    client
        .shared
        .role
        .store(crate::client::role::PRIMARY, Ordering::Relaxed);
    let result = apply_stream(server, &mut conn, &mut client, epoch).await;
    crate::commands::transaction::discard_transaction(server, &mut client);
    server.clients.disconnect(client.id);
    result
}

async fn apply_stream(
    server: &Arc<Server>,
    conn: &mut Conn,
    client: &mut crate::client::Client,
    epoch: u64,
) -> anyhow::Result<()> {
    let replication = &server.replication;
    let feed = &server.persistence.feed;
    replication
        .link
        .status
        .store(link::CONNECTED, Ordering::Relaxed);
    info!("MASTER <-> REPLICA sync: Finished with success");
    let mut parser = RequestParser::new();
    let limits = RequestLimits::default();
    let mut reply = Reply::new(Resp::V2);
    let mut args = Vec::new();
    // Every byte read and not yet part of an applied command: the parser's unfinished
    // command (`pending` bytes it has consumed already), then the unparsed input. An
    // applied command's exact bytes go into this server's own feed.
    let mut mirror = BytesMut::from(&conn.input[..]);
    let mut pending = 0usize;
    let mut ack = tokio::time::interval(Duration::from_secs(1));
    let shared = Arc::clone(&client.shared);
    let interrupt = crate::net::interrupted(&shared, server);
    tokio::pin!(interrupt);
    let mut processed = feed.end();
    // A transaction's bytes, fed with its EXEC: a snapshot's offset never falls inside
    // one (Redis' replica does not advance its offset inside MULTI either).
    let mut held = BytesMut::new();
    send_ack(conn, processed).await?;
    loop {
        while !conn.input.is_empty() {
            let before = conn.input.len();
            let parsed = parser
                .parse(&mut conn.input, &limits, &mut args)
                .map_err(|error| anyhow::anyhow!("protocol error from the primary: {error}"))?;
            let used = before - conn.input.len();
            pending += used;
            replication
                .link
                .read
                .fetch_add(used as u64, Ordering::Relaxed);
            if !parsed {
                break;
            }
            let command = mirror.split_to(pending);
            pending = 0;
            processed += command.len() as u64;
            held.extend_from_slice(&command);
            client.primary_bytes = Some(held.split().freeze());
            if is_getack(&args) {
                send_ack(conn, processed).await?;
            } else {
                // A write's commit feeds the bytes, under the write's locks.
                run(server, client, &mut reply, &args).await;
            }
            if let Some(bytes) = client.primary_bytes.take() {
                if client.multi.is_some() {
                    held.extend_from_slice(&bytes);
                } else {
                    feed.append_raw(&bytes, client.db);
                }
            }
            replication
                .link
                .processed
                .store(processed, Ordering::Relaxed);
            if replication.epoch.load(Ordering::SeqCst) != epoch {
                return Ok(());
            }
        }
        let had = conn.input.len();
        tokio::select! {
            biased;
            _ = &mut interrupt => return Ok(()),
            filled = conn.fill(server) => filled?,
            _ = ack.tick() => send_ack(conn, processed).await?,
        }
        mirror.extend_from_slice(&conn.input[had..]);
    }
}

fn is_getack(args: &[Bytes]) -> bool {
    args.len() >= 2
        && args[0].eq_ignore_ascii_case(b"REPLCONF")
        && args[1].eq_ignore_ascii_case(b"GETACK")
}

async fn send_ack(conn: &mut Conn, offset: u64) -> anyhow::Result<()> {
    let mut out = Vec::new();
    let offset = offset.to_string();
    let args = [
        Bytes::from_static(b"REPLCONF"),
        Bytes::from_static(b"ACK"),
        Bytes::copy_from_slice(offset.as_bytes()),
    ];
    latch_persist::aof::encode_command(&mut out, &args);
    conn.stream.write_all(&out).await?;
    Ok(())
}

/// Runs one command of the primary's, dropping its reply; waits out a script that holds
/// the server or a pause, as any client would.
async fn run(
    server: &Arc<Server>,
    client: &mut crate::client::Client,
    reply: &mut Reply,
    args: &[Bytes],
) {
    loop {
        let outcome = crate::gate::execute(server, client, reply, args, None, None);
        reply.buffer().clear();
        match outcome {
            crate::gate::Outcome::Done => break,
            crate::gate::Outcome::Deferred { until_end } => {
                crate::scripting::wait(&server.scripting, until_end).await;
            }
            crate::gate::Outcome::Paused => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    if !client.woken.is_empty() {
        crate::net::await_woken(std::mem::take(&mut client.woken), None).await;
    }
    client.propagated.clear();
}

/// Where `needle` first occurs in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// Connects to `host:port`, from `source` when it is set (`bind-source-addr`: the
/// address the primary sees this replica at), as Redis' anetTcpNonBlockBindConnect.
async fn connect_from(source: &str, host: &str, port: u16) -> std::io::Result<TcpStream> {
    if source.is_empty() {
        return TcpStream::connect((host, port)).await;
    }
    let mut failure = None;
    for addr in tokio::net::lookup_host((host, port)).await? {
        let socket = if addr.is_ipv6() {
            tokio::net::TcpSocket::new_v6()?
        } else {
            tokio::net::TcpSocket::new_v4()?
        };
        let from: std::net::IpAddr = source.parse().map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad bind-source-addr")
        })?;
        if let Err(e) = socket.bind(std::net::SocketAddr::new(from, 0)) {
            failure = Some(e);
            continue;
        }
        match socket.connect(addr).await {
            Ok(stream) => return Ok(stream),
            Err(e) => failure = Some(e),
        }
    }
    Err(failure.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "no address for the primary")
    }))
}
