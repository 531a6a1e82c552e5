//! The VM and the script cache: compiling EVAL bodies (by SHA1), running a script function
//! against the caller's context, and the run-time checks Redis makes (busy threshold,
//! SCRIPT KILL, read-only scripts).

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicPtr, AtomicU8, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use mlua::{Function, HookTriggers, Lua, MultiValue, Table, Value, VmState};

use super::convert::{error_info, lua_to_reply};
use super::debugger::{self, Debugger};
use super::functions::{self, Functions, LoadApi};
use super::idiom::{self, Idiom};
use super::raw::{self, Ran};
use super::rollback::{DebugMode, Journal};
use super::sandbox::{self, Sandbox};
use super::RunState;
use crate::commands::Ctx;

/// Lua instructions between two looks at the clock and the kill flag (Redis' count).
const HOOK_EVERY: u32 = 100_000;
/// How long a script runs before its hook hands the worker's place on (see
/// `server::step_aside_from_runtime`).
pub(super) const STEP_ASIDE_AFTER_US: u64 = 1_000;
/// Garbage a VM gathers before the engine finishes a collection cycle (see `Engine::call`).
const GC_BUDGET: usize = 24 * 1024;

/// The flags a script declares in its `#!lua flags=...` line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    /// No shebang: Redis' compatibility mode, where the flags below do not apply.
    pub compat: bool,
    pub no_writes: bool,
    pub allow_oom: bool,
    pub allow_stale: bool,
    pub no_cluster: bool,
    pub allow_cross_slot: bool,
}

impl ScriptFlags {
    /// Parses a comma-separated flag list (shared with functions' `flags` tables).
    pub fn set(&mut self, name: &[u8]) -> bool {
        match name {
            b"no-writes" => self.no_writes = true,
            b"allow-oom" => self.allow_oom = true,
            b"allow-stale" => self.allow_stale = true,
            b"no-cluster" => self.no_cluster = true,
            b"allow-cross-slot-keys" => self.allow_cross_slot = true,
            _ => return false,
        }
        true
    }
}

/// Reads the shebang line, if any: the flags, and how many bytes to skip (the line, not its
/// newline, so that line numbers stay right).
pub fn parse_shebang(body: &[u8]) -> Result<(ScriptFlags, usize), Vec<u8>> {
    if !body.starts_with(b"#!") {
        return Ok((
            ScriptFlags {
                compat: true,
                ..ScriptFlags::default()
            },
            0,
        ));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err(b"ERR Invalid script shebang".to_vec());
    };
    let line = &body[..end];
    let mut parts = Vec::new();
    if !latch_protocol::request::split_args(&Bytes::copy_from_slice(line), &mut parts) {
        return Err(b"ERR Invalid engine in script shebang".to_vec());
    }
    let Some(engine) = parts.first() else {
        return Err(b"ERR Invalid engine in script shebang".to_vec());
    };
    if &engine[..] != b"#!lua" {
        let mut message = b"ERR Unexpected engine in script shebang: ".to_vec();
        message.extend_from_slice(engine);
        return Err(message);
    }
    let mut flags = ScriptFlags::default();
    for part in &parts[1..] {
        let Some(list) = part.strip_prefix(b"flags=") else {
            let mut message = b"ERR Unknown lua shebang option: ".to_vec();
            message.extend_from_slice(part);
            return Err(message);
        };
        // `flags=` alone declares no flags (an empty name inside a list is still an error).
        if list.is_empty() {
            continue;
        }
        for name in list.split(|&b| b == b',') {
            if !flags.set(name) {
                let mut message = b"ERR Unexpected flag in script shebang: ".to_vec();
                message.extend_from_slice(name);
                return Err(message);
            }
        }
    }
    Ok((flags, end))
}

/// A cached EVAL script.
pub struct Script {
    /// Its SHA1, lower-case hex: the name its errors give.
    sha: String,
    pub body: Bytes,
    pub flags: ScriptFlags,
    function: Function,
    /// Set when the body is one Latch runs without the VM (`idiom`).
    idiom: Option<Idiom>,
}

/// What `redis.call` refuses during one run.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallRules {
    /// Write commands (EVAL_RO, `no-writes`).
    pub read_only: bool,
    /// The first `denyoom` command: the server was over maxmemory when the script started
    /// and the script did not declare `allow-oom`.
    pub deny_oom: bool,
}

/// How one run goes.
pub struct RunOptions<'a> {
    /// Refuse write commands (EVAL_RO, `no-writes`).
    pub read_only: bool,
    /// `allow-oom` was declared (a shebang or a function's flags).
    pub allow_oom: bool,
    /// EVAL (KEYS and ARGV as globals) rather than FCALL (passed as arguments).
    pub eval: bool,
    /// The name errors mention: the SHA1 for EVAL, the function name for FCALL.
    pub name: &'a str,
}

/// Which of the two VMs an engine is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmRole {
    Eval,
    Functions,
}

