//! A noise stream resumed at a saved word position for a few draws: the same words, in the same order, as
//! [`ChaCha12Rng`] with that key, stream and word position, but cheaper to open.
//!
//! The online counters open a cell's stream at every visit and mostly draw one or two words there. Opening a
//! `ChaCha12Rng` at a position computes four ChaCha blocks at once (its buffer; 64 words) and sets its stream
//! through the vector machinery, which made opening the dominant cost of `stream`. This reader computes the
//! one block the position falls in, and only a visit that reads past [`SCALAR_BLOCKS`] blocks hands over to a
//! `ChaCha12Rng` at the word it reached, whose four-block refill is the faster one for long reads. Both are the
//! ChaCha12 keystream of RFC 7539's layout with djb's 64-bit counter and 64-bit nonce (words 12–13 the block
//! counter, 14–15 the stream), so the draws, and the state files that save the positions, do not change.

use std::convert::Infallible;

use rand::{Rng, SeedableRng, TryRng};
use rand_chacha::ChaCha12Rng;

/// Words of one ChaCha block.
const BLOCK_WORDS: u64 = 16;

/// Blocks computed one at a time before a reader hands over to [`ChaCha12Rng`]: a visit that reads more
/// is a long one, where the four-block vector refill costs less per word.
const SCALAR_BLOCKS: u32 = 2;

/// ChaCha12's double rounds.
const DOUBLE_ROUNDS: usize = 6;

/// "expand 32-byte k", the ChaCha constants.
const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

/// One stream of one key, read from a word position on.
pub struct ResumedStream {
    seed: [u8; 32],
    key: [u32; 8],
    stream: u64,
    /// Words read from the stream's start.
    position: u64,
    /// The block held in `words` (`u64::MAX`: none yet).
    buffered: u64,
    words: [u32; BLOCK_WORDS as usize],
    scalar_blocks: u32,
    /// The reader a long visit hands over to.
    wide: Option<Box<ChaCha12Rng>>,
}

impl ResumedStream {
    /// The stream `stream` of the key `seed` (as [`ChaCha12Rng::from_seed`] and `set_stream` take them), at
    /// word `position`. Nothing is computed until the first word is read.
    pub fn new(seed: [u8; 32], stream: u64, position: u64) -> Self {
        let mut key = [0u32; 8];
        for (word, bytes) in key.iter_mut().zip(seed.chunks_exact(4)) {
            *word = u32::from_le_bytes(bytes.try_into().expect("four bytes"));
        }
        ResumedStream {
            seed,
            key,
            stream,
            position,
            buffered: u64::MAX,
            words: [0; BLOCK_WORDS as usize],
            scalar_blocks: 0,
            wide: None,
        }
    }

    /// Words read from the stream's start: where the next reader resumes.
    pub fn word_position(&self) -> u64 {
        match &self.wide {
            Some(wide) => u64::try_from(wide.get_word_pos()).expect("a stream reads fewer than 2^64 words"),
            None => self.position,
        }
    }

    fn next_word(&mut self) -> u32 {
        if let Some(wide) = &mut self.wide {
            return wide.next_u32();
        }
        let block = self.position / BLOCK_WORDS;
        if block != self.buffered {
            if self.scalar_blocks == SCALAR_BLOCKS {
                let mut wide = ChaCha12Rng::from_seed(self.seed);
                wide.set_stream(self.stream);
                wide.set_word_pos(u128::from(self.position));
                let word = wide.next_u32();
                self.wide = Some(Box::new(wide));
                return word;
            }
            self.words = chacha12_block(&self.key, block, self.stream);
            self.buffered = block;
            self.scalar_blocks += 1;
        }
        let word = self.words[(self.position % BLOCK_WORDS) as usize];
        self.position += 1;
        word
    }
}

impl TryRng for ResumedStream {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(self.next_word())
    }

    /// Two words, the first the low half (as `ChaCha12Rng` joins them, across blocks too).
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let low = self.next_word();
        let high = self.next_word();
        Ok(u64::from(high) << 32 | u64::from(low))
    }

    /// Whole words in little-endian order, a partly used last word discarded (as `ChaCha12Rng` fills).
    fn try_fill_bytes(&mut self, bytes: &mut [u8]) -> Result<(), Infallible> {
        for chunk in bytes.chunks_mut(4) {
            let word = self.next_word().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
        Ok(())
    }
}

