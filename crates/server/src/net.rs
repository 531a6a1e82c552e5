//! Listeners and the per-connection loop: read, parse every complete command, execute each
//! through the gatekeeper, write all replies in one go (so pipelines cost one write).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use latch_keyspace::{Swept, Tick, Woken};
use latch_protocol::{Reply, RequestLimits, RequestParser, Resp};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::broadcast;
use tracing::{debug, error, info, warn};

use crate::client::{Client, ClientShared, UnblockReason, Waiter};
use crate::config::BufferLimit;
use crate::gate;
use crate::scripting;
use crate::server::Server;

/// Bytes read at a time, at least.
const READ_CHUNK: usize = 16 * 1024;
/// The most a reply buffer keeps after writing what others sent its idle client: what
/// Redis keeps for every client (its 16 KiB reply buffer); more, and a burst of messages
/// to many clients (invalidations of evicted keys) would stay counted against maxmemory.
const OUTBOX_BURST_KEPT: usize = 16 * 1024;
/// Most bytes read at a time, unless a bigger argument is in flight: a client that
/// pipelines big commands runs this much of them before the worker's other connections get
/// their turn (Redis reads 16 KiB a time).
const MAX_READ: usize = 16 * 1024;
/// An input whose commands ran this long is followed by a turn for the other connections.
const LONG_INPUT_NS: u64 = 1_000_000;
/// Most commands parsed (and prefetched) ahead of running them.
const MAX_BATCH: usize = 64;
/// Replies are flushed mid-pipeline once they grow past this.
const REPLY_FLUSH_AT: usize = 64 * 1024;

/// Binds every configured listener. Fails (naming the address) when one cannot be bound.
pub async fn bind(server: &Server) -> anyhow::Result<(Vec<TcpListener>, Option<UnixListener>)> {
    let port = server.config.port();
    let tcp = match bind_tcp(port, &server.config.bind()).await {
        Ok(tcp) => tcp,
        Err((target, e)) => {
            // The lines redis-server writes; Redis' test suite looks for the second to try
            // another port.
            warn!("Warning: Could not create server TCP listening socket {target}: bind: {e}");
            warn!("Failed listening on port {port} (TCP), aborting.");
            anyhow::bail!("could not bind {target}: {e}")
        }
    };
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

/// Listens on `port` at each address (none when the port is 0). An address marked
/// optional (`-::1`) is skipped when it cannot be bound; any other failure is the target
/// and its error.
async fn bind_tcp(
    port: u16,
    addresses: &[String],
) -> Result<Vec<TcpListener>, (String, std::io::Error)> {
    let mut tcp = Vec::new();
    if port == 0 {
        return Ok(tcp);
    }
    for configured in addresses {
        let optional = configured.starts_with('-');
        let address = configured.trim_start_matches('-');
        let target = if address.contains(':') {
            format!("[{address}]:{port}")
        } else {
            format!("{address}:{port}")
        };
        match listen_on(&target).await {
            Ok(listener) => tcp.push(listener),
            Err(e) if optional => {
                debug!(address = %target, error = %e, "skipping optional bind address");
            }
            Err(e) => return Err((target, e)),
        }
    }
    Ok(tcp)
}

/// A listening socket at `target` (`host:port`), as Redis' anetTcpServer makes them:
/// SO_REUSEADDR, and an IPv6 socket only for IPv6 (so `::*` and `*` both bind on a
/// dual-stack host).
async fn listen_on(target: &str) -> std::io::Result<TcpListener> {
    let mut failure = None;
    for addr in tokio::net::lookup_host(target).await? {
        let attempt = (|| {
            let socket = if addr.is_ipv6() {
                let socket = tokio::net::TcpSocket::new_v6()?;
                use std::os::fd::AsRawFd;
                if !setsockopt_int(socket.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1) {
                    return Err(std::io::Error::last_os_error());
                }
                socket
            } else {
                tokio::net::TcpSocket::new_v4()?
            };
            socket.set_reuseaddr(true)?;
            socket.bind(addr)?;
            socket.listen(TCP_BACKLOG)
        })();
        match attempt {
            Ok(listener) => return Ok(listener),
            Err(e) => failure = Some(e),
        }
    }
    Err(failure.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to listen on")
    }))
}

/// Redis' `tcp-backlog` default.
const TCP_BACKLOG: u32 = 511;

/// The TCP listeners' accept loops, which CONFIG SET port and bind replace while the
/// server runs.
pub struct Listeners {
    running: parking_lot::Mutex<Vec<Accepting>>,
    /// The unix socket's listening descriptor, or -1.
    unix_fd: std::sync::atomic::AtomicI32,
}

impl Default for Listeners {
    fn default() -> Listeners {
        Listeners {
            running: Default::default(),
            unix_fd: std::sync::atomic::AtomicI32::new(-1),
        }
    }
}

/// One accept loop: told to stop, it drops its listener (closing the socket) and ends.
struct Accepting {
    stop: tokio::sync::oneshot::Sender<()>,
    done: tokio::task::JoinHandle<()>,
    /// The listening socket, for [`Listeners::refuse_connections`].
    fd: std::os::fd::RawFd,
}

impl Listeners {
    fn start(&self, server: &Arc<Server>, listeners: Vec<TcpListener>) {
        let mut running = self.running.lock();
        for listener in listeners {
            running.push(accept_tcp(server.clone(), listener));
        }
    }

    /// At shutdown, before any connection is closed: the listening sockets stop taking
    /// connections at once, so a client that connects after SHUTDOWN is refused, as it is
    /// once redis-server has exited (the accept loops end when they see it).
    #[allow(unsafe_code)]
    pub fn refuse_connections(&self) {
        let fds = self.running.lock().iter().map(|a| a.fd).collect::<Vec<_>>();
        let unix = self.unix_fd.load(Ordering::Relaxed);
        for fd in fds.into_iter().chain((unix >= 0).then_some(unix)) {
            // SAFETY: the descriptor belongs to a listener its accept loop still owns;
            // shutdown() only changes the socket's state, it closes nothing.
            unsafe {
                libc::shutdown(fd, libc::SHUT_RDWR);
            }
        }
    }

    /// Stops every accept loop and waits until their sockets are closed.
    async fn stop_all(&self) {
        let stopping = std::mem::take(&mut *self.running.lock());
        for accepting in stopping {
            let _ = accepting.stop.send(());
            let _ = accepting.done.await;
        }
    }
}

/// CONFIG SET port / bind, once the new values are set: listens as they say. A new port
/// alone is bound before the old listeners close, so a port in use changes nothing; new
/// addresses are bound after the old ones close (they may be among them), and the old
/// ones are bound again if that fails, as Redis does. The error is Redis' reason.
pub fn relisten(
    server: &Arc<Server>,
    old: (u16, Vec<String>),
    new: (u16, Vec<String>),
) -> Result<(), &'static str> {
    let (done, result) = std::sync::mpsc::channel();
    let task_server = server.clone();
    tokio::spawn(async move {
        let server = task_server;
        let outcome = if old.1 == new.1 {
            match bind_tcp(new.0, &new.1).await {
                Ok(listeners) => {
                    server.listeners.stop_all().await;
                    server.listeners.start(&server, listeners);
                    Ok(())
                }
                Err((target, e)) => {
                    warn!("Could not create server TCP listening socket {target}: bind: {e}");
                    Err("Unable to listen on this port")
                }
            }
        } else {
            server.listeners.stop_all().await;
            match bind_tcp(new.0, &new.1).await {
                Ok(listeners) => {
                    server.listeners.start(&server, listeners);
                    Ok(())
                }
                Err((target, e)) => {
                    warn!("Could not create server TCP listening socket {target}: bind: {e}");
                    warn!("Failed to bind, trying to restore old listening sockets.");
                    match bind_tcp(old.0, &old.1).await {
                        Ok(listeners) => server.listeners.start(&server, listeners),
                        Err((target, e)) => {
                            warn!("Failed to restore old listening socket {target}: {e}")
                        }
                    }
                    Err("Failed to bind to specified addresses.")
                }
            }
        };
        let _ = done.send(outcome);
    });
    crate::server::beside_runtime(|| {
        result
            .recv()
            .unwrap_or(Err("Failed to bind to specified addresses."))
    })
}

