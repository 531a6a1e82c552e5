//! Writing entries of an AOF command file exactly as Redis appends them.

/// Appends one command as a RESP array of bulk strings: `*N\r\n` then `$len\r\narg\r\n` for
/// each argument, which is the only form Redis writes to an AOF.
pub fn encode_command(out: &mut Vec<u8>, args: &[impl AsRef<[u8]>]) {
    out.push(b'*');
    push_decimal(out, args.len());
    out.extend_from_slice(b"\r\n");
    for arg in args {
        let arg = arg.as_ref();
        out.push(b'$');
        push_decimal(out, arg.len());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends the `SELECT` Redis writes before a command for a database other than the last one.
pub fn encode_select(out: &mut Vec<u8>, db: usize) {
    encode_command(out, &[b"SELECT".as_slice(), db.to_string().as_bytes()]);
}

/// Appends the timestamp annotation Redis writes when `aof-timestamp-enabled` is on:
/// `#TS:<unix seconds>\r\n`. Loaders skip lines starting with `#`.
pub fn encode_timestamp_annotation(out: &mut Vec<u8>, unix_secs: i64) {
    out.extend_from_slice(b"#TS:");
    out.extend_from_slice(unix_secs.to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn push_decimal(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(n.to_string().as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_redis() {
        let mut out = Vec::new();
        encode_command(&mut out, &["SET", "key", ""]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$0\r\n\r\n");

        out.clear();
        encode_command(&mut out, &[b"x\r\ny".to_vec()]);
        assert_eq!(out, b"*1\r\n$4\r\nx\r\ny\r\n");

        out.clear();
        encode_select(&mut out, 12);
        assert_eq!(out, b"*2\r\n$6\r\nSELECT\r\n$2\r\n12\r\n");

        out.clear();
        encode_timestamp_annotation(&mut out, 1_700_000_000);
        assert_eq!(out, b"#TS:1700000000\r\n");
    }

    #[test]
    fn empty_command_has_zero_count() {
        // Nobody writes this, but the encoding must still be well-formed RESP.
        let mut out = Vec::new();
        encode_command(&mut out, &[] as &[&[u8]]);
        assert_eq!(out, b"*0\r\n");
    }
}
