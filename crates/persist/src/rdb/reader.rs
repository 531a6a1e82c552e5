//! Reading a whole RDB file, one item at a time.

use std::io::Read;

use latch_keyspace::Value;

use super::decode::{read_object, Input};
use super::{opcodes, types, RdbError};

/// The oldest and newest RDB versions read. Version 11 (Redis 7.2) only adds set
/// listpacks and consumers' active time, both understood.
const MIN_VERSION: u16 = 1;
const MAX_VERSION: u16 = 11;
/// Checksums were added in version 5.
const FIRST_VERSION_WITH_CHECKSUM: u16 = 5;

/// One thing an RDB file says, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// An auxiliary field (`redis-ver`, `ctime`, `repl-id`, ...).
    Aux { name: Vec<u8>, value: Vec<u8> },
    /// The following keys belong to this database.
    SelectDb(u64),
    /// How many keys (and keys with expiry) the current database holds: a sizing hint.
    ResizeDb { keys: u64, expires: u64 },
    /// A function library's source code.
    Function(Vec<u8>),
    /// A key, its value, its expiry as Unix time in milliseconds, and what the file kept
    /// of its accesses for eviction.
    Key {
        key: Vec<u8>,
        value: Value,
        expire_unix_ms: Option<i64>,
        access: Option<Access>,
    },
    /// A key whose collection is empty. Redis never writes one, but old versions did
    /// (redis#8453); loaders skip it and say so, as Redis does.
    EmptyKey(Vec<u8>),
}

/// What a file keeps of a key's accesses, for the eviction policy (Redis writes one when
/// its policy is an LRU or an LFU one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Seconds since the key was last read or written (`RDB_OPCODE_IDLE`).
    IdleSeconds(u64),
    /// The key's LFU counter (`RDB_OPCODE_FREQ`).
    Frequency(u8),
}

/// Reads an RDB file. Keys holding empty collections (which old Redis versions could
/// write by mistake) are skipped, as Redis skips them.
pub struct Reader<R: Read> {
    input: Input<R>,
    version: u16,
    done: bool,
}

impl<R: Read> Reader<R> {
    /// Reads and checks the magic and version.
    pub fn new(inner: R) -> Result<Self, RdbError> {
        let mut input = Input::new(inner);
        let header: [u8; 9] = input.array().map_err(|e| match e {
            RdbError::Truncated { .. } => RdbError::BadMagic,
            other => other,
        })?;
        if &header[..5] != b"REDIS" {
            return Err(RdbError::BadMagic);
        }
        let version = std::str::from_utf8(&header[5..])
            .ok()
            .filter(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|digits| digits.parse::<u16>().ok())
            .ok_or(RdbError::BadMagic)?;
        if !(MIN_VERSION..=MAX_VERSION).contains(&version) {
            return Err(RdbError::UnsupportedVersion(version));
        }
        Ok(Reader {
            input,
            version,
            done: false,
        })
    }

    /// The file's RDB version.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.input.offset()
    }

    /// The next item; `None` once the end marker has been read and the checksum verified
    /// (a stored checksum of 0 means none was computed).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Item>, RdbError> {
        if self.done {
            return Ok(None);
        }
        let mut expire_unix_ms = None;
        let mut access = None;
        loop {
            let code = self.input.byte()?;
            match code {
                opcodes::EXPIRETIME => {
                    let seconds = i32::from_le_bytes(self.input.array()?);
                    expire_unix_ms = Some(seconds as i64 * 1000);
                }
                opcodes::EXPIRETIME_MS => expire_unix_ms = Some(self.input.millis()?),
                opcodes::IDLE => access = Some(Access::IdleSeconds(self.input.read_len()?)),
                opcodes::FREQ => access = Some(Access::Frequency(self.input.byte()?)),
                opcodes::EOF => {
                    self.finish()?;
                    return Ok(None);
                }
                opcodes::SELECTDB => return Ok(Some(Item::SelectDb(self.input.read_len()?))),
                opcodes::RESIZEDB => {
                    let keys = self.input.read_len()?;
                    let expires = self.input.read_len()?;
                    return Ok(Some(Item::ResizeDb { keys, expires }));
                }
                opcodes::AUX => {
                    let name = self.input.read_string()?;
                    let value = self.input.read_string()?;
                    return Ok(Some(Item::Aux { name, value }));
                }
                opcodes::MODULE_AUX => {
                    return Err(RdbError::ModuleUnsupported {
                        code,
                        offset: self.input.offset() - 1,
                    })
                }
                opcodes::FUNCTION2 => {
                    return Ok(Some(Item::Function(self.input.read_string()?)));
                }
                opcodes::FUNCTION => return Ok(Some(Item::Function(self.old_function()?))),
                kind if types::is_object_type(kind) => {
                    let key = self.input.read_string()?;
                    match read_object(&mut self.input, kind)? {
                        Some(value) => {
                            return Ok(Some(Item::Key {
                                key,
                                value,
                                expire_unix_ms,
                                access,
                            }))
                        }
                        // An empty collection: reported, and what preceded it dropped.
                        None => return Ok(Some(Item::EmptyKey(key))),
                    }
                }
                _ => {
                    return Err(RdbError::UnknownType {
                        code,
                        offset: self.input.offset() - 1,
                    })
                }
            }
        }
    }

    /// Redis 7.0 release candidates stored a library as name, engine, optional
    /// description and code; today's form is the code with a `#!engine name=...` line.
    fn old_function(&mut self) -> Result<Vec<u8>, RdbError> {
        let name = self.input.read_string()?;
        let engine = self.input.read_string()?;
        if self.input.read_len()? != 0 {
            self.input.read_string()?;
        }
        let code = self.input.read_string()?;
        let mut payload = b"#!".to_vec();
        payload.extend_from_slice(&engine);
        payload.extend_from_slice(b" name=");
        payload.extend_from_slice(&name);
        payload.push(b'\n');
        payload.extend_from_slice(&code);
        Ok(payload)
    }

    /// After the end marker: the checksum, for versions that have one.
    fn finish(&mut self) -> Result<(), RdbError> {
        self.done = true;
        if self.version < FIRST_VERSION_WITH_CHECKSUM {
            return Ok(());
        }
        let computed = self.input.crc();
        let stored = u64::from_le_bytes(self.input.array()?);
        if stored != 0 && stored != computed {
            return Err(RdbError::Checksum { computed, stored });
        }
        Ok(())
    }
}