/// Accepts connections until shutdown is requested.
pub async fn serve(server: Arc<Server>, tcp: Vec<TcpListener>, unix: Option<UnixListener>) {
    server.listeners.start(&server, tcp);
    if let Some(listener) = unix {
        let server = server.clone();
        server
            .listeners
            .unix_fd
            .store(raw_fd(&listener) as i32, Ordering::Relaxed);
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
                    Err(_) if server.is_shutting_down() => return,
                    Err(e) => {
                        warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        });
    }
}

/// One TCP listener's accept loop, until it is told to stop.
fn accept_tcp(server: Arc<Server>, listener: TcpListener) -> Accepting {
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let fd = raw_fd(&listener) as std::os::fd::RawFd;
    let done = tokio::spawn(async move {
        let local = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        loop {
            let accepted = tokio::select! {
                _ = &mut stopped => return,
                accepted = listener.accept() => accepted,
            };
            match accepted {
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
                Err(_) if server.is_shutting_down() => return,
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    });
    Accepting { stop, done, fd }
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
        if refused_by_protected_mode(&server, &addr, unix) {
            server
                .stats
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            let _ = stream.write_all(PROTECTED_MODE_DENIED).await;
            return;
        }
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

/// What a client not on the loopback interface is told when `protected-mode` is on and the
/// default user has no password (Redis' text, which tools recognize).
const PROTECTED_MODE_DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Whether `protected-mode` turns this new connection away: it is on, the default user
/// logs in without a password, and the peer is neither a unix socket nor exactly
/// 127.0.0.1 or ::1 (Redis' test: another loopback address is refused too).
fn refused_by_protected_mode(server: &Server, addr: &str, unix: bool) -> bool {
    server.config.protected_mode()
        && !unix
        && server.acl.default_user().logs_in_without_password()
        && !is_exact_loopback(addr)
}

/// "127.0.0.1:port" or "[::1]:port".
fn is_exact_loopback(addr: &str) -> bool {
    match addr.rsplit_once(':') {
        Some((host, _)) => host == "127.0.0.1" || host == "[::1]",
        None => false,
    }
}

/// Serves one client until it leaves, is killed or the server shuts down. This one task
/// reads `stream` and writes it, never both at once, so the stream is used whole (the
/// halves of a `tokio::io::split` take a lock for every read and every write). A panic
/// costs this connection only: the client is unregistered and its waits are dropped.
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
    let client = server
        .clients
        .connect(addr, laddr, fd, unix, user, authenticated);
    let id = client.id;
    debug!(id, "client connected");
    // Out of the client list, with its waits dropped, however the connection ends: a
    // panic that escapes a command's own guard (see `execute`) unwinds through here.
    let mut client = Registered {
        server: &server,
        client,
    };
    serve_client(&server, &mut client.client, &mut stream).await;
    drop(client);
    let _ = stream.shutdown().await;
    debug!(id, "client disconnected");
}

/// A connected client, cleaned up when dropped: its blocking wait ended and its entry
/// taken out of the registry, before the socket closes (as Redis unlinks a client before
/// it closes it, so a peer that saw the close never finds the client in CLIENT LIST
/// after), and also when a panic unwinds the connection.
struct Registered<'s> {
    server: &'s Server,
    client: Client,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        gate::end_block(self.server, &mut self.client);
        let client = &mut self.client;
        if client.subscriptions.any() {
            crate::pubsub::leave_all(self.server, &client.shared, &mut client.subscriptions);
        }
        if client.tracking.on {
            self.server.tracking.disable(self.server, client);
        }
        self.server.clients.disconnect(self.client.id);
    }
}

/// The message a panic was raised with.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "(no message)".to_string()
    }
}

/// The part of a connection's memory that does not change: its two state structs and the
/// batch's table entries.
const CLIENT_FIXED_BYTES: usize = std::mem::size_of::<Client>()
    + std::mem::size_of::<crate::client::ClientShared>()
    + MAX_BATCH * std::mem::size_of::<Option<&crate::table::Command>>();
/// A query or reply buffer larger than this is reviewed (every `BUFFER_REVIEW_NS`) and
/// shrunk when the last period's peak used less than half of it (Redis'
/// PROTO_RESIZE_THRESHOLD).
const BUFFER_SHRINK_ABOVE: usize = 32 * 1024;
const BUFFER_REVIEW_NS: u64 = 100_000_000;
/// DEBUG REPLYBUFFER RESIZING: whether reviews and idleness may shrink or free a reply
/// buffer (Redis' `reply_buffer_resizing_enabled`).
pub static REPLY_RESIZING: AtomicBool = AtomicBool::new(true);
/// DEBUG REPLYBUFFER PEAK-RESET-TIME: how often, in milliseconds, a reply buffer's peak
/// starts over (-1: never); by default at every review.
pub static REPLY_PEAK_RESET_MS: AtomicI64 = AtomicI64::new(REPLY_PEAK_RESET_DEFAULT_MS);
pub const REPLY_PEAK_RESET_DEFAULT_MS: i64 = (BUFFER_REVIEW_NS / 1_000_000) as i64;
/// Room reserved ahead for an announced bulk argument, at most (the parser already checked
/// its length): the whole argument at once, as Redis sizes its query buffer for a big
/// argument, so that it is read without copies; pages not yet written take no memory.
const MAX_UPFRONT_RESERVE: usize = 64 * 1024 * 1024;

/// The limits a connection applies, read again when the configuration changes.
struct Limits {
    epoch: u64,
    request: RequestLimits,
    /// `client-query-buffer-limit` (0: none).
    query: u64,
    /// `client-output-buffer-limit` for normal clients.
    output: BufferLimit,
    /// `client-output-buffer-limit` for clients subscribed to something.
    pubsub_output: BufferLimit,
    /// `maxmemory-clients` in bytes (0: none).
    clients_memory: usize,
    idle_timeout: Duration,
}

impl Limits {
    fn new() -> Limits {
        Limits {
            epoch: u64::MAX,
            request: RequestLimits::default(),
            query: 0,
            output: BufferLimit {
                hard_bytes: 0,
                soft_bytes: 0,
                soft_seconds: 0,
            },
            pubsub_output: BufferLimit {
                hard_bytes: 0,
                soft_bytes: 0,
                soft_seconds: 0,
            },
            clients_memory: 0,
            idle_timeout: Duration::ZERO,
        }
    }

    /// How much input may wait unparsed, read while replies waited for room: the query
    /// buffer limit (Redis' default, 1 GiB, when none is known).
    fn read_ahead(&self) -> usize {
        match self.query {
            0 => 1 << 30,
            limit => limit.min(usize::MAX as u64) as usize,
        }
    }

    /// The output limit of the client's class: pubsub while it subscribes to something.
    fn output_for(&self, client: &Client) -> &BufferLimit {
        if client.subscriptions.any() {
            &self.pubsub_output
        } else {
            &self.output
        }
    }

    fn refresh(&mut self, server: &Server) {
        if self.epoch == server.config.epoch() {
            return;
        }
        self.epoch = server.config.epoch();
        self.request.max_bulk_len = server.config.proto_max_bulk_len();
        self.query = server.config.client_query_buffer_limit();
        let output_limits = server.config.client_output_buffer_limits();
        self.output = output_limits[0];
        self.pubsub_output = output_limits[crate::pubsub::PUBSUB_CLASS];
        self.clients_memory = clients_memory_limit(server);
        self.idle_timeout = Duration::from_secs(server.config.timeout_s());
    }
}

