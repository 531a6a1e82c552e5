//! Reading an AOF command file (an incr file, a base file of commands, or the tail after a
//! legacy file's RDB preamble) one command at a time, telling a crash-truncated end apart from
//! corruption.
//!
//! The grammar is what Redis writes: `*N\r\n` followed by N bulk strings `$len\r\n...\r\n`,
//! with `#` annotation lines (timestamps) between commands. Redis' own loader is laxer (it
//! does not look at the line endings or the two bytes after a bulk string); this reader
//! follows `redis-check-aof` and calls those bytes corrupt, since Redis never writes them.
//!
//! Transactions: Redis replays the commands between `MULTI` and `EXEC` only at `EXEC`, and
//! treats a file that ends before the `EXEC` as truncated at the `MULTI`. This reader does
//! the same bookkeeping: it returns every command, `MULTI` and `EXEC` included, so the caller
//! queues them as a client would; if the data ends (cleanly or not) inside a transaction,
//! the error is [`AofReadError::Truncated`] with `valid_up_to` at the start of the `MULTI`,
//! and the caller drops its queue.

use bytes::Bytes;

/// Redis reads annotation lines with `fgets` into a buffer of this size, so at most one byte
/// less is consumed per read; a longer line continues as a new line.
const ANNOTATION_CHUNK: usize = 1024 - 1;

/// The smallest possible argument, `$0\r\n\r\n`, used to bound preallocation.
const MIN_ARG_LEN: usize = 6;

/// Bounds beyond which a count or length is corrupt rather than merely large.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// Most arguments in one command. Redis keeps the count in a C `int`.
    pub max_args: usize,
    /// Longest argument; the server should pass its `proto-max-bulk-len`.
    pub max_bulk_len: usize,
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits {
            max_args: i32::MAX as usize,
            max_bulk_len: 512 * 1024 * 1024,
        }
    }
}

/// Why a command file cannot be read to its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AofReadError {
    /// The file ends inside a command (a crash while writing), or inside a transaction:
    /// everything before `valid_up_to` is good. Redis with `aof-load-truncated yes` cuts the
    /// file there and carries on, but only when it is the last file of the data set.
    #[error("the AOF ends in the middle of a command; it is intact up to offset {valid_up_to}")]
    Truncated { valid_up_to: usize },
    /// Bad bytes in the middle of the file: refuse to start. `offset` is the first bad byte.
    #[error("bad AOF format at offset {offset}: {what}")]
    Corrupt { offset: usize, what: String },
}

/// Reads commands from the bytes of one AOF file.
#[derive(Debug, Clone)]
pub struct CommandReader<'a> {
    data: &'a [u8],
    limits: ReadLimits,
    /// End of the last complete command or annotation line.
    pos: usize,
    /// Where the open transaction's `MULTI` starts, if one is open.
    multi_start: Option<usize>,
}

/// Where parsing a command stopped short.
enum Stop {
    /// More bytes would be needed.
    Incomplete,
    /// A byte that cannot be right whatever follows.
    Bad { offset: usize, what: String },
}

fn bad(offset: usize, what: impl Into<String>) -> Stop {
    Stop::Bad {
        offset,
        what: what.into(),
    }
}

/// Shows a byte in an error message.
fn show(b: u8) -> String {
    format!("'{}'", b.escape_ascii())
}

impl<'a> CommandReader<'a> {
    /// Reads `data` from `start_offset` (0, or the end of an RDB preamble), with the default
    /// limits. An offset past the end is treated as the end.
    pub fn new(data: &'a [u8], start_offset: usize) -> Self {
        Self::with_limits(data, start_offset, ReadLimits::default())
    }

    pub fn with_limits(data: &'a [u8], start_offset: usize, limits: ReadLimits) -> Self {
        CommandReader {
            data,
            limits,
            pos: start_offset.min(data.len()),
            multi_start: None,
        }
    }

    /// End of the last complete command (or annotation line); where a writer appending to
    /// this file should continue. At a clean end it is the end of the data, except when the
    /// file ends with an annotation lacking its newline, which Redis accepts but which would
    /// swallow an appended command: a writer should cut the file here first.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// The start of the `MULTI` of a transaction still waiting for its `EXEC`.
    pub fn pending_multi(&self) -> Option<usize> {
        self.multi_start
    }

    /// The next command, `None` at a clean end of the data, or why there is none. After an
    /// error the reader stays where it was, so calling again reports the same error.
    #[allow(clippy::should_implement_trait)] // An iterator could not tell a clean end from an error as plainly.
    pub fn next(&mut self) -> Result<Option<Vec<Bytes>>, AofReadError> {
        Ok(self
            .next_borrowed()?
            .map(|args| args.into_iter().map(Bytes::copy_from_slice).collect()))
    }

