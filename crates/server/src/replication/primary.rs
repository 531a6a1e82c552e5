//! Latch as a primary: a connection that sent PSYNC (or SYNC) becomes its replica's feeder.
//!
//! 1. **Partial resync** when the replica names this server's history (`replid`, or
//!    `replid2` up to `second_repl_offset`) and an offset the backlog still holds:
//!    `+CONTINUE <replid>`, then the stream from that offset.
//! 2. Otherwise a **full sync**: a snapshot cut (`persistence::snapshot::cut`, no fork),
//!    taken under every shard lock together with the replica's place in the stream, so the
//!    data and the stream after it meet exactly, and shared by every replica that asked
//!    meanwhile (`sync_job.rs`, with `repl-diskless-sync-delay`); `+FULLRESYNC <replid>
//!    <offset>`; the RDB, serialized once by a blocking thread (newlines keep the link alive
//!    meanwhile), framed as `$<length>` or, with `repl-diskless-sync` and a replica that
//!    can read it, the `$EOF:<mark>` form; then the stream.
//! 3. **Streaming**: whatever the feed gets is copied to the socket; the replica's
//!    `REPLCONF ACK <offset>` lines are read meanwhile (INFO's `offset` and `lag`, WAIT,
//!    `min-replicas-to-write`). A replica that falls behind the replica class's hard output
//!    limit, is killed (CLIENT KILL), or goes silent for `repl-timeout`, is dropped.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use latch_protocol::{RequestLimits, RequestParser};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tracing::{info, warn};

use super::feed::{Read, Registration};
use super::{state, Attached};
use crate::client::Client;
use crate::server::Server;

/// What the replica asked for.
#[derive(Debug, Clone)]
pub struct SyncRequest {
    /// PSYNC's history id and offset; `None` for the old SYNC.
    pub psync: Option<(String, i64)>,
}

/// What a replica said of itself with REPLCONF before PSYNC.
#[derive(Debug, Clone, Default)]
pub struct ReplConf {
    pub listening_port: u16,
    pub ip_address: Option<String>,
    pub capa_eof: bool,
    pub capa_psync2: bool,
    /// `rdb-filter-only`: the snapshot holds no keys, and the function libraries only when
    /// this is true (`redis-cli --functions-rdb`); `None`: the whole data set.
    pub rdb_filter_functions: Option<bool>,
}

/// The most bytes sent to a replica per write.
const SEND_CHUNK: usize = 16 * 1024;

/// Serves a replica on `stream` until it goes. `input` holds what it sent after PSYNC.
pub async fn serve<S>(
    server: &Arc<Server>,
    client: &mut Client,
    stream: &mut S,
    request: SyncRequest,
    input: BytesMut,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let replication = &server.replication;
    client
        .shared
        .role
        .store(crate::client::role::REPLICA, Ordering::Relaxed);
    let ip = client
        .replconf
        .ip_address
        .clone()
        .unwrap_or_else(|| peer_ip(&client.shared.addr));
    let attached = Arc::new(Attached {
        client_id: client.id,
        ip,
        listening_port: std::sync::atomic::AtomicU16::new(client.replconf.listening_port),
        state: std::sync::atomic::AtomicU8::new(state::WAIT_BGSAVE),
        ack_offset: std::sync::atomic::AtomicU64::new(0),
        ack_ms: std::sync::atomic::AtomicU64::new(replication.now_ms()),
    });
    replication.attached.lock().push(Arc::clone(&attached));
    let registration = match partial(server, client, &request) {
        Some(registration) => {
            let ids = replication.ids();
            let line = if client.replconf.capa_psync2 {
                format!("+CONTINUE {}\r\n", ids.replid)
            } else {
                "+CONTINUE\r\n".to_string()
            };
            replication.sync_partial_ok.fetch_add(1, Ordering::Relaxed);
            info!(
                "Partial resynchronization request from {} accepted.",
                client.shared.addr
            );
            if stream.write_all(line.as_bytes()).await.is_ok() {
                attached.state.store(state::ONLINE, Ordering::Relaxed);
                Some((registration, true))
            } else {
                server.persistence.feed.unregister(registration.id);
                None
            }
        }
        None => {
            if let Some((replid, _)) = &request.psync {
                if replid != "?" {
                    replication.sync_partial_err.fetch_add(1, Ordering::Relaxed);
                }
            }
            match client.replconf.rdb_filter_functions {
                Some(functions) => {
                    filtered_sync(server, client, stream, &request, &attached, functions).await
                }
                None => full_sync(server, client, stream, &request, &attached).await,
            }
        }
    };
    if let Some((registration, streaming)) = registration {
        attached
            .ack_ms
            .store(replication.now_ms(), Ordering::Relaxed);
        let place = Place {
            registration: &registration,
            attached: &attached,
            streaming,
        };
        stream_to(server, client, stream, place, input).await;
        server.persistence.feed.unregister(registration.id);
    }
    replication
        .attached
        .lock()
        .retain(|replica| !Arc::ptr_eq(replica, &attached));
    info!("Connection with replica {} lost.", client.shared.addr);
}