/// `maxmemory-clients` in bytes: a percentage (stored negative) is of `maxmemory`; at least
/// 128 KB, as in Redis, so that a mistake cannot lock every client out. 0: no limit.
pub fn clients_memory_limit(server: &Server) -> usize {
    let setting = server.config.maxmemory_clients();
    let maxmemory = server.config.maxmemory();
    let bytes = if setting < 0 && maxmemory > 0 {
        (maxmemory as f64 * (-setting) as f64 / 100.0) as u64
    } else if setting > 0 {
        setting as u64
    } else {
        return 0;
    };
    usize::try_from(bytes).unwrap_or(usize::MAX).max(128 * 1024)
}

/// What a connection owns besides its `Client`: its buffers and their bookkeeping.
struct Buffers {
    input: BytesMut,
    /// The input buffer's allocation as last made: its capacity shrinks as requests are
    /// taken off its front (until a reserve reclaims the room), the allocation does not.
    input_allocation: usize,
    reply: Reply,
    parser: RequestParser,
    batch: Vec<Vec<Bytes>>,
    /// The most the input and reply buffers held since their sizes were last reviewed.
    input_peak: usize,
    reply_peak: usize,
    /// When `reply_peak` last started over.
    reply_peak_since: Tick,
    last_review: Tick,
    /// When the unwritten replies first reached the soft output limit, while they stay
    /// over it.
    soft_limit_since: Option<tokio::time::Instant>,
    /// Input came in while replies waited for room ([`ReadAhead`]) and is not parsed yet.
    read_ahead: bool,
}

impl Buffers {
    /// Records what the client holds (CLIENT LIST, `maxmemory-clients`); returns the bytes
    /// its query buffer limit counts: the unparsed input, the arguments of an unfinished
    /// request and the MULTI queue.
    fn account(&self, server: &Server, client: &Client) -> u64 {
        let memory = &client.shared.memory;
        let multi = client
            .multi
            .as_ref()
            .map_or(0, crate::client::Transaction::memory);
        let batch_slots: usize = self
            .batch
            .iter()
            .map(|args| args.capacity() * std::mem::size_of::<Bytes>())
            .sum();
        memory
            .query_capacity
            .store(self.input_bytes(), Ordering::Relaxed);
        memory
            .argv
            .store(self.parser.held_argument_bytes(), Ordering::Relaxed);
        memory
            .reply_capacity
            .store(self.reply.capacity(), Ordering::Relaxed);
        memory.reply_peak.store(self.reply_peak, Ordering::Relaxed);
        let total = CLIENT_FIXED_BYTES
            + self.input_bytes()
            + self.parser.held_bytes()
            + multi
            + self.reply.capacity()
            + batch_slots
            + client.watches.memory()
            + client.subscriptions.memory()
            + client.tracking.memory();
        if memory.total.load(Ordering::Relaxed) != total {
            server.clients.account(&client.shared, total);
        }
        (self.input.len() + self.parser.held_bytes() + multi) as u64
    }

    /// What the input buffer holds allocated. While the parser holds arguments of an
    /// unfinished request, they share that allocation and are counted by the parser
    /// instead: only the room after them counts here.
    fn input_bytes(&self) -> usize {
        if self.parser.held_argument_bytes() > 0 {
            self.input.capacity()
        } else {
            self.input_allocation.max(self.input.capacity())
        }
    }

    /// Every `BUFFER_REVIEW_NS`, gives back what the last period did not need: a query or
    /// reply buffer over `BUFFER_SHRINK_ABOVE` whose peak used less than half of it is
    /// made as small as the peak (at least one read's worth).
    fn review(&mut self, now: Tick) {
        if now.nanos_since(self.last_review) < BUFFER_REVIEW_NS {
            return;
        }
        self.last_review = now;
        let input_capacity = self.input_bytes();
        if input_capacity > BUFFER_SHRINK_ABOVE && self.input_peak < input_capacity / 2 {
            let mut smaller =
                BytesMut::with_capacity(self.input_peak.max(self.input.len()).max(READ_CHUNK));
            smaller.extend_from_slice(&self.input);
            self.input = smaller;
            self.input_allocation = self.input.capacity();
        }
        let reply_capacity = self.reply.capacity();
        if REPLY_RESIZING.load(Ordering::Relaxed)
            && reply_capacity > BUFFER_SHRINK_ABOVE
            && self.reply_peak < reply_capacity / 2
            && self.reply.is_empty()
        {
            *self.reply.buffer() = BytesMut::with_capacity(self.reply_peak.max(READ_CHUNK));
        }
        self.input_peak = self.input.len();
        let reset_ms = REPLY_PEAK_RESET_MS.load(Ordering::Relaxed);
        if reset_ms >= 0 && now.nanos_since(self.reply_peak_since) >= reset_ms as u64 * 1_000_000 {
            self.reply_peak = self.reply.len();
            self.reply_peak_since = now;
        }
        self.batch
            .retain(|args| args.capacity() <= MAX_BATCH_ARGS_KEPT);
    }

    /// An idle client gives back its empty buffers (Redis frees an idle client's query
    /// buffer after 2 seconds).
    fn release_idle(&mut self) {
        if self.input.is_empty() && !self.parser.in_progress() {
            self.input = BytesMut::new();
            self.input_allocation = 0;
        }
        let resizing = REPLY_RESIZING.load(Ordering::Relaxed);
        if self.reply.is_empty() && resizing {
            *self.reply.buffer() = BytesMut::new();
        }
        self.batch.clear();
        self.batch.shrink_to_fit();
        self.input_peak = 0;
        if resizing && REPLY_PEAK_RESET_MS.load(Ordering::Relaxed) >= 0 {
            self.reply_peak = 0;
        }
    }
}

/// An argument list kept for the next batch holds at most this many slots (a huge request's
/// list is dropped after it ran).
const MAX_BATCH_ARGS_KEPT: usize = 1024;

/// How long a client must be idle before its empty buffers are freed.
pub const IDLE_BUFFERS_AFTER_S: u64 = 2;

