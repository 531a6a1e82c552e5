//! Lua scripting: EVAL and the script cache (`engine.rs`), conversions between Lua values
//! and replies (`convert.rs`), the sandbox and the `redis` API (`sandbox.rs`), and the
//! libraries Redis loads (`libs/`).
//!
//! One Lua VM serves the whole server, as in Redis. A script runs on the thread of the
//! client that sent it, holding every shard of the keyspace (an exclusive view, see
//! `Keyspace::lock_exclusive`), so nothing interleaves with it. Who may run is decided by
//! [`Scripting::try_claim`]: one claim at a time, taken by the gatekeeper before it locks any
//! shard. While a claim is held, other clients' commands wait (asynchronously: the
//! connection parks, the thread goes on serving others) until it ends, or, once the script
//! has run longer than `busy-reply-threshold`, get `BUSY` at once, except the few commands
//! Redis allows then (SCRIPT KILL, SHUTDOWN NOSAVE...).

mod bound;
mod builtins;
pub mod convert;
pub mod debugger;
pub mod engine;
pub mod functions;
pub mod idiom;
pub mod libs;
mod raw;
pub mod rollback;
pub mod sandbox;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use latch_keyspace::Tick;
use parking_lot::Mutex;
use tokio::sync::watch;

pub use engine::{Engine, VmRole};

/// The run state other threads read while a script runs: whether one does, whether it
/// passed the busy threshold, and what SCRIPT KILL may do to it.
#[derive(Debug)]
pub struct RunState {
    running: AtomicBool,
    /// A script (not just a SCRIPT LOAD) runs under the claim.
    in_script: AtomicBool,
    busy: AtomicBool,
    kill: AtomicBool,
    /// The running script has written (SCRIPT KILL then refuses).
    wrote: AtomicBool,
    /// The running script came from EVAL (not FCALL): picks the BUSY text and which KILL
    /// may stop it.
    eval: AtomicBool,
    /// When the running script's command started (a [`Tick`] in nanoseconds).
    started_at: AtomicU64,
    /// The running script's thread has handed its worker's place in the runtime on
    /// (`server::step_aside_from_runtime`).
    stepped_aside: AtomicBool,
    /// `busy-reply-threshold` as the run in progress started with it.
    pub threshold_ms: AtomicU64,
    /// Set when a killed run's hook was switched to fire on every line: the next run puts
    /// the count hook back.
    pub line_hook: AtomicBool,
    /// Bumped when a claim ends or a script turns busy: waiting connections look again.
    changes: watch::Sender<u64>,
    /// The function FCALL runs, for FUNCTION STATS.
    pub function: Mutex<Option<(String, Vec<bytes::Bytes>)>>,
    /// Library and function counts, for FUNCTION STATS (read without the claim).
    pub library_count: std::sync::atomic::AtomicUsize,
    pub function_count: std::sync::atomic::AtomicUsize,
    /// EVAL's script cache and the VM's size, for INFO memory (read without the claim).
    pub cached_scripts: std::sync::atomic::AtomicUsize,
    pub cached_scripts_bytes: std::sync::atomic::AtomicUsize,
    pub vm_bytes: std::sync::atomic::AtomicUsize,
    pub functions_vm_bytes: std::sync::atomic::AtomicUsize,
    /// Scripts run without the VM (`idiom`), for INFO.
    pub runs_without_vm: AtomicU64,
}

impl RunState {
    fn new() -> RunState {
        RunState {
            running: AtomicBool::new(false),
            in_script: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            kill: AtomicBool::new(false),
            wrote: AtomicBool::new(false),
            eval: AtomicBool::new(true),
            started_at: AtomicU64::new(0),
            stepped_aside: AtomicBool::new(false),
            threshold_ms: AtomicU64::new(0),
            line_hook: AtomicBool::new(false),
            changes: watch::Sender::new(0),
            function: Mutex::new(None),
            library_count: Default::default(),
            function_count: Default::default(),
            cached_scripts: Default::default(),
            cached_scripts_bytes: Default::default(),
            vm_bytes: Default::default(),
            functions_vm_bytes: Default::default(),
            runs_without_vm: AtomicU64::new(0),
        }
    }

    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    pub fn is_script_running(&self) -> bool {
        self.in_script.load(Ordering::Acquire)
    }