pub struct Engine {
    role: VmRole,
    lua: Lua,
    sandbox: Sandbox,
    /// By lower-case SHA1. Shared so that a run holds its script without cloning the
    /// Lua function (a registry reference) each time.
    scripts: HashMap<String, Rc<Script>, ahash::RandomState>,
    /// Bytes of cached bodies, for INFO.
    pub scripts_bytes: usize,
    run: Arc<RunState>,
    /// The run in progress, for the host functions.
    active: Arc<ActiveRun>,
    /// What runs need of the VM (the KEYS and ARGV tables EVAL runs fill again).
    runner: raw::Runner,
    /// The VM's size after the last cycle the engine finished.
    gc_floor: usize,
    /// Lua's `collectgarbage`, to finish a cycle (mlua offers a full collection, which
    /// sweeps twice, or a step of its own size).
    collect: Option<Function>,
    pub functions: Functions,
    load_api: LoadApi,
    /// The `SCRIPT DEBUG SYNC` session in progress (EVAL's VM only).
    debugger: Debugger,
    /// Lua's `debug` library, for the debugger only (scripts do not see it).
    debug_lib: Option<Table>,
    /// The journal of a `SCRIPT DEBUG YES` session in progress.
    journal: Option<Journal>,
}

/// Which host function a script called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HostCall {
    /// `redis.call`: a command's error reply is raised.
    Call,
    /// `redis.pcall`: it is returned.
    PCall,
    /// `redis.acl_check_cmd`.
    AclCheck,
}

/// What a host function gets back for the script in progress.
pub(super) enum HostReply {
    /// The command ran: its reply, in the script's RESP version.
    Reply(latch_protocol::Reply),
    /// Refused before it ran (`counted`: the error statistics have it already).
    Refused { message: Vec<u8>, counted: bool },
    /// `redis.acl_check_cmd`: whether the user may run it (None: no such command).
    Allowed(Option<bool>),
}

/// What a host function runs for the script in progress.
pub(super) type Dispatch<'r> = dyn FnMut(HostCall, &[Bytes]) -> HostReply + 'r;

/// The run in progress, as the host functions (`redis.call`, `redis.pcall`,
/// `redis.acl_check_cmd`, created once per VM) reach it. Creating them per run, in a
/// `Lua::scope`, cost more than the rest of a short script (callbacks to build and
/// invalidate, and garbage with finalizers for the collector).
pub(super) struct ActiveRun {
    /// Points to the `&mut Dispatch` of the run in progress; null between runs and while a
    /// host function is using it.
    current: AtomicPtr<()>,
    /// The RESP version `redis.call` replies are converted with, and the script's own
    /// reply (`redis.setresp`); 2 at the start of every run.
    pub(super) resp: AtomicU8,
    /// Where the commands `redis.call` runs go (`redis.set_repl`: bit 1 the AOF, bit 2 the
    /// replicas); both at the start of every run.
    pub(super) repl: AtomicU8,
    /// A panic of a command `redis.call` ran, caught before it could unwind through Lua
    /// (which would leave the VM inconsistent); the run resumes it once Lua is done.
    panic: std::sync::Mutex<Option<Box<dyn std::any::Any + Send>>>,
}

impl Default for ActiveRun {
    fn default() -> Self {
        ActiveRun {
            current: AtomicPtr::new(std::ptr::null_mut()),
            resp: AtomicU8::new(2),
            repl: AtomicU8::new(REPL_ALL),
            panic: std::sync::Mutex::new(None),
        }
    }
}

/// Clears [`ActiveRun::current`] when the run ends, however it ends.
pub(super) struct Entered<'a>(&'a ActiveRun);

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.0
            .current
            .store(std::ptr::null_mut(), Ordering::Release);
    }
}

impl ActiveRun {
    /// Makes `dispatch` the run in progress until the returned guard is dropped.
    pub(super) fn enter<'a>(&'a self, dispatch: &'a mut &mut Dispatch<'_>) -> Entered<'a> {
        let pointer = (dispatch as *mut &mut Dispatch<'_>).cast::<()>();
        self.current.store(pointer, Ordering::Release);
        Entered(self)
    }

    /// Whether a run is in progress (and no host function of it is running).
    fn is_running(&self) -> bool {
        !self.current.load(Ordering::Acquire).is_null()
    }

    /// Runs the host function `kind` for the run in progress; `None` when there is none
    /// (a host function called outside a run, or from inside another one).
    #[allow(unsafe_code)]
    pub(super) fn dispatch(&self, kind: HostCall, args: &[Bytes]) -> Option<HostReply> {
        let pointer = self.current.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if pointer.is_null() {
            return None;
        }
        // SAFETY: `pointer` was stored by `enter` from a `&mut &mut Dispatch` that outlives
        // the guard `enter` returned, whose drop nulls it; the script (and so this call)
        // runs on the thread that holds that guard, inside the guarded call. Taking the
        // pointer out (the swap above) makes this the only live reference until it is put
        // back below. The lifetime written here is not the real one; the reference never
        // leaves this function.
        let dispatch = unsafe { &mut *pointer.cast::<&mut Dispatch<'static>>() };
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dispatch(kind, args)));
        self.current.store(pointer, Ordering::Release);
        match result {
            Ok(reply) => Some(reply),
            Err(payload) => {
                if let Ok(mut slot) = self.panic.lock() {
                    slot.get_or_insert(payload);
                }
                Some(HostReply::Refused {
                    message: b"ERR the command panicked".to_vec(),
                    counted: false,
                })
            }
        }
    }

    /// Goes on with a panic a command raised during the run, if one did.
    pub(super) fn resume_panic(&self) {
        let payload = self.panic.lock().ok().and_then(|mut slot| slot.take());
        if let Some(payload) = payload {
            std::panic::resume_unwind(payload);
        }
    }
}

