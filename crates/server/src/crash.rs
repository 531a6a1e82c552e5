//! Crash reports, as redis-server writes them: when the process takes SIGSEGV, SIGBUS,
//! SIGFPE, SIGILL or SIGABRT, the log gets a bug report (the signal, then the stack of the
//! thread that took it) before the signal's usual action ends the process (with a core
//! dump where the system makes one). A panic is not a crash: it costs one connection.
//!
//! The handler runs on the thread's alternate signal stack and uses only calls that are
//! safe there: `write(2)` of text built in a fixed buffer, glibc's `backtrace` (warmed up
//! at install, since its first call may load libgcc and allocate) and
//! `backtrace_symbols_fd`, which writes without allocating. A fault then goes to the
//! handler that was there before (Rust's stack-overflow report, or the default action) by
//! running the faulting instruction again; a signal someone sent is raised again.

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

/// The signals that get a report, as in Redis' `setupSigSegvAction`.
const SIGNALS: [libc::c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGABRT,
];

/// Where the report goes: the log's file descriptor (standard output until a log file
/// is open).
static LOG_FD: AtomicI32 = AtomicI32::new(1);

/// The actions the signals had before [`install`], in [`SIGNALS`]' order.
static PREVIOUS: OnceLock<[libc::sigaction; SIGNALS.len()]> = OnceLock::new();

/// Sends crash reports to `fd` (the log file, kept open for the process' life).
pub fn set_log_fd(fd: i32) {
    LOG_FD.store(fd, Ordering::Relaxed);
}

/// DEBUG SEGFAULT: a write to an address nothing maps, as redis-server does, so the
/// report and the end are those of a real fault.
pub fn segfault() -> ! {
    // SAFETY: deliberately not: the write faults, and the process ends in the handler.
    unsafe { std::ptr::write_volatile(usize::MAX as *mut u8, b'x') };
    std::process::abort()
}

/// `crash-log-enabled`: installs the handler for every signal in [`SIGNALS`], or gives
/// them back the actions they had before (as Redis' CONFIG SET does).
pub fn set_enabled(enabled: bool) {
    if !enabled {
        if let Some(previous) = PREVIOUS.get() {
            for (signal, action) in SIGNALS.iter().zip(previous) {
                // SAFETY: restores an action sigaction read at the first install.
                unsafe { libc::sigaction(*signal, action, std::ptr::null_mut()) };
            }
        }
        return;
    }
    let first = PREVIOUS.get().is_none();
    if first {
        let mut frames = [std::ptr::null_mut::<libc::c_void>(); 4];
        // SAFETY: `frames` has room for the 4 entries asked for.
        unsafe { libc::backtrace(frames.as_mut_ptr(), frames.len() as libc::c_int) };
    }
    // SAFETY: zeroed sigaction structs are valid (empty masks, no handler); each call
    // gets live pointers to them, and `on_crash` has the SA_SIGINFO signature.
    let previous = unsafe {
        let mut previous: [libc::sigaction; SIGNALS.len()] = std::mem::zeroed();
        for (signal, old) in SIGNALS.iter().zip(previous.iter_mut()) {
            let mut action: libc::sigaction = std::mem::zeroed();
            libc::sigemptyset(&mut action.sa_mask);
            // As Redis: a fault inside the handler takes the default action.
            action.sa_flags =
                libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER | libc::SA_RESETHAND;
            action.sa_sigaction = on_crash as *const () as libc::sighandler_t;
            libc::sigaction(*signal, &action, old);
        }
        previous
    };
    if first {
        let _ = PREVIOUS.set(previous);
    }
}

extern "C" fn on_crash(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let fd = LOG_FD.load(Ordering::Relaxed);
    // SAFETY: the kernel passes a valid siginfo_t with SA_SIGINFO.
    let code = if info.is_null() {
        0
    } else {
        unsafe { (*info).si_code }
    };
    let mut line = Line::new();
    line.text("\n\n=== LATCH BUG REPORT START: Cut & paste starting from here ===\n");
    line.number(i64::from(std::process::id()));
    line.text(":M # Latch ");
    line.text(env!("CARGO_PKG_VERSION"));
    line.text(" crashed by signal: ");
    line.number(i64::from(signal));
    line.text(", si_code: ");
    line.number(i64::from(code));
    line.text("\n\n------ STACK TRACE ------\n\nBacktrace:\n");
    line.write_to(fd);
    let mut frames = [std::ptr::null_mut::<libc::c_void>(); 100];
    // SAFETY: `frames` has room for the entries asked for; backtrace_symbols_fd reads the
    // `count` it filled in and writes to `fd` without allocating.
    unsafe {
        let count = libc::backtrace(frames.as_mut_ptr(), frames.len() as libc::c_int);
        libc::backtrace_symbols_fd(frames.as_ptr(), count, fd);
    }
    let mut line = Line::new();
    line.text("\n=== LATCH BUG REPORT END. Make sure to include from START to END. ===\n\n");
    line.write_to(fd);
    let index = SIGNALS.iter().position(|&s| s == signal);
    // SAFETY: restores an action read by sigaction at install (or the default one), then
    // raises the signal again for one that was sent rather than caused by an instruction.
    unsafe {
        match (index, PREVIOUS.get()) {
            (Some(index), Some(previous)) => {
                libc::sigaction(signal, &previous[index], std::ptr::null_mut());
            }
            _ => {
                libc::signal(signal, libc::SIG_DFL);
            }
        }
        // si_code <= 0: sent by kill, tkill, raise or abort; nothing would repeat it.
        if code <= 0 {
            libc::raise(signal);
        }
    }
}

/// A line of the report, built without allocating.
struct Line {
    bytes: [u8; 256],
    len: usize,
}

impl Line {
    fn new() -> Line {
        Line {
            bytes: [0; 256],
            len: 0,
        }
    }

    fn text(&mut self, text: &str) {
        for &byte in text.as_bytes() {
            if self.len < self.bytes.len() {
                self.bytes[self.len] = byte;
                self.len += 1;
            }
        }
    }

    fn number(&mut self, value: i64) {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut rest = value.unsigned_abs();
        loop {
            at -= 1;
            digits[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        if value < 0 {
            self.text("-");
        }
        for &digit in &digits[at..] {
            if self.len < self.bytes.len() {
                self.bytes[self.len] = digit;
                self.len += 1;
            }
        }
    }

    fn write_to(&self, fd: i32) {
        let mut written = 0;
        while written < self.len {
            // SAFETY: the range is inside `bytes`.
            let n = unsafe {
                libc::write(
                    fd,
                    self.bytes[written..self.len].as_ptr().cast(),
                    self.len - written,
                )
            };
            if n <= 0 {
                return;
            }
            written += n as usize;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Line;

    #[test]
    fn lines_are_built_in_place() {
        let mut line = Line::new();
        line.text("signal: ");
        line.number(11);
        line.text(", code: ");
        line.number(-6);
        line.text(" ");
        line.number(0);
        assert_eq!(&line.bytes[..line.len], b"signal: 11, code: -6 0");
        let mut long = Line::new();
        long.text(&"x".repeat(300));
        assert_eq!(long.len, 256);
    }
}