    /// The script returned (its claim may still be held by the command around it).
    pub fn script_ended(&self) {
        self.in_script.store(false, Ordering::Release);
    }

    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    pub fn is_eval(&self) -> bool {
        self.eval.load(Ordering::Acquire)
    }

    pub fn kill_requested(&self) -> bool {
        self.kill.load(Ordering::Acquire)
    }

    pub fn wrote(&self) -> bool {
        self.wrote.load(Ordering::Acquire)
    }

    pub fn note_run_without_vm(&self) {
        self.runs_without_vm.fetch_add(1, Ordering::Relaxed);
    }

    pub fn note_write(&self) {
        self.wrote.store(true, Ordering::Release);
    }

    /// Microseconds since the run in progress started.
    pub fn elapsed_us(&self) -> u64 {
        let started = Tick::from_nanos(self.started_at.load(Ordering::Acquire));
        Tick::now().nanos_since(started) / 1000
    }

    /// Milliseconds since the run in progress started.
    pub fn elapsed_ms(&self) -> u64 {
        self.elapsed_us() / 1000
    }

    /// Once the running script has run `after_us`, hands its thread's place in the runtime
    /// on (once a run: a handoff not seen to happen is tried again at the next call).
    pub fn step_aside_after(&self, after_us: u64) {
        if self.elapsed_us() >= after_us
            && !self.stepped_aside.load(Ordering::Acquire)
            && crate::server::step_aside_from_runtime()
        {
            self.stepped_aside.store(true, Ordering::Release);
        }
    }

    /// A script starts running under the claim, its time counted from `at` (when its
    /// command started: a run costs no clock read of its own).
    pub fn script_started(&self, eval: bool, at: Tick) {
        self.eval.store(eval, Ordering::Release);
        self.wrote.store(false, Ordering::Release);
        self.kill.store(false, Ordering::Release);
        self.stepped_aside.store(false, Ordering::Release);
        self.started_at.store(at.as_nanos(), Ordering::Release);
        self.in_script.store(true, Ordering::Release);
    }

    /// The script passed the busy threshold: waiting clients get BUSY from now on.
    pub fn mark_busy(&self) {
        if !self.busy.swap(true, Ordering::AcqRel) {
            self.changes.send_modify(|n| *n += 1);
        }
    }

    /// SCRIPT KILL / FUNCTION KILL: the script stops at its next check.
    pub fn request_kill(&self) {
        self.kill.store(true, Ordering::Release);
    }
}

/// The scripting state of the server.
pub struct Scripting {
    pub run: Arc<RunState>,
    /// EVAL's VM and script cache, and the functions' VM (two VMs, as in Redis: neither
    /// sees the other's globals or garbage). Locked only by the holder of the claim.
    eval: Mutex<Option<Vm>>,
    functions: Mutex<Option<Vm>>,
    /// Every function library's code, kept beside the VM for snapshots (which must not
    /// wait for the claim a long script holds).
    pub library_codes: Mutex<Vec<bytes::Bytes>>,
}

impl Default for Scripting {
    fn default() -> Self {
        Self::new()
    }
}

impl Scripting {
    pub fn new() -> Scripting {
        Scripting {
            run: Arc::new(RunState::new()),
            eval: Mutex::new(None),
            functions: Mutex::new(None),
            library_codes: Mutex::new(Vec::new()),
        }
    }

    /// Takes the right to run scripts (and to touch the VM). False when someone holds it:
    /// the caller waits for [`changed`](Self::changed) and tries again.
    pub fn try_claim(&self) -> bool {
        self.run
            .running
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Gives the claim back and lets waiting connections look again.
    pub fn release(&self) {
        self.run.busy.store(false, Ordering::Release);
        self.run.kill.store(false, Ordering::Release);
        self.run.running.store(false, Ordering::Release);
        // Connections that deferred a command hold a receiver (`wait`); with none, the
        // notification is skipped. The fences pair with the one in `wait`: either it sees
        // the claim released, or this sees its receiver.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.run.changes.receiver_count() > 0 {
            self.run.changes.send_modify(|n| *n += 1);
        }
    }

