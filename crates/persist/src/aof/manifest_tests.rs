//! Tests of manifest parsing and writing against what Redis 7.0.15 writes and refuses.

use proptest::prelude::*;

use super::*;

fn file(name: &str, seq: u64, kind: FileKind) -> AofFile {
    AofFile {
        name: name.to_string(),
        seq,
        kind,
    }
}

fn err(text: &str) -> ManifestError {
    Manifest::parse(text.as_bytes()).unwrap_err()
}

/// Written by redis-server 7.0.15 after one BGREWRITEAOF.
const REDIS_PLAIN: &str = "file appendonly.aof.2.base.rdb seq 2 type b\n\
                           file appendonly.aof.2.incr.aof seq 2 type i\n";

/// Written by redis-server 7.0.15 with `appendfilename 'my "é" file.aof'`,
/// `aof-disable-auto-gc yes` and two rewrites.
const REDIS_QUOTED: &str = r#"file "my \"\xc3\xa9\" file.aof.3.base.rdb" seq 3 type b
file "my \"\xc3\xa9\" file.aof.2.incr.aof" seq 2 type h
file "my \"\xc3\xa9\" file.aof.2.base.rdb" seq 2 type h
file "my \"\xc3\xa9\" file.aof.1.incr.aof" seq 1 type h
file "my \"\xc3\xa9\" file.aof.1.base.rdb" seq 1 type h
file "my \"\xc3\xa9\" file.aof.3.incr.aof" seq 3 type i
"#;

#[test]
fn parses_and_reproduces_redis_manifests() {
    let m = Manifest::parse(REDIS_PLAIN.as_bytes()).unwrap();
    assert_eq!(
        m,
        Manifest {
            base: Some(file("appendonly.aof.2.base.rdb", 2, FileKind::Base)),
            incrs: vec![file("appendonly.aof.2.incr.aof", 2, FileKind::Incr)],
            history: vec![],
        }
    );
    assert_eq!(m.to_text(), REDIS_PLAIN);
    assert_eq!((m.next_base_seq(), m.next_incr_seq()), (3, 3));

    let m = Manifest::parse(REDIS_QUOTED.as_bytes()).unwrap();
    let name = "my \"é\" file.aof";
    assert_eq!(
        m.base,
        Some(file(&format!("{name}.3.base.rdb"), 3, FileKind::Base))
    );
    assert_eq!(m.history.len(), 4);
    assert_eq!(
        m.history[0],
        file(&format!("{name}.2.incr.aof"), 2, FileKind::History)
    );
    assert_eq!(
        m.incrs,
        vec![file(&format!("{name}.3.incr.aof"), 3, FileKind::Incr)]
    );
    assert_eq!(m.to_text(), REDIS_QUOTED);
}

#[test]
fn redis_bookkeeping_reproduces_two_rewrites() {
    // The sequence of manifest changes behind REDIS_QUOTED: start, then twice (open a new
    // incr file when the rewrite starts; install the base and retire incrs when it ends).
    let name = "my \"é\" file.aof";
    let mut m = Manifest::default();
    m.replace_base(name, true);
    m.add_incr(name);
    for _ in 0..2 {
        m.add_incr(name);
        m.replace_base(name, true);
        m.mark_rewritten_incrs_as_history(true);
    }
    assert_eq!(m.to_text(), REDIS_QUOTED);

    // With AOF off every incr file is retired.
    m.mark_rewritten_incrs_as_history(false);
    assert!(m.incrs.is_empty());
    assert_eq!(m.history[0].name, format!("{name}.3.incr.aof"));
    assert_eq!(m.next_incr_seq(), 1);
}

#[test]
fn empty_and_comment_only() {
    assert_eq!(Manifest::parse(b""), Err(ManifestError::Empty));
    assert_eq!(
        Manifest::parse(b"# nothing here\n#nor here").unwrap(),
        Manifest::default()
    );
    let m = Manifest::default();
    assert_eq!(m.to_text(), "");
    assert_eq!((m.next_base_seq(), m.next_incr_seq()), (1, 1));
}

#[test]
fn lenient_where_redis_is() {
    let m = Manifest::parse(
        b"# comment\r\n\
          \t FILE a seq 3 TYPE b  \r\n\
          type i seq +4x file b extra 1\n\
          file 'c d' seq 1 type history file e\n\
          file \"f\\x00g\" seq 99999999999999999999 type incr\n",
    )
    .unwrap();
    assert_eq!(m.base, Some(file("a", 3, FileKind::Base)));
    assert_eq!(m.history, vec![file("e", 1, FileKind::History)]);
    assert_eq!(
        m.incrs,
        vec![
            file("b", 4, FileKind::Incr),
            file("f", i64::MAX as u64, FileKind::Incr)
        ]
    );
    // A key is compared as a C string too.
    let m = Manifest::parse(b"\"file\\x00x\" a seq 1 type b\n").unwrap();
    assert_eq!(m.base, Some(file("a", 1, FileKind::Base)));
}