/// The ChaCha12 block `block` of stream `stream` under `key`: the 16 output words. The state is held as its
/// four rows, so that each step works on four words at once in one 128-bit register (SSE2, part of every
/// x86-64), and the diagonal round is the column round on rows rotated by one, two and three lanes.
#[cfg(target_arch = "x86_64")]
fn chacha12_block(key: &[u32; 8], block: u64, stream: u64) -> [u32; BLOCK_WORDS as usize] {
    // SAFETY: SSE2 is in every x86-64's baseline.
    unsafe { chacha12_block_sse2(key, block, stream) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn chacha12_block_sse2(key: &[u32; 8], block: u64, stream: u64) -> [u32; BLOCK_WORDS as usize] {
    use std::arch::x86_64::*;

    #[inline]
    #[target_feature(enable = "sse2")]
    fn rotate(x: __m128i, by: i32) -> __m128i {
        match by {
            16 => _mm_or_si128(_mm_slli_epi32::<16>(x), _mm_srli_epi32::<16>(x)),
            12 => _mm_or_si128(_mm_slli_epi32::<12>(x), _mm_srli_epi32::<20>(x)),
            8 => _mm_or_si128(_mm_slli_epi32::<8>(x), _mm_srli_epi32::<24>(x)),
            _ => _mm_or_si128(_mm_slli_epi32::<7>(x), _mm_srli_epi32::<25>(x)),
        }
    }

    #[inline]
    #[target_feature(enable = "sse2")]
    fn round(a: &mut __m128i, b: &mut __m128i, c: &mut __m128i, d: &mut __m128i) {
        *a = _mm_add_epi32(*a, *b);
        *d = rotate(_mm_xor_si128(*d, *a), 16);
        *c = _mm_add_epi32(*c, *d);
        *b = rotate(_mm_xor_si128(*b, *c), 12);
        *a = _mm_add_epi32(*a, *b);
        *d = rotate(_mm_xor_si128(*d, *a), 8);
        *c = _mm_add_epi32(*c, *d);
        *b = rotate(_mm_xor_si128(*b, *c), 7);
    }

    let (low, high) = (|word: u64| word as u32 as i32, |word: u64| (word >> 32) as u32 as i32);
    let input = [
        _mm_set_epi32(SIGMA[3] as i32, SIGMA[2] as i32, SIGMA[1] as i32, SIGMA[0] as i32),
        _mm_set_epi32(key[3] as i32, key[2] as i32, key[1] as i32, key[0] as i32),
        _mm_set_epi32(key[7] as i32, key[6] as i32, key[5] as i32, key[4] as i32),
        _mm_set_epi32(high(stream), low(stream), high(block), low(block)),
    ];
    let [mut a, mut b, mut c, mut d] = input;
    for _ in 0..DOUBLE_ROUNDS {
        round(&mut a, &mut b, &mut c, &mut d);
        // Lane i takes lane i + 1, i + 2, i + 3 (mod 4): the diagonals become columns.
        (b, c, d) = (_mm_shuffle_epi32::<0x39>(b), _mm_shuffle_epi32::<0x4e>(c), _mm_shuffle_epi32::<0x93>(d));
        round(&mut a, &mut b, &mut c, &mut d);
        (b, c, d) = (_mm_shuffle_epi32::<0x93>(b), _mm_shuffle_epi32::<0x4e>(c), _mm_shuffle_epi32::<0x39>(d));
    }
    let mut words = [0u32; BLOCK_WORDS as usize];
    for (index, (state, start)) in [a, b, c, d].into_iter().zip(input).enumerate() {
        let sum = _mm_add_epi32(state, start);
        // SAFETY: `words` holds 16 words; row `index` < 4 is stored at words 4·index..4·index + 4, unaligned.
        unsafe { _mm_storeu_si128(words.as_mut_ptr().add(4 * index).cast(), sum) };
    }
    words
}

/// The portable form of the block above: the same rows, one lane at a time.
#[cfg(not(target_arch = "x86_64"))]
fn chacha12_block(key: &[u32; 8], block: u64, stream: u64) -> [u32; BLOCK_WORDS as usize] {
    let input = [
        SIGMA,
        [key[0], key[1], key[2], key[3]],
        [key[4], key[5], key[6], key[7]],
        [block as u32, (block >> 32) as u32, stream as u32, (stream >> 32) as u32],
    ];
    let [mut a, mut b, mut c, mut d] = input;
    let lanes_left = |row: [u32; 4], by: usize| [row[by % 4], row[(by + 1) % 4], row[(by + 2) % 4], row[(by + 3) % 4]];
    let round = |a: &mut [u32; 4], b: &mut [u32; 4], c: &mut [u32; 4], d: &mut [u32; 4]| {
        for lane in 0..4 {
            a[lane] = a[lane].wrapping_add(b[lane]);
            d[lane] = (d[lane] ^ a[lane]).rotate_left(16);
            c[lane] = c[lane].wrapping_add(d[lane]);
            b[lane] = (b[lane] ^ c[lane]).rotate_left(12);
            a[lane] = a[lane].wrapping_add(b[lane]);
            d[lane] = (d[lane] ^ a[lane]).rotate_left(8);
            c[lane] = c[lane].wrapping_add(d[lane]);
            b[lane] = (b[lane] ^ c[lane]).rotate_left(7);
        }
    };
    for _ in 0..DOUBLE_ROUNDS {
        round(&mut a, &mut b, &mut c, &mut d);
        (b, c, d) = (lanes_left(b, 1), lanes_left(c, 2), lanes_left(d, 3));
        round(&mut a, &mut b, &mut c, &mut d);
        (b, c, d) = (lanes_left(b, 3), lanes_left(c, 2), lanes_left(d, 1));
    }
    let mut words = [0u32; BLOCK_WORDS as usize];
    for (row, (state, start)) in [a, b, c, d].into_iter().zip(input).enumerate() {
        for lane in 0..4 {
            words[row * 4 + lane] = state[lane].wrapping_add(start[lane]);
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(seed: [u8; 32], stream: u64, position: u64) -> ChaCha12Rng {
        let mut rng = ChaCha12Rng::from_seed(seed);
        rng.set_stream(stream);
        rng.set_word_pos(u128::from(position));
        rng
    }

    /// Every mix of 32- and 64-bit reads from every offset inside a block, short and long enough to hand
    /// over to `ChaCha12Rng`, on streams whose halves both matter: the same words and the same end position.
    #[test]
    fn reads_the_words_chacha12rng_reads() {
        let mut seed = [0u8; 32];
        seed.iter_mut().enumerate().for_each(|(index, byte)| *byte = (index as u8).wrapping_mul(37) ^ 0x5a);
        for stream in [0, 1, 0x0000_0001_0000_0000, 0x00ab_cdef_1234_5678, u64::MAX] {
            for start in [0u64, 1, 7, 15, 16, 31, 63, 64, 65, 1 << 33, (1 << 36) - 3] {
                for reads in [1usize, 2, 9, 17, 40, 100] {
                    let mut ours = ResumedStream::new(seed, stream, start);
                    let mut theirs = reference(seed, stream, start);
                    for read in 0..reads {
                        if (read * 7 + start as usize).is_multiple_of(3) {
                            assert_eq!(ours.next_u32(), theirs.next_u32(), "stream {stream} start {start} read {read}");
                        } else {
                            assert_eq!(ours.next_u64(), theirs.next_u64(), "stream {stream} start {start} read {read}");
                        }
                    }
                    assert_eq!(u128::from(ours.word_position()), theirs.get_word_pos());
                }
                let (mut ours, mut theirs) = (ResumedStream::new(seed, stream, start), reference(seed, stream, start));
                let (mut mine, mut yours) = ([0u8; 23], [0u8; 23]);
                ours.fill_bytes(&mut mine);
                theirs.fill_bytes(&mut yours);
                assert_eq!(mine, yours);
                assert_eq!(u128::from(ours.word_position()), theirs.get_word_pos());
            }
        }
    }
}
