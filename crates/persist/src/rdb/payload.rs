//! `DUMP` and `RESTORE` payloads: one value in RDB form, its type byte first, followed by
//! the RDB version (2 bytes LE) and a CRC-64 of everything before the CRC (8 bytes LE).

use latch_keyspace::Value;

use super::decode::{read_object, Input};
use super::encode::{put_string, put_typed_value};
use super::{opcodes, types, RdbError, RDB_VERSION};
use crate::crc64::crc64;

/// The payload `DUMP` returns for `value`.
pub fn dump_payload(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    put_typed_value(&mut out, None, value);
    seal(out)
}

/// Checks a payload's footer (RDB version at most ours, CRC-64 right); returns the body.
fn checked_body(payload: &[u8]) -> Result<&[u8], RdbError> {
    footer_checked_body(payload, true)
}

/// [`checked_body`], the CRC checked only when `check_crc`.
fn footer_checked_body(payload: &[u8], check_crc: bool) -> Result<&[u8], RdbError> {
    let Some(body_len) = payload.len().checked_sub(10) else {
        return Err(RdbError::BadPayload);
    };
    let footer = &payload[body_len..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let mut stored = [0u8; 8];
    stored.copy_from_slice(&footer[2..]);
    if version > RDB_VERSION
        || (check_crc && crc64(0, &payload[..body_len + 2]) != u64::from_le_bytes(stored))
    {
        return Err(RdbError::BadPayload);
    }
    Ok(&payload[..body_len])
}

fn seal(mut out: Vec<u8>) -> Vec<u8> {
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The payload `FUNCTION DUMP` returns: each library's code as an RDB `FUNCTION2` record,
/// then the same footer as `DUMP`.
pub fn dump_functions<C: AsRef<[u8]>>(libraries: &[C]) -> Vec<u8> {
    let mut out = Vec::new();
    for code in libraries {
        out.push(opcodes::FUNCTION2);
        put_string(&mut out, code.as_ref());
    }
    seal(out)
}

/// The libraries' code in a `FUNCTION RESTORE` payload. `Ok(Err(byte))`: a record that is
/// not a function (its opcode), which Redis reports apart from a damaged payload.
pub fn restore_functions(payload: &[u8]) -> Result<Result<Vec<Vec<u8>>, u8>, RdbError> {
    let body = checked_body(payload)?;
    let mut input = Input::new(body);
    let mut libraries = Vec::new();
    while input.offset() < body.len() as u64 {
        let opcode = input.byte()?;
        if opcode != opcodes::FUNCTION2 {
            return Ok(Err(opcode));
        }
        libraries.push(input.read_string()?);
    }
    Ok(Ok(libraries))
}

/// Decodes a `RESTORE` payload after checking its footer as Redis does (version at most
/// ours, CRC right). The value must use up the payload exactly, and may not be an empty
/// collection.
pub fn restore_payload(payload: &[u8]) -> Result<Value, RdbError> {
    restore_payload_checking(payload, true)
}

/// [`restore_payload`], the CRC checked only when `check_crc` (Redis' DEBUG
/// SET-SKIP-CHECKSUM-VALIDATION turns it off; the value is still decoded with every check).
pub fn restore_payload_checking(payload: &[u8], check_crc: bool) -> Result<Value, RdbError> {
    let mut input = Input::new(footer_checked_body(payload, check_crc)?);
    let kind = input.byte()?;
    if !types::is_object_type(kind) {
        return Err(RdbError::UnknownType {
            code: kind,
            offset: 0,
        });
    }
    let value = read_object(&mut input, kind)?.ok_or(RdbError::EmptyValue)?;
    if !input.at_end()? {
        return Err(input.corrupt("trailing bytes after the value"));
    }
    Ok(value)
}