    /// Like [`next`](Self::next), but borrowing the arguments from the data.
    pub fn next_borrowed(&mut self) -> Result<Option<Vec<&'a [u8]>>, AofReadError> {
        loop {
            let Some(&first) = self.data.get(self.pos) else {
                return self.at_end();
            };
            match first {
                b'#' => {
                    let rest = &self.data[self.pos..];
                    let limit = rest.len().min(ANNOTATION_CHUNK);
                    match rest[..limit].iter().position(|&b| b == b'\n') {
                        Some(i) => self.pos += i + 1,
                        None if limit == ANNOTATION_CHUNK => self.pos += limit,
                        // An annotation cut short by the end of the file is skipped, as
                        // Redis does, but `pos` stays before it (see `offset`).
                        None => return self.at_end(),
                    }
                }
                b'*' => return self.command().map(Some),
                other => {
                    return Err(AofReadError::Corrupt {
                        offset: self.pos,
                        what: format!(
                            "expected '*' or '#' at the start of a command, found {}",
                            show(other)
                        ),
                    })
                }
            }
        }
    }

    fn at_end(&self) -> Result<Option<Vec<&'a [u8]>>, AofReadError> {
        match self.multi_start {
            Some(valid_up_to) => Err(AofReadError::Truncated { valid_up_to }),
            None => Ok(None),
        }
    }

    fn command(&mut self) -> Result<Vec<&'a [u8]>, AofReadError> {
        let start = self.pos;
        let (args, end) = self.parse_command(start).map_err(|stop| match stop {
            Stop::Incomplete => AofReadError::Truncated {
                valid_up_to: self.multi_start.unwrap_or(start),
            },
            Stop::Bad { offset, what } => AofReadError::Corrupt {
                offset,
                what: format!("{what} (in the command starting at offset {start})"),
            },
        })?;
        let name = args.first().copied().unwrap_or_default();
        if name.eq_ignore_ascii_case(b"multi") {
            // A nested MULTI is just a queued command (EXEC will reject it); the transaction
            // still starts at the outer one.
            self.multi_start.get_or_insert(start);
        } else if name.eq_ignore_ascii_case(b"exec") {
            self.multi_start = None;
        }
        self.pos = end;
        Ok(args)
    }

    /// Parses the command at `start` (which holds `*`), returning it and where it ends.
    fn parse_command(&self, start: usize) -> Result<(Vec<&'a [u8]>, usize), Stop> {
        let (argc, mut p) = self.number(start + 1, self.limits.max_args, "argument count")?;
        if argc == 0 {
            return Err(bad(start + 1, "a command with no arguments"));
        }
        let remaining = self.data.len() - p;
        let mut args = Vec::with_capacity(argc.min(remaining / MIN_ARG_LEN + 1));
        for _ in 0..argc {
            match self.data.get(p) {
                None => return Err(Stop::Incomplete),
                Some(b'$') => {}
                Some(&other) => {
                    return Err(bad(
                        p,
                        format!("expected '$' before an argument, found {}", show(other)),
                    ))
                }
            }
            let (len, body) = self.number(p + 1, self.limits.max_bulk_len, "argument length")?;
            let end = body.checked_add(len).ok_or(Stop::Incomplete)?;
            let Some(arg) = self.data.get(body..end) else {
                return Err(Stop::Incomplete);
            };
            p = self.crlf(end, "after an argument")?;
            args.push(arg);
        }
        Ok((args, p))
    }

    /// Parses decimal digits at `p` up to `limit`, then CRLF; returns the value and the
    /// offset after the CRLF.
    fn number(&self, p: usize, limit: usize, what: &str) -> Result<(usize, usize), Stop> {
        let mut value: usize = 0;
        let mut q = p;
        loop {
            match self.data.get(q) {
                None => return Err(Stop::Incomplete),
                Some(&d) if d.is_ascii_digit() => {
                    value = value
                        .checked_mul(10)
                        .and_then(|v| v.checked_add(usize::from(d - b'0')))
                        .filter(|&v| v <= limit)
                        .ok_or_else(|| bad(p, format!("{what} above the limit of {limit}")))?;
                    q += 1;
                }
                Some(&other) if q == p => {
                    return Err(bad(q, format!("expected a {what}, found {}", show(other))))
                }
                Some(_) => return Ok((value, self.crlf(q, &format!("after the {what}"))?)),
            }
        }
    }

    /// Expects CRLF at `p`; returns the offset after it.
    fn crlf(&self, p: usize, context: &str) -> Result<usize, Stop> {
        for (i, expected) in [b'\r', b'\n'].into_iter().enumerate() {
            match self.data.get(p + i) {
                None => return Err(Stop::Incomplete),
                Some(&b) if b == expected => {}
                Some(&other) => {
                    let name = if expected == b'\r' { "'\\r'" } else { "'\\n'" };
                    return Err(bad(
                        p + i,
                        format!("expected {name} {context}, found {}", show(other)),
                    ));
                }
            }
        }
        Ok(p + 2)
    }
}

/// Whether a file starts with an RDB snapshot (the `REDIS` magic): an RDB base file, or a
/// legacy single AOF with an RDB preamble. The caller loads that part with the RDB reader
/// and, for a legacy file, reads the rest with `CommandReader::new(data, rdb_end)`.
pub fn starts_with_rdb_preamble(data: &[u8]) -> bool {
    data.starts_with(b"REDIS")
}
