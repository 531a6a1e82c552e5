//! Connected clients: the state a connection owns ([`Client`]) and the part other clients
//! may read or act on ([`ClientShared`]: CLIENT LIST, CLIENT KILL), kept in the registry.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Notify;

/// Whether replies are sent (`CLIENT REPLY ON|OFF|SKIP`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Set by `CLIENT REPLY SKIP`: the command after this one gets no reply.
    SkipNext,
    /// The current command gets no reply.
    Skip,
}

/// Connection-local state, owned by the connection's task.
#[derive(Debug)]
pub struct Client {
    pub id: u64,
    pub db: usize,
    pub authenticated: bool,
    pub reply_mode: ReplyMode,
    pub close_after_reply: bool,
    pub shared: Arc<ClientShared>,
}

/// What others may see or change of a client.
#[derive(Debug)]
pub struct ClientShared {
    pub id: u64,
    pub addr: String,
    pub laddr: String,
    pub fd: i64,
    /// True for a Unix-socket connection.
    pub unix: bool,
    pub created: Instant,
    pub name: Mutex<Option<Bytes>>,
    pub lib_name: Mutex<Option<Bytes>>,
    pub lib_ver: Mutex<Option<Bytes>>,
    /// Milliseconds since `created` of the last command.
    pub last_interaction_ms: AtomicU64,
    pub db: AtomicUsize,
    pub resp: AtomicU8,
    /// The table id + 1 of the command running or last run (0: none yet), for CLIENT LIST.
    pub last_command: AtomicUsize,
    pub query_buffer: AtomicUsize,
    pub monitor: AtomicBool,
    pub no_evict: AtomicBool,
    pub no_touch: AtomicBool,
    /// Set by CLIENT KILL; the connection closes when it sees it.
    pub killed: AtomicBool,
    pub kill_signal: Notify,
}

impl ClientShared {
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.kill_signal.notify_one();
    }

    /// A unix-socket or loopback client (what `enable-debug-command local` allows).
    pub fn is_local(&self) -> bool {
        self.unix || self.addr.starts_with("127.") || self.addr.starts_with("[::1]")
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    pub fn age_s(&self) -> u64 {
        self.created.elapsed().as_secs()
    }

    pub fn idle_s(&self) -> u64 {
        let now_ms = self.created.elapsed().as_millis() as u64;
        now_ms.saturating_sub(self.last_interaction_ms.load(Ordering::Relaxed)) / 1000
    }

    pub fn touch(&self) {
        self.last_interaction_ms
            .store(self.created.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// The flags field of CLIENT LIST.
    pub fn flags(&self) -> String {
        let mut flags = String::new();
        if self.monitor.load(Ordering::Relaxed) {
            flags.push('O');
        }
        if self.no_evict.load(Ordering::Relaxed) {
            flags.push('e');
        }
        if self.no_touch.load(Ordering::Relaxed) {
            flags.push('T');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        flags
    }

    /// One line of CLIENT LIST / CLIENT INFO (without the newline), fields as Redis 7 prints them.
    pub fn describe(&self) -> String {
        let text = |m: &Mutex<Option<Bytes>>| {
            m.lock()
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default()
        };
        let qbuf = self.query_buffer.load(Ordering::Relaxed);
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub=0 psub=0 ssub=0 multi=-1 qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs=16384 rbp=0 obl=0 oll=0 omem=0 tot-mem={} events=r cmd={} user=default redir=-1 resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            text(&self.name),
            self.age_s(),
            self.idle_s(),
            self.flags(),
            self.db.load(Ordering::Relaxed),
            qbuf,
            16384usize.saturating_sub(qbuf),
            qbuf + 16384 + 2048,
            match self.last_command.load(Ordering::Relaxed) {
                0 => "NULL",
                id => crate::table::table().get(id - 1).full_name.as_str(),
            },
            self.resp.load(Ordering::Relaxed),
            text(&self.lib_name),
            text(&self.lib_ver),
        )
    }
}

/// Every connected client, by id.
#[derive(Debug, Default)]
pub struct Registry {
    next_id: AtomicU64,
    clients: Mutex<BTreeMap<u64, Arc<ClientShared>>>,
    /// Number of MONITOR clients, so the hot path can skip feeding when there are none.
    pub monitors: AtomicUsize,
}

impl Registry {
    pub fn new() -> Registry {
        Registry {
            next_id: AtomicU64::new(1),
            ..Registry::default()
        }
    }

    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers a new connection and returns its local state.
    pub fn connect(
        &self,
        addr: String,
        laddr: String,
        fd: i64,
        unix: bool,
        authenticated: bool,
    ) -> Client {
        let id = self.next_id();
        let shared = Arc::new(ClientShared {
            id,
            addr,
            laddr,
            fd,
            unix,
            created: Instant::now(),
            name: Mutex::new(None),
            lib_name: Mutex::new(None),
            lib_ver: Mutex::new(None),
            last_interaction_ms: AtomicU64::new(0),
            db: AtomicUsize::new(0),
            resp: AtomicU8::new(2),
            last_command: AtomicUsize::new(0),
            query_buffer: AtomicUsize::new(0),
            monitor: AtomicBool::new(false),
            no_evict: AtomicBool::new(false),
            no_touch: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            kill_signal: Notify::new(),
        });
        self.clients.lock().insert(id, shared.clone());
        Client {
            id,
            db: 0,
            authenticated,
            reply_mode: ReplyMode::On,
            close_after_reply: false,
            shared,
        }
    }

    pub fn disconnect(&self, id: u64) {
        if let Some(shared) = self.clients.lock().remove(&id) {
            if shared.monitor.load(Ordering::Relaxed) {
                self.monitors.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// A snapshot of every client, in id order.
    pub fn list(&self) -> Vec<Arc<ClientShared>> {
        self.clients.lock().values().cloned().collect()
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientShared>> {
        self.clients.lock().get(&id).cloned()
    }

    pub fn len(&self) -> usize {
        self.clients.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