fn peer_ip(addr: &str) -> String {
    match addr.rsplit_once(':') {
        Some((ip, _)) => ip.trim_start_matches('[').trim_end_matches(']').to_string(),
        None => addr.to_string(),
    }
}

/// The stream from the replica's offset, when this server's history and backlog allow it.
fn partial(server: &Server, client: &Client, request: &SyncRequest) -> Option<Registration> {
    let (replid, offset) = request.psync.as_ref()?;
    let ids = server.replication.ids();
    let ours = *replid == ids.replid || (*replid == ids.replid2 && *offset <= ids.second_offset);
    if !ours || *offset < 0 || !server.persistence.feed.is_active() {
        return None;
    }
    let hard = super::replica_hard_limit(server);
    server
        .persistence
        .feed
        .register_from(client.id, *offset as u64, hard)
}

/// A full sync whose snapshot has no keys (and the function libraries when `functions`),
/// for a client that asked for `rdb-filter-only` (redis-cli --functions-rdb, and
/// --replica, which wants the stream only): made at once, with no cut, and followed by
/// the stream as a full sync's is.
async fn filtered_sync<S>(
    server: &Arc<Server>,
    client: &Client,
    stream: &mut S,
    request: &SyncRequest,
    attached: &Attached,
    functions: bool,
) -> Option<(Registration, bool)>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let rdb = match crate::persistence::snapshot::filtered_rdb(server, functions) {
        Ok(rdb) => rdb,
        Err(error) => {
            warn!("full sync: writing the filtered snapshot failed: {error}");
            return None;
        }
    };
    server.replication.sync_full.fetch_add(1, Ordering::Relaxed);
    let backlog_size = server.config.get_i64("repl-backlog-size").max(1) as usize;
    server.persistence.start_feed(backlog_size);
    let hard = super::replica_hard_limit(server);
    let (registration, offset, _) = server.persistence.feed.register_at_cut(client.id, hard);
    info!(
        "Full resync requested by replica {} (rdb-filter-only{}): starting at offset {offset}",
        client.shared.addr,
        if functions { " functions" } else { "" }
    );
    let diskless = server.config.get_bool("repl-diskless-sync") && client.replconf.capa_eof;
    let mark = crate::server::random_hex(40);
    let mut head = String::new();
    if request.psync.is_some() {
        let replid = server.replication.ids().replid;
        head.push_str(&format!("+FULLRESYNC {replid} {offset}\r\n"));
    }
    if diskless {
        head.push_str(&format!("$EOF:{mark}\r\n"));
    } else {
        head.push_str(&format!("${}\r\n", rdb.len()));
    }
    let tail: &[u8] = if diskless { mark.as_bytes() } else { b"" };
    attached.state.store(state::SEND_BULK, Ordering::Relaxed);
    if !write_parts(stream, &[head.as_bytes(), &rdb, tail]).await {
        server.persistence.feed.unregister(registration.id);
        return None;
    }
    server
        .stats
        .net_repl_output_bytes
        .fetch_add(rdb.len() as u64, Ordering::Relaxed);
    attached.state.store(state::ONLINE, Ordering::Relaxed);
    Some((registration, !diskless))
}