/// Installs the count hook every run is watched by: it hands the worker's place in the
/// runtime on (a script that runs on), marks the script busy past the threshold and stops
/// it once killed.
fn install_run_hook(lua: &Lua, run: &Arc<RunState>) -> mlua::Result<()> {
    let run = Arc::clone(run);
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(HOOK_EVERY),
        move |lua, _| {
            if !run.is_script_running() {
                return Ok(VmState::Continue);
            }
            // The hook stays installed, so its count runs on across runs: a tick can land
            // in a script that just started. Only one that has run a while steps aside.
            run.step_aside_after(STEP_ASIDE_AFTER_US);
            check_run(lua, &run, run.threshold_ms.load(Ordering::Relaxed))
        },
    )
}

/// Creates the host functions of `redis` (and `acl_check` in `private`) for `active`.
fn install_host_functions(
    lua: &Lua,
    redis: &Table,
    private: &Table,
    active: &Arc<ActiveRun>,
    idle_call: &Function,
) -> mlua::Result<()> {
    // C functions, not Lua wrappers: a `return redis.call(...)` must keep the script's
    // frame (a Lua tail call would drop it) so errors name the right line.
    let (call, pcall) = raw::host_functions(lua, active, idle_call)?;
    redis.raw_set("call", call)?;
    redis.raw_set("pcall", pcall)?;
    // `redis.setresp` (after its checks, in the prelude) and the "only inside a script"
    // checks of the prelude's functions.
    let resp_of = Arc::clone(active);
    let set_resp = lua.create_function(move |_, resp: u8| {
        resp_of.resp.store(resp, Ordering::Relaxed);
        Ok(())
    })?;
    private.raw_set("set_resp", set_resp)?;
    let repl_of = Arc::clone(active);
    let set_repl = lua.create_function(move |_, flags: u8| {
        repl_of.repl.store(flags & REPL_ALL, Ordering::Relaxed);
        Ok(())
    })?;
    private.raw_set("set_repl", set_repl)?;
    let running = Arc::clone(active);
    let is_running = lua.create_function(move |_, ()| Ok(running.is_running()))?;
    private.raw_set("is_running", is_running)?;
    let active = Arc::clone(active);
    let acl_check = lua.create_function(move |_, words: MultiValue| {
        let Ok(args) = words_to_args(&words) else {
            return Ok(Value::Nil);
        };
        Ok(match active.dispatch(HostCall::AclCheck, &args) {
            Some(HostReply::Allowed(Some(allowed))) => Value::Boolean(allowed),
            _ => Value::Nil,
        })
    })?;
    private.raw_set("acl_check", acl_check)
}

/// Gives EVAL's VM what `SCRIPT DEBUG` needs: `redis.debug` and `redis.breakpoint` that
/// reach the session, and Lua's `debug` library, kept here and out of the globals.
fn install_debugger(lua: &Lua, redis: &Table, debugger: &Debugger) -> mlua::Result<Table> {
    redis.raw_set("debug", debugger::debug_function(lua, debugger.clone())?)?;
    redis.raw_set(
        "breakpoint",
        debugger::breakpoint_function(lua, debugger.clone())?,
    )?;
    // SAFETY: `luaopen_debug` registers the library's C functions in a table it leaves on
    // the stack (and in a global, removed below); exec_raw runs it in a protected call
    // and returns what it left.
    #[allow(unsafe_code)]
    let lib: Table = unsafe {
        lua.exec_raw((), |state| {
            mlua::ffi::luaopen_debug(state);
        })
    }?;
    lua.globals().raw_set("debug", Value::Nil)?;
    Ok(lib)
}

