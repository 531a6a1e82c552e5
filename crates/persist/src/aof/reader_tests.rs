//! Tests of reading command files: clean files, every truncation point, corruption offsets,
//! transactions, annotations, limits, and arbitrary input.

use bytes::Bytes;
use proptest::prelude::*;

use super::*;

fn cmd(args: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_command(&mut out, args);
    out
}

/// Reads everything, returning the commands and how it ended.
fn read_all(data: &[u8], start: usize) -> (Vec<Vec<Bytes>>, Result<(), AofReadError>, usize) {
    let mut reader = CommandReader::new(data, start);
    let mut cmds = Vec::new();
    loop {
        match reader.next() {
            Ok(Some(c)) => cmds.push(c),
            Ok(None) => return (cmds, Ok(()), reader.offset()),
            Err(e) => return (cmds, Err(e), reader.offset()),
        }
    }
}

fn corrupt_at(data: &[u8]) -> usize {
    match read_all(data, 0).1 {
        Err(AofReadError::Corrupt { offset, .. }) => offset,
        other => panic!(
            "expected Corrupt for {:?}, got {other:?}",
            data.escape_ascii().to_string()
        ),
    }
}

fn truncated_at(data: &[u8]) -> usize {
    match read_all(data, 0).1 {
        Err(AofReadError::Truncated { valid_up_to }) => valid_up_to,
        other => panic!(
            "expected Truncated for {:?}, got {other:?}",
            data.escape_ascii().to_string()
        ),
    }
}

#[test]
fn reads_a_clean_file() {
    let mut data = b"#TS:1700000000\r\n".to_vec();
    encode_select(&mut data, 0);
    let after_select = data.len();
    data.extend(cmd(&["SET", "k", "a\r\nb"]));
    data.extend(cmd(&["SET", "empty", ""]));
    let mut reader = CommandReader::new(&data, 0);
    assert_eq!(reader.offset(), 0);
    assert_eq!(reader.next().unwrap().unwrap(), vec!["SELECT", "0"]);
    assert_eq!(reader.offset(), after_select);
    assert_eq!(reader.next().unwrap().unwrap(), vec!["SET", "k", "a\r\nb"]);
    assert_eq!(
        reader.next_borrowed().unwrap().unwrap(),
        vec![&b"SET"[..], b"empty", b""]
    );
    assert_eq!(reader.next(), Ok(None));
    assert_eq!(reader.next(), Ok(None));
    assert_eq!(reader.offset(), data.len());
}

#[test]
fn empty_input_and_start_offsets() {
    assert_eq!(CommandReader::new(b"", 0).next(), Ok(None));
    let data = cmd(&["PING"]);
    assert_eq!(CommandReader::new(&data, data.len()).next(), Ok(None));
    assert_eq!(CommandReader::new(&data, data.len() + 10).next(), Ok(None));
    assert_eq!(
        CommandReader::new(&data, data.len() + 10).offset(),
        data.len()
    );
}

#[test]
fn rdb_preamble_then_commands() {
    // A legacy single file: the caller loads the RDB part and hands over its end.
    let mut data = b"REDIS0010\xfa\xff12345678".to_vec();
    let rdb_end = data.len();
    data.extend(cmd(&["SET", "a", "1"]));
    assert!(starts_with_rdb_preamble(&data));
    assert!(!starts_with_rdb_preamble(b"REDI"));
    assert!(!starts_with_rdb_preamble(&cmd(&["SET"])));
    let (cmds, end, _) = read_all(&data, rdb_end);
    assert_eq!(cmds, vec![vec!["SET", "a", "1"]]);
    assert_eq!(end, Ok(()));
    // Redis' own loader reports 0 here (it only counts commands), and cutting there would
    // destroy the preamble; this reader starts counting at the offset it is given.
    let mut reader = CommandReader::new(&data[..data.len() - 1], rdb_end);
    assert_eq!(
        reader.next(),
        Err(AofReadError::Truncated {
            valid_up_to: rdb_end
        })
    );
}

