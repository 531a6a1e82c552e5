//! The commands after which the server keeps talking: SUBSCRIBE, PSUBSCRIBE and SSUBSCRIBE
//! (messages), MONITOR (one line per command it sees). As redis-cli does, every reply is
//! printed as it comes, in the session's format (raw or readable, RESP2 or RESP3 pushes
//! alike), until an error reply, Ctrl-C, or the connection closes. Readable output starts
//! with "Reading messages... (press Ctrl-C to quit)" for the subscriptions.

use std::io::{self, Write};

use latch_protocol::Frame;

use super::interrupt::Catch;
use super::{print_reply, Connection, Output};

/// What a command that keeps reading waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listen {
    /// SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE.
    Messages,
    /// MONITOR.
    Monitor,
}

impl Listen {
    /// The mode the command enters, if any (redis-cli looks at the name alone).
    pub fn of(args: &[Vec<u8>]) -> Option<Listen> {
        let name = args.first()?.to_ascii_lowercase();
        match name.as_slice() {
            b"subscribe" | b"psubscribe" | b"ssubscribe" => Some(Listen::Messages),
            b"monitor" => Some(Listen::Monitor),
            _ => None,
        }
    }
}

/// How the reading ended, when the connection is still usable or to be replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// An error reply (printed): the connection goes on as before.
    Refused,
    /// Ctrl-C (when caught): the connection was shut down, the caller opens a new one.
    Interrupted,
}

/// Sends the command and prints what comes back until it ends. With `catch_interrupt` (the
/// prompt), Ctrl-C ends the reading; without it (a one-shot command), SIGINT keeps its
/// default action and ends the process, as with redis-cli. A closed connection is an
/// error (redis-cli prints it and exits with status 1).
pub fn listen(
    connection: &mut Connection,
    args: &[Vec<u8>],
    mode: Listen,
    output: Output,
    catch_interrupt: bool,
) -> io::Result<Ended> {
    let catch = if catch_interrupt {
        Some(Catch::new(connection.raw_fd())?)
    } else {
        None
    };
    let result = read_until_refused(connection, args, mode, output);
    match result {
        Err(_) if catch.as_ref().is_some_and(Catch::interrupted) => Ok(Ended::Interrupted),
        other => other,
    }
}

fn read_until_refused(
    connection: &mut Connection,
    args: &[Vec<u8>],
    mode: Listen,
    output: Output,
) -> io::Result<Ended> {
    connection.send(args)?;
    if mode == Listen::Messages && output != Output::Raw {
        let mut stdout = io::stdout().lock();
        stdout.write_all(b"Reading messages... (press Ctrl-C to quit)\n")?;
        stdout.flush()?;
    }
    loop {
        let frame = connection.read_frame()?;
        print_reply(&frame, output, args);
        if matches!(frame, Frame::Error(_) | Frame::BulkError(_)) {
            return Ok(Ended::Refused);
        }
    }
}
