//! The randomness of one run: the secret key of the noise streams, and the seeds of the data-independent
//! post-processing draws, each named for what it drives. Without `--seed` both come from the OS; with it,
//! both derive from the user's seed (reproducible, and so not fit for release).

use rand::SeedableRng;
use rand_chacha::ChaCha12Rng;

use crate::error::{Error, Result};
use crate::privacy::resumed_stream::ResumedStream;
use crate::privacy::NoiseStream;

/// Separates the post-processing seeds from the noise key derived from the same user seed.
const POST_PROCESSING_SEED_TWEAK: u64 = 0x5eed_0f5a_3b1e_0001;

/// The secret key of the noise streams. Without `--seed` it comes from the OS and is never shown.
#[derive(Clone)]
pub struct NoiseKey([u8; 32]);

impl NoiseKey {
    /// A fresh key from the operating system's CSPRNG.
    pub fn from_os() -> Result<Self> {
        let mut key = [0u8; 32];
        fill_from_os(&mut key)?;
        Ok(NoiseKey(key))
    }

    /// A key derived from a user seed: reproducible, and therefore not fit for release.
    pub fn from_user_seed(seed: u64) -> Self {
        let mut key = [0u8; 32];
        rand::Rng::fill_bytes(&mut ChaCha12Rng::seed_from_u64(seed), &mut key);
        NoiseKey(key)
    }

    /// The key's bytes, for a state file that must resume the same streams (as secret as the key).
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0
    }

    /// A key saved by [`NoiseKey::to_bytes`].
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        NoiseKey(bytes)
    }

    /// The generator of one chunk of cells of one release; streams never overlap (2^64 blocks each).
    pub fn stream(&self, stream: NoiseStream, chunk: u64) -> ChaCha12Rng {
        let mut rng = ChaCha12Rng::from_seed(self.0);
        rng.set_stream(Self::stream_number(stream, chunk));
        rng
    }

    /// [`Self::stream`] resumed at word `position` for a few draws: the same words, cheaper to open.
    pub fn resumed_stream(&self, stream: NoiseStream, chunk: u64, position: u64) -> ResumedStream {
        ResumedStream::new(self.0, Self::stream_number(stream, chunk), position)
    }

    /// The ChaCha stream (nonce) of one chunk of one noise stream.
    fn stream_number(stream: NoiseStream, chunk: u64) -> u64 {
        u64::from(stream.id()) << 40 | chunk
    }
}

/// Fills `bytes` from the OS CSPRNG.
pub fn fill_from_os(bytes: &mut [u8]) -> Result<()> {
    rand::TryRng::try_fill_bytes(&mut rand::rngs::SysRng, bytes)
        .map_err(|error| Error::internal(format!("the OS random source failed: {error}")))
}

/// The placement seed of draw `draw` of one release, from the run's own ([`RunSeeds::placement`], which
/// draw 0 keeps): a SplitMix64 step keyed by the draw, so draws do not share coins.
pub fn draw_seed(placement: u64, draw: u64) -> u64 {
    if draw == 0 {
        return placement;
    }
    let mut z = placement ^ draw.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

pub struct RunSeeds {
    /// The key of every noise stream ([`crate::privacy::NoiseStream`]).
    pub noise: NoiseKey,
    post_processing: u64,
}

impl RunSeeds {
    pub fn new(seed: Option<u64>) -> Result<Self> {
        Ok(match seed {
            Some(seed) => RunSeeds {
                noise: NoiseKey::from_user_seed(seed),
                post_processing: seed ^ POST_PROCESSING_SEED_TWEAK,
            },
            None => {
                let mut bytes = [0u8; 8];
                fill_from_os(&mut bytes)?;
                RunSeeds {
                    noise: NoiseKey::from_os()?,
                    post_processing: u64::from_le_bytes(bytes),
                }
            }
        })
    }

    /// The seeds as bytes, for the ranks of one distributed run to share (as secret as the key).
    pub fn to_bytes(&self) -> [u8; 40] {
        let mut bytes = [0u8; 40];
        bytes[..32].copy_from_slice(&self.noise.to_bytes());
        bytes[32..].copy_from_slice(&self.post_processing.to_le_bytes());
        bytes
    }

    /// Seeds saved by [`RunSeeds::to_bytes`].
    pub fn from_bytes(bytes: [u8; 40]) -> Self {
        let mut key = [0u8; 32];
        key.copy_from_slice(&bytes[..32]);
        let mut post_processing = [0u8; 8];
        post_processing.copy_from_slice(&bytes[32..]);
        RunSeeds {
            noise: NoiseKey::from_bytes(key),
            post_processing: u64::from_le_bytes(post_processing),
        }
    }

    /// The seeds of column `column`'s marginal tree (`--marginal-share`): a noise key of its own, drawn
    /// from this key's [`NoiseStream::PmmMarginalKey`] stream, so its levels never share draws with the
    /// joint tree's or another column's; its consistency coins are the run's, keyed by the column.
    pub fn for_marginal(&self, column: u64) -> RunSeeds {
        let mut key = [0u8; 32];
        rand::Rng::fill_bytes(&mut self.noise.stream(NoiseStream::PmmMarginalKey, column), &mut key);
        RunSeeds {
            noise: NoiseKey(key),
            post_processing: self.post_processing ^ (column + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        }
    }

    /// The coins of the consistency step's tie-breaking.
    pub fn consistency(&self) -> u64 {
        self.post_processing
    }

    /// Where synthetic points go inside their cells.
    pub fn placement(&self) -> u64 {
        self.post_processing.rotate_left(17)
    }

    /// The rows drawn from the joint release to fit the pair maps on (`--pair-share`).
    pub fn pair_sample(&self) -> u64 {
        self.post_processing.rotate_left(41)
    }

    /// Private Evolution's data-independent draws: the initial points, the variations and the
    /// resampling of each step.
    pub fn evolution(&self) -> u64 {
        self.post_processing.rotate_left(29)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    fn first_word(seeds: &RunSeeds) -> u64 {
        seeds.noise.stream(NoiseStream::PmmLevel(3), 0).next_u64()
    }

    #[test]
    fn each_marginal_tree_draws_from_a_key_of_its_own() {
        let run = RunSeeds::new(Some(9)).unwrap();
        let words = [first_word(&run), first_word(&run.for_marginal(0)), first_word(&run.for_marginal(1))];
        assert!(words[0] != words[1] && words[0] != words[2] && words[1] != words[2], "{words:?}");
        // Reproducible from the run's seed, like every other stream.
        assert_eq!(first_word(&run.for_marginal(1)), first_word(&RunSeeds::new(Some(9)).unwrap().for_marginal(1)));
    }
}