impl Engine {
    pub fn new(run: Arc<RunState>, role: VmRole) -> Engine {
        let (lua, sandbox) = match sandbox::build(log_from_script, role == VmRole::Eval) {
            Ok(built) => built,
            Err(error) => panic!("the Lua VM could not be set up: {error}"),
        };
        let (redis, idle_call) = match sandbox
            .private
            .raw_get::<Table>("redis")
            .and_then(|redis| Ok((redis.clone(), redis.raw_get::<Function>("call")?)))
        {
            Ok(found) => found,
            Err(error) => panic!("the Lua VM could not be set up: {error}"),
        };
        let private = &sandbox.private;
        let load_api = match (|| -> mlua::Result<LoadApi> {
            Ok(LoadApi {
                fenv: private.raw_get("fenv")?,
                fenv_meta: private.raw_get("fenv_meta")?,
                load_api: private.raw_get("load_api")?,
                load_redis: private.raw_get("load_redis")?,
                safe: sandbox.safe.clone(),
                idle_register: private.raw_get("idle_register")?,
            })
        })() {
            Ok(api) => api,
            Err(error) => panic!("the Lua VM could not be set up: {error}"),
        };
        let active = Arc::new(ActiveRun::default());
        if let Err(error) = install_host_functions(&lua, &redis, private, &active, &idle_call)
            .and_then(|()| install_run_hook(&lua, &run))
        {
            panic!("the Lua VM could not be set up: {error}");
        }
        let runner = match raw::Runner::new(&lua) {
            Ok(runner) => runner,
            Err(error) => panic!("the Lua VM could not be set up: {error}"),
        };
        let debugger = Debugger::default();
        let debug_lib = if role == VmRole::Eval {
            match install_debugger(&lua, &redis, &debugger) {
                Ok(lib) => Some(lib),
                Err(error) => panic!("the Lua VM could not be set up: {error}"),
            }
        } else {
            None
        };
        let collect = sandbox.safe.raw_get::<Function>("collectgarbage").ok();
        // Lua's default pause (a cycle starts once memory doubles), as in Redis; the engine
        // finishes cycles itself after GC_BUDGET of garbage (see `call`). A pause of 100 (a
        // new cycle as soon as one ends) marked the whole heap without rest. The VM stays
        // between about 66 and 90 KB over 10,000 EVALs (Redis' "EVAL does not leak in the
        // Lua stack" test allows 100 KB).
        let gc_floor = lua.used_memory();
        Engine {
            role,
            collect,
            functions: Functions::default(),
            load_api,
            lua,
            sandbox,
            active,
            runner,
            scripts: HashMap::default(),
            scripts_bytes: 0,
            run,
            gc_floor,
            debugger,
            debug_lib,
            journal: None,
        }
    }

    pub fn lua(&self) -> &Lua {
        &self.lua
    }

    /// The environment script functions run in.
    pub fn env(&self) -> Table {
        self.sandbox.env.clone()
    }

    pub fn exists(&self, sha: &[u8]) -> bool {
        self.cached(sha).is_some()
    }

    /// The cached script whose SHA1 is `sha`, in any case.
    fn cached(&self, sha: &[u8]) -> Option<&Rc<Script>> {
        let mut lower = [0u8; 40];
        if sha.len() != lower.len() {
            return None;
        }
        for (to, from) in lower.iter_mut().zip(sha) {
            *to = from.to_ascii_lowercase();
        }
        self.scripts.get(std::str::from_utf8(&lower).ok()?)
    }

    /// The flags of the cached script whose SHA1 is `sha`, if it is cached.
    pub fn cached_flags(&self, sha: &[u8]) -> Option<ScriptFlags> {
        self.cached(sha).map(|script| script.flags)
    }

    /// The flags of the function named `name`, if one is loaded.
    pub fn function_flags(&self, name: &[u8]) -> Option<ScriptFlags> {
        self.functions.function(name).map(|function| function.flags)
    }

    /// Compiles and caches a body (SCRIPT LOAD). Returns its SHA1, or the error reply.
    pub fn load(&mut self, body: &Bytes) -> Result<String, Vec<u8>> {
        self.load_script(body).map(|script| script.sha.clone())
    }

    /// The cached script of a body, compiled and cached first if it is new (EVAL).
    fn load_script(&mut self, body: &Bytes) -> Result<Rc<Script>, Vec<u8>> {
        let sha = sandbox::sha1_hex(body);
        if let Some(found) = self.scripts.get(&sha) {
            return Ok(Rc::clone(found));
        }
        let (flags, skip) = parse_shebang(body)?;
        let function = self
            .lua
            .load(&body[skip..])
            .set_name("@user_script")
            .set_environment(self.sandbox.env.clone())
            .into_function()
            .map_err(|error| {
                let mut message = b"ERR Error compiling script (new function): ".to_vec();
                message.extend_from_slice(sandbox::plain_message(&error).as_bytes());
                message
            })?;
        self.scripts_bytes += body.len() + sha.len();
        let script = Rc::new(Script {
            sha: sha.clone(),
            body: body.clone(),
            flags,
            function,
            idiom: flags.compat.then(|| idiom::recognize(body)).flatten(),
        });
        self.scripts.insert(sha, Rc::clone(&script));
        self.publish_sizes();
        Ok(script)
    }

    /// Copies the cache's and the VM's sizes where INFO reads them.
    pub fn publish_sizes(&self) {
        let run = &self.run;
        if self.role == VmRole::Functions {
            run.functions_vm_bytes
                .store(self.lua.used_memory(), Ordering::Relaxed);
            return;
        }
        run.cached_scripts
            .store(self.scripts.len(), Ordering::Relaxed);
        run.cached_scripts_bytes
            .store(self.scripts_bytes, Ordering::Relaxed);
        run.vm_bytes
            .store(self.lua.used_memory(), Ordering::Relaxed);
    }

    /// FUNCTION LOAD.
    pub fn load_library(&mut self, payload: &Bytes, replace: bool) -> Result<String, Vec<u8>> {
        let loaded = functions::load(
            &self.lua,
            &self.load_api,
            &mut self.functions,
            payload,
            replace,
        );
        // Loading watched the library's top level with a hook of its own.
        if let Err(error) = install_run_hook(&self.lua, &self.run) {
            tracing::warn!(%error, "could not put the script hook back after FUNCTION LOAD");
        }
        loaded
    }

