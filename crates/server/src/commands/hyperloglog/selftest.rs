//! PFSELFTEST: checks the register packing and the estimator from the inside, as Redis'
//! does, with its error messages.

use super::estimate::{estimate, HISTOGRAM_LEN, REGISTERS};
use super::repr::{self, DENSE_LEN, HEADER_LEN, SPARSE};

/// Rounds of writing random values to every dense register and reading them back.
const REGISTER_ROUNDS: usize = 1000;
/// Elements added in the accuracy check (checked at 1, 10, 100... of them).
const ELEMENTS: u64 = 10_000_000;

/// A small xorshift generator: the test needs many values fast, not good ones.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

fn count(hll: &[u8]) -> u64 {
    let mut histogram = [0; HISTOGRAM_LEN];
    // The values are built here, never corrupt.
    let _ = repr::histogram(hll, &mut histogram);
    estimate(&histogram)
}

/// Runs the self test; `Err` carries the error reply (without its `ERR ` prefix).
pub fn run(sparse_max_bytes: u64) -> Result<(), String> {
    let mut rng = XorShift(rand::random::<u64>() | 1);

    // 1. Every register keeps the value written to it and leaves its neighbours alone.
    let mut dense = vec![0u8; DENSE_LEN];
    let mut expected = vec![0u8; REGISTERS];
    for _ in 0..REGISTER_ROUNDS {
        let regs = &mut dense[HEADER_LEN..];
        for (index, slot) in expected.iter_mut().enumerate() {
            *slot = (rng.next() & 63) as u8;
            repr::set_register(regs, index, *slot);
        }
        for (index, want) in expected.iter().enumerate() {
            let got = repr::get_register(regs, index);
            if got != *want {
                return Err(format!(
                    "TESTFAILED Register {index} should be {want} but is {got}"
                ));
            }
        }
    }

    // 2. Accuracy: add distinct elements to a dense and a sparse value at once; at each
    // power of ten both estimate the same, the sparse one is still sparse while small, and
    // the error stays within six standard errors (1.04 / sqrt(m)).
    dense = vec![0u8; DENSE_LEN];
    dense[..4].copy_from_slice(b"HYLL");
    let mut sparse = repr::new_sparse();
    let mut writer = repr::Writer::new(sparse_max_bytes);
    let relative_error = 1.04 / (REGISTERS as f64).sqrt();
    let seed = rng.next();
    let mut checkpoint = 1u64;
    for n in 1..=ELEMENTS {
        let element = (n ^ seed).to_le_bytes();
        let (index, run) = super::estimate::locate(&element);
        repr::raise_register(&mut dense[HEADER_LEN..], index, run);
        if writer.add(&mut sparse, &element).is_err() {
            return Err("TESTFAILED sparse representation corrupted".to_string());
        }
        if n != checkpoint {
            continue;
        }
        if n < sparse_max_bytes / 2 && repr::encoding(&sparse) != SPARSE {
            return Err("TESTFAILED sparse encoding not used".to_string());
        }
        let estimated = count(&dense);
        if estimated != count(&sparse) {
            return Err("TESTFAILED dense/sparse disagree".to_string());
        }
        let error = checkpoint.abs_diff(estimated);
        // Ten elements may well collide: allow one.
        let max_error = if n == 10 {
            1
        } else {
            (relative_error * 6.0 * checkpoint as f64).ceil() as u64
        };
        if error > max_error {
            return Err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{error}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}
