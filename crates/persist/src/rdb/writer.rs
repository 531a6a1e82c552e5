//! Writing a whole RDB file.

use std::io::{self, Write};

use latch_keyspace::Value;

use super::encode::{is_empty_collection, put_len, put_millis, put_string, put_typed_value, Sink};
use super::{opcodes, Access, RdbError, RDB_VERSION};
use crate::crc64::crc64;

/// Bytes gathered before they are handed to the underlying writer.
const FLUSH_AT: usize = 1 << 16;

/// Buffers encoded bytes, checksums them on their way out, and keeps the first write
/// error so the encoders need not handle one.
struct Output<W: Write> {
    inner: W,
    buf: Vec<u8>,
    crc: u64,
    error: Option<io::Error>,
}

impl<W: Write> Output<W> {
    fn flush_buf(&mut self) {
        if self.error.is_none() && !self.buf.is_empty() {
            self.crc = crc64(self.crc, &self.buf);
            if let Err(e) = self.inner.write_all(&self.buf) {
                self.error = Some(e);
            }
        }
        self.buf.clear();
    }

    fn check(&mut self) -> Result<(), RdbError> {
        match self.error.take() {
            Some(e) => Err(RdbError::Io(e)),
            None => Ok(()),
        }
    }
}

impl<W: Write> Sink for Output<W> {
    fn put(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= FLUSH_AT {
            self.flush_buf();
        }
    }
}

/// Writes an RDB version 10 file: header, then aux fields, functions and databases in
/// the order the caller gives them, then [`Writer::finish`] for the end marker and the
/// checksum. Output is buffered internally.
pub struct Writer<W: Write> {
    out: Output<W>,
}

impl<W: Write> Writer<W> {
    /// Starts a file with its magic and version ("REDIS0010").
    pub fn new(inner: W) -> Result<Self, RdbError> {
        let mut out = Output {
            inner,
            buf: Vec::with_capacity(FLUSH_AT + 1024),
            crc: 0,
            error: None,
        };
        out.put(format!("REDIS{RDB_VERSION:04}").as_bytes());
        Ok(Writer { out })
    }

    /// An auxiliary field (`redis-ver`, `ctime`, ...); values that read as integers are
    /// stored as integers, as Redis stores them.
    pub fn aux(&mut self, name: &str, value: &[u8]) -> Result<(), RdbError> {
        self.out.put(&[opcodes::AUX]);
        put_string(&mut self.out, name.as_bytes());
        put_string(&mut self.out, value);
        self.out.check()
    }

    /// A function library, as its source code.
    pub fn function(&mut self, library_code: &[u8]) -> Result<(), RdbError> {
        self.out.put(&[opcodes::FUNCTION2]);
        put_string(&mut self.out, library_code);
        self.out.check()
    }

    /// Starts database `db`, announcing how many keys (and keys with expiry) follow.
    pub fn select_db(&mut self, db: u64, keys: u64, expires: u64) -> Result<(), RdbError> {
        self.out.put(&[opcodes::SELECTDB]);
        put_len(&mut self.out, db);
        self.out.put(&[opcodes::RESIZEDB]);
        put_len(&mut self.out, keys);
        put_len(&mut self.out, expires);
        self.out.check()
    }

    /// A key with its value and, when it has one, its expiry as Unix time in milliseconds.
    ///
    /// Empty lists, sets, hashes and sorted sets are skipped: Redis never holds them, and
    /// `redis-check-rdb` rejects a file that contains one.
    pub fn key(
        &mut self,
        key: &[u8],
        value: &Value,
        expire_unix_ms: Option<i64>,
    ) -> Result<(), RdbError> {
        self.key_accessed(key, value, expire_unix_ms, None)
    }

    /// [`Writer::key`], with what the file keeps of the key's accesses (after the expiry,
    /// as Redis places it).
    pub fn key_accessed(
        &mut self,
        key: &[u8],
        value: &Value,
        expire_unix_ms: Option<i64>,
        access: Option<Access>,
    ) -> Result<(), RdbError> {
        if is_empty_collection(value) {
            return Ok(());
        }
        if let Some(ms) = expire_unix_ms {
            self.out.put(&[opcodes::EXPIRETIME_MS]);
            put_millis(&mut self.out, ms);
        }
        match access {
            Some(Access::IdleSeconds(seconds)) => {
                self.out.put(&[opcodes::IDLE]);
                put_len(&mut self.out, seconds);
            }
            Some(Access::Frequency(counter)) => self.out.put(&[opcodes::FREQ, counter]),
            None => {}
        }
        put_typed_value(&mut self.out, Some(key), value);
        self.out.check()
    }

    /// Ends the file: the end marker, then the CRC-64 of everything before it (8 bytes,
    /// little-endian). Returns the underlying writer, flushed.
    pub fn finish(mut self) -> Result<W, RdbError> {
        self.out.put(&[opcodes::EOF]);
        self.out.flush_buf();
        self.out.check()?;
        let crc = self.out.crc;
        let mut inner = self.out.inner;
        inner.write_all(&crc.to_le_bytes())?;
        inner.flush()?;
        Ok(inner)
    }
}
