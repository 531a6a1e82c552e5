//! The AOF manifest (`appendonly.aof.manifest`): which files make up the append-only data set,
//! parsed with Redis 7.0's rules and written byte for byte as Redis writes it.
//!
//! Each line is `file <name> seq <n> type <b|h|i>`. Redis writes the base first, then the
//! history files, then the incr files, quoting a name only when it must.

use super::naming::{base_name, incr_name};
use super::quote::{atoll, needs_repr, push_repr, split_args};

/// The longest line Redis' loader reads in one go; it counts the newline.
pub const MANIFEST_MAX_LINE: usize = 1024;

/// What a file listed in the manifest holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// The snapshot the incr files apply to: an RDB file or a file of commands (`b`).
    Base,
    /// A file replaced by a rewrite, kept until it is deleted (`h`).
    History,
    /// Commands written after the base, in sequence order (`i`).
    Incr,
}

impl FileKind {
    /// The letter the manifest uses for this kind.
    pub fn as_char(self) -> char {
        match self {
            FileKind::Base => 'b',
            FileKind::History => 'h',
            FileKind::Incr => 'i',
        }
    }

    /// The kind a manifest letter names, if any.
    pub fn from_byte(b: u8) -> Option<FileKind> {
        match b {
            b'b' => Some(FileKind::Base),
            b'h' => Some(FileKind::History),
            b'i' => Some(FileKind::Incr),
            _ => None,
        }
    }
}

/// One line of the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AofFile {
    /// A bare file name inside the AOF directory.
    pub name: String,
    pub seq: u64,
    pub kind: FileKind,
}

/// The files of an AOF directory, grouped the way Redis keeps them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub base: Option<AofFile>,
    /// Incr files, oldest first, with strictly increasing sequence numbers.
    pub incrs: Vec<AofFile>,
    /// Files awaiting deletion, newest first (Redis prepends to this list).
    pub history: Vec<AofFile>,
}

/// Why a manifest was refused. Line numbers count from 1 and, like Redis', count a line
/// longer than [`MANIFEST_MAX_LINE`] as several.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("the AOF manifest is empty")]
    Empty,
    #[error("AOF manifest line {line}: longer than {MANIFEST_MAX_LINE} bytes")]
    LineTooLong { line: usize },
    #[error("AOF manifest line {line}: the last line does not end with a newline")]
    MissingNewline { line: usize },
    #[error("AOF manifest line {line}: contains a NUL byte")]
    NulByte { line: usize },
    #[error("AOF manifest line {line}: blank line")]
    BlankLine { line: usize },
    #[error("AOF manifest line {line}: unbalanced quotes")]
    BadQuotes { line: usize },
    #[error(
        "AOF manifest line {line}: expected `file <name> seq <n> type <t>` \
         (an even number of at least 6 fields), found {fields} fields"
    )]
    FieldCount { line: usize, fields: usize },
    #[error("AOF manifest line {line}: {name:?} is a path; only a file name is allowed")]
    NotBaseName { line: usize, name: String },
    #[error("AOF manifest line {line}: `{field}` is missing (or zero or empty)")]
    MissingField { line: usize, field: &'static str },
    #[error("AOF manifest line {line}: a second base file")]
    DuplicateBase { line: usize },
    #[error(
        "AOF manifest line {line}: incr sequence number {seq} is not greater than \
         the previous one ({previous})"
    )]
    NonMonotonicSeq {
        line: usize,
        seq: i64,
        previous: i64,
    },
    #[error("AOF manifest line {line}: unknown file type {kind:?}")]
    UnknownType { line: usize, kind: char },
    #[error("AOF manifest line {line}: negative sequence number {seq}")]
    NegativeSeq { line: usize, seq: i64 },
    #[error("AOF manifest line {line}: the file name is not valid UTF-8")]
    NameNotUtf8 { line: usize },
}

impl ManifestError {
    /// The line the error is on, if it is about one line.
    pub fn line(&self) -> Option<usize> {
        use ManifestError::*;
        match *self {
            Empty => None,
            LineTooLong { line }
            | MissingNewline { line }
            | NulByte { line }
            | BlankLine { line }
            | BadQuotes { line }
            | FieldCount { line, .. }
            | NotBaseName { line, .. }
            | MissingField { line, .. }
            | DuplicateBase { line }
            | NonMonotonicSeq { line, .. }
            | UnknownType { line, .. }
            | NegativeSeq { line, .. }
            | NameNotUtf8 { line } => Some(line),
        }
    }

