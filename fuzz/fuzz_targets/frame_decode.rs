//! Decodes arbitrary bytes as a RESP frame. Checks that decoding never panics, that a
//! decoded frame re-encodes canonically and stably, and that every prefix of a complete
//! frame is reported as incomplete.
#![no_main]

use bytes::BytesMut;
use latch_protocol::frame::{decode, encode, encode_resp2, Frame};
use libfuzzer_sys::fuzz_target;

fn encoded(f: &Frame) -> BytesMut {
    let mut out = BytesMut::new();
    encode(f, &mut out);
    out
}

fuzz_target!(|data: &[u8]| {
    let Ok(Some((frame, used))) = decode(data) else {
        return;
    };
    assert!(used > 0 && used <= data.len());

    // Only the first `used` bytes matter.
    let (again, used_again) = decode(&data[..used]).unwrap().unwrap();
    assert_eq!(used_again, used);
    assert_eq!(encoded(&again), encoded(&frame));

    // Strict prefixes are incomplete, not errors.
    for cut in [0, used / 2, used - 1] {
        assert_eq!(decode(&data[..cut]), Ok(None), "prefix of {cut} bytes");
    }

    // Canonical encoding is stable: encode(decode(encode(f))) == encode(f).
    let canonical = encoded(&frame);
    let (reparsed, n) = decode(&canonical).unwrap().unwrap();
    assert_eq!(n, canonical.len());
    assert_eq!(encoded(&reparsed), canonical);

    // The RESP2 form is always a single well-formed frame.
    let mut resp2 = BytesMut::new();
    encode_resp2(&frame, &mut resp2);
    let (_, n) = decode(&resp2).unwrap().unwrap();
    assert_eq!(n, resp2.len());
});