/// The connection's loop. Returns when the client leaves, is killed or the server shuts
/// down; the caller cleans up.
async fn serve_client<S>(server: &Arc<Server>, client: &mut Client, stream: &mut S)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let id = client.id;
    // The wait for a kill or shutdown is made once for the connection's life. Made and
    // dropped with every read, its two `Notified` took a lock each way: with that,
    // bench/instructions.sh --pipeline 1 --rows GET counted 5739 instructions per request,
    // 4979 with this. It also resolves (with false) when the clients' cron asks an idle
    // client for its buffers back; it is then made anew.
    let shared = Arc::clone(&client.shared);
    let interrupt = interruption(&shared, server, true);
    tokio::pin!(interrupt);
    // Made once, as `interrupt`, and made anew each time it resolves.
    let outbox_ready = shared.outbox.ready();
    tokio::pin!(outbox_ready);
    // Receivers of what this connection's commands published, told once its reply is out.
    let mut deferred = crate::pubsub::Deferred::default();
    let mut buffers = Buffers {
        input: BytesMut::with_capacity(READ_CHUNK),
        input_allocation: READ_CHUNK,
        reply: Reply::new(Resp::V2),
        parser: RequestParser::new(),
        batch: Vec::new(),
        input_peak: 0,
        reply_peak: 0,
        last_review: Tick::now(),
        reply_peak_since: Tick::now(),
        soft_limit_since: None,
        read_ahead: false,
    };
    // The batch's table entries, when it has more than one command (`gate::prefetch`).
    let mut found: Vec<Option<&'static crate::table::Command>> = vec![None; MAX_BATCH];
    let mut monitor: Option<broadcast::Receiver<Bytes>> = None;
    let mut limits = Limits::new();
    buffers.account(server, client);
    // Until the start-up load first turns to the clients, their input waits (Redis reads
    // none before then either). The hold only ever ends, so once per connection will do.
    if crate::persistence::start_holds_clients() {
        crate::persistence::until_start_serves().await;
    }
    'connection: loop {
        limits.refresh(server);
        let Buffers {
            ref mut input,
            ref mut input_allocation,
            ref mut reply,
            ref mut parser,
            ref mut batch,
            ref mut read_ahead,
            ..
        } = buffers;
        // Input read while the last replies waited for room is parsed before reading
        // more (the socket may have nothing further to give).
        if !std::mem::take(read_ahead) {
            // A big argument in flight: make room for all of it at once (see
            // MAX_UPFRONT_RESERVE).
            let wanted = parser.pending_bulk_len().map_or(READ_CHUNK, |n| {
                (n.min(usize::MAX as u64) as usize).clamp(READ_CHUNK, MAX_UPFRONT_RESERVE)
            });
            // The argument starts at the front of the buffer: room for exactly all of it
            // (a doubling would make it count twice against maxmemory-clients). More only
            // once that is full (an argument past MAX_UPFRONT_RESERVE).
            let room = input.capacity() - input.len();
            if wanted > READ_CHUNK && input.capacity() < wanted {
                input.reserve(wanted - input.len());
                *input_allocation = input.capacity();
            } else if (wanted > READ_CHUNK && room == 0)
                || (wanted <= READ_CHUNK && room < READ_CHUNK / 2)
            {
                input.reserve(READ_CHUNK);
                *input_allocation = input.capacity();
            }
            let mut room = bytes::BufMut::limit(&mut *input, wanted.max(MAX_READ));
            let is_monitor = monitor.is_some();
            // Monitors and subscribers wait for what others send them: no idle timeout.
            let times_out =
                !limits.idle_timeout.is_zero() && !is_monitor && !client.subscriptions.any();
            // A client others send messages to lets them write to its socket while it waits.
            let mut idle = IdleOutbox::enter(
                &shared.outbox,
                shared.fd,
                client.subscriptions.any() || client.tracking.on,
            );
            let read = tokio::select! {
                biased;
                interrupted = &mut interrupt => {
                    idle.leave();
                    if interrupted {
                        break 'connection;
                    }
                    // The cron found the client idle: give its buffers back.
                    shared.trim_requested.store(false, Ordering::Relaxed);
                    if shared.idle_s() >= IDLE_BUFFERS_AFTER_S {
                        buffers.release_idle();
                        buffers.account(server, client);
                    }
                    interrupt.set(interruption(&shared, server, true));
                    continue;
                }
                read = stream.read_buf(&mut room) => {
                    idle.leave();
                    read
                }
                line = recv_monitor(&mut monitor), if is_monitor => {
                    idle.leave();
                    if let Some(line) = line {
                        if stream.write_all(&line).await.is_err() {
                            break 'connection;
                        }
                    }
                    continue;
                }
                _ = &mut outbox_ready => {
                    idle.leave();
                    outbox_ready.set(shared.outbox.ready());
                    if connections_are_ready() {
                        // Publishers queued behind us may add to what we are about to write:
                        // let them run first, and write it all at once (each write to a
                        // sleeping reader wakes it).
                        tokio::task::yield_now().await;
                    }
                    shared.outbox.take_into(reply.buffer());
                    let output_limit = limits.output_for(client);
                    if !flush(server, client, stream, reply, output_limit, &mut buffers.soft_limit_since, None, None).await {
                        break 'connection;
                    }
                    // A burst of messages (invalidations of many evicted keys, say) gives
                    // back the room it took: a client that only receives never reaches the
                    // review after input, and eviction counts what it holds.
                    if reply.capacity() > OUTBOX_BURST_KEPT {
                        *reply.buffer() = BytesMut::new();
                    }
                    continue;
                }
                _ = idle_timeout(limits.idle_timeout), if times_out => {
                    idle.leave();
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
        }
        if client.shared.is_killed() {
            break;
        }
        if shared.outbox.queued() > 0 {
            // Messages queued before this input came go out before its replies.
            shared.outbox.take_into(reply.buffer());
        }
        // One clock reading for the input: its time for CLIENT LIST's idle, and the first
        // command's start.
        let arrived = Tick::now();
        client.shared.touch_at(arrived);
        buffers.input_peak = buffers.input_peak.max(input.len());
        let mut first_reading = Some(arrived);
        // When the input's last command ended (a clock reading commands take anyway).
        let mut last_end = None;
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
                match parser.parse(input, &limits.request, &mut batch[parsed]) {
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
                gate::prefetch(server, client, &batch[..parsed], &mut found[..parsed]);
            }
            // The clock reading the command before ended at (for the input's first, when it
            // arrived): the next one takes it as its start unless something between them
            // could wait (then it reads the clock).
            let mut reading = first_reading.take();
            for (index, args) in batch.iter_mut().take(parsed).enumerate() {
                let found = if parsed > 1 { found[index] } else { None };
                // Messages sent to this client go out in the order they came relative to
                // its replies: what came before a command goes before its reply, what
                // the command caused (its own writes' invalidations) after it.
                if client.shared.outbox.queued() > 0 {
                    client.shared.outbox.take_into(reply.buffer());
                }
                let mut step = execute(
                    server,
                    client,
                    reply,
                    args,
                    found,
                    reading,
                    Some(&mut deferred),
                )
                .await;
                if step == Step::Paused {
                    deferred.wake_all();
                    let io = HeldIo {
                        input,
                        parser,
                        reply,
                        reply_peak: &mut buffers.reply_peak,
                        soft_since: &mut buffers.soft_limit_since,
                        limits: &limits,
                    };
                    step = run_held(server, client, stream, io, args, found).await;
                }
                reading = client.reading.take();
                last_end = reading.or(last_end);
                if client.shared.outbox.queued() > 0 {
                    client.shared.outbox.take_into(reply.buffer());
                }
                // Dropped now: the arguments share the input buffer's memory.
                args.clear();
                if step == Step::Close {
                    break 'connection;
                }
                if let Some(request) = client.wait_request.take() {
                    // WAIT: its reply comes when enough replicas acknowledged (or the
                    // timeout), in its place among the batch's replies.
                    deferred.wake_all();
                    reading = None;
                    let (peak, soft_since) =
                        (&mut buffers.reply_peak, &mut buffers.soft_limit_since);
                    if !flush_batch(
                        server, client, stream, reply, &limits, peak, soft_since, None,
                    )
                    .await
                    {
                        break 'connection;
                    }
                    let acked = tokio::select! {
                        acked = crate::replication::wait_for_acks(server, request) => acked,
                        _ = interrupted(&client.shared, server) => break 'connection,
                    };
                    reply.integer(acked as i64);
                }
                if let Some(request) = client.sync_request.take() {
                    // PSYNC or SYNC: this connection now feeds a replica.
                    deferred.wake_all();
                    if !flush_all(server, client, stream, reply).await {
                        break 'connection;
                    }
                    let rest = input.split();
                    crate::replication::primary::serve(server, client, stream, request, rest).await;
                    break 'connection;
                }
                if over_output_hard_limit(server, client, reply, limits.output_for(client)) {
                    break 'connection;
                }
                let is_monitor = client.shared.monitor.load(Ordering::Relaxed);
                if is_monitor && monitor.is_none() {
                    monitor = Some(server.monitor_feed.subscribe());
                } else if !is_monitor && monitor.is_some() {
                    monitor = None;
                }
                if client.close_after_reply || client.shared.is_killed() {
                    client.shared.closing.store(true, Ordering::Relaxed);
                    let _ = flush_all(server, client, stream, reply).await;
                    break 'connection;
                }
                if !client.woken.is_empty() {
                    reading = None;
                    deferred.wake_all();
                    await_woken(std::mem::take(&mut client.woken), None).await;
                }
                if client.blocked.is_some() {
                    reading = None;
                    deferred.wake_all();
                    // Answer what came before, then wait; later input stays buffered.
                    let (peak, soft_since) =
                        (&mut buffers.reply_peak, &mut buffers.soft_limit_since);
                    if !flush_batch(
                        server, client, stream, reply, &limits, peak, soft_since, None,
                    )
                    .await
                    {
                        break 'connection;
                    }
                    let blocked = Blocked {
                        server,
                        query_limit: limits.query,
                    };
                    let outbox = (&shared.outbox, outbox_ready.as_mut());
                    if !blocked
                        .wait(client, reply, stream, input, parser, outbox)
                        .await
                    {
                        break 'connection;
                    }
                }
                if reply.len() >= REPLY_FLUSH_AT {
                    reading = None;
                    deferred.wake_all();
                    let (peak, soft_since) =
                        (&mut buffers.reply_peak, &mut buffers.soft_limit_since);
                    let ahead = ReadAhead {
                        input: &mut *input,
                        limit: limits.read_ahead(),
                        read: &mut *read_ahead,
                    };
                    if !flush_batch(
                        server,
                        client,
                        stream,
                        reply,
                        &limits,
                        peak,
                        soft_since,
                        Some(ahead),
                    )
                    .await
                    {
                        break 'connection;
                    }
                }
            }
            if let Some(error) = parse_error {
                let message = error.error_reply();
                server.stats.record_error(&message);
                reply.error(&message);
                let _ = flush_all(server, client, stream, reply).await;
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
        buffers.reply_peak = buffers.reply_peak.max(buffers.reply.len());
        let held = buffers.account(server, client);
        if limits.query > 0 && held > limits.query {
            server
                .stats
                .client_query_buffer_limit_disconnections
                .fetch_add(1, Ordering::Relaxed);
            warn!(
                client = %client.shared.describe(),
                "Closing client that reached max query buffer length"
            );
            break;
        }
        if limits.clients_memory > 0
            && server.clients.memory() >= limits.clients_memory
            && server.clients.evict_over(limits.clients_memory) > 0
            && client.shared.is_killed()
        {
            break;
        }
        if !buffers.reply.is_empty()
            && crate::pubsub::take_delivering_publishes() != 1
            && others_are_ready()
        {
            // Let the other connections this worker has input for run first, and write
            // after them: replies of one round then go out together, as Redis writes its
            // replies just before it sleeps. Each write to a client that sleeps wakes it
            // (on loopback, a cross-core wake-up); writing in a burst wakes it once.
            // Not after the one PUBLISH of an unpipelined client that reached someone:
            // its subscribers are what became ready, and its reply goes first (as Redis
            // writes it before their messages), so its next request overlaps their
            // writes. A pipelined batch of publishes still yields: its subscribers then
            // take more messages per write (bench/compare.sh, docs/PERFORMANCE.md).
            deferred.wake_all();
            tokio::task::yield_now().await;
        }
        let ahead = ReadAhead {
            input: &mut buffers.input,
            limit: limits.read_ahead(),
            read: &mut buffers.read_ahead,
        };
        if !flush(
            server,
            client,
            stream,
            &mut buffers.reply,
            limits.output_for(client),
            &mut buffers.soft_limit_since,
            Some(&mut deferred),
            Some(ahead),
        )
        .await
        {
            break;
        }
        if !deferred.is_empty() {
            // The reply is out; now what the commands published. With nothing else
            // ready on this worker (no batching to wait for), written here.
            deferred.hand_on(server, !connections_are_ready());
        }
        if last_end.is_some_and(|end: Tick| end.nanos_since(arrived) >= LONG_INPUT_NS) {
            // This input took long: let the worker's other connections have their turn
            // before the next one, which may already be waiting in the socket (a client
            // pipelining big commands would otherwise hold the worker until its socket
            // runs dry, tens of milliseconds; Redis takes 16 KiB of a client's input per
            // turn). Yielding also polls for the input others sent meanwhile.
            tokio::task::yield_now().await;
        }
        buffers.review(arrived);
    }
}

/// Writes the replies made so far in the middle of a batch (before a blocking wait, or when
/// they grew past `REPLY_FLUSH_AT`), noting how much the reply buffer held for its review.
#[allow(clippy::too_many_arguments)]
async fn flush_batch<W: AsyncRead + AsyncWrite + Unpin>(
    server: &Server,
    client: &mut Client,
    writer: &mut W,
    reply: &mut Reply,
    limits: &Limits,
    reply_peak: &mut usize,
    soft_since: &mut Option<tokio::time::Instant>,
    ahead: Option<ReadAhead<'_>>,
) -> bool {
    *reply_peak = (*reply_peak).max(reply.len());
    flush(
        server,
        client,
        writer,
        reply,
        limits.output_for(client),
        soft_since,
        None,
        ahead,
    )
    .await
}

/// Whether the replies waiting to be written passed the hard output limit of normal
/// clients: the client is then closed without being sent any of them, as Redis does.
#[inline]
fn over_output_hard_limit(
    server: &Server,
    client: &Client,
    reply: &Reply,
    limit: &BufferLimit,
) -> bool {
    if limit.hard_bytes == 0 || (reply.len() as u64) < limit.hard_bytes {
        return false;
    }
    close_for_output_limit(server, client, reply);
    true
}

#[cold]
fn close_for_output_limit(server: &Server, client: &Client, reply: &Reply) {
    server
        .stats
        .client_output_buffer_limit_disconnections
        .fetch_add(1, Ordering::Relaxed);
    client
        .shared
        .memory
        .output
        .store(reply.len(), Ordering::Relaxed);
    warn!(
        client = %client.shared.describe(),
        "Client closed for overcoming of output buffer limits"
    );
}

/// Whether tasks are queued to run on this worker after the current one.
fn others_are_ready() -> bool {
    queued_besides(false)
}

/// Whether connections (not only the busy poller) are queued to run on this worker after
/// the current one.
fn connections_are_ready() -> bool {
    queued_besides(true)
}

/// Whether this worker's queue (or the global one) holds a task, not counting the busy
/// poller when `skip_poller` and it polls here.
fn queued_besides(skip_poller: bool) -> bool {
    let Some(worker) = tokio::runtime::worker_index() else {
        return false;
    };
    with_runtime(|handle| {
        let metrics = handle.metrics();
        let poller = usize::from(skip_poller && crate::busy_poll::polls_on(worker));
        worker < metrics.num_workers()
            && (metrics.worker_local_queue_depth(worker) > poller
                || metrics.global_queue_depth() > 0)
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

/// What became of a command handed to [`execute`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// It ran (or was refused): its reply is written.
    Done,
    /// The connection must close.
    Close,
    /// CLIENT PAUSE holds it: nothing ran ([`run_held`] takes over).
    Paused,
}

/// Runs one command through the gatekeeper; when a script holds the server, waits (without
/// holding the thread) and runs it again.
/// With `deferred`, the wake-ups of whoever the command delivers messages to wait there
/// (`pubsub::Deferred`) for the connection to hand them on.
async fn execute(
    server: &Server,
    client: &mut Client,
    reply: &mut Reply,
    args: &[Bytes],
    found: Option<&'static crate::table::Command>,
    mut reading: Option<latch_keyspace::Tick>,
    mut deferred: Option<&mut crate::pubsub::Deferred>,
) -> Step {
    loop {
        let before = reply.len();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            match deferred.as_deref_mut() {
                Some(deferred) => {
                    deferred.run(|| gate::execute(server, client, reply, args, found, reading))
                }
                None => gate::execute(server, client, reply, args, found, reading),
            }
        }));
        match outcome {
            Ok(gate::Outcome::Done) => return Step::Done,
            Ok(gate::Outcome::Paused) => return Step::Paused,
            Ok(gate::Outcome::Deferred { until_end }) => {
                // After the wait, the command reads the clock itself.
                reading = None;
                if let Some(deferred) = deferred.as_deref_mut() {
                    deferred.wake_all();
                }
                tokio::select! {
                    _ = scripting::wait(&server.scripting, until_end) => {}
                    _ = interrupted(&client.shared, server) => return Step::Close,
                }
                if server.is_shutting_down() || client.shared.is_killed() {
                    return Step::Close;
                }
            }
            Err(panic) => {
                // A bug costs this connection, not the server: the half-written reply is
                // dropped, the client told, the connection closed (and cleaned up).
                error!(
                    client = %client.shared.describe(),
                    command = %String::from_utf8_lossy(args.first().map_or(&b""[..], |a| &a[..])),
                    panic = %panic_text(&*panic),
                    "a command panicked; closing its client's connection"
                );
                reply.truncate(before);
                let message = COMMAND_PANICKED;
                server.stats.record_error(message);
                reply.error(message);
                client.close_after_reply = true;
                return Step::Done;
            }
        }
    }
}