#[test]
fn long_comment_continues_as_a_line() {
    // Redis reads 1024 bytes at a time: the rest of a long comment is judged on its own.
    let mut text = vec![b'#'; MANIFEST_MAX_LINE];
    text.extend_from_slice(b"file a seq 1 type b\n");
    let m = Manifest::parse(&text).unwrap();
    assert_eq!(m.base, Some(file("a", 1, FileKind::Base)));

    let mut text = vec![b'#'; MANIFEST_MAX_LINE];
    text.extend_from_slice(b"junk\n");
    assert_eq!(
        Manifest::parse(&text),
        Err(ManifestError::FieldCount { line: 2, fields: 1 })
    );
}

#[test]
fn line_length_limit() {
    // 1023 bytes plus the newline fit; one more does not.
    let fixed = "file  seq 1 type b\n".len();
    let fits = format!(
        "file {} seq 1 type b\n",
        "a".repeat(MANIFEST_MAX_LINE - fixed)
    );
    assert_eq!(fits.len(), MANIFEST_MAX_LINE);
    Manifest::parse(fits.as_bytes()).unwrap();
    let long = format!(
        "file {} seq 1 type b\n",
        "a".repeat(MANIFEST_MAX_LINE + 1 - fixed)
    );
    assert_eq!(
        Manifest::parse(long.as_bytes()),
        Err(ManifestError::LineTooLong { line: 1 })
    );
}

#[test]
fn every_error_names_its_line() {
    use ManifestError::*;
    let ok = "# c\nfile a seq 1 type b\n";
    let case = |bad: &str| err(&format!("{ok}{bad}"));
    assert_eq!(case("file x seq 1 type i"), MissingNewline { line: 3 });
    assert_eq!(case("file x\0 seq 1 type i\n"), NulByte { line: 3 });
    assert_eq!(case("\n"), BlankLine { line: 3 });
    assert_eq!(case(" \t\r\n"), BlankLine { line: 3 });
    assert_eq!(case("file \"x seq 1 type i\n"), BadQuotes { line: 3 });
    assert_eq!(case("file \"x\"y seq 1 type i\n"), BadQuotes { line: 3 });
    assert_eq!(case("file x seq 1\n"), FieldCount { line: 3, fields: 4 });
    assert_eq!(
        case("file x seq 1 type i z\n"),
        FieldCount { line: 3, fields: 7 }
    );
    assert_eq!(
        case("file d/x seq 1 type i\n"),
        NotBaseName {
            line: 3,
            name: "d/x".into()
        }
    );
    assert_eq!(
        case("file \"d\\\\x\" seq 1 type i\n"),
        NotBaseName {
            line: 3,
            name: "d\\x".into()
        }
    );
    assert_eq!(
        case("fil x seq 1 type i\n"),
        MissingField {
            line: 3,
            field: "file"
        }
    );
    assert_eq!(
        case("file x seq 0 type i\n"),
        MissingField {
            line: 3,
            field: "seq"
        }
    );
    assert_eq!(
        case("file x seq y type i\n"),
        MissingField {
            line: 3,
            field: "seq"
        }
    );
    assert_eq!(
        case("file x seq 1 type \"\"\n"),
        MissingField {
            line: 3,
            field: "type"
        }
    );
    assert_eq!(
        case("file x seq 1 typ i\n"),
        MissingField {
            line: 3,
            field: "type"
        }
    );
    assert_eq!(case("file x seq 2 type b\n"), DuplicateBase { line: 3 });
    assert_eq!(
        case("file x seq 1 type z\n"),
        UnknownType { line: 3, kind: 'z' }
    );
    assert_eq!(
        case("file x seq -1 type h\n"),
        NegativeSeq { line: 3, seq: -1 }
    );
    assert_eq!(
        case("file \"\\xff\" seq 1 type h\n"),
        NameNotUtf8 { line: 3 }
    );
    assert_eq!(
        case("file x seq -1 type i\n"),
        NonMonotonicSeq {
            line: 3,
            seq: -1,
            previous: 0
        }
    );
    assert_eq!(
        case("file x seq 5 type i\nfile y seq 5 type i\n"),
        NonMonotonicSeq {
            line: 4,
            seq: 5,
            previous: 5
        }
    );
    assert_eq!(
        case("file x seq 5 type i\nfile y seq 4 type i\n"),
        NonMonotonicSeq {
            line: 4,
            seq: 4,
            previous: 5
        }
    );
    assert_eq!(case("\n").line(), Some(3));
    assert_eq!(ManifestError::Empty.line(), None);
    assert_eq!(
        case("file x seq 1 type z\n").to_string(),
        "AOF manifest line 3: unknown file type 'z'"
    );
}

