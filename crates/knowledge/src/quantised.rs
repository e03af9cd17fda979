//! Vectors in 8 bits for the first pass of a nearest-chunk search: per-vector symmetric quantisation, and the scan of a collection's codes, run with AVX2 where the processor has it.

// The scan is compiled twice: as portable code, and with AVX2 enabled for processors found at
// run time to have it (four times faster on 384-dimension vectors). Calling a function compiled
// for a CPU feature needs `unsafe`; it is sound once the feature was detected.
#![allow(unsafe_code)]

/// `vector` in 8-bit codes and the scale that brings them back (symmetric, per vector: its
/// largest component becomes ±127). A zero vector, or one with an infinite component, has
/// zero codes and scale; a NaN component codes as zero.
pub(crate) fn quantised(vector: &[f32]) -> (Vec<i8>, f32) {
    let largest = vector
        .iter()
        .fold(0.0f32, |largest, x| largest.max(x.abs()));
    if largest == 0.0 || !largest.is_finite() {
        return (vec![0; vector.len()], 0.0);
    }
    let scale = largest / 127.0;
    let codes = vector
        .iter()
        .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (codes, scale)
}

/// The approximate similarity of `query` (codes) to each vector of `codes` (`dimension` codes
/// each, scaled by `scales`), in order; the query's own scale, common to all, is left out.
pub(crate) fn similarities(
    codes: &[i8],
    scales: &[f32],
    dimension: usize,
    query: &[i8],
) -> Vec<f32> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor was just found to have AVX2, the only feature this function
        // is compiled for beyond the portable baseline.
        return unsafe { similarities_avx2(codes, scales, dimension, query) };
    }
    similarities_portable(codes, scales, dimension, query)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn similarities_avx2(codes: &[i8], scales: &[f32], dimension: usize, query: &[i8]) -> Vec<f32> {
    scan(codes, scales, dimension, query, |a, b| dot_codes_avx2(a, b))
}

/// [`dot_codes`] in AVX2: sixteen codes at a time widened to 16 bits, multiplied and added in
/// pairs into eight 32-bit lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dot_codes_avx2(a: &[i8], b: &[i8]) -> i32 {
    use std::arch::x86_64::{
        __m128i, _mm_add_epi32, _mm_cvtsi128_si32, _mm_loadu_si128, _mm_shuffle_epi32,
        _mm256_add_epi32, _mm256_castsi256_si128, _mm256_cvtepi8_epi16, _mm256_extracti128_si256,
        _mm256_madd_epi16, _mm256_setzero_si256,
    };
    let (a_chunks, b_chunks) = (a.chunks_exact(32), b.chunks_exact(32));
    let mut total = 0;
    for (x, y) in a_chunks.remainder().iter().zip(b_chunks.remainder()) {
        total += i32::from(*x) * i32::from(*y);
    }
    let (mut low_sums, mut high_sums) = (_mm256_setzero_si256(), _mm256_setzero_si256());
    for (x, y) in a_chunks.zip(b_chunks) {
        // SAFETY: each chunk is 32 bytes, two unaligned 128-bit loads at 0 and 16.
        let (x_low, x_high, y_low, y_high) = unsafe {
            (
                _mm_loadu_si128(x.as_ptr().cast::<__m128i>()),
                _mm_loadu_si128(x.as_ptr().add(16).cast::<__m128i>()),
                _mm_loadu_si128(y.as_ptr().cast::<__m128i>()),
                _mm_loadu_si128(y.as_ptr().add(16).cast::<__m128i>()),
            )
        };
        low_sums = _mm256_add_epi32(
            low_sums,
            _mm256_madd_epi16(_mm256_cvtepi8_epi16(x_low), _mm256_cvtepi8_epi16(y_low)),
        );
        high_sums = _mm256_add_epi32(
            high_sums,
            _mm256_madd_epi16(_mm256_cvtepi8_epi16(x_high), _mm256_cvtepi8_epi16(y_high)),
        );
    }
    let sums = _mm256_add_epi32(low_sums, high_sums);
    let halves = _mm_add_epi32(
        _mm256_castsi256_si128(sums),
        _mm256_extracti128_si256(sums, 1),
    );
    let pairs = _mm_add_epi32(halves, _mm_shuffle_epi32(halves, 0b01_00_11_10));
    let lanes = _mm_add_epi32(pairs, _mm_shuffle_epi32(pairs, 0b10_11_00_01));
    total + _mm_cvtsi128_si32(lanes)
}

