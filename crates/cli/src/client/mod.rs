//! The redis-cli-like client: one command from the command line, or a prompt.
//!
//! - `conn.rs`: the blocking connection and its handshake (AUTH, HELLO 3, SELECT).
//! - `format.rs`: replies printed readably (at a terminal) or raw (piped), as redis-cli does.
//! - `split.rs`: typed lines split into arguments with redis-cli's quoting.
//! - `repl.rs`: the prompt, with history; lines from stdin when it is not a terminal.

mod conn;
mod format;
mod repl;
mod split;

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use latch_protocol::Frame;

use crate::connect::{ConnectOpts, Endpoint};
pub use conn::Connection;

/// How replies are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Readable,
    Raw,
}

pub fn main(connect: &ConnectOpts, command: &[OsString]) -> ExitCode {
    let endpoint = match connect.endpoint() {
        Ok(endpoint) => endpoint,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::FAILURE;
        }
    };
    let output = if connect.no_raw {
        Output::Readable
    } else if connect.raw || !std::io::stdout().is_terminal() {
        Output::Raw
    } else {
        Output::Readable
    };
    if command.is_empty() {
        return repl::run(&endpoint, connect.resp3, output);
    }
    let mut connection = match open(&endpoint, connect.resp3) {
        Some(connection) => connection,
        None => return ExitCode::FAILURE,
    };
    let args: Vec<Vec<u8>> = command.iter().map(|a| a.as_bytes().to_vec()).collect();
    match connection.call(&args) {
        Ok(reply) => {
            print_reply(&reply, output, &args);
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("Error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Connects, printing redis-cli's message on failure.
pub fn open(endpoint: &Endpoint, resp3: bool) -> Option<Connection> {
    match Connection::open(endpoint, resp3) {
        Ok(Ok(connection)) => Some(connection),
        Ok(Err(reply)) => {
            let mut stderr = std::io::stderr();
            let _ = stderr.write_all(&format::readable(&reply));
            None
        }
        Err(err) => {
            eprintln!(
                "Could not connect to Redis at {}:{}: {}",
                endpoint.host,
                endpoint.port,
                describe(&err)
            );
            None
        }
    }
}

/// The error text without Rust's "(os error N)" suffix, as redis-cli prints it.
fn describe(err: &std::io::Error) -> String {
    let text = err.to_string();
    match text.find(" (os error") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}

/// Prints a reply. INFO and a few others print their text as it is, as in redis-cli.
pub fn print_reply(reply: &Frame, output: Output, args: &[Vec<u8>]) {
    let verbatim = args.first().is_some_and(|name| {
        name.eq_ignore_ascii_case(b"info") || name.eq_ignore_ascii_case(b"lolwut")
    });
    let bytes = match (output, verbatim) {
        (Output::Raw, _) => format::raw(reply),
        (Output::Readable, true) => {
            let mut text = format::raw(reply);
            text.pop();
            text
        }
        (Output::Readable, false) => format::readable(reply),
    };
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(&bytes);
    let _ = stdout.flush();
}