#[test]
fn history_sequence_numbers_are_not_ordered() {
    let m = Manifest::parse(b"file a seq 5 type h\nfile b seq 2 type h\nfile c seq 5 type h\n")
        .unwrap();
    assert_eq!(m.history.len(), 3);
    assert_eq!(m.next_base_seq(), 1);
}

#[test]
fn quotes_only_when_redis_does() {
    let m = Manifest {
        base: Some(file("a b", 1, FileKind::Base)),
        incrs: vec![file("tab\there", 7, FileKind::Incr)],
        history: vec![file("x\"y\u{7f}", 2, FileKind::History)],
    };
    assert_eq!(
        m.to_text(),
        "file \"a b\" seq 1 type b\n\
         file \"x\\\"y\\x7f\" seq 2 type h\n\
         file \"tab\\there\" seq 7 type i\n"
    );
    assert_eq!(Manifest::parse(m.to_text().as_bytes()).unwrap(), m);
}

#[test]
fn names_redis_writes_but_cannot_read() {
    // Redis writes a name with a single quote bare, and then refuses it: a quote opens
    // inside a field. Seen with redis-server 7.0.15 and `appendfilename "a'b.aof"`.
    let m = Manifest {
        base: Some(file("a'b.aof.1.base.rdb", 1, FileKind::Base)),
        ..Manifest::default()
    };
    assert_eq!(m.to_text(), "file a'b.aof.1.base.rdb seq 1 type b\n");
    assert_eq!(
        Manifest::parse(m.to_text().as_bytes()),
        Err(ManifestError::BadQuotes { line: 1 })
    );
    // An empty name is written as nothing at all.
    let m = Manifest {
        base: Some(file("", 1, FileKind::Base)),
        ..Manifest::default()
    };
    assert_eq!(m.to_text(), "file  seq 1 type b\n");
}

#[test]
fn write_manifest_replaces_the_file() {
    let dir = std::env::temp_dir().join(format!(
        "latch-aof-manifest-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("appendonly.aof.manifest"), "old").unwrap();
    let m = Manifest::parse(REDIS_PLAIN.as_bytes()).unwrap();
    write_manifest(&dir, "appendonly.aof", &m).unwrap();
    let written = std::fs::read_to_string(dir.join("appendonly.aof.manifest")).unwrap();
    assert_eq!(written, REDIS_PLAIN);
    assert!(!dir.join("temp-appendonly.aof.manifest").exists());
    assert!(write_manifest(&dir.join("missing"), "appendonly.aof", &m).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

fn arb_name() -> impl Strategy<Value = String> {
    // Any text except what Redis cannot round-trip: path separators, NUL, a bare single
    // quote (when no other byte forces quoting) and the empty name.
    "[^/\\\\\\x00]{1,40}".prop_filter("round-trippable", |s| {
        !s.contains('\'') || super::quote::needs_repr(s.as_bytes())
    })
}

fn arb_file(kind: FileKind) -> impl Strategy<Value = AofFile> {
    (arb_name(), 1..=i64::MAX as u64).prop_map(move |(name, seq)| AofFile { name, seq, kind })
}

fn arb_manifest() -> impl Strategy<Value = Manifest> {
    (
        proptest::option::of(arb_file(FileKind::Base)),
        proptest::collection::vec(arb_file(FileKind::History), 0..4),
        proptest::collection::btree_map(1..=i64::MAX as u64, arb_name(), 0..4),
    )
        .prop_map(|(base, history, incrs)| Manifest {
            base,
            history,
            incrs: incrs
                .into_iter()
                .map(|(seq, name)| AofFile {
                    name,
                    seq,
                    kind: FileKind::Incr,
                })
                .collect(),
        })
}

proptest! {
    #[test]
    fn to_text_round_trips(m in arb_manifest()) {
        let text = m.to_text();
        if text.is_empty() {
            prop_assert_eq!(Manifest::parse(text.as_bytes()), Err(ManifestError::Empty));
        } else {
            prop_assert_eq!(Manifest::parse(text.as_bytes()).unwrap(), m);
        }
    }

    #[test]
    fn parse_never_panics(text in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = Manifest::parse(&text);
    }

    #[test]
    fn parse_never_panics_on_near_manifests(
        lines in proptest::collection::vec(
            "(file|seq|type|FILE|#| |\"|'|\\\\x4|a|/|1|-|0|b|h|i|\r|\n|\t)*\n", 0..6)
    ) {
        let text = lines.concat();
        if let Ok(m) = Manifest::parse(text.as_bytes()) {
            // Whatever parses has the invariants Redis' lists have.
            prop_assert!(m.incrs.windows(2).all(|w| w[0].seq < w[1].seq));
            prop_assert!(m.base.iter().all(|b| b.kind == FileKind::Base));
        }
    }
}
