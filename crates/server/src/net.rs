//! Listeners and the per-connection loop: read, parse every complete command, execute each
//! through the gatekeeper, write all replies in one go (so pipelines cost one write).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use latch_keyspace::{Swept, Tick, Woken};
use latch_protocol::{Reply, RequestLimits, RequestParser, Resp};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::broadcast;
use tracing::{debug, info, warn};

use crate::client::{Client, ClientShared, UnblockReason, Waiter};
use crate::gate;
use crate::scripting;
use crate::server::Server;

/// Bytes read at a time, at least.
const READ_CHUNK: usize = 16 * 1024;
/// Most commands parsed (and prefetched) ahead of running them.
const MAX_BATCH: usize = 64;
/// Replies are flushed mid-pipeline once they grow past this.
const REPLY_FLUSH_AT: usize = 64 * 1024;

/// Binds every configured listener. Fails (naming the address) when one cannot be bound.
pub async fn bind(server: &Server) -> anyhow::Result<(Vec<TcpListener>, Option<UnixListener>)> {
    let mut tcp = Vec::new();
    let port = server.config.port();
    if port != 0 {
        for configured in server.config.bind() {
            let optional = configured.starts_with('-');
            let address = configured.trim_start_matches('-').to_string();
            let target = if address.contains(':') {
                format!("[{address}]:{port}")
            } else {
                format!("{address}:{port}")
            };
            let listener = match TcpListener::bind(&target).await {
                Ok(listener) => listener,
                Err(e) if optional => {
                    debug!(address = %target, error = %e, "skipping optional bind address");
                    continue;
                }
                Err(e) => anyhow::bail!("could not bind {target}: {e}"),
            };
            tcp.push(listener);
        }
    }
    let unix = match server.config.unixsocket() {
        Some(path) if !path.is_empty() => {
            let _ = std::fs::remove_file(&path);
            let listener = UnixListener::bind(&path)
                .map_err(|e| anyhow::anyhow!("could not bind unix socket {path}: {e}"))?;
            let perm = server.config.unixsocketperm();
            if perm != 0 {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(perm))?;
            }
            Some(listener)
        }
        _ => None,
    };
    if tcp.is_empty() && unix.is_none() {
        anyhow::bail!("no TCP port and no unix socket configured: nothing to listen on");
    }
    Ok((tcp, unix))
}