fn similarities_portable(codes: &[i8], scales: &[f32], dimension: usize, query: &[i8]) -> Vec<f32> {
    scan(codes, scales, dimension, query, dot_codes)
}

/// Each vector's scaled dot product with `query` by `dot`; inlined into its caller, so it is
/// compiled with the caller's CPU features. `for` loops, not a collecting adapter: an adapter's
/// body would be a function of its own, compiled without them.
#[inline(always)]
fn scan(
    codes: &[i8],
    scales: &[f32],
    dimension: usize,
    query: &[i8],
    dot: impl Fn(&[i8], &[i8]) -> i32,
) -> Vec<f32> {
    let mut similarities = Vec::with_capacity(scales.len());
    if dimension == 0 || query.len() != dimension {
        return similarities;
    }
    for (vector, scale) in codes.chunks_exact(dimension).zip(scales) {
        similarities.push(scale * dot(query, vector) as f32);
    }
    similarities
}

/// The dot product of two code vectors, in sixteen lanes the compiler turns into vector
/// instructions.
#[inline(always)]
fn dot_codes(a: &[i8], b: &[i8]) -> i32 {
    let mut lanes = [0i32; 16];
    let (a_chunks, b_chunks) = (a.chunks_exact(16), b.chunks_exact(16));
    let mut total = 0;
    for (x, y) in a_chunks.remainder().iter().zip(b_chunks.remainder()) {
        total += i32::from(*x) * i32::from(*y);
    }
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..16 {
            lanes[lane] += i32::from(x[lane]) * i32::from(y[lane]);
        }
    }
    for lane in lanes {
        total += lane;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_bring_the_vector_back_within_half_a_step() {
        let vector = [0.5f32, -0.25, 0.125, 0.0, -0.5];
        let (codes, scale) = quantised(&vector);
        assert_eq!(codes[0], 127);
        assert_eq!(codes[4], -127);
        for (code, x) in codes.iter().zip(vector) {
            assert!((f32::from(*code) * scale - x).abs() <= scale / 2.0 + f32::EPSILON);
        }
        assert_eq!(quantised(&[0.0, 0.0]), (vec![0, 0], 0.0));
        assert_eq!(quantised(&[f32::INFINITY, 1.0]), (vec![0, 0], 0.0));
        assert_eq!(quantised(&[f32::NAN, 1.0]).0, vec![0, 127]);
    }

    #[test]
    fn both_scans_give_the_exact_integer_dot_product() {
        // 37 dimensions: two blocks of sixteen lanes and a tail.
        let dimension = 37;
        let codes: Vec<i8> = (0..dimension * 3)
            .map(|i| ((i * 53) % 255) as u8 as i8)
            .collect();
        let codes: Vec<i8> = codes.into_iter().map(|c| c.max(-127)).collect();
        let query: Vec<i8> = (0..dimension)
            .map(|i| (i as i8).wrapping_mul(7).max(-127))
            .collect();
        let expected: Vec<f32> = codes
            .chunks_exact(dimension)
            .map(|vector| {
                vector
                    .iter()
                    .zip(&query)
                    .map(|(x, y)| i32::from(*x) * i32::from(*y))
                    .sum::<i32>() as f32
                    * 0.5
            })
            .collect();
        let scales = [0.5; 3];
        assert_eq!(
            similarities_portable(&codes, &scales, dimension, &query),
            expected
        );
        assert_eq!(similarities(&codes, &scales, dimension, &query), expected);
        assert!(similarities(&codes, &scales, 0, &[]).is_empty());
    }
}
