//! What can go wrong reading or writing RDB data.

/// An RDB or `DUMP` payload error. Offsets count bytes from the start of the input.
#[derive(Debug, thiserror::Error)]
pub enum RdbError {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("not an RDB file (bad magic)")]
    BadMagic,
    #[error("can't handle RDB format version {0}")]
    UnsupportedVersion(u16),
    #[error("unexpected end of RDB data at offset {offset}")]
    Truncated { offset: u64 },
    #[error("unknown RDB type or opcode {code} at offset {offset}")]
    UnknownType { code: u8, offset: u64 },
    #[error("RDB module data (type {code}) at offset {offset} is not supported")]
    ModuleUnsupported { code: u8, offset: u64 },
    #[error("corrupt RDB data at offset {offset}: {what}")]
    Corrupt { offset: u64, what: String },
    #[error("wrong RDB checksum: computed {computed:016x}, stored {stored:016x}")]
    Checksum { computed: u64, stored: u64 },
    /// A `DUMP` payload whose footer names a newer RDB version or whose CRC is wrong.
    #[error("DUMP payload version or checksum are wrong")]
    BadPayload,
    /// A `DUMP` payload holding an empty collection (Redis never stores one).
    #[error("DUMP payload holds an empty value")]
    EmptyValue,
}

impl RdbError {
    /// The line Redis' loader logs for this error ("Internal error in RDB reading offset N
    /// -> reason"), with the reason in Redis' words where Redis has words for it.
    pub fn log_line(&self) -> String {
        let (offset, reason) = match self {
            RdbError::Truncated { offset } => (*offset, "Unexpected EOF reading RDB file".into()),
            RdbError::UnknownType { code, offset } => {
                (*offset, format!("Unknown RDB encoding type {code}"))
            }
            RdbError::Corrupt { offset, what } => (*offset, what.clone()),
            RdbError::Checksum { .. } => (0, format!("RDB CRC error ({self})")),
            other => (0, other.to_string()),
        };
        format!("Internal error in RDB reading offset {offset} -> {reason}")
    }
}