/// Accepts connections until shutdown is requested.
pub async fn serve(server: Arc<Server>, tcp: Vec<TcpListener>, unix: Option<UnixListener>) {
    tokio::spawn(crate::busy_poll::run(server.clone()));
    for listener in tcp {
        let server = server.clone();
        tokio::spawn(async move {
            let local = listener
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default();
            loop {
                match listener.accept().await {
                    Ok((stream, peer)) => {
                        let _ = stream.set_nodelay(true);
                        set_keepalive(&stream, server.config.tcp_keepalive_s());
                        let fd = raw_fd(&stream);
                        spawn_connection(
                            server.clone(),
                            stream,
                            peer.to_string(),
                            local.clone(),
                            fd,
                            false,
                        );
                    }
                    Err(e) => {
                        warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        });
    }
    if let Some(listener) = unix {
        let server = server.clone();
        tokio::spawn(async move {
            let path = server.config.unixsocket().unwrap_or_default();
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        let fd = raw_fd(&stream);
                        spawn_connection(
                            server.clone(),
                            stream,
                            format!("{path}:0"),
                            path.clone(),
                            fd,
                            true,
                        );
                    }
                    Err(e) => {
                        warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        });
    }
}

fn raw_fd<T: std::os::fd::AsRawFd>(stream: &T) -> i64 {
    stream.as_raw_fd() as i64
}

/// Turns on TCP keepalive like Redis' `anetKeepAlive`: first probe after `seconds` idle,
/// then every `seconds / 3` (at least 1), giving up after 3 unanswered probes.
fn set_keepalive(stream: &tokio::net::TcpStream, seconds: u64) {
    use std::os::fd::AsRawFd;
    if seconds == 0 {
        return;
    }
    let idle = seconds.min(i32::MAX as u64) as libc::c_int;
    let fd = stream.as_raw_fd();
    let mut ok = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
    #[cfg(target_os = "linux")]
    {
        ok = ok
            && setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, idle)
            && setsockopt_int(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_KEEPINTVL,
                (idle / 3).max(1),
            )
            && setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3);
    }
    if !ok {
        debug!(fd, "could not set TCP keepalive");
    }
}

/// `setsockopt` for an int-valued option; false when the kernel refused it.
#[allow(unsafe_code)]
fn setsockopt_int(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> bool {
    // SAFETY: `fd` is an open socket borrowed from a live TcpStream for the duration of the
    // call; the pointer and length describe `value`, a c_int on this stack frame that
    // outlives the call, which is exactly what int-valued socket options read.
    let result = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast::<libc::c_void>(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    result == 0
}

fn spawn_connection<S>(
    server: Arc<Server>,
    stream: S,
    addr: String,
    laddr: String,
    fd: i64,
    unix: bool,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    server
        .stats
        .total_connections_received
        .fetch_add(1, Ordering::Relaxed);
    tokio::spawn(async move {
        let mut stream = stream;
        let max_clients = server.config.maxclients();
        if server.clients.len() >= max_clients {
            server
                .stats
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            let _ = stream
                .write_all(b"-ERR max number of clients reached\r\n")
                .await;
            return;
        }
        connection(server, stream, addr, laddr, fd, unix).await;
    });
}

/// Serves one client until it leaves, is killed or the server shuts down. This one task
/// reads `stream` and writes it, never both at once, so the stream is used whole (the
/// halves of a `tokio::io::split` take a lock for every read and every write).
async fn connection<S>(
    server: Arc<Server>,
    mut stream: S,
    addr: String,
    laddr: String,
    fd: i64,
    unix: bool,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let user = server.acl.default_user();
    let authenticated = user.logs_in_without_password();
    let mut client = server
        .clients
        .connect(addr, laddr, fd, unix, user, authenticated);
    let id = client.id;
    debug!(id, "client connected");
    // The wait for a kill or shutdown is made once for the connection's life. Made and
    // dropped with every read, its two `Notified` took a lock each way: with that,
    // bench/instructions.sh --pipeline 1 --rows GET counted 5739 instructions per request,
    // 4979 with this.
    let shared = Arc::clone(&client.shared);
    let interrupt = interrupted(&shared, &server);
    tokio::pin!(interrupt);
    let mut input = BytesMut::with_capacity(READ_CHUNK);
    let mut reply = Reply::new(Resp::V2);
    let mut parser = RequestParser::new();
    let mut batch: Vec<Vec<Bytes>> = Vec::new();
    // The batch's table entries, when it has more than one command (`gate::prefetch`).
    let mut found: Vec<Option<&'static crate::table::Command>> = vec![None; MAX_BATCH];
    let mut monitor: Option<broadcast::Receiver<Bytes>> = None;
    let mut limits_epoch = u64::MAX;
    let mut limits = RequestLimits::default();
    let mut query_limit = 0u64;
    let mut idle_timeout = Duration::ZERO;
    'connection: loop {
        if limits_epoch != server.config.epoch() {
            limits_epoch = server.config.epoch();
            limits.max_bulk_len = server.config.proto_max_bulk_len();
            query_limit = server.config.client_query_buffer_limit();
            idle_timeout = Duration::from_secs(server.config.timeout_s());
        }
        // A big argument in flight: make room for all of it at once (bounded by the bulk
        // length limit the parser already enforced).
        let wanted = parser.pending_bulk_len().map_or(READ_CHUNK, |n| {
            (n as usize).clamp(READ_CHUNK, 64 * 1024 * 1024)
        });
        if input.capacity() - input.len() < wanted / 2 {
            input.reserve(wanted);
        }
        let is_monitor = monitor.is_some();
        let read = tokio::select! {
            biased;
            _ = &mut interrupt => break 'connection,
            read = stream.read_buf(&mut input) => read,
            line = recv_monitor(&mut monitor), if is_monitor => {
                if let Some(line) = line {
                    if stream.write_all(&line).await.is_err() {
                        break 'connection;
                    }
                }
                continue;
            }
            _ = idle(idle_timeout), if !idle_timeout.is_zero() && !is_monitor => {
                debug!(id, "closing idle client");
                break 'connection;
            }
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                crate::busy_poll::input_arrived();
                server
                    .stats
                    .net_input_bytes
                    .fetch_add(n as u64, Ordering::Relaxed);
            }
        }
        if client.shared.is_killed() {
            break;
        }
        // One clock reading for the input: its time for CLIENT LIST's idle, and the first
        // command's start.
        let arrived = Tick::now();
        client.shared.touch_at(arrived);
        let mut first_reading = Some(arrived);
        loop {
            // Parse every complete command first (up to a batch), so that their keys can be
            // prefetched together. An unauthenticated client goes one command at a time: its
            // AUTH changes the parser's limits for what follows.
            let mut parsed = 0;
            let mut parse_error = None;
            let mut drained = false;
            // While the batch runs, CLIENT LIST's `qbuf` counts it too, as Redis' query
            // buffer still holds the commands it is running.
            let unconsumed = input.len();
            while parsed < MAX_BATCH {
                if parsed == batch.len() {
                    batch.push(Vec::new());
                }
                parser.set_auth_required(!client.authenticated);
                match parser.parse(&mut input, &limits, &mut batch[parsed]) {
                    Ok(true) => parsed += 1,
                    Ok(false) => {
                        drained = true;
                        break;
                    }
                    Err(error) => {
                        parse_error = Some(error);
                        break;
                    }
                }
                if !client.authenticated {
                    break;
                }
            }
            client
                .shared
                .query_buffer
                .store(unconsumed, Ordering::Relaxed);
            if parsed > 1 {
                found[..parsed].fill(None);
                gate::prefetch(&server, &client, &batch[..parsed], &mut found[..parsed]);
            }
            // The clock reading the command before ended at (for the input's first, when it
            // arrived): the next one takes it as its start unless something between them
            // could wait (then it reads the clock).
            let mut reading = first_reading.take();
            for (index, args) in batch.iter_mut().take(parsed).enumerate() {
                let found = if parsed > 1 { found[index] } else { None };
                let ok = execute(&server, &mut client, &mut reply, args, found, reading).await;
                reading = client.reading.take();
                // Dropped now: the arguments share the input buffer's memory.
                args.clear();
                if !ok {
                    break 'connection;
                }
                let is_monitor = client.shared.monitor.load(Ordering::Relaxed);
                if is_monitor && monitor.is_none() {
                    monitor = Some(server.monitor_feed.subscribe());
                } else if !is_monitor && monitor.is_some() {
                    monitor = None;
                }
                if client.close_after_reply || client.shared.is_killed() {
                    let _ = flush(&server, &mut client, &mut stream, &mut reply).await;
                    break 'connection;
                }
                if !client.woken.is_empty() {
                    reading = None;
                    await_woken(std::mem::take(&mut client.woken), None).await;
                }
                if client.blocked.is_some() {
                    reading = None;
                    // Answer what came before, then wait; later input stays buffered.
                    if flush(&server, &mut client, &mut stream, &mut reply)
                        .await
                        .is_err()
                    {
                        break 'connection;
                    }
                    let blocked = Blocked {
                        server: &server,
                        query_limit,
                    };
                    if !blocked
                        .wait(&mut client, &mut reply, &mut stream, &mut input)
                        .await
                    {
                        break 'connection;
                    }
                }
                if reply.len() >= REPLY_FLUSH_AT {
                    reading = None;
                    if flush(&server, &mut client, &mut stream, &mut reply)
                        .await
                        .is_err()
                    {
                        break 'connection;
                    }
                }
            }
            if let Some(error) = parse_error {
                let message = error.error_reply();
                server.stats.record_error(&message);
                reply.error(&message);
                let _ = flush(&server, &mut client, &mut stream, &mut reply).await;
                debug!(id, %error, "protocol error, closing");
                break 'connection;
            }
            if drained {
                break;
            }
        }
        client
            .shared
            .query_buffer
            .store(input.len(), Ordering::Relaxed);
        if query_limit > 0 && input.len() as u64 > query_limit {
            warn!(id, "closing client that reached max query buffer length");
            break;
        }
        if !reply.is_empty() && others_are_ready() {
            // Let the other connections this worker has input for run first, and write
            // after them: replies of one round then go out together, as Redis writes its
            // replies just before it sleeps. Each write to a client that sleeps wakes it
            // (on loopback, a cross-core wake-up); writing in a burst wakes it once.
            tokio::task::yield_now().await;
        }
        if flush(&server, &mut client, &mut stream, &mut reply)
            .await
            .is_err()
        {
            break;
        }
    }
    gate::end_block(&server, &mut client);
    // Out of the client list before the socket closes, as Redis unlinks a client before it
    // closes it: a peer that saw the close never finds the client in CLIENT LIST after.
    server.clients.disconnect(id);
    let _ = stream.shutdown().await;
    debug!(id, "client disconnected");
}

/// Whether tasks are queued to run on this worker after the current one.
fn others_are_ready() -> bool {
    let Some(worker) = tokio::runtime::worker_index() else {
        return false;
    };
    with_runtime(|handle| {
        let metrics = handle.metrics();
        worker < metrics.num_workers()
            && (metrics.worker_local_queue_depth(worker) > 0 || metrics.global_queue_depth() > 0)
    })
    .unwrap_or(false)
}

/// Runs `f` with the handle of the runtime this thread belongs to (looked up once per
/// thread); `None` off any runtime.
pub(crate) fn with_runtime<R>(f: impl FnOnce(&tokio::runtime::Handle) -> R) -> Option<R> {
    thread_local! {
        static RUNTIME: std::cell::OnceCell<Option<tokio::runtime::Handle>> =
            const { std::cell::OnceCell::new() };
    }
    RUNTIME.with(|runtime| {
        runtime
            .get_or_init(|| tokio::runtime::Handle::try_current().ok())
            .as_ref()
            .map(f)
    })
}

/// Runs one command through the gatekeeper; when a script holds the server, waits (without
/// holding the thread) and runs it again. False when the connection must close meanwhile.
async fn execute(
    server: &Server,
    client: &mut Client,
    reply: &mut Reply,
    args: &[Bytes],
    found: Option<&'static crate::table::Command>,
    mut reading: Option<latch_keyspace::Tick>,
) -> bool {
    loop {
        match gate::execute(server, client, reply, args, found, reading) {
            gate::Outcome::Done => return true,
            gate::Outcome::Deferred { until_end } => {
                // After the wait, the command reads the clock itself.
                reading = None;
                tokio::select! {
                    _ = scripting::wait(&server.scripting, until_end) => {}
                    _ = interrupted(&client.shared, server) => return false,
                }
                if server.is_shutting_down() || client.shared.is_killed() {
                    return false;
                }
            }
        }
    }
}

/// Longest a command waits for the blocked clients it woke to be served before it goes on
/// (a safety net: a retry only needs shard locks, so it normally takes microseconds).
const WOKEN_WAIT_CAP: Duration = Duration::from_secs(1);

/// Lets the blocked clients a command woke run their retry before this client goes on, so
/// that (as in Redis, which serves them before the next command) what they take or push is
/// visible to this client's next command. `own`: this client's own waiter, never waited on.
async fn await_woken(woken: Vec<Woken>, own: Option<&Arc<Waiter>>) {
    // Addresses compared as integers: raw pointers would make this future !Send.
    let own = own.map(|w| Arc::as_ptr(w).cast::<()>() as usize);
    let all = async {
        for woken in &woken {
            if Some(Arc::as_ptr(&woken.waiter).cast::<()>() as usize) == own {
                continue;
            }
            if let Some(waiter) = woken.waiter.as_any().downcast_ref::<Waiter>() {
                waiter.retried_after(woken.token).await;
            }
        }
    };
    let _ = tokio::time::timeout(WOKEN_WAIT_CAP, all).await;
}

/// What ended one wait of a blocked client.
enum BlockEvent {
    Retry,
    TimedOut,
    Unblocked,
    Read,
    Close,
}

/// The wait of a client in a blocking command.
struct Blocked<'s> {
    server: &'s Server,
    query_limit: u64,
}

