//! The redis-cli-like client: one command from the command line, or a prompt.
//!
//! - `conn.rs`: the blocking connection and its handshake (AUTH, HELLO 3, SELECT).
//! - `format.rs`: replies printed readably (at a terminal) or raw (piped), as redis-cli does.
//! - `split.rs`: typed lines split into arguments with redis-cli's quoting.
//! - `repl.rs`: the prompt, with history; lines from stdin when it is not a terminal.
//! - `listen.rs`: SUBSCRIBE and friends, MONITOR: replies printed as they come until Ctrl-C.
//! - `interrupt.rs`: Ctrl-C at the prompt ends such a command, not the session.

mod conn;
mod format;
mod interrupt;
mod listen;
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
    if endpoint.password.is_some() && !connect.no_auth_warning {
        eprintln!(
            "Warning: Using a password with '-a' or '-u' option on the command line interface may not be safe."
        );
    }
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
    if let Some(mode) = listen::Listen::of(&args) {
        // Until the server refuses the command, the connection closes, or SIGINT (its
        // default action) ends the process.
        return match listen::listen(&mut connection, &args, mode, output, false) {
            Ok(_) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("Error: {}", describe(&err));
                ExitCode::FAILURE
            }
        };
    }
    match connection.call(&args) {
        Ok(reply) => {
            print_reply(&reply, output, &args);
            ExitCode::SUCCESS
        }
        // SHUTDOWN succeeds by closing the connection.
        Err(err) if is_shutdown(&args) && err.kind() == std::io::ErrorKind::UnexpectedEof => {
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("Error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Whether the command is SHUTDOWN, whose success is a closed connection.
pub fn is_shutdown(args: &[Vec<u8>]) -> bool {
    args.first()
        .is_some_and(|name| name.eq_ignore_ascii_case(b"shutdown"))
}

/// Connects, printing redis-cli's message on failure.
pub fn open(endpoint: &Endpoint, resp3: bool) -> Option<Connection> {
    match Connection::open(endpoint, resp3) {
        Ok(connection) => Some(connection),
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

/// Whether redis-cli prints this command's reply as plain text in every mode (its text is
/// meant for people: INFO, CLIENT LIST, LATENCY DOCTOR, ...).
fn prints_as_text(args: &[Vec<u8>]) -> bool {
    let word = |i: usize| {
        args.get(i)
            .map(|w| w.to_ascii_lowercase())
            .unwrap_or_default()
    };
    let (name, sub) = (word(0), word(1));
    match name.as_slice() {
        b"info" | b"lolwut" => true,
        b"client" => matches!(sub.as_slice(), b"list" | b"info"),
        b"memory" => matches!(sub.as_slice(), b"doctor" | b"malloc-stats"),
        b"latency" => matches!(sub.as_slice(), b"doctor" | b"graph"),
        b"cluster" => matches!(sub.as_slice(), b"info" | b"nodes"),
        b"debug" => matches!(
            sub.as_slice(),
            b"htstats" | b"htstats-key" | b"client-eviction"
        ),
        b"proxy" => sub.as_slice() == b"info",
        _ => false,
    }
}

/// Prints a reply to a command.
pub fn print_reply(reply: &Frame, output: Output, args: &[Vec<u8>]) {
    let bytes = if prints_as_text(args) {
        let mut text = format::raw(reply);
        text.pop();
        text
    } else {
        match output {
            Output::Raw => format::raw(reply),
            Output::Readable => format::readable(reply),
        }
    };
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(&bytes);
    let _ = stdout.flush();
}

/// Prints what the server pushed unasked (RESP3): at a terminal only, as redis-cli does.
pub fn print_push(push: &Frame, output: Output) {
    if output == Output::Readable {
        print_reply(push, output, &[]);
    }
}