    /// FCALL and FCALL_RO, after the numkeys check.
    pub fn fcall(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        name: &[u8],
        read_only_command: bool,
        keys: &[Bytes],
        args: &[Bytes],
    ) {
        let Some(function) = self.functions.function(name) else {
            ctx.reply.error(b"ERR Function not found");
            return;
        };
        let flags = function.flags;
        let callback = function.callback.clone();
        let function_name = function.name.clone();
        if let Some(message) = refused_by_state(ctx, &flags) {
            ctx.reply.error(message);
            return;
        }
        if !flags.no_writes && read_only_command {
            ctx.reply
                .error(b"ERR Can not execute a script with write flag using *_ro command.");
            return;
        }
        let options = RunOptions {
            read_only: read_only_command || flags.no_writes,
            allow_oom: flags.allow_oom,
            eval: false,
            name: &function_name,
        };
        self.call(ctx, &callback, None, keys, args, &options);
    }

    /// EVAL, EVALSHA and their _RO forms, after the numkeys check. `script` is the body or
    /// (for EVALSHA) the SHA1. A client that asked for `SCRIPT DEBUG SYNC` has its EVAL
    /// run in a debugging session.
    pub fn eval(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        script: &Bytes,
        evalsha: bool,
        read_only_command: bool,
        keys: &[Bytes],
        args: &[Bytes],
    ) {
        let mode = ctx.client.lua_debug;
        let debug_fd = (mode != DebugMode::Off).then(|| ctx.client.shared.fd);
        match debug_fd {
            Some(_) if evalsha => ctx
                .reply
                .error(b"ERR Please use EVAL instead of EVALSHA for debugging"),
            Some(fd) if fd >= 0 && self.debug_lib.is_some() => {
                self.debugger.start(fd as i32, script);
                // Replies to the commands before this one go out ahead of the session's.
                let pending = ctx.reply.buffer().split();
                self.debugger.write_raw(&pending);
                let rolls_back = mode == DebugMode::RollBack;
                tracing::warn!(
                    client = %ctx.client.shared.describe(),
                    "Lua debugging session started (SCRIPT DEBUG {})",
                    if rolls_back { "YES" } else { "SYNC" }
                );
                self.journal = rolls_back.then(Journal::default);
                self.eval_checked(ctx, script, false, read_only_command, keys, args);
                if let Some(journal) = self.journal.take() {
                    journal.roll_back(ctx.keys);
                }
                self.debugger.end();
                tracing::warn!("Lua debugging session ended");
                // The connection's end tells the client the session is over, as in Redis.
                ctx.client.close_after_reply = true;
            }
            _ => self.eval_checked(ctx, script, evalsha, read_only_command, keys, args),
        }
    }

    fn eval_checked(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        script: &Bytes,
        evalsha: bool,
        read_only_command: bool,
        keys: &[Bytes],
        args: &[Bytes],
    ) {
        let found = if evalsha {
            match self.cached(script) {
                Some(found) => Rc::clone(found),
                None => {
                    ctx.reply
                        .error(b"NOSCRIPT No matching script. Please use EVAL.");
                    return;
                }
            }
        } else {
            match self.load_script(script) {
                Ok(found) => found,
                Err(message) => {
                    ctx.reply.error(&message);
                    return;
                }
            }
        };
        let flags = found.flags;
        if let Some(message) = refused_by_state(ctx, &flags) {
            ctx.reply.error(message);
            return;
        }
        if !flags.compat && !flags.no_writes && read_only_command {
            ctx.reply
                .error(b"ERR Can not execute a script with write flag using *_ro command.");
            return;
        }
        let read_only = read_only_command || (!flags.compat && flags.no_writes);
        let options = RunOptions {
            read_only,
            allow_oom: !flags.compat && flags.allow_oom,
            eval: true,
            name: &found.sha,
        };
        self.call(
            ctx,
            &found.function,
            found.idiom.as_ref(),
            keys,
            args,
            &options,
        );
    }