/// Waits, for a connection whose command a CLIENT PAUSE holds, until the pause ends and
/// `ticket`'s turn comes (the commands held before it have run), reading (not running)
/// further input meanwhile as Redis does, so that a client that leaves is noticed (and its
/// command never runs). The client counts as blocked meanwhile (INFO `blocked_clients`,
/// CLIENT LIST flag `b`). False when the connection must close (peer gone, query buffer
/// limit, killed, shutdown).
async fn wait_out_pause<R: AsyncRead + Unpin>(
    server: &Server,
    client: &Client,
    ticket: &crate::pause::Ticket<'_>,
    reader: &mut R,
    input: &mut BytesMut,
    parser: &RequestParser,
    query_limit: u64,
) -> bool {
    struct Counted<'a>(&'a Server, &'a ClientShared);
    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.0.clients.mark_paused(self.1, false);
        }
    }
    server.clients.mark_paused(&client.shared, true);
    let _counted = Counted(server, &client.shared);
    let mut reading = PausedReader {
        server,
        client,
        reader,
        input,
        parser,
        query_limit,
    };
    loop {
        let released = server.pause.released();
        tokio::pin!(released);
        // Registered before the look, so that a release in between is not missed.
        released.as_mut().enable();
        if server.pause.ended_since(client.held_since) {
            break;
        }
        match reading.until(&mut released).await {
            Waited::Over => break,
            Waited::Read => {}
            Waited::Close => return false,
        }
    }
    let turn = ticket.my_turn();
    tokio::pin!(turn);
    loop {
        match reading.until(&mut turn).await {
            Waited::Over => return true,
            Waited::Read => {}
            Waited::Close => return false,
        }
    }
}