#[test]
fn every_truncation_point_of_a_file() {
    let units = [
        cmd(&["SELECT", "0"]),
        b"#TS:1\r\n".to_vec(),
        cmd(&["SET", "key", "value"]),
        cmd(&["DEL", ""]),
    ];
    let data = units.concat();
    let mut boundaries = vec![0];
    for u in &units {
        boundaries.push(boundaries.last().unwrap() + u.len());
    }
    let annotation = boundaries[1]..boundaries[2];
    for split in 0..=data.len() {
        let last = *boundaries.iter().rev().find(|&&b| b <= split).unwrap();
        let (_, end, offset) = read_all(&data[..split], 0);
        if boundaries.contains(&split) || annotation.contains(&split) {
            assert_eq!(end, Ok(()), "split {split}");
            assert_eq!(offset, last, "split {split}");
        } else {
            assert_eq!(
                end,
                Err(AofReadError::Truncated { valid_up_to: last }),
                "split {split}"
            );
        }
    }
}

#[test]
fn corruption_offsets() {
    let good = cmd(&["SET", "k", "v"]);
    let n = good.len();
    let with = |tail: &[u8]| [good.as_slice(), tail].concat();
    assert_eq!(corrupt_at(b"x"), 0);
    assert_eq!(corrupt_at(b"\r\n"), 0);
    assert_eq!(corrupt_at(&with(b"?")), n);
    assert_eq!(corrupt_at(&with(b" *1\r\n")), n);
    assert_eq!(corrupt_at(&with(b"*a")), n + 1);
    assert_eq!(corrupt_at(&with(b"*-1\r\n")), n + 1);
    assert_eq!(corrupt_at(&with(b"*0\r\n")), n + 1);
    assert_eq!(corrupt_at(&with(b"*1 \r\n")), n + 2);
    assert_eq!(corrupt_at(&with(b"*1\n")), n + 2);
    assert_eq!(corrupt_at(&with(b"*1\rx")), n + 3);
    assert_eq!(corrupt_at(&with(b"*1\r\n%3\r\n")), n + 4);
    assert_eq!(corrupt_at(&with(b"*1\r\n*1\r\n")), n + 4);
    assert_eq!(corrupt_at(&with(b"*1\r\n$\r\n")), n + 5);
    assert_eq!(corrupt_at(&with(b"*1\r\n$-1\r\n")), n + 5);
    assert_eq!(corrupt_at(&with(b"*1\r\n$1x")), n + 6);
    assert_eq!(corrupt_at(&with(b"*1\r\n$3\r\nfooXY")), n + 11);
    assert_eq!(corrupt_at(&with(b"*1\r\n$3\r\nfoo\rY")), n + 12);
    assert_eq!(corrupt_at(&with(b"*1\r\n$3\r\nfoo\r\n$")), n + 13);
    // Too many arguments or too long a string is corruption, found before any allocation.
    assert_eq!(corrupt_at(&with(b"*2147483648\r\n")), n + 1);
    assert_eq!(corrupt_at(&with(b"*99999999999999999999999999\r\n")), n + 1);
    assert_eq!(corrupt_at(&with(b"*1\r\n$536870913\r\n")), n + 5);
    assert_eq!(truncated_at(&with(b"*2147483647\r\n")), n);
    assert_eq!(truncated_at(&with(b"*1\r\n$536870912\r\n")), n);

    let data = with(b"*1\r\n$1x");
    let err = read_all(&data, 0).1.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "bad AOF format at offset {}: expected '\\r' after the argument length, \
             found 'x' (in the command starting at offset {n})",
            n + 6
        )
    );
}

#[test]
fn errors_repeat_and_earlier_commands_survive() {
    let set = cmd(&["SET", "k", "v"]);
    let data = [set.clone(), b"*1\r\n$3\r\nab".to_vec()].concat();
    let mut reader = CommandReader::new(&data, 0);
    assert!(reader.next().unwrap().is_some());
    let first = reader.next();
    assert_eq!(
        first,
        Err(AofReadError::Truncated {
            valid_up_to: set.len()
        })
    );
    assert_eq!(reader.next(), first);
    assert_eq!(reader.offset(), set.len());
}

