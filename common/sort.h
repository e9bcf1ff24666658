// common/sort.h - stable sorts of 64-bit keys by their bytes (LSD radix,
// a pass per byte that differs among the keys), for the ids of embedding
// rows: qsort's calls through a comparison were most of a sparse step's
// time on the worker (a batch of 256 x 26 ids sorted twice a step).
#ifndef PT_COMMON_SORT_H
#define PT_COMMON_SORT_H

#include <stdint.h>

// pti_sort_u64 sorts a[0..n) ascending; tmp holds n words.
void pti_sort_u64(uint64_t *a, uint64_t n, uint64_t *tmp);

// pti_sort_pairs sorts the n (key, value) pairs of a[0..2n) by key,
// stably: pairs of one key keep their order. tmp holds 2n words.
void pti_sort_pairs(uint64_t *a, uint64_t n, uint64_t *tmp);

#endif // PT_COMMON_SORT_H