    /// Runs a script function for the caller in `ctx` (whose view holds every shard) and
    /// writes its reply. The script's SELECT stays its own; blocking commands answer at once.
    /// `idiom`: what the script is, when Latch can run it without the VM.
    pub fn call(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        function: &Function,
        idiom: Option<&Idiom>,
        keys: &[Bytes],
        args: &[Bytes],
        options: &RunOptions<'_>,
    ) {
        let caller_db = ctx.client.db;
        let caller_deny_blocking = ctx.client.deny_blocking;
        ctx.client.deny_blocking = true;
        ctx.client.in_script = true;
        if ctx.client.tracking.on {
            // A read-only call makes the caller track the declared keys.
            ctx.client.tracking.script_keys = Some(keys.to_vec());
        }
        self.run
            .script_started(options.eval, ctx.client.command_started);
        self.active.resp.store(2, Ordering::Relaxed);
        self.active.repl.store(REPL_ALL, Ordering::Relaxed);
        let rules = CallRules {
            read_only: options.read_only,
            deny_oom: !options.allow_oom && ctx.server.out_of_memory(),
        };
        // A debugged script runs in the VM, whatever it is.
        let idiom = idiom.filter(|_| !self.debugger.is_active());
        let without_vm = idiom.and_then(|idiom| idiom.run(ctx, keys, args, rules, &self.run));
        let outcome = match without_vm {
            Some(ran) => {
                self.run.note_run_without_vm();
                Ok(ran)
            }
            // Inline: most scripts take microseconds. For one that runs on, the hook's
            // first tick wakes a peer worker to serve the other connections meanwhile.
            None => self.run_protected(ctx, function, keys, args, rules, options.eval),
        };
        self.run.script_ended();
        self.publish_sizes();
        ctx.client.db = caller_db;
        ctx.client.deny_blocking = caller_deny_blocking;
        ctx.client.in_script = false;
        ctx.client.tracking.script_keys = None;
        let resp = self.active.resp.load(Ordering::Relaxed);
        match outcome {
            Ok(Ran::Nil) => ctx.reply.null(),
            Ok(Ran::Boolean(b)) => lua_to_reply(&self.lua, &Value::Boolean(b), ctx.reply, resp),
            Ok(Ran::Number(n)) => lua_to_reply(&self.lua, &Value::Number(n), ctx.reply, resp),
            Ok(Ran::String(text)) => ctx.reply.bulk(&text),
            Ok(Ran::Table(value)) => lua_to_reply(&self.lua, &value, ctx.reply, resp),
            Ok(Ran::Failed(value)) => self.reply_with(ctx, value, options.name),
            Err(error) => {
                let message = sandbox::plain_message(&error);
                let text = format!(
                    "ERR Error running script {}, {}",
                    options.name,
                    truncate_chars(&message, 100)
                );
                ctx.reply.error(text.replace(['\r', '\n'], " ").as_bytes());
            }
        }
        // Once runs have left GC_BUDGET bytes of garbage, the cycle is finished here, in
        // one go between two runs. Redis finishes one every 50 runs (its
        // LUA_GC_CYCLE_PERIOD step), but a cycle marks the whole VM, which the sandbox
        // makes about 66 KB here (29 KB in Redis): every 50 runs, the collector was a
        // fifth of a lock release's instructions. Lua's own pacing (a cycle once the VM
        // doubles) backs this up for a script that makes a lot of garbage in one run.
        if self.lua.used_memory() > self.gc_floor + GC_BUDGET {
            // A step of 1 GB of debt runs until the cycle ends.
            let _ = match &self.collect {
                Some(collect) => collect.call::<()>(("step", 1 << 20)),
                None => self.lua.gc_collect(),
            };
            self.gc_floor = self.lua.used_memory();
        }
    }

    /// The run itself: `redis.call` & co reach it through [`ActiveRun`], and the busy/kill
    /// hook (installed once) watches it.
    fn run_protected(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        function: &Function,
        keys: &[Bytes],
        args: &[Bytes],
        rules: CallRules,
        eval: bool,
    ) -> mlua::Result<Ran> {
        let lua = &self.lua;
        let active = &self.active;
        self.run.threshold_ms.store(
            ctx.server.config.busy_reply_threshold_ms(),
            Ordering::Relaxed,
        );
        let debugging = match &self.debug_lib {
            Some(debug_lib) if self.debugger.is_active() => {
                let cx = debugger::HookContext {
                    debugger: self.debugger.clone(),
                    run: Arc::clone(&self.run),
                    env: self.sandbox.env.clone(),
                    safe: self.sandbox.safe.clone(),
                    call: self
                        .sandbox
                        .private
                        .raw_get::<Table>("redis")?
                        .raw_get::<Function>("call")?,
                    debug_lib: debug_lib.clone(),
                    threshold_ms: self.run.threshold_ms.load(Ordering::Relaxed),
                };
                let triggers = HookTriggers::new()
                    .every_line()
                    .every_nth_instruction(HOOK_EVERY);
                lua.set_hook(triggers, move |lua, debug| debugger::hook(lua, debug, &cx))?;
                true
            }
            _ => false,
        };
        if !debugging && self.run.line_hook.swap(false, Ordering::AcqRel) {
            // The last run was killed: its hook fired on every line.
            install_run_hook(lua, &self.run)?;
        }
        let run_state = self.run.clone();
        let debugger = self.debugger.clone();
        let journal = &mut self.journal;
        let mut dispatch = |kind: HostCall, args: &[Bytes]| -> HostReply {
            match kind {
                HostCall::Call | HostCall::PCall => {
                    let resp = active.resp.load(Ordering::Relaxed);
                    // A debugging session that steps logs each command and its reply.
                    let logged = debugger.is_logging();
                    if logged {
                        debugger.log_command(args);
                    }
                    let logged_from = ctx.client.propagated.len();
                    if let Some(journal) = journal.as_mut() {
                        if let Ok(command) = crate::gate::command_for_script(args) {
                            journal.before(ctx.keys, ctx.client.db, command, args);
                        }
                    }
                    let called = crate::gate::script_call(ctx, args, resp, rules, &run_state);
                    let repl = active.repl.load(Ordering::Relaxed);
                    if journal.is_some() {
                        // Undone at the session's end: nothing to propagate.
                        ctx.client.propagated.truncate(logged_from);
                    } else if repl != REPL_ALL {
                        route_effects(&mut ctx.client.propagated, logged_from, repl);
                    }
                    match called {
                        Ok(mut reply) => {
                            if logged {
                                debugger.log_reply(&reply.buffer()[..], resp == 3);
                            }
                            HostReply::Reply(reply)
                        }
                        // Refusals read like Redis' `luaPushError`: "ERR " and the text.
                        // The gatekeeper counted them in the error statistics already.
                        Err(message) => {
                            if logged {
                                debugger.log_error(&message);
                            }
                            HostReply::Refused {
                                message,
                                counted: true,
                            }
                        }
                    }
                }
                // redis.acl_check_cmd: whether the script's user may run a command (None
                // when there is no such command).
                HostCall::AclCheck => HostReply::Allowed(
                    crate::gate::command_for_script(args)
                        .ok()
                        .map(|command| ctx.client.user.check(command, args).is_none()),
                ),
            }
        };
        let mut dispatch: &mut Dispatch<'_> = &mut dispatch;
        let ran = {
            let _active = active.enter(&mut dispatch);
            let inputs = if eval {
                raw::Inputs::Globals(&self.sandbox.safe)
            } else {
                raw::Inputs::Arguments
            };
            let handler = &self.sandbox.handler;
            raw::run(lua, &mut self.runner, handler, function, inputs, keys, args)
        };
        if debugging {
            // Back to the count hook (also after a kill, which left a line hook).
            self.run.line_hook.store(false, Ordering::Release);
            install_run_hook(lua, &self.run)?;
        }
        active.resume_panic();
        ran
    }

