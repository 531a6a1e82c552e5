//! Intsets: sets of integers as a sorted array of 2, 4 or 8 byte little-endian values,
//! after a header of the width (u32 LE) and the count (u32 LE).

/// Encodes sorted, distinct integers with the narrowest width that holds them all (the
/// set's intset form holds these bytes; this builds them for tests).
#[cfg(test)]
pub(crate) fn build(sorted: &[i64]) -> Vec<u8> {
    let width: usize = if sorted.iter().all(|&v| i16::try_from(v).is_ok()) {
        2
    } else if sorted.iter().all(|&v| i32::try_from(v).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + width * sorted.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(sorted.len() as u32).to_le_bytes());
    for &v in sorted {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

/// Decodes and validates an intset: known width, size matching the count, not empty,
/// strictly ascending.
pub(crate) fn parse(blob: &[u8]) -> Result<Vec<i64>, &'static str> {
    if blob.len() < 8 {
        return Err("intset shorter than its header");
    }
    let width = u32::from_le_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize;
    let count = u32::from_le_bytes([blob[4], blob[5], blob[6], blob[7]]) as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err("intset with unknown width");
    }
    if count.checked_mul(width).and_then(|n| n.checked_add(8)) != Some(blob.len()) {
        return Err("intset size does not match its count");
    }
    if count == 0 {
        return Err("empty intset");
    }
    let values: Vec<i64> = blob[8..]
        .chunks_exact(width)
        .map(|c| match width {
            2 => i16::from_le_bytes([c[0], c[1]]) as i64,
            4 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64,
            _ => i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
        })
        .collect();
    if values.windows(2).any(|w| w[0] >= w[1]) {
        return Err("intset not strictly ascending");
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths() {
        for (values, width) in [
            (vec![-5i64, 0, 32767], 2u8),
            (vec![-40_000, 1], 4),
            (vec![i64::MIN, 0, i64::MAX], 8),
        ] {
            let blob = build(&values);
            assert_eq!(blob[0], width);
            assert_eq!(parse(&blob).unwrap(), values);
        }
    }

    #[test]
    fn invalid() {
        assert!(parse(&build(&[])).is_err());
        assert!(parse(&build(&[3, 2])).is_err());
        assert!(parse(&build(&[2, 2])).is_err());
        let mut blob = build(&[1, 2]);
        blob.pop();
        assert!(parse(&blob).is_err());
        let mut blob = build(&[1, 2]);
        blob[0] = 3;
        assert!(parse(&blob).is_err());
    }
}
