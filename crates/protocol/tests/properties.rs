//! Property tests across the public API: request parsing is independent of how the
//! stream is split, frames round-trip, and no input makes the parsers panic.

use bytes::{Bytes, BytesMut};
use latch_protocol::frame::{decode, encode, encode_resp2};
use latch_protocol::{Frame, RequestError, RequestLimits, RequestParser};
use proptest::collection::vec;
use proptest::prelude::*;

type Command = Vec<Vec<u8>>;

/// One request as it appears on the wire, and the command it must parse to (None for
/// requests that are skipped silently).
#[derive(Clone, Debug)]
struct WireRequest {
    bytes: Vec<u8>,
    command: Option<Command>,
}

fn encode_multibulk(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn multibulk_request() -> impl Strategy<Value = WireRequest> {
    vec(vec(any::<u8>(), 0..20), 1..6).prop_map(|args| WireRequest {
        bytes: encode_multibulk(&args),
        command: Some(args),
    })
}

/// An inline argument and its quoted or plain spelling.
fn inline_arg() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
    prop_oneof![
        "[a-zA-Z0-9_:.-]{1,8}".prop_map(|s| (s.clone().into_bytes(), s.into_bytes())),
        // Double quoted, with every byte escaped as \xHH.
        vec(any::<u8>(), 0..6).prop_map(|v| {
            let mut spelled = b"\"".to_vec();
            for b in &v {
                spelled.extend_from_slice(format!("\\x{b:02x}").as_bytes());
            }
            spelled.push(b'"');
            (v, spelled)
        }),
        // Single quoted, spaces and double quotes inside.
        "[a-z \"]{0,6}".prop_map(|s| {
            let spelled = format!("'{s}'").into_bytes();
            (s.into_bytes(), spelled)
        }),
    ]
}

fn inline_request() -> impl Strategy<Value = WireRequest> {
    (vec(inline_arg(), 1..5), any::<bool>()).prop_map(|(args, crlf)| {
        let mut bytes = Vec::new();
        let mut command = Vec::new();
        for (i, (value, spelled)) in args.into_iter().enumerate() {
            if i > 0 {
                bytes.push(b' ');
            }
            bytes.extend_from_slice(&spelled);
            command.push(value);
        }
        bytes.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
        WireRequest {
            bytes,
            command: Some(command),
        }
    })
}

fn empty_request() -> impl Strategy<Value = WireRequest> {
    prop_oneof![
        Just(&b"*0\r\n"[..]),
        Just(&b"*-1\r\n"[..]),
        Just(&b"\r\n"[..]),
        Just(&b"\n"[..]),
        Just(&b"  \t \r\n"[..]),
    ]
    .prop_map(|b| WireRequest {
        bytes: b.to_vec(),
        command: None,
    })
}

fn request() -> impl Strategy<Value = WireRequest> {
    prop_oneof![
        4 => multibulk_request(),
        2 => inline_request(),
        1 => empty_request(),
    ]
}

/// Parses all complete commands in `buf`.
fn drain(
    parser: &mut RequestParser,
    buf: &mut BytesMut,
    out: &mut Vec<Command>,
) -> Result<(), RequestError> {
    let limits = RequestLimits::default();
    let mut args = Vec::new();
    while parser.parse(buf, &limits, &mut args)? {
        out.push(args.iter().map(|a| a.to_vec()).collect());
    }
    Ok(())
}

/// Feeds `chunks` one after the other. Returns the commands, the outcome, and how many
/// input bytes were not consumed (including chunks never fed because of an error).
fn parse_chunks(chunks: &[&[u8]]) -> (Vec<Command>, Result<(), RequestError>, usize) {
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        buf.extend_from_slice(chunk);
        if let Err(e) = drain(&mut parser, &mut buf, &mut out) {
            let unfed: usize = chunks[i + 1..].iter().map(|c| c.len()).sum();
            return (out, Err(e), buf.len() + unfed);
        }
    }
    (out, Ok(()), buf.len())
}

/// A frame whose decode(encode(f)) == f (finite or infinite doubles, no NaN).
fn frame() -> impl Strategy<Value = Frame> {
    let line = "[^\r\n]{0,12}".prop_map(|s| Bytes::from(s.into_bytes()));
    let data = vec(any::<u8>(), 0..24).prop_map(Bytes::from);
    let double = prop_oneof![
        any::<f64>().prop_filter("no NaN", |d| !d.is_nan()),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
    ];
    let leaf = prop_oneof![
        line.clone().prop_map(Frame::Simple),
        line.prop_map(Frame::Error),
        any::<i64>().prop_map(Frame::Integer),
        data.clone().prop_map(Frame::Bulk),
        Just(Frame::Null),
        double.prop_map(Frame::Double),
        any::<bool>().prop_map(Frame::Boolean),
        "[-+]?[0-9]{1,40}".prop_map(|s| Frame::BigNumber(Bytes::from(s.into_bytes()))),
        (any::<[u8; 3]>(), data.clone())
            .prop_map(|(format, text)| Frame::Verbatim { format, text }),
        data.prop_map(Frame::BulkError),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Frame::Array),
            vec((inner.clone(), inner.clone()), 0..4).prop_map(Frame::Map),
            vec(inner.clone(), 0..6).prop_map(Frame::Set),
            vec(inner, 0..6).prop_map(Frame::Push),
        ]
    })
}

