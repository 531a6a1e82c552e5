//! Ctrl-C at the prompt while a command keeps reading (SUBSCRIBE, MONITOR): as in redis-cli,
//! it ends that command, not the session. While a [`Catch`] is alive, SIGINT shuts the
//! connection's socket down; the read blocked on it returns, and the caller sees
//! [`Catch::interrupted`]. Outside of it SIGINT keeps its disposition.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The socket the handler shuts down (-1: none).
static SOCKET: AtomicI32 = AtomicI32::new(-1);
/// Whether SIGINT came while a [`Catch`] was alive.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Only async-signal-safe work: atomics and shutdown(2).
extern "C" fn on_sigint(_signal: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
    let fd = SOCKET.load(Ordering::SeqCst);
    if fd >= 0 {
        shutdown(fd);
    }
}

#[allow(unsafe_code)]
fn shutdown(fd: RawFd) {
    // SAFETY: shutdown(2) on a descriptor number has no memory-safety preconditions; the
    // descriptor stays open (the caller closes it after the Catch is dropped).
    unsafe {
        libc::shutdown(fd, libc::SHUT_RDWR);
    }
}

/// SIGINT caught for one socket, until dropped (the previous disposition then comes back).
pub struct Catch {
    previous: libc::sigaction,
}

impl Catch {
    /// Catches SIGINT for `socket`, which must stay open until the Catch is dropped.
    #[allow(unsafe_code)]
    pub fn new(socket: RawFd) -> io::Result<Catch> {
        INTERRUPTED.store(false, Ordering::SeqCst);
        SOCKET.store(socket, Ordering::SeqCst);
        // SAFETY: both structs are plain C data, zeroed then filled in; the handler only
        // touches atomics and calls shutdown(2), both async-signal-safe. No SA_RESTART: a
        // read under way returns EINTR, and any later one finds the socket shut down.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGINT, &action, &mut previous) != 0 {
                SOCKET.store(-1, Ordering::SeqCst);
                return Err(io::Error::last_os_error());
            }
            Ok(Catch { previous })
        }
    }

    /// Whether SIGINT came since the Catch was made.
    pub fn interrupted(&self) -> bool {
        INTERRUPTED.load(Ordering::SeqCst)
    }
}

impl Drop for Catch {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: puts back the action sigaction(2) returned in `new`.
        unsafe {
            libc::sigaction(libc::SIGINT, &self.previous, std::ptr::null_mut());
        }
        SOCKET.store(-1, Ordering::SeqCst);
    }
}