impl Blocked<'_> {
    /// Waits until the client's blocking command is answered (served on a retry, timed out,
    /// or ended by CLIENT UNBLOCK), reading (not running) any further input meanwhile as
    /// Redis does. False when the connection must close (peer gone, killed, shutdown).
    async fn wait<R: AsyncRead + Unpin>(
        &self,
        client: &mut Client,
        reply: &mut Reply,
        reader: &mut R,
        input: &mut BytesMut,
    ) -> bool {
        let server = self.server;
        loop {
            let Some(block) = client.blocked.as_ref() else {
                return true;
            };
            let waiter = block.waiter.clone();
            let deadline = block.deadline;
            if server.is_shutting_down() || client.shared.is_killed() {
                return false;
            }
            if input.capacity() - input.len() < READ_CHUNK / 2 {
                input.reserve(READ_CHUNK);
            }
            let event = tokio::select! {
                _ = waiter.notify.notified() => BlockEvent::Retry,
                _ = sleep_until(deadline) => BlockEvent::TimedOut,
                _ = client.shared.unblock_signal.notified() => BlockEvent::Unblocked,
                _ = interrupted(&client.shared, server) => BlockEvent::Close,
                read = reader.read_buf(input) => match read {
                    Ok(0) | Err(_) => BlockEvent::Close,
                    Ok(n) => {
                        server.stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                        BlockEvent::Read
                    }
                },
            };
            match event {
                BlockEvent::Retry => {
                    let args = block.args.clone();
                    if !execute(server, client, reply, &args, None, None).await {
                        return false;
                    }
                    await_woken(std::mem::take(&mut client.woken), Some(&waiter)).await;
                    waiter.finish_retry();
                    if client.blocked.is_none() {
                        waiter.finish();
                    }
                }
                BlockEvent::TimedOut => {
                    gate::end_block(server, client);
                    reply.null_array();
                }
                BlockEvent::Unblocked => match client.shared.take_unblock() {
                    None => {}
                    Some(UnblockReason::Timeout) => {
                        gate::end_block(server, client);
                        reply.null_array();
                    }
                    Some(UnblockReason::Error) => {
                        gate::end_block(server, client);
                        let message = b"UNBLOCKED client unblocked via CLIENT UNBLOCK";
                        server.stats.record_error(message);
                        reply.error(message);
                    }
                },
                BlockEvent::Read => {
                    client
                        .shared
                        .query_buffer
                        .store(input.len(), Ordering::Relaxed);
                    if self.query_limit > 0 && input.len() as u64 > self.query_limit {
                        warn!(
                            id = client.id,
                            "closing client that reached max query buffer length"
                        );
                        return false;
                    }
                }
                BlockEvent::Close => return false,
            }
        }
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

async fn flush<W: AsyncWrite + Unpin>(
    server: &Server,
    client: &mut Client,
    writer: &mut W,
    reply: &mut Reply,
) -> std::io::Result<()> {
    // Logged writes reach the AOF file (and the disk under `appendfsync always`) before
    // their replies leave.
    server.persistence.before_reply(client).await;
    if reply.is_empty() {
        return Ok(());
    }
    let buffer = reply.buffer();
    server
        .stats
        .net_output_bytes
        .fetch_add(buffer.len() as u64, Ordering::Relaxed);
    let result = writer.write_all(buffer).await;
    buffer.clear();
    result
}

async fn recv_monitor(monitor: &mut Option<broadcast::Receiver<Bytes>>) -> Option<Bytes> {
    match monitor {
        None => std::future::pending().await,
        Some(receiver) => loop {
            match receiver.recv().await {
                Ok(line) => return Some(line),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        },
    }
}

async fn idle(timeout: Duration) {
    tokio::time::sleep(timeout).await;
}

/// Resolves once the client is killed or the server shuts down. Both set their flag before
/// they notify, so once the first poll has put the task's waker in both queues, later polls
/// only read the flags: a notification wakes the task, which then sees its flag, whichever
/// of the task's waiting futures the notification went to (`kill` wakes one waiter). So
/// every future of this kind must be polled by the connection's own task.
async fn interrupted(shared: &ClientShared, server: &Server) {
    let kill = shared.kill_signal.notified();
    let shutdown = server.shutdown.notified();
    tokio::pin!(kill, shutdown);
    let mut waiting = false;
    std::future::poll_fn(|cx| {
        if !waiting {
            waiting = true;
            use std::future::Future;
            if kill.as_mut().poll(cx).is_ready() || shutdown.as_mut().poll(cx).is_ready() {
                return std::task::Poll::Ready(());
            }
        }
        if shared.is_killed() || server.is_shutting_down() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}

/// Background work at `hz`: the wall clock's resync, active expiry, persistence, idle
/// MIGRATE connections.
pub async fn cron(server: Arc<Server>) {
    let mut shard = 0usize;
    loop {
        let hz = server.config.hz().clamp(1, 500);
        tokio::time::sleep(Duration::from_millis(1000 / hz)).await;
        if server.is_shutting_down() {
            return;
        }
        server.keyspace.clock().resync_wall();
        crate::persistence::cron(&server);
        server.migrate_sockets.close_idle();
        if !server.active_expire.load(Ordering::Relaxed) {
            continue;
        }
        // Each tick reads a few keys of one shard after another, and more of a shard while
        // over a tenth of what it read had passed (Redis' acceptable share of stale keys).
        // It moves on to the next shard until it has read SWEEP_TICK_KEYS keys and at most
        // a tenth of them had passed, or it has been round every shard: little work while
        // keys live on, every shard while they expire in bulk. The other tasks get the
        // worker between groups of shards, so a bulk expiry never stalls clients long.
        let shards = server.keyspace.shard_count();
        let mut tick = Swept::default();
        for visited in 1..=shards {
            for _ in 0..SWEEP_ROUNDS {
                let (removed, swept) =
                    server
                        .keyspace
                        .sweep_shard(shard, SWEEP_KEYS, &mut |removed| {
                            server.persistence.log_expired(removed)
                        });
                if !removed.is_empty() {
                    server
                        .stats
                        .expired_keys
                        .fetch_add(removed.len() as u64, Ordering::Relaxed);
                }
                tick += swept;
                if swept.expired * 10 <= swept.examined {
                    break;
                }
            }
            shard = (shard + 1) % shards;
            if tick.examined >= SWEEP_TICK_KEYS && tick.expired * 10 <= tick.examined {
                break;
            }
            if visited % SWEEP_SHARDS_BETWEEN_YIELDS == 0 {
                tokio::task::yield_now().await;
            }
        }
    }
}

/// Keys the active expiry reads per database of a shard in one round.
const SWEEP_KEYS: usize = 16;
/// Most rounds for one shard in one tick, when its keys keep turning out expired.
const SWEEP_ROUNDS: usize = 16;
/// Keys a tick reads at least (unless it has been round every shard) before it stops where
/// few of them had passed: 16 shards' worth of one database, 2,560 keys a second at `hz`
/// 10. (Every shard each tick, 4,096 keys a tick, kept an idle server holding a million
/// keys with a TTL 1% busy.)
const SWEEP_TICK_KEYS: usize = 256;
/// Shards swept between two turns of the other tasks.
const SWEEP_SHARDS_BETWEEN_YIELDS: usize = 16;

/// Logs where the server listens, in one line.
pub fn log_ready(tcp: &[TcpListener], unix: &Option<UnixListener>, server: &Server) {
    let mut places: Vec<String> = tcp
        .iter()
        .filter_map(|l| l.local_addr().ok())
        .map(|a| a.to_string())
        .collect();
    if unix.is_some() {
        places.push(format!(
            "unix:{}",
            server.config.unixsocket().unwrap_or_default()
        ));
    }
    info!(
        version = env!("CARGO_PKG_VERSION"),
        "ready to accept connections on {}",
        places.join(", ")
    );
}