fn encoded(f: &Frame) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode(f, &mut out);
    out.to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn pipelined_stream_parses_the_same_at_every_split(reqs in vec(request(), 1..8)) {
        let stream: Vec<u8> = reqs.iter().flat_map(|r| r.bytes.clone()).collect();
        let expected: Vec<Command> = reqs.iter().filter_map(|r| r.command.clone()).collect();

        let (whole, res, left) = parse_chunks(&[&stream]);
        prop_assert_eq!(res, Ok(()));
        prop_assert_eq!(left, 0);
        prop_assert_eq!(&whole, &expected);

        for split in 0..=stream.len() {
            let (a, b) = stream.split_at(split);
            let (got, res, left) = parse_chunks(&[a, b]);
            prop_assert_eq!(res, Ok(()));
            prop_assert_eq!(left, 0);
            prop_assert_eq!(&got, &expected, "split at {}", split);
        }

        // One byte at a time.
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        let (got, res, _) = parse_chunks(&bytes);
        prop_assert_eq!(res, Ok(()));
        prop_assert_eq!(&got, &expected);
    }

    #[test]
    fn multibulk_round_trips(args in vec(vec(any::<u8>(), 0..300), 1..10)) {
        let wire = encode_multibulk(&args);
        let (got, res, left) = parse_chunks(&[&wire]);
        prop_assert_eq!(res, Ok(()));
        prop_assert_eq!(left, 0);
        prop_assert_eq!(got, vec![args]);
    }

    #[test]
    fn request_parser_never_panics_and_is_split_invariant(
        data in vec(any::<u8>(), 0..300),
        split in any::<prop::sample::Index>(),
    ) {
        let split = split.index(data.len() + 1);
        let whole = parse_chunks(&[&data]);
        let (a, b) = data.split_at(split);
        let parts = parse_chunks(&[a, b]);
        // Inputs are far below the 64 KiB header limits, so splitting changes nothing.
        prop_assert_eq!(whole, parts);
    }

    /// Streams made of protocol fragments, odd ones included (leading zeros, signs, NULs,
    /// empty and negative counts, a missing `$`): a request that arrives whole takes the
    /// one-pass path, the same bytes one at a time take the resumable one, and both must
    /// agree on every command and on the error.
    #[test]
    fn one_pass_and_resumable_paths_agree(
        fragments in vec(prop::sample::select(vec![
            "*1\r\n", "*2\r\n", "*3\r\n", "*0\r\n", "*-1\r\n", "*01\r\n", "*+1\r\n",
            "$3\r\n", "$0\r\n", "$1\r\n", "$03\r\n", "$-1\r\n", "$+1\r\n", "$x\r\n",
            "abc", "a", "\r\n", "\r", "\0", " ", "ping\r\n",
            "*3\r\n$3\r\nset\r\n$1\r\nk\r\n$1\r\nv\r\n",
            "*1\r\n$4\r\nping\r\n",
        ]), 1..12),
    ) {
        let stream: Vec<u8> = fragments.concat().into_bytes();
        let whole = parse_chunks(&[&stream]);
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        let (got, res, _) = parse_chunks(&bytes);
        prop_assert_eq!(&whole.0, &got);
        prop_assert_eq!(whole.1, res);
    }

    #[test]
    fn frame_round_trips(f in frame()) {
        let wire = encoded(&f);
        prop_assert_eq!(decode(&wire), Ok(Some((f.clone(), wire.len()))));
        // Followed by more data, only the frame is consumed.
        let mut more = wire.clone();
        more.extend_from_slice(b":1\r\n");
        prop_assert_eq!(decode(&more), Ok(Some((f, wire.len()))));
        // Every strict prefix is incomplete, never an error.
        for cut in 0..wire.len() {
            prop_assert_eq!(decode(&wire[..cut]), Ok(None));
        }
    }

    #[test]
    fn resp2_encoding_decodes(f in frame()) {
        let mut out = BytesMut::new();
        encode_resp2(&f, &mut out);
        let got = decode(&out);
        prop_assert!(matches!(got, Ok(Some((_, n))) if n == out.len()), "{:?}", got);
    }

    #[test]
    fn frame_decode_never_panics(data in vec(any::<u8>(), 0..300)) {
        if let Ok(Some((f, n))) = decode(&data) {
            prop_assert!(n <= data.len());
            // The decoded frame re-encodes into something that decodes to it again
            // (NaN excepted, which is never equal to itself).
            let again = decode(&encoded(&f)).unwrap().unwrap().0;
            if !format!("{f:?}").contains("NaN") {
                prop_assert_eq!(again, f);
            }
        }
    }

    #[test]
    fn frame_decode_never_panics_on_frame_like_bytes(
        parts in vec(prop::sample::select(vec![
            "*", "%", "|", "$", "=", "!", ":", ",", "#", "(", "_", "+", "1", "2", "-", "\r\n",
            "t", "txt:",
        ]), 0..60)
    ) {
        let data: Vec<u8> = parts.concat().into_bytes();
        let _ = decode(&data);
    }
}

#[test]
fn nan_double_round_trips_as_nan() {
    let wire = encoded(&Frame::Double(f64::NAN));
    assert_eq!(wire, b",nan\r\n");
    match decode(&wire) {
        Ok(Some((Frame::Double(d), 6))) => assert!(d.is_nan()),
        other => panic!("unexpected {other:?}"),
    }
}
