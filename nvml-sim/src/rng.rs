//! Tiny deterministic hashing/random helpers (splitmix64): every random
//! quantity in the simulator is a pure function of a seed and an index.

/// One splitmix64 step: a high-quality 64-bit mix of `x`.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Combines a seed with further keys into a new seed.
pub fn mix(seed: u64, key: u64) -> u64 {
    splitmix64(seed ^ splitmix64(key))
}

/// Stable 64-bit hash of a string (FNV-1a), for seeding per metric name.
pub fn hash_str(text: &str) -> u64 {
    text.bytes().fold(0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
    })
}

/// A uniform number in `[0, 1)` derived from `seed` and `index`.
pub fn unit(seed: u64, index: u64) -> f64 {
    (mix(seed, index) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_is_deterministic_and_in_range() {
        for i in 0..1000 {
            let u = unit(7, i);
            assert!((0.0..1.0).contains(&u));
            assert_eq!(u, unit(7, i));
        }
        assert_ne!(unit(7, 1), unit(8, 1));
    }
}