    /// The reply of a failed run: its error, with where it happened.
    fn reply_with(&self, ctx: &mut Ctx<'_, '_>, value: Value, name: &str) {
        match value {
            Value::Table(table) => {
                let info = error_info(&table);
                let counted = info.ignore_stats;
                let mut text = info
                    .message
                    .unwrap_or_else(|| b"ERR unknown error".to_vec());
                if let (Some(source), Some(line)) = (info.source, info.line) {
                    text.extend_from_slice(format!(" script: {name}, on ").as_bytes());
                    text.extend_from_slice(&source);
                    text.push(b':');
                    text.extend_from_slice(&line);
                    text.push(b'.');
                }
                let text: Vec<u8> = text
                    .into_iter()
                    .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b })
                    .collect();
                if counted {
                    ctx.reply.error_counted_elsewhere(&text);
                } else {
                    ctx.reply.error(&text);
                }
            }
            other => {
                let message = match other {
                    Value::String(s) => s.to_string_lossy(),
                    _ => "execution failure".to_string(),
                };
                let text = format!(
                    "ERR Error running script {name}, {}",
                    truncate_chars(&message, 100)
                );
                ctx.reply.error(text.replace(['\r', '\n'], " ").as_bytes());
            }
        }
    }
}

/// `redis.set_repl` flags: the AOF, the replicas, both.
const REPL_AOF: u8 = 1;
const REPL_REPLICAS: u8 = 2;
const REPL_ALL: u8 = REPL_AOF | REPL_REPLICAS;

/// Sends what a script's command logged (`effects[from..]`) where `redis.set_repl` said:
/// nowhere, to the AOF only or to the replicas only.
fn route_effects(effects: &mut Vec<crate::client::Propagated>, from: usize, repl: u8) {
    let from = from.min(effects.len());
    if repl & REPL_ALL == 0 {
        effects.truncate(from);
        return;
    }
    for entry in &mut effects[from..] {
        if repl & REPL_REPLICAS == 0 {
            entry.aof_only = true;
        }
        if repl & REPL_AOF == 0 {
            entry.replicas_only = true;
        }
    }
    // An entry that was for one target only and is now refused it goes nowhere.
    let mut index = from;
    while index < effects.len() {
        if effects[index].aof_only && effects[index].replicas_only {
            effects.remove(index);
        } else {
            index += 1;
        }
    }
}

fn truncate_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// The count hook: marks the script busy past the threshold, stops it when killed. Once
/// killed it fires on every line, so that a `pcall` cannot swallow the kill for long.
pub(super) fn check_run(lua: &Lua, run: &RunState, threshold_ms: u64) -> mlua::Result<VmState> {
    if threshold_ms > 0 && !run.is_busy() && run.elapsed_ms() >= threshold_ms {
        tracing::warn!(
            "Slow script detected: still in execution after {} milliseconds. You can try killing the script using the {} command.",
            run.elapsed_ms(),
            if run.is_eval() {
                "SCRIPT KILL"
            } else {
                "FUNCTION KILL"
            }
        );
        run.mark_busy();
    }
    if run.kill_requested() {
        run.line_hook.store(true, Ordering::Release);
        let run_line = HookTriggers::new().every_line();
        let _ = lua.set_hook(run_line, |_, _| {
            Err(mlua::Error::RuntimeError(
                "Script killed by user with SCRIPT KILL...".into(),
            ))
        });
        return Err(mlua::Error::RuntimeError(
            "Script killed by user with SCRIPT KILL...".into(),
        ));
    }
    Ok(VmState::Continue)
}