#[test]
fn custom_limits() {
    let limits = ReadLimits {
        max_args: 2,
        max_bulk_len: 3,
    };
    let read = |data: &[u8]| CommandReader::with_limits(data, 0, limits).next();
    assert!(read(&cmd(&["GET", "abc"])).unwrap().is_some());
    assert!(matches!(
        read(&cmd(&["GET", "a", "b"])),
        Err(AofReadError::Corrupt { offset: 1, .. })
    ));
    assert!(matches!(
        read(&cmd(&["GET", "abcd"])),
        Err(AofReadError::Corrupt { offset: 14, .. })
    ));
}

#[test]
fn multi_without_exec_reverts_to_the_multi() {
    let set = cmd(&["SET", "a", "1"]);
    let multi = cmd(&["multi"]);
    let incr = cmd(&["INCR", "n"]);
    let exec = cmd(&["EXEC"]);

    let whole = [set.clone(), multi.clone(), incr.clone(), exec.clone()].concat();
    let (cmds, end, offset) = read_all(&whole, 0);
    assert_eq!((cmds.len(), end, offset), (4, Ok(()), whole.len()));

    // A clean end inside the transaction: all commands come out, then Truncated at MULTI.
    let open = [set.clone(), multi.clone(), incr.clone()].concat();
    let mut reader = CommandReader::new(&open, 0);
    for _ in 0..3 {
        reader.next().unwrap().unwrap();
    }
    assert_eq!(reader.pending_multi(), Some(set.len()));
    assert_eq!(
        reader.next(),
        Err(AofReadError::Truncated {
            valid_up_to: set.len()
        })
    );
    // The same when the file ends mid-command inside the transaction, or mid-EXEC.
    assert_eq!(truncated_at(&open[..open.len() - 3]), set.len());
    assert_eq!(truncated_at(&whole[..whole.len() - 1]), set.len());
    assert_eq!(truncated_at(&multi), 0);

    // A nested MULTI does not move the start; EXEC without MULTI is just a command.
    let nested = [
        exec.clone(),
        multi.clone(),
        b"#TS:9\r\n".to_vec(),
        multi.clone(),
    ]
    .concat();
    assert_eq!(truncated_at(&nested), exec.len());
    let after = [nested.clone(), exec.clone(), set.clone()].concat();
    let (cmds, end, _) = read_all(&after, 0);
    assert_eq!((cmds.len(), end), (5, Ok(())));
}

#[test]
fn annotations() {
    let set = cmd(&["SET", "a", "1"]);
    // Redis accepts a file ending in an annotation without its newline; the offset stays
    // before it so that a writer can cut it off before appending.
    let data = [set.clone(), b"#TS:17".to_vec()].concat();
    let (cmds, end, offset) = read_all(&data, 0);
    assert_eq!((cmds.len(), end, offset), (1, Ok(()), set.len()));

    // Redis reads annotations 1023 bytes at a time: the rest of a longer one is read as if
    // it started a line.
    let mut long = vec![b'#'; 1023];
    long.extend_from_slice(b"x\r\n");
    assert_eq!(corrupt_at(&long), 1023);
    let mut long = vec![b'#'; 1023];
    long.extend(set.clone());
    let (cmds, end, _) = read_all(&long, 0);
    assert_eq!((cmds.len(), end), (1, Ok(())));
    let mut fits = vec![b'#'; 1022];
    fits.extend_from_slice(b"\n");
    fits.extend(set);
    let (cmds, end, _) = read_all(&fits, 0);
    assert_eq!((cmds.len(), end), (1, Ok(())));
}

/// One piece of a generated file.
#[derive(Debug, Clone)]
enum Unit {
    Command(Vec<Vec<u8>>),
    Annotation(Vec<u8>),
    Transaction(Vec<Unit>),
}

