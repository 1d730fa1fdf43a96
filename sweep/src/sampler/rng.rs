//! A counter-based generator: SplitMix64 started from a key of (seed, stream,
//! trial number, parameter name), so what trial `n` draws for a parameter
//! depends on nothing else: not on the order parameters are drawn in, how
//! many trials ran before, or which worker asks.

/// SplitMix64's output function (Steele, Lea, Flood 2014).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a: a stable hash of a parameter's name (std's hasher may change
/// between Rust releases, and a sweep's draws must not).
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Which sampler draws, so random and TPE candidates of one trial differ.
#[derive(Clone, Copy)]
pub(crate) enum Stream {
    Random = 1,
    Tpe = 2,
    /// The multivariate TPE's draws, all parameters from one generator.
    TpeJoint = 3,
}

pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    pub(crate) fn new(seed: u64, stream: Stream, number: u64, name: &str) -> Rng {
        let key = mix(mix(mix(seed) ^ stream as u64) ^ number);
        Rng {
            state: mix(key ^ fnv1a(name)),
        }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.state)
    }

    /// Uniform in [0, 1) with 53 random bits, as numpy's random_sample.
    pub(crate) fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [low, high), as numpy's uniform(low, high).
    pub(crate) fn uniform_in(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.uniform()
    }

    /// Uniform in 0..n, without modulo bias (Lemire's method).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            if (m as u64) >= n.wrapping_neg() % n {
                return (m >> 64) as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_key_same_stream_other_keys_differ() {
        let draw = |seed, stream, n, name| {
            let mut r = Rng::new(seed, stream, n, name);
            (r.next_u64(), r.next_u64())
        };
        let a = draw(1, Stream::Random, 7, "lr");
        assert_eq!(a, draw(1, Stream::Random, 7, "lr"));
        assert_ne!(a, draw(2, Stream::Random, 7, "lr"));
        assert_ne!(a, draw(1, Stream::Tpe, 7, "lr"));
        assert_ne!(a, draw(1, Stream::Random, 8, "lr"));
        assert_ne!(a, draw(1, Stream::Random, 7, "wd"));
    }

    #[test]
    fn uniform_and_below_stay_in_range() {
        let mut r = Rng::new(0, Stream::Random, 0, "x");
        let mut hits = [0u32; 3];
        for _ in 0..3000 {
            let u = r.uniform();
            assert!((0.0..1.0).contains(&u));
            hits[r.below(3) as usize] += 1;
        }
        assert!(hits.iter().all(|&h| h > 850), "{hits:?}");
    }
}