/// What [`run_held`] needs of the connection's buffers.
struct HeldIo<'a> {
    input: &'a mut BytesMut,
    parser: &'a RequestParser,
    reply: &'a mut Reply,
    reply_peak: &'a mut usize,
    soft_since: &'a mut Option<tokio::time::Instant>,
    limits: &'a Limits,
}

/// Runs a command CLIENT PAUSE holds ([`Step::Paused`]): answers what came before it,
/// waits for the pause's end and for the commands held before it to run (later input
/// stays buffered), then runs it; again, at the end of the line, while it is held again.
async fn run_held<S: AsyncRead + AsyncWrite + Unpin>(
    server: &Server,
    client: &mut Client,
    stream: &mut S,
    io: HeldIo<'_>,
    args: &[Bytes],
    found: Option<&'static crate::table::Command>,
) -> Step {
    let mut ticket = None;
    loop {
        let (reply_peak, soft_since) = (&mut *io.reply_peak, &mut *io.soft_since);
        if !flush_batch(
            server, client, stream, io.reply, io.limits, reply_peak, soft_since, None,
        )
        .await
        {
            return Step::Close;
        }
        // In line once answered (a client that does not read its replies must not hold up
        // the others). Taken before the old one goes: a command held again goes to the
        // end, and the line moves on behind it. Kept until the command has run.
        let place = &*ticket.insert(server.pause.ticket());
        let query_limit = io.limits.query;
        if !wait_out_pause(
            server,
            client,
            place,
            stream,
            io.input,
            io.parser,
            query_limit,
        )
        .await
        {
            return Step::Close;
        }
        let step = execute(server, client, io.reply, args, found, None, None).await;
        if step != Step::Paused {
            return step;
        }
    }
}

/// What ended one wait of a held client.
enum Waited {
    /// What it waited for happened.
    Over,
    /// Input arrived (kept for later).
    Read,
    /// The connection must close.
    Close,
}

/// A held client's connection, read while it waits.
struct PausedReader<'a, R> {
    server: &'a Server,
    client: &'a Client,
    reader: &'a mut R,
    input: &'a mut BytesMut,
    parser: &'a RequestParser,
    query_limit: u64,
}

impl<R: AsyncRead + Unpin> PausedReader<'_, R> {
    /// Waits for `event`, a kill or shutdown, or input.
    async fn until<F: std::future::Future + Unpin>(&mut self, event: &mut F) -> Waited {
        let (server, client) = (self.server, self.client);
        if server.is_shutting_down() || client.shared.is_killed() {
            return Waited::Close;
        }
        if self.input.capacity() - self.input.len() < READ_CHUNK / 2 {
            self.input.reserve(READ_CHUNK);
        }
        tokio::select! {
            _ = event => Waited::Over,
            _ = interrupted(&client.shared, server) => Waited::Close,
            read = self.reader.read_buf(self.input) => match read {
                Ok(0) | Err(_) => Waited::Close,
                Ok(n) => {
                    server.stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    client.shared.query_buffer.store(self.input.len(), Ordering::Relaxed);
                    let held = self.input.len() + self.parser.held_bytes();
                    if self.query_limit > 0 && held as u64 > self.query_limit {
                        server
                            .stats
                            .client_query_buffer_limit_disconnections
                            .fetch_add(1, Ordering::Relaxed);
                        warn!(
                            client = %client.shared.describe(),
                            "Closing client that reached max query buffer length"
                        );
                        return Waited::Close;
                    }
                    Waited::Read
                }
            },
        }
    }
}

/// What a client whose command panicked is told before its connection closes.
const COMMAND_PANICKED: &[u8] =
    b"ERR internal error: the command panicked (see the server log); closing the connection";

/// Longest a command waits for the blocked clients it woke to be served before it goes on
/// (a safety net: a retry only needs shard locks, so it normally takes microseconds).
const WOKEN_WAIT_CAP: Duration = Duration::from_secs(1);