/// Whether the server's state refuses the script before it starts. Redis derives EVAL's
/// and FCALL's `write`, `denyoom` and `stale` flags from the script's (a shebang's or a
/// function's): without `no-writes` it writes, without `allow-oom` (or `no-writes`) it may
/// grow memory, without `allow-stale` it does not run on a stale replica; a script without
/// a shebang runs nowhere stale. It then refuses the command as any such command, in
/// processCommand's order and words: OOM, NOREPLICAS, READONLY, MASTERDOWN. The primary's
/// link and the AOF loader are obeyed.
fn refused_by_state(ctx: &Ctx<'_, '_>, flags: &ScriptFlags) -> Option<&'static [u8]> {
    if ctx.client.must_obey() {
        return None;
    }
    let may_write = !flags.compat && !flags.no_writes;
    if may_write && !flags.allow_oom && ctx.server.out_of_memory() {
        return Some(crate::commands::err::OOM);
    }
    if may_write && !ctx.server.enough_replicas() {
        return Some(crate::commands::err::NOREPLICAS);
    }
    if may_write && crate::gate::read_only_replica(ctx.server, ctx.client) {
        return Some(crate::commands::err::READONLY);
    }
    if (flags.compat || !flags.allow_stale) && crate::gate::running_stale(ctx.server) {
        return Some(
            b"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
        );
    }
    None
}

/// A `redis.call` argument list as command arguments, or Redis' complaint about it.
fn words_to_args(words: &MultiValue) -> Result<Vec<Bytes>, &'static [u8]> {
    if words.is_empty() {
        return Err(raw::NO_ARGUMENTS);
    }
    let mut args = Vec::with_capacity(words.len());
    for word in words.iter() {
        match word {
            Value::String(text) => args.push(Bytes::copy_from_slice(&text.as_bytes())),
            Value::Integer(n) => args.push(raw::number_arg(*n as f64)),
            Value::Number(n) => args.push(raw::number_arg(*n)),
            _ => return Err(raw::BAD_ARGUMENT),
        }
    }
    Ok(args)
}

fn log_from_script(level: u8, text: &str) {
    match level {
        0 => tracing::debug!(target: "script", "{text}"),
        1 => tracing::debug!(target: "script", "{text}"),
        2 => tracing::info!(target: "script", "{text}"),
        _ => tracing::warn!(target: "script", "{text}"),
    }
}

/// Redis' `math.random`/`math.randomseed`: a 48-bit linear congruential generator (as
/// `lrand48`), so that a seed gives the same numbers on every machine.
pub fn install_random(lua: &Lua) -> mlua::Result<()> {
    // lrand48's state before any seed.
    let state = Arc::new(parking_lot::Mutex::new(0x1234_ABCD_330E_u64));
    let math: Table = lua.globals().raw_get("math")?;
    let random_state = state.clone();
    math.raw_set(
        "random",
        lua.create_function(move |_, args: MultiValue| {
            let r = {
                let mut x = random_state.lock();
                *x = (x.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB)) & ((1 << 48) - 1);
                let drawn = (*x >> 17) as i64;
                (drawn % i64::from(i32::MAX)) as f64 / f64::from(i32::MAX)
            };
            let int_arg = |value: &Value, position: usize| -> mlua::Result<i64> {
                match value {
                    Value::Integer(n) => Ok(*n),
                    Value::Number(n) => Ok(*n as i64),
                    Value::String(s) => s
                        .to_str()
                        .ok()
                        .and_then(|s| s.trim().parse::<f64>().ok())
                        .map(|n| n as i64)
                        .ok_or_else(|| bad_argument(position, "number expected")),
                    _ => Err(bad_argument(position, "number expected")),
                }
            };
            match args.len() {
                0 => Ok(r),
                1 => {
                    let upper = int_arg(&args[0], 1)?;
                    if upper < 1 {
                        return Err(bad_argument(1, "interval is empty"));
                    }
                    Ok((r * upper as f64).floor() + 1.0)
                }
                2 => {
                    let lower = int_arg(&args[0], 1)?;
                    let upper = int_arg(&args[1], 2)?;
                    if lower > upper {
                        return Err(bad_argument(2, "interval is empty"));
                    }
                    Ok((r * (upper - lower + 1) as f64).floor() + lower as f64)
                }
                _ => Err(mlua::Error::RuntimeError(
                    "wrong number of arguments".into(),
                )),
            }
        })?,
    )?;
    math.raw_set(
        "randomseed",
        lua.create_function(move |_, seed: f64| {
            *state.lock() = seed_state(seed as i64 as i32);
            Ok(())
        })?,
    )?;
    Ok(())
}

fn seed_state(seed: i32) -> u64 {
    ((u64::from(seed as u32)) << 16) | 0x330E
}

fn bad_argument(position: usize, message: &str) -> mlua::Error {
    mlua::Error::RuntimeError(format!("bad argument #{position} to 'random' ({message})"))
}
