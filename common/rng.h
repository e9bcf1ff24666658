// common/rng.h - small deterministic random numbers. Everything random in
// pstrain (initial values, data order, synthetic data, delays) derives
// from the job seed through these, so every process computes the same.
// Pure inline functions, no state beyond the caller's pti_rng.
#ifndef PT_COMMON_RNG_H
#define PT_COMMON_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct pti_rng {
	uint64_t s;
} pti_rng;

// pti_mix64 is the splitmix64 finalizer: a bijective 64-bit hash.
static inline uint64_t pti_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

// pti_hash3 hashes three words; used as a counter-based generator so that
// element i of stream (seed, a) can be computed without the ones before.
static inline uint64_t pti_hash3(uint64_t seed, uint64_t a, uint64_t b)
{
	return pti_mix64(pti_mix64(pti_mix64(seed) ^ a) + b);
}

// pti_rng_seed starts a sequential stream named by (seed, stream).
static inline void pti_rng_seed(pti_rng *r, uint64_t seed, uint64_t stream)
{
	r->s = pti_hash3(seed, stream, 0x5eedULL);
}

static inline uint64_t pti_rng_u64(pti_rng *r)
{
	r->s += 0x9e3779b97f4a7c15ULL;
	return pti_mix64(r->s);
}

// pti_u64_to_unit maps 64 random bits to a double in [0, 1).
static inline double pti_u64_to_unit(uint64_t x)
{
	return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

static inline double pti_rng_unit(pti_rng *r)
{
	return pti_u64_to_unit(pti_rng_u64(r));
}

// pti_rng_below returns a uniform integer in [0, n), n > 0 (Lemire's
// multiply-shift; the tiny bias for n near 2^32 does not matter here).
static inline uint32_t pti_rng_below(pti_rng *r, uint32_t n)
{
	return (uint32_t)(((pti_rng_u64(r) >> 32) * (uint64_t)n) >> 32);
}

// pti_rng_normal returns a standard normal deviate (Box-Muller).
static inline double pti_rng_normal(pti_rng *r)
{
	double u1 = 1.0 - pti_rng_unit(r); // in (0, 1]: log stays finite
	double u2 = pti_rng_unit(r);
	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif // PT_COMMON_RNG_H