    /// The reason as redis-server words it in its log (what Redis' tests look for).
    pub fn redis_reason(&self) -> &'static str {
        use ManifestError::*;
        match self {
            Empty => "Found an empty AOF manifest",
            LineTooLong { .. } => "The AOF manifest file contains too long line",
            NotBaseName { .. } => "File can't be a path, just a filename",
            DuplicateBase { .. } => "Found duplicate base file information",
            NonMonotonicSeq { .. } => "Found a non-monotonic sequence number",
            UnknownType { .. } => "Unknown AOF file type",
            MissingNewline { .. }
            | NulByte { .. }
            | BlankLine { .. }
            | BadQuotes { .. }
            | FieldCount { .. }
            | MissingField { .. }
            | NegativeSeq { .. }
            | NameNotUtf8 { .. } => "Invalid AOF manifest file format",
        }
    }
}

/// A line's fields as the loader reads them: later repeats of a key win, unknown keys are
/// ignored.
#[derive(Default)]
struct Fields {
    name: Option<Vec<u8>>,
    seq: i64,
    kind: Option<u8>,
}

/// The part of a byte string C code sees: everything before the first NUL.
fn c_str(s: &[u8]) -> &[u8] {
    s.iter().position(|&b| b == 0).map_or(s, |i| &s[..i])
}

fn trim(mut s: &[u8]) -> &[u8] {
    let strip = |b: &u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    while s.first().is_some_and(strip) {
        s = &s[1..];
    }
    while s.last().is_some_and(strip) {
        s = &s[..s.len() - 1];
    }
    s
}

fn parse_fields(line: usize, text: &[u8]) -> Result<Fields, ManifestError> {
    let args = split_args(text).ok_or(ManifestError::BadQuotes { line })?;
    // At least six fields, in pairs; extra pairs are allowed so that newer versions can add
    // keys.
    if args.len() < 6 || args.len() % 2 != 0 {
        return Err(ManifestError::FieldCount {
            line,
            fields: args.len(),
        });
    }
    let mut fields = Fields::default();
    for pair in args.chunks_exact(2) {
        // Redis compares and copies these as C strings, so an escaped NUL ends them.
        let (key, value) = (c_str(&pair[0]), c_str(&pair[1]));
        if key.eq_ignore_ascii_case(b"file") {
            if value.iter().any(|&b| b == b'/' || b == b'\\') {
                return Err(ManifestError::NotBaseName {
                    line,
                    name: String::from_utf8_lossy(value).into_owned(),
                });
            }
            fields.name = Some(value.to_vec());
        } else if key.eq_ignore_ascii_case(b"seq") {
            fields.seq = atoll(value);
        } else if key.eq_ignore_ascii_case(b"type") {
            fields.kind = value.first().copied();
        }
    }
    Ok(fields)
}

impl Manifest {
    /// Parses a manifest with the checks Redis 7.0 makes when it starts.
    ///
    /// Where Redis would accept something this type cannot hold, it is refused instead: a
    /// negative sequence number on a base or history line, or a name that is not UTF-8.
    pub fn parse(text: &[u8]) -> Result<Manifest, ManifestError> {
        if text.is_empty() {
            return Err(ManifestError::Empty);
        }
        let mut manifest = Manifest::default();
        let mut max_incr_seq: i64 = 0;
        let mut line = 0;
        let mut rest = text;
        while !rest.is_empty() {
            // Redis reads with `fgets` into a buffer of MANIFEST_MAX_LINE bytes, so a longer
            // line arrives in pieces that are each judged as a line.
            let limit = rest.len().min(MANIFEST_MAX_LINE);
            let len = rest[..limit]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(limit, |i| i + 1);
            let (chunk, tail) = rest.split_at(len);
            rest = tail;
            line += 1;

            if chunk[0] == b'#' {
                continue;
            }
            let text = c_str(chunk);
            if !text.contains(&b'\n') {
                return Err(if text.len() < chunk.len() {
                    ManifestError::NulByte { line }
                } else if chunk.len() == MANIFEST_MAX_LINE {
                    ManifestError::LineTooLong { line }
                } else {
                    ManifestError::MissingNewline { line }
                });
            }
            let text = trim(text);
            if text.is_empty() {
                return Err(ManifestError::BlankLine { line });
            }
            let fields = parse_fields(line, text)?;
            let missing = |field| ManifestError::MissingField { line, field };
            let name = fields.name.ok_or(missing("file"))?;
            if fields.seq == 0 {
                return Err(missing("seq"));
            }
            let kind = fields.kind.ok_or(missing("type"))?;
            let seq = fields.seq;
            let kind = match FileKind::from_byte(kind) {
                Some(FileKind::Base) if manifest.base.is_some() => {
                    return Err(ManifestError::DuplicateBase { line })
                }
                Some(FileKind::Incr) if seq <= max_incr_seq => {
                    return Err(ManifestError::NonMonotonicSeq {
                        line,
                        seq,
                        previous: max_incr_seq,
                    })
                }
                Some(kind) => kind,
                None => {
                    return Err(ManifestError::UnknownType {
                        line,
                        kind: char::from(kind),
                    })
                }
            };
            let seq = u64::try_from(seq).map_err(|_| ManifestError::NegativeSeq { line, seq })?;
            let name = String::from_utf8(name).map_err(|_| ManifestError::NameNotUtf8 { line })?;
            let file = AofFile { name, seq, kind };
            match kind {
                FileKind::Base => manifest.base = Some(file),
                FileKind::History => manifest.history.push(file),
                FileKind::Incr => {
                    max_incr_seq = fields.seq;
                    manifest.incrs.push(file);
                }
            }
        }
        Ok(manifest)
    }