/// A full sync: the cut, `+FULLRESYNC`, the RDB. Returns the replica's place in the stream,
/// and whether the stream may follow at once: after an `$EOF:` snapshot it waits for the
/// replica's first ACK, as Redis' primary does, because the replica finds the snapshot's
/// end by the mark being the last bytes it read.
async fn full_sync<S>(
    server: &Arc<Server>,
    client: &Client,
    stream: &mut S,
    request: &SyncRequest,
    attached: &Attached,
) -> Option<(Registration, bool)>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let replication = &server.replication;
    replication.sync_full.fetch_add(1, Ordering::Relaxed);
    let backlog_size = server.config.get_i64("repl-backlog-size").max(1) as usize;
    server.persistence.start_feed(backlog_size);
    let hard = super::replica_hard_limit(server);
    let mut ticket = super::sync_job::join(server, client.id, hard, client.replconf.capa_eof);
    // Redis keeps a replica waiting for its snapshot alive with newlines, before and after
    // +FULLRESYNC.
    let mut keepalive = tokio::time::interval_at(
        tokio::time::Instant::now() + Duration::from_secs(1),
        Duration::from_secs(1),
    );
    let start = loop {
        tokio::select! {
            start = &mut ticket.start => break start,
            _ = keepalive.tick() => {
                if stream.write_all(b"\n").await.is_err() {
                    return None;
                }
            }
        }
    };
    let Ok((registration, offset, replid)) = start else {
        warn!("full sync: the snapshot could not be cut");
        return None;
    };
    info!(
        "Full resync requested by replica {}: starting at offset {offset}",
        client.shared.addr
    );
    let give_up = |registration: &Registration| {
        server.persistence.feed.unregister(registration.id);
        None
    };
    if request.psync.is_some() {
        let line = format!("+FULLRESYNC {replid} {offset}\r\n");
        if stream.write_all(line.as_bytes()).await.is_err() {
            return give_up(&registration);
        }
    }
    attached.state.store(state::SEND_BULK, Ordering::Relaxed);
    let diskless = server.config.get_bool("repl-diskless-sync") && client.replconf.capa_eof;
    // The snapshot goes out once it is whole. Sent as it was made, the sending shared the
    // core with the serializer, and clients waited for it: bench/replication.py at 1M keys,
    // the primary's slowest PING 20 ms (redis-server 5 ms) for a sync 8% faster.
    let total = loop {
        let progress = ticket.progress.borrow_and_update().clone();
        match progress.end {
            Some(Ok(total)) => break total,
            Some(Err(error)) => {
                warn!("full sync: writing the snapshot failed: {error}");
                return give_up(&registration);
            }
            None => {}
        }
        tokio::select! {
            changed = ticket.progress.changed() => {
                if changed.is_err() {
                    return give_up(&registration);
                }
            }
            _ = keepalive.tick() => {
                if stream.write_all(b"\n").await.is_err() {
                    return give_up(&registration);
                }
            }
        }
    };
    let mark = crate::server::random_hex(40);
    let head = if diskless {
        format!("$EOF:{mark}\r\n")
    } else {
        format!("${total}\r\n")
    };
    let mut finished = write_parts(stream, &[head.as_bytes()]).await;
    for chunk in ticket.rdb.chunks_from(0) {
        finished = finished && write_parts(stream, &[&chunk]).await;
    }
    if diskless {
        finished = finished && write_parts(stream, &[mark.as_bytes()]).await;
    }
    if !finished {
        return give_up(&registration);
    }
    server
        .stats
        .net_repl_output_bytes
        .fetch_add(total, Ordering::Relaxed);
    attached.state.store(state::ONLINE, Ordering::Relaxed);
    info!(
        "Synchronization with replica {} succeeded",
        client.shared.addr
    );
    Some((registration, !diskless))
}

/// A replica's place in the stream, and whether the stream flows to it yet.
struct Place<'a> {
    registration: &'a Registration,
    attached: &'a Attached,
    streaming: bool,
}