    /// Waits, on this thread, for a script another thread runs to end, for at most
    /// `limit`: scripts usually take microseconds, and a short spin costs less than
    /// deferring (and being woken). Every few turns the spin gives its core away: when
    /// the machine has more busy threads than cores (a load generator beside the workers),
    /// a pure spin takes the core from the very thread it waits for (measured unpinned,
    /// pipelined EVALSHA from 50 clients: the spin was a third of the server's time;
    /// yielding took the release from about 250k to 275k requests/s and halved its p99).
    /// Returns at once when the script is past the busy threshold. True when the claim
    /// is free.
    pub fn wait_out_short_script(&self, limit: std::time::Duration) -> bool {
        let run = &self.run;
        let mut started = None;
        let mut spins = 0u32;
        while run.is_running() {
            if run.is_busy() {
                return false;
            }
            spins += 1;
            if spins.is_multiple_of(16) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            if spins.is_multiple_of(64)
                && started.get_or_insert_with(Instant::now).elapsed() > limit
            {
                return false;
            }
        }
        true
    }

    /// A receiver that sees the next claim release or busy mark. Subscribe before looking
    /// at the state, so that no change is missed in between.
    pub fn changed(&self) -> watch::Receiver<u64> {
        self.run.changes.subscribe()
    }

    /// Runs `f` with EVAL's VM, creating it on first use. The caller holds the claim, so
    /// the lock is never contended.
    pub fn with_engine<R: Send>(&self, f: impl FnOnce(&mut Engine) -> R) -> R {
        debug_assert!(self.run.is_running(), "the VM is used without the claim");
        let mut slot = self.eval.lock();
        let vm = slot.get_or_insert_with(|| Vm(Engine::new(self.run.clone(), VmRole::Eval)));
        f(&mut vm.0)
    }

    /// Runs `f` with the functions' VM (FUNCTION, FCALL), creating it on first use.
    pub fn with_function_engine<R: Send>(&self, f: impl FnOnce(&mut Engine) -> R) -> R {
        debug_assert!(self.run.is_running(), "the VM is used without the claim");
        let mut slot = self.functions.lock();
        let vm = slot.get_or_insert_with(|| Vm(Engine::new(self.run.clone(), VmRole::Functions)));
        f(&mut vm.0)
    }

    /// SCRIPT FLUSH: as in Redis, a fresh EVAL VM, which drops every cached script and
    /// whatever scripts left in Lua (the caller holds the claim).
    pub fn flush_scripts(&self) {
        let engine = Engine::new(self.run.clone(), VmRole::Eval);
        engine.publish_sizes();
        *self.eval.lock() = Some(Vm(engine));
    }
}

/// A VM that may change threads between runs.
///
/// mlua is built without its `send` feature: that feature puts a reentrant mutex around
/// every call into Lua and makes every handle's reference count atomic, which cost about a
/// fifth of a short script's time (profiled: `LuaGuard::new` 9.5%, `ValueRef` clone and drop
/// 9% of a pipelined EVALSHA). Without it, an `Engine` and every Lua handle are `!Send`;
/// this wrapper lets the engine itself move between threads, under these rules, which make
/// its use single-threaded at any moment:
/// - a `Vm` is only reached through `Scripting::with_engine` / `with_function_engine`,
///   under its mutex, by the holder of the claim;
/// - no Lua handle leaves the closure those give the engine to: results must be `Send`
///   (Lua handles are not), and the host functions reach the run through `ActiveRun`,
///   which holds no Lua handle across runs.
struct Vm(Engine);

// SAFETY: see above: the engine and every Lua handle made from it are used by one thread at
// a time (the mutex orders the hand-over between threads), and none outlives the closure
// it was made in except inside the engine itself.
#[allow(unsafe_code)]
unsafe impl Send for Vm {}

/// Waits, for a connection whose command was deferred, until the claim is given back, or
/// (unless `until_end`) until the running script turns busy.
pub async fn wait(scripting: &Scripting, until_end: bool) {
    let mut changed = scripting.changed();
    std::sync::atomic::fence(Ordering::SeqCst);
    loop {
        let run = &scripting.run;
        if !run.is_running() || (!until_end && run.is_busy()) {
            return;
        }
        if changed.changed().await.is_err() {
            return;
        }
    }
}

/// Drops every function library (a replica about to load its primary's snapshot, which
/// carries the primary's libraries). Waits for a running script to end first.
pub fn flush_functions(server: &crate::server::Server) {
    let scripting = &server.scripting;
    while !scripting.try_claim() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    scripting.with_function_engine(|engine| engine.functions.flush());
    scripting.release();
    let run = &scripting.run;
    run.library_count.store(0, Ordering::Relaxed);
    run.function_count.store(0, Ordering::Relaxed);
    scripting.library_codes.lock().clear();
}