/// Lets the blocked clients a command woke run their retry before this client goes on, so
/// that (as in Redis, which serves them before the next command) what they take or push is
/// visible to this client's next command. `own`: this client's own waiter, never waited on.
pub(crate) async fn await_woken(woken: Vec<Woken>, own: Option<&Arc<Waiter>>) {
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
    /// Others sent the client something (a message, an invalidation): it goes out now, as
    /// Redis writes pushes to a blocked RESP3 client.
    Pushed,
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
    async fn wait<'o, S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        client: &mut Client,
        reply: &mut Reply,
        stream: &mut S,
        input: &mut BytesMut,
        parser: &RequestParser,
        (outbox, mut outbox_ready): (
            &'o crate::pubsub::Outbox,
            std::pin::Pin<&mut tokio::sync::futures::Notified<'o>>,
        ),
    ) -> bool {
        let server = self.server;
        loop {
            let Some(block) = client.blocked.as_ref() else {
                return true;
            };
            let waiter = block.waiter.clone();
            let deadline = block.deadline;
            let recheck_at = block.recheck_at;
            if server.is_shutting_down() || client.shared.is_killed() {
                return false;
            }
            if input.capacity() - input.len() < READ_CHUNK / 2 {
                input.reserve(READ_CHUNK);
            }
            let event = tokio::select! {
                _ = waiter.notify.notified() => BlockEvent::Retry,
                _ = sleep_until(deadline) => BlockEvent::TimedOut,
                _ = sleep_until(recheck_at) => BlockEvent::Retry,
                _ = client.shared.unblock_signal.notified() => BlockEvent::Unblocked,
                _ = interrupted(&client.shared, server) => BlockEvent::Close,
                _ = &mut outbox_ready => BlockEvent::Pushed,
                read = stream.read_buf(input) => match read {
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
                    // Never `Paused`: the gatekeeper does not hold a blocked client's retry.
                    if execute(server, client, reply, &args, None, None, None).await == Step::Close
                    {
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
                        gate::end_block_failed(server, client);
                        let message = b"UNBLOCKED client unblocked via CLIENT UNBLOCK";
                        server.stats.record_error(message);
                        reply.error(message);
                    }
                    Some(UnblockReason::RoleChange) => {
                        gate::end_block_failed(server, client);
                        let message = b"UNBLOCKED force unblock from blocking operation, \
                                        instance state changed (master -> replica?)";
                        server.stats.record_error(message);
                        reply.error(message);
                        let _ = stream.write_all(reply.buffer()).await;
                        reply.buffer().clear();
                        return false;
                    }
                },
                BlockEvent::Read => {
                    client
                        .shared
                        .query_buffer
                        .store(input.len(), Ordering::Relaxed);
                    let held = input.len() + parser.held_bytes();
                    if self.query_limit > 0 && held as u64 > self.query_limit {
                        server
                            .stats
                            .client_query_buffer_limit_disconnections
                            .fetch_add(1, Ordering::Relaxed);
                        warn!(
                            client = %client.shared.describe(),
                            "Closing client that reached max query buffer length"
                        );
                        return false;
                    }
                }
                BlockEvent::Pushed => {
                    outbox_ready.set(outbox.ready());
                    outbox.take_into(reply.buffer());
                    if !reply.is_empty() {
                        server
                            .stats
                            .net_output_bytes
                            .fetch_add(reply.len() as u64, Ordering::Relaxed);
                        let written = stream.write_all(reply.buffer()).await;
                        reply.buffer().clear();
                        if written.is_err() {
                            return false;
                        }
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

/// Writes the replies out. False when the connection must close: the peer is gone, the
/// client was killed (or the server shuts down) while its replies waited for room in the
/// socket, or they stayed over the soft output limit (`limit`) for longer than it allows.
/// `soft_since` is when they first reached that limit.
#[allow(clippy::too_many_arguments)]
async fn flush<W: AsyncRead + AsyncWrite + Unpin>(
    server: &Server,
    client: &mut Client,
    writer: &mut W,
    reply: &mut Reply,
    limit: &BufferLimit,
    soft_since: &mut Option<tokio::time::Instant>,
    deferred: Option<&mut crate::pubsub::Deferred>,
    ahead: Option<ReadAhead<'_>>,
) -> bool {
    // Logged writes reach the AOF file (and the disk under `appendfsync always`) before
    // their replies leave.
    server.persistence.before_reply(client).await;
    if reply.is_empty() {
        client.shared.outbox.written();
        return true;
    }
    let buffer = reply.buffer();
    server
        .stats
        .net_output_bytes
        .fetch_add(buffer.len() as u64, Ordering::Relaxed);
    // Most writes take everything at once: tried first without waiting.
    let attempt = std::future::poll_fn(|cx| {
        match std::pin::Pin::new(&mut *writer).poll_write(cx, &buffer[..]) {
            std::task::Poll::Ready(result) => std::task::Poll::Ready(Some(result)),
            std::task::Poll::Pending => std::task::Poll::Ready(None),
        }
    })
    .await;
    let written = match attempt {
        Some(Ok(n)) if n == buffer.len() => {
            buffer.clear();
            *soft_since = None;
            client.shared.outbox.written();
            return true;
        }
        Some(Ok(0)) | Some(Err(_)) => {
            buffer.clear();
            client.shared.outbox.written();
            return false;
        }
        Some(Ok(n)) => n,
        None => 0,
    };
    // The client does not read fast enough: whoever the commands published to is not kept
    // waiting for it.
    if let Some(deferred) = deferred {
        deferred.wake_all();
    }
    flush_rest(
        server, client, writer, buffer, written, limit, soft_since, ahead,
    )
    .await
}

/// Where input read while replies wait for room goes. A client that writes a whole
/// pipeline before it reads any reply (redis-py's `execute`, Redis' own tests) would
/// otherwise wait on the server while the server waits on it, once both directions' socket
/// buffers are full; Redis keeps reading and buffers the replies, Latch keeps reading and
/// buffers the requests, up to the query buffer limit.
pub(crate) struct ReadAhead<'a> {
    input: &'a mut BytesMut,
    /// Reading stops once the input holds this much.
    limit: usize,
    /// Set when anything was read.
    read: &'a mut bool,
}

/// What a wait for room in the socket saw first.
enum Io {
    Wrote(std::io::Result<usize>),
    Read(std::io::Result<usize>),
}

/// The rest of [`flush`], when the socket did not take everything at once: the client
/// does not read (or not fast enough). Waits for room, a kill, or the end of the time the
/// soft output limit allows.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
async fn flush_rest<W: AsyncRead + AsyncWrite + Unpin>(
    server: &Server,
    client: &mut Client,
    writer: &mut W,
    buffer: &mut BytesMut,
    mut written: usize,
    limit: &BufferLimit,
    soft_since: &mut Option<tokio::time::Instant>,
    mut ahead: Option<ReadAhead<'_>>,
) -> bool {
    // What it has to write is stuck, not on its way out: eviction counts it.
    client.shared.outbox.stalled(true);
    let finished = loop {
        if written == buffer.len() {
            break true;
        }
        let pending = buffer.len() - written;
        let memory = &client.shared.memory;
        memory.output.store(pending, Ordering::Relaxed);
        let counted = memory
            .reply_capacity
            .swap(buffer.capacity(), Ordering::Relaxed);
        let mut total = memory.total.load(Ordering::Relaxed) + buffer.capacity();
        let mut uncounted = counted;
        // Input read ahead meanwhile is the client's memory too (Redis would have run it
        // and held its replies instead).
        if let Some(ahead) = ahead.as_ref() {
            let capacity = ahead.input.capacity();
            uncounted += memory.query_capacity.swap(capacity, Ordering::Relaxed);
            total += capacity;
        }
        server
            .clients
            .account(&client.shared, total.saturating_sub(uncounted));
        let clients_limit = clients_memory_limit(server);
        if clients_limit > 0
            && server.clients.evict_over(clients_limit) > 0
            && client.shared.is_killed()
        {
            break false;
        }
        let allowed = Duration::from_secs(limit.soft_seconds.max(0) as u64);
        let over_soft = limit.soft_bytes > 0 && pending as u64 >= limit.soft_bytes;
        if !over_soft {
            *soft_since = None;
        } else if soft_since.is_some_and(|since| since.elapsed() > allowed) {
            server
                .stats
                .client_output_buffer_limit_disconnections
                .fetch_add(1, Ordering::Relaxed);
            warn!(
                client = %client.shared.describe(),
                "Client closed for overcoming of output buffer limits"
            );
            break false;
        }
        let deadline = over_soft.then(|| {
            *soft_since.get_or_insert_with(tokio::time::Instant::now)
                + allowed
                + Duration::from_millis(1)
        });
        // Room in the socket, or input to read ahead, whichever comes first.
        let io = std::future::poll_fn(|cx| {
            use std::task::Poll;
            if let Poll::Ready(result) =
                std::pin::Pin::new(&mut *writer).poll_write(cx, &buffer[written..])
            {
                return Poll::Ready(Io::Wrote(result));
            }
            if let Some(ahead) = ahead
                .as_mut()
                .filter(|ahead| ahead.input.len() < ahead.limit)
            {
                if ahead.input.capacity() - ahead.input.len() < READ_CHUNK / 2 {
                    ahead.input.reserve(READ_CHUNK);
                }
                // A read_buf future is cancel-safe: made and dropped within one poll, it
                // loses nothing.
                let read = std::future::Future::poll(
                    std::pin::pin!(writer.read_buf(&mut *ahead.input)),
                    cx,
                );
                if let Poll::Ready(result) = read {
                    return Poll::Ready(Io::Read(result));
                }
            }
            Poll::Pending
        });
        tokio::select! {
            _ = interrupted(&client.shared, server) => break false,
            _ = sleep_until(deadline) => {}
            io = io => match io {
                Io::Wrote(Ok(0) | Err(_)) => break false,
                Io::Wrote(Ok(n)) => written += n,
                // The client stopped sending (or its side failed): it may still read.
                Io::Read(Ok(0) | Err(_)) => ahead = None,
                Io::Read(Ok(n)) => {
                    server
                        .stats
                        .net_input_bytes
                        .fetch_add(n as u64, Ordering::Relaxed);
                    if let Some(ahead) = ahead.as_mut() {
                        *ahead.read = true;
                    }
                }
            },
        }
    };
    if finished {
        *soft_since = None;
    }
    client.shared.memory.output.store(0, Ordering::Relaxed);
    buffer.clear();
    client.shared.outbox.stalled(false);
    client.shared.outbox.written();
    finished
}

/// Writes what is left before the connection closes (no output limit applies).
async fn flush_all<W: AsyncRead + AsyncWrite + Unpin>(
    server: &Server,
    client: &mut Client,
    writer: &mut W,
    reply: &mut Reply,
) -> bool {
    let unlimited = BufferLimit {
        hard_bytes: 0,
        soft_bytes: 0,
        soft_seconds: 0,
    };
    flush(
        server, client, writer, reply, &unlimited, &mut None, None, None,
    )
    .await
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

async fn idle_timeout(timeout: Duration) {
    tokio::time::sleep(timeout).await;
}

/// A connection waiting for input with nothing to write, whose socket others may write
/// their messages to meanwhile (`pubsub::Outbox::idle`). Left (under the outbox's lock)
/// before the connection writes anything or closes the socket, and when dropped.
struct IdleOutbox<'a>(Option<&'a crate::pubsub::Outbox>);

impl<'a> IdleOutbox<'a> {
    /// Enters the state when `wanted` and nothing is queued (else the connection is woken
    /// to take it).
    fn enter(outbox: &'a crate::pubsub::Outbox, fd: i64, wanted: bool) -> IdleOutbox<'a> {
        let fd = i32::try_from(fd).unwrap_or(-1);
        IdleOutbox((wanted && fd >= 0 && outbox.idle(fd)).then_some(outbox))
    }

    fn leave(&mut self) {
        if let Some(outbox) = self.0.take() {
            outbox.busy();
        }
    }
}

impl Drop for IdleOutbox<'_> {
    fn drop(&mut self) {
        self.leave();
    }
}

/// Resolves once the client is killed or the server shuts down.
pub(crate) async fn interrupted(shared: &ClientShared, server: &Server) {
    interruption(shared, server, false).await;
}

/// Resolves with true once the client is killed or the server shuts down, and, when
/// `trims`, with false once the clients' cron asks the connection to give back its idle
/// buffers. Kill and shutdown set their flag before they notify, so once the first poll
/// has put the task's waker in the queues, later polls only read the flags: a notification
/// wakes the task, which then sees its flag, whichever of the task's waiting futures the
/// notification went to (`kill` wakes one waiter). So every future of this kind must be
/// polled by the connection's own task.
async fn interruption(shared: &ClientShared, server: &Server, trims: bool) -> bool {
    let kill = shared.kill_signal.notified();
    let shutdown = server.shutdown.notified();
    let trim = shared.trim_signal.notified();
    tokio::pin!(kill, shutdown, trim);
    let mut waiting = false;
    std::future::poll_fn(|cx| {
        if !waiting {
            waiting = true;
            use std::future::Future;
            if kill.as_mut().poll(cx).is_ready() || shutdown.as_mut().poll(cx).is_ready() {
                return std::task::Poll::Ready(true);
            }
            if trims && trim.as_mut().poll(cx).is_ready() {
                return std::task::Poll::Ready(false);
            }
        }
        if shared.is_killed() || server.is_shutting_down() {
            std::task::Poll::Ready(true)
        } else if trims && shared.trim_requested.load(Ordering::Relaxed) {
            std::task::Poll::Ready(false)
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}

/// Asks every client idle for `IDLE_BUFFERS_AFTER_S` that still holds buffers to give
/// them back (its connection does it: it owns them).
fn release_idle_buffers(server: &Server) {
    for client in server.clients.list() {
        let memory = &client.memory;
        let holds = memory.query_capacity.load(Ordering::Relaxed) > 0
            || memory.reply_capacity.load(Ordering::Relaxed) > 0;
        if holds
            && client.idle_s() >= IDLE_BUFFERS_AFTER_S
            && !client.trim_requested.swap(true, Ordering::Relaxed)
        {
            client.trim_signal.notify_one();
        }
    }
}

/// Background work at `hz`: the wall clock's resync, active expiry, persistence, idle
/// MIGRATE connections.
pub async fn cron(server: Arc<Server>) {
    let mut shard = 0usize;
    loop {
        let hz = server.config.hz().clamp(1, 500);
        tokio::time::sleep(Duration::from_millis(1000 / hz)).await;
        if server.cron_paused.load(Ordering::Relaxed) {
            continue;
        }
        crate::shutdown::run_pending(&server).await;
        if server.is_shutting_down() {
            return;
        }
        server.keyspace.clock().resync_wall();
        // A running script holds shards the duties below would wait for (Redis runs no
        // cron while a script runs): they wait for the next tick after it.
        if server.scripting.run.is_running() {
            continue;
        }
        crate::persistence::cron(&server);
        server.migrate_sockets.close_idle();
        release_idle_buffers(&server);
        server.tracking.cron(&server);
        // A CLIENT PAUSE holds the dataset still: nothing expires until it ends.
        if !server.active_expire.load(Ordering::Relaxed)
            || server.keyspace.expiry_held_at(Tick::now())
        {
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
        // The longest stretch of sweeping without a yield: the latency monitor's
        // `expire-cycle` (Redis' cycle never yields, so its whole cycle is that stretch).
        let mut stretch = std::time::Instant::now();
        let mut longest = Duration::ZERO;
        for visited in 1..=shards {
            for _ in 0..SWEEP_ROUNDS {
                let (removed, swept) =
                    server
                        .keyspace
                        .sweep_shard(shard, SWEEP_KEYS, &mut |removed| {
                            server.persistence.log_expired(removed);
                            server.tracking.expired(&server, removed);
                            crate::pubsub::notify::expired(&server, removed);
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
                longest = longest.max(stretch.elapsed());
                tokio::task::yield_now().await;
                stretch = std::time::Instant::now();
            }
        }
        longest = longest.max(stretch.elapsed());
        crate::commands::server::record_latency(
            &server,
            "expire-cycle",
            longest.as_millis() as u64,
        );
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

/// What runs beside the connections once the data set is loaded: busy polling and
/// replication (its cron, and the link to the primary `replicaof` names).
pub fn start_duties(server: &Arc<Server>) {
    tokio::spawn(crate::busy_poll::run(server.clone()));
    tokio::spawn(crate::replication::cron(server.clone()));
    if let Some((host, port)) = server.config.replicaof() {
        crate::replication::replica::start(server, crate::replication::PrimaryAddr { host, port });
    }
}

/// Where the server listens, for the log.
pub fn listening_places(
    tcp: &[TcpListener],
    unix: &Option<UnixListener>,
    server: &Server,
) -> Vec<String> {
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
    places
}

/// Logs where the server listens, in one line, and that it is ready.
pub fn log_ready(places: &[String]) {
    info!("Listening on {}", places.join(", "));
    // redis-server's words: scripts and Redis' test suite wait for them.
    info!("Ready to accept connections");
}