/// Writes a snapshot in pieces of [`SEND_CHUNK`], letting the worker's other connections
/// run between them: one write of megabytes into a loopback socket keeps the thread in the
/// kernel (delivering it) for tens of milliseconds, as Redis avoids by sending 16 KiB of
/// its file per turn of its loop.
async fn write_parts<S: AsyncWrite + Unpin>(stream: &mut S, parts: &[&[u8]]) -> bool {
    for part in parts {
        for piece in part.chunks(SEND_CHUNK) {
            if stream.write_all(piece).await.is_err() {
                return false;
            }
            tokio::task::yield_now().await;
        }
    }
    stream.flush().await.is_ok()
}

/// Copies the stream to the replica and reads its acknowledgements, until either side ends.
async fn stream_to<S>(
    server: &Server,
    client: &Client,
    stream: &mut S,
    place: Place<'_>,
    mut input: BytesMut,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let Place {
        registration,
        attached,
        mut streaming,
    } = place;
    let replication = &server.replication;
    let feed = &server.persistence.feed;
    let mut out = Vec::with_capacity(SEND_CHUNK);
    let mut parser = RequestParser::new();
    match take_acks(server, &mut parser, &mut input, attached) {
        None => return,
        Some(acked) => streaming |= acked,
    }
    let interrupt = crate::net::interrupted(&client.shared, server);
    tokio::pin!(interrupt);
    let mut check = tokio::time::interval(Duration::from_secs(1));
    loop {
        // What the feed holds for this replica goes out first.
        if streaming {
            loop {
                out.clear();
                match feed.read(registration.id, &mut out, SEND_CHUNK) {
                    Read::Dropped => {
                        warn!(
                            replica = %client.shared.addr,
                            "replica fell behind past its output buffer limit; dropping it"
                        );
                        return;
                    }
                    Read::Bytes(0) => break,
                    Read::Bytes(n) => {
                        server
                            .stats
                            .net_repl_output_bytes
                            .fetch_add(n as u64, Ordering::Relaxed);
                        if stream.write_all(&out).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
        if input.capacity() - input.len() < 1024 {
            input.reserve(4096);
        }
        tokio::select! {
            biased;
            _ = &mut interrupt => return,
            _ = registration.wake.notified(), if streaming => {}
            read = stream.read_buf(&mut input) => {
                match read {
                    Ok(0) | Err(_) => return,
                    Ok(_) => match take_acks(server, &mut parser, &mut input, attached) {
                        None => return,
                        Some(acked) => streaming |= acked,
                    },
                }
            }
            _ = check.tick() => {
                let timeout_ms = server.config.get_i64("repl-timeout").max(1) as u64 * 1000;
                let silent = replication
                    .now_ms()
                    .saturating_sub(attached.ack_ms.load(Ordering::Relaxed));
                if silent > timeout_ms {
                    warn!("Disconnecting timedout replica (streaming sync): {}", client.shared.addr);
                    return;
                }
            }
        }
    }
}

/// Reads the replica's REPLCONF ACK lines (and ignores what else a replica may send, as
/// Redis answers nothing to its replicas). Whether an ACK came; `None` on input that is not
/// RESP.
fn take_acks(
    server: &Server,
    parser: &mut RequestParser,
    input: &mut BytesMut,
    attached: &Attached,
) -> Option<bool> {
    let replication = &server.replication;
    let limits = RequestLimits::default();
    let mut args = Vec::new();
    let mut acked = false;
    loop {
        match parser.parse(input, &limits, &mut args) {
            Ok(true) => {}
            Ok(false) => return Some(acked),
            Err(_) => return None,
        }
        if args.len() >= 3
            && args[0].eq_ignore_ascii_case(b"REPLCONF")
            && args[1].eq_ignore_ascii_case(b"ACK")
        {
            if let Some(offset) = std::str::from_utf8(&args[2])
                .ok()
                .and_then(|text| text.parse::<u64>().ok())
            {
                acked = true;
                attached.ack_offset.fetch_max(offset, Ordering::Relaxed);
                attached
                    .ack_ms
                    .store(replication.now_ms(), Ordering::Relaxed);
                replication.acked.notify_waiters();
            }
        }
    }
}
