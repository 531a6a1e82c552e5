//! The prompt: `host:port[db]> `, commands split with redis-cli's quoting, replies printed,
//! history kept in `~/.latch_history` (`LATCH_HISTFILE` to move it, empty to turn it off).
//! When stdin is not a terminal, lines are read from it one by one, without a prompt. A
//! command that keeps reading (SUBSCRIBE, MONITOR) runs until Ctrl-C, then the prompt is back.

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use latch_protocol::Frame;
use rustyline::error::ReadlineError;

use super::listen::{listen, Ended, Listen};
use super::split::split_args;
use super::{describe, open, print_push, print_reply, Connection, Output};
use crate::connect::Endpoint;

/// The state of the session: the connection (None after it dropped), and the database for the
/// prompt.
struct Session {
    endpoint: Endpoint,
    resp3: bool,
    connection: Option<Connection>,
    output: Output,
}

impl Session {
    fn prompt(&self) -> String {
        if self.connection.is_none() {
            return "not connected> ".into();
        }
        let db = if self.endpoint.db != 0 {
            format!("[{}]", self.endpoint.db)
        } else {
            String::new()
        };
        format!("{}:{}{db}> ", self.endpoint.host, self.endpoint.port)
    }

    /// Runs one typed line.
    fn line(&mut self, line: &str) -> Next {
        let Some(args) = split_args(line.as_bytes()) else {
            println!("Invalid argument(s)");
            return Next::Prompt;
        };
        let Some(name) = args.first() else {
            return Next::Prompt;
        };
        if name.eq_ignore_ascii_case(b"quit") || name.eq_ignore_ascii_case(b"exit") {
            return Next::Quit;
        }
        let started = Instant::now();
        let next = self.command(&args);
        // Like redis-cli, say how long a command took when it was half a second or more
        // (a SUBSCRIBE ended with Ctrl-C, a blocking pop...).
        let millis = started.elapsed().as_millis();
        if next == Next::Prompt && self.output == Output::Readable && millis >= 500 {
            println!("({:.2}s)", millis as f64 / 1000.0);
        }
        next
    }

    fn command(&mut self, args: &[Vec<u8>]) -> Next {
        let name = &args[0];
        if self.connection.is_none() {
            self.connection = open(&self.endpoint, self.resp3);
        }
        let Some(connection) = self.connection.as_mut() else {
            return Next::Prompt;
        };
        if let Some(mode) = Listen::of(args) {
            return match listen(connection, args, mode, self.output, true) {
                Ok(Ended::Refused) => Next::Prompt,
                Ok(Ended::Interrupted) => {
                    // Ctrl-C: as redis-cli, a new connection (same database and protocol)
                    // and the prompt again.
                    self.connection = None;
                    self.connection = open(&self.endpoint, self.resp3);
                    Next::Prompt
                }
                // The connection closed under the subscriber: redis-cli exits.
                Err(err) => {
                    eprintln!("Error: {}", describe(&err));
                    Next::Fail
                }
            };
        }
        match connection.call(args) {
            Ok(reply) => {
                for push in std::mem::take(&mut connection.pushes) {
                    print_push(&push, self.output);
                }
                let ok = !matches!(reply, Frame::Error(_));
                if ok && name.eq_ignore_ascii_case(b"select") && args.len() == 2 {
                    if let Some(db) = std::str::from_utf8(&args[1])
                        .ok()
                        .and_then(|db| db.parse().ok())
                    {
                        self.endpoint.db = db;
                    }
                }
                if ok && name.eq_ignore_ascii_case(b"hello") {
                    self.resp3 = args.get(1).is_some_and(|v| v.as_slice() == b"3");
                }
                print_reply(&reply, self.output, args);
            }
            Err(err) => {
                if !(super::is_shutdown(args) && err.kind() == std::io::ErrorKind::UnexpectedEof) {
                    eprintln!("Error: {err}");
                }
                self.connection = None;
            }
        }
        Next::Prompt
    }
}

/// What the session does after a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    Prompt,
    Quit,
    /// End with status 1 (the connection closed while reading messages).
    Fail,
}

fn history_file() -> Option<PathBuf> {
    match std::env::var_os("LATCH_HISTFILE") {
        Some(path) if path.is_empty() => None,
        Some(path) => Some(PathBuf::from(path)),
        None => std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".latch_history")),
    }
}

pub fn run(endpoint: &Endpoint, resp3: bool, output: Output) -> ExitCode {
    let interactive = std::io::stdin().is_terminal();
    let connection = open(endpoint, resp3);
    let mut session = Session {
        endpoint: endpoint.clone(),
        resp3,
        connection,
        output: if interactive {
            Output::Readable
        } else {
            output
        },
    };
    if !interactive {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            match session.line(&line) {
                Next::Prompt => {}
                Next::Quit => break,
                Next::Fail => return ExitCode::FAILURE,
            }
        }
        return ExitCode::SUCCESS;
    }
    let mut editor = match rustyline::DefaultEditor::new() {
        Ok(editor) => editor,
        Err(err) => {
            eprintln!("latch: cannot open the terminal: {err}");
            return ExitCode::FAILURE;
        }
    };
    let history = history_file();
    if let Some(path) = &history {
        let _ = editor.load_history(path);
    }
    loop {
        match editor.readline(&session.prompt()) {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = editor.add_history_entry(line.as_str());
                    if let Some(path) = &history {
                        let _ = editor.append_history(path);
                    }
                }
                match session.line(&line) {
                    Next::Prompt => {}
                    Next::Quit => break,
                    Next::Fail => return ExitCode::FAILURE,
                }
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(_) => break,
        }
    }
    ExitCode::SUCCESS
}
