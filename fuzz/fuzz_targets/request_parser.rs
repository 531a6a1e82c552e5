//! Feeds arbitrary bytes to the request parser in two chunks split at a point chosen by
//! the input. Checks that parsing never panics, that consumed plus buffered bytes always
//! add up to what was fed, and that the outcome does not depend on the split.
#![no_main]

use bytes::{Bytes, BytesMut};
use latch_protocol::{RequestError, RequestLimits, RequestParser};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, PartialEq)]
struct Outcome {
    commands: Vec<Vec<Bytes>>,
    error: Option<RequestError>,
    /// Input bytes consumed by the parser.
    consumed: usize,
}

fn run(chunks: &[&[u8]], limits: &RequestLimits, auth_required: bool) -> Outcome {
    let mut parser = RequestParser::new();
    parser.set_auth_required(auth_required);
    let mut buf = BytesMut::new();
    let mut args = Vec::new();
    let mut commands = Vec::new();
    let mut fed = 0usize;
    let mut consumed = 0usize;
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        fed += chunk.len();
        loop {
            let before = buf.len();
            let result = parser.parse(&mut buf, limits, &mut args);
            assert!(buf.len() <= before, "the parser grew the buffer");
            consumed += before - buf.len();
            assert_eq!(consumed + buf.len(), fed, "consumed + remaining != fed");
            match result {
                Ok(true) => {
                    assert!(!args.is_empty(), "empty commands must be skipped");
                    let arg_bytes: usize = args.iter().map(|a| a.len()).sum();
                    assert!(arg_bytes <= consumed, "arguments larger than the input");
                    commands.push(args.clone());
                }
                Ok(false) => break,
                Err(error) => {
                    return Outcome {
                        commands,
                        error: Some(error),
                        consumed,
                    }
                }
            }
        }
    }
    Outcome {
        commands,
        error: None,
        consumed,
    }
}

fuzz_target!(|data: &[u8]| {
    let [a, b, flags, rest @ ..] = data else {
        return;
    };
    let split = usize::from(u16::from_le_bytes([*a, *b])) % (rest.len() + 1);
    let limits = if flags & 1 == 0 {
        RequestLimits::default()
    } else {
        // Small limits so that the "too big" paths are reachable with short inputs.
        RequestLimits {
            max_bulk_len: 64,
            max_inline_len: 32,
            max_multibulk_len: 8,
        }
    };
    let auth_required = flags & 2 != 0;
    let (first, second) = rest.split_at(split);
    let parts = run(&[first, second], &limits, auth_required);
    if rest.len() <= limits.max_inline_len {
        // Below the header size limits the split point cannot change anything.
        let whole = run(&[rest], &limits, auth_required);
        assert_eq!(parts, whole);
    }
});