    /// The manifest as Redis writes it: base, then history, then incr files, one line each.
    ///
    /// Like Redis, an empty name is written as nothing and a name containing `'` is written
    /// bare, and neither reads back; the server should not choose such names.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let files = self.base.iter().chain(&self.history).chain(&self.incrs);
        for file in files {
            out.push_str("file ");
            if needs_repr(file.name.as_bytes()) {
                push_repr(&mut out, file.name.as_bytes());
            } else {
                out.push_str(&file.name);
            }
            out.push_str(" seq ");
            out.push_str(&file.seq.to_string());
            out.push_str(" type ");
            out.push(file.kind.as_char());
            out.push('\n');
        }
        out
    }

    /// The sequence number Redis gives the next incr file: one past the last incr file's,
    /// or 1 when there is none.
    ///
    /// A running Redis remembers its counter even after every incr file became history (a
    /// rewrite while AOF is off); like a restarted Redis, this only looks at the list.
    pub fn next_incr_seq(&self) -> u64 {
        self.incrs.last().map_or(1, |f| f.seq.saturating_add(1))
    }

    /// The sequence number Redis gives the next base file: one past the base's, or 1.
    pub fn next_base_seq(&self) -> u64 {
        self.base.as_ref().map_or(1, |f| f.seq.saturating_add(1))
    }

    /// Adds a new incr file at the end, as Redis does when it opens one, and returns it.
    pub fn add_incr(&mut self, appendfilename: &str) -> &AofFile {
        let seq = self.next_incr_seq();
        self.incrs.push(AofFile {
            name: incr_name(appendfilename, seq),
            seq,
            kind: FileKind::Incr,
        });
        let last = self.incrs.len() - 1;
        &self.incrs[last]
    }

    /// Installs a new base file after a rewrite, moving the old base (if any) to the front of
    /// the history list, and returns the new base.
    pub fn replace_base(&mut self, appendfilename: &str, rdb_preamble: bool) -> &AofFile {
        let seq = self.next_base_seq();
        if let Some(mut old) = self.base.take() {
            old.kind = FileKind::History;
            self.history.insert(0, old);
        }
        self.base.insert(AofFile {
            name: base_name(appendfilename, seq, rdb_preamble),
            seq,
            kind: FileKind::Base,
        })
    }

    /// Moves the incr files a finished rewrite covered to history, keeping the last one when
    /// AOF is on because it is the file being appended to. Redis walks the list from the end
    /// and prepends each file, so history keeps their order ahead of older entries.
    pub fn mark_rewritten_incrs_as_history(&mut self, aof_enabled: bool) {
        let keep = usize::from(aof_enabled && !self.incrs.is_empty());
        let moved = self.incrs.len() - keep;
        let old: Vec<AofFile> = self
            .incrs
            .drain(..moved)
            .map(|mut f| {
                f.kind = FileKind::History;
                f
            })
            .collect();
        self.history.splice(0..0, old);
    }
}