fn arb_command() -> impl Strategy<Value = Vec<Vec<u8>>> {
    (
        "[A-Z]{1,6}".prop_filter("not a transaction keyword", |s| s != "MULTI" && s != "EXEC"),
        proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 0..4),
    )
        .prop_map(|(name, mut rest)| {
            rest.insert(0, name.into_bytes());
            rest
        })
}

fn arb_annotation() -> impl Strategy<Value = Vec<u8>> {
    "#[^\n]{0,20}\r\n".prop_map(String::into_bytes)
}

fn arb_unit() -> impl Strategy<Value = Unit> {
    let simple = prop_oneof![
        3 => arb_command().prop_map(Unit::Command),
        1 => arb_annotation().prop_map(Unit::Annotation),
    ];
    prop_oneof![
        4 => simple.clone(),
        1 => proptest::collection::vec(simple, 0..4).prop_map(Unit::Transaction),
    ]
}

/// Appends a unit; returns (end offset of each command, ranges of top-level annotations).
fn render(unit: &Unit, out: &mut Vec<u8>, command_ends: &mut Vec<usize>) {
    match unit {
        Unit::Command(args) => {
            encode_command(out, args);
            command_ends.push(out.len());
        }
        Unit::Annotation(text) => out.extend_from_slice(text),
        Unit::Transaction(inner) => {
            encode_command(out, &["MULTI"]);
            command_ends.push(out.len());
            for u in inner {
                render(u, out, command_ends);
            }
            encode_command(out, &["EXEC"]);
            command_ends.push(out.len());
        }
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        data in proptest::collection::vec(any::<u8>(), 0..200),
        start in 0usize..220,
        max_args in 0usize..5,
        max_bulk_len in 0usize..20,
    ) {
        for limits in [ReadLimits::default(), ReadLimits { max_args, max_bulk_len }] {
            let mut reader = CommandReader::with_limits(&data, start, limits);
            for _ in 0..=data.len() {
                if !matches!(reader.next(), Ok(Some(_))) {
                    break;
                }
            }
            prop_assert!(reader.offset() <= data.len());
        }
    }

    #[test]
    fn near_valid_bytes_never_panic(
        pieces in proptest::collection::vec(
            "(\\*|\\$|[0-9]{1,3}|\r|\n|\r\n|#|MULTI|EXEC|x)", 0..40)
    ) {
        let data = pieces.concat();
        let (_, end, offset) = read_all(data.as_bytes(), 0);
        prop_assert!(offset <= data.len());
        if let Err(AofReadError::Corrupt { offset, .. }) = end {
            prop_assert!(offset < data.len());
        }
    }

    #[test]
    fn every_split_of_a_valid_file_is_clean_or_truncated(
        units in proptest::collection::vec(arb_unit(), 0..8),
        split_seed in any::<proptest::sample::Index>(),
    ) {
        let mut data = Vec::new();
        let mut command_ends = Vec::new();
        // Boundaries are where a top-level unit ends; `lenient` are split points inside a
        // top-level annotation, where the file still ends cleanly.
        let mut boundaries = vec![0];
        let mut lenient = Vec::new();
        for unit in &units {
            let start = data.len();
            render(unit, &mut data, &mut command_ends);
            if let Unit::Annotation(_) = unit {
                lenient.extend(start + 1..data.len());
            }
            boundaries.push(data.len());
        }
        let (cmds, end, _) = read_all(&data, 0);
        prop_assert_eq!(end, Ok(()));
        prop_assert_eq!(cmds.len(), command_ends.len());

        let split = split_seed.index(data.len() + 1);
        let last = *boundaries.iter().rev().find(|&&b| b <= split).unwrap();
        let (cmds, end, offset) = read_all(&data[..split], 0);
        prop_assert_eq!(cmds.len(), command_ends.iter().filter(|&&e| e <= split).count());
        if boundaries.contains(&split) || lenient.contains(&split) {
            prop_assert_eq!(end, Ok(()));
            prop_assert_eq!(offset, last);
        } else {
            prop_assert_eq!(end, Err(AofReadError::Truncated { valid_up_to: last }));
        }
    }
}
