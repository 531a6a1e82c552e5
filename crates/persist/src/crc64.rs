//! The CRC-64 Redis puts at the end of RDB files and `DUMP` payloads: the "Jones"
//! polynomial (0xad93d23594c935a9), reflected, with an initial value and final xor of zero.
//!
//! The tables are built at compile time and the input is consumed eight bytes at a time
//! ("slicing by 8"), which is several times faster than one table lookup per byte.

/// The polynomial with its bits reversed, as a reflected CRC uses it.
const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

const fn build_tables() -> [[u64; 256]; 8] {
    let mut tables = [[0u64; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY_REFLECTED
            } else {
                crc >> 1
            };
            bit += 1;
        }
        tables[0][i] = crc;
        i += 1;
    }
    // Table k advances a byte through k further zero bytes, so eight lookups can be
    // combined with xor.
    let mut i = 0;
    while i < 256 {
        let mut k = 1;
        while k < 8 {
            let prev = tables[k - 1][i];
            tables[k][i] = (prev >> 8) ^ tables[0][(prev & 0xff) as usize];
            k += 1;
        }
        i += 1;
    }
    tables
}

static TABLES: [[u64; 256]; 8] = build_tables();

/// Continues the checksum `crc` over `data`; start with 0.
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes([
            chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7],
        ]);
        let x = crc ^ word;
        crc = TABLES[7][(x & 0xff) as usize]
            ^ TABLES[6][((x >> 8) & 0xff) as usize]
            ^ TABLES[5][((x >> 16) & 0xff) as usize]
            ^ TABLES[4][((x >> 24) & 0xff) as usize]
            ^ TABLES[3][((x >> 32) & 0xff) as usize]
            ^ TABLES[2][((x >> 40) & 0xff) as usize]
            ^ TABLES[1][((x >> 48) & 0xff) as usize]
            ^ TABLES[0][(x >> 56) as usize];
    }
    for &byte in chunks.remainder() {
        crc = TABLES[0][((crc ^ byte as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::crc64;

    /// One table lookup per byte: the definition the sliced version must agree with.
    fn bytewise(mut crc: u64, data: &[u8]) -> u64 {
        for &byte in data {
            crc ^= byte as u64;
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ super::POLY_REFLECTED
                } else {
                    crc >> 1
                };
            }
        }
        crc
    }

    #[test]
    fn check_value() {
        assert_eq!(crc64(0, b"123456789"), 0xe9c6d914c4b8d9ca);
        assert_eq!(crc64(0, b""), 0);
    }

    #[test]
    fn longer_text() {
        let text = b"This is a test of the emergency broadcast system.";
        assert_eq!(crc64(0, text), bytewise(0, text));
    }

    #[test]
    fn sliced_matches_bytewise_and_continues() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for len in [0, 1, 7, 8, 9, 15, 16, 17, 100, 1000] {
            assert_eq!(crc64(0, &data[..len]), bytewise(0, &data[..len]), "{len}");
        }
        let whole = crc64(0, &data);
        let split = crc64(crc64(0, &data[..333]), &data[333..]);
        assert_eq!(whole, split);
    }
}
