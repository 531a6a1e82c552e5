//! Sending a signal to the command `latch lock run` supervises.

/// The command runs in its own process group (so that a shell's children get the signal
/// too), except when stdin is a terminal: then it stays in the terminal's foreground group,
/// and only the command itself is signalled.
#[derive(Clone, Copy, Debug)]
pub enum Target {
    Group(u32),
    Process(u32),
}

impl Target {
    pub fn send(self, signal: i32) {
        let pid = match self {
            Target::Group(pgid) => -(pgid as i32),
            Target::Process(pid) => pid as i32,
        };
        kill(pid, signal);
    }
}

#[allow(unsafe_code)]
fn kill(pid: i32, signal: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions; a process that is gone gives ESRCH.
    unsafe {
        libc::kill(pid, signal);
    }
}
