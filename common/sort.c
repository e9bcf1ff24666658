// common/sort.c - radix sorts of 64-bit keys (sort.h).
#include "common/sort.h"

#include <string.h>

#define SORT_SMALL 32 // below this many items, insertion sort

// sort_small: insertion sort of n items of w words by their first word;
// stable.
static void sort_small(uint64_t *a, uint64_t n, unsigned w)
{
	for (uint64_t i = 1; i < n; i++) {
		uint64_t item[2] = {a[i * w], w > 1 ? a[i * w + 1] : 0};
		uint64_t j = i;
		for (; j > 0 && a[(j - 1) * w] > item[0]; j--)
			memcpy(a + j * w, a + (j - 1) * w, w * sizeof(*a));
		memcpy(a + j * w, item, w * sizeof(*a));
	}
}

// sort_radix: n items of w (1 or 2) words, by their first word; a pass
// per byte, least significant first, skipping a byte all keys share.
static void sort_radix(uint64_t *a, uint64_t n, uint64_t *tmp, unsigned w)
{
	if (n < SORT_SMALL) {
		sort_small(a, n, w);
		return;
	}
	uint64_t count[8][256];
	memset(count, 0, sizeof(count));
	for (uint64_t i = 0; i < n; i++)
		for (int b = 0; b < 8; b++)
			count[b][(a[i * w] >> (8 * b)) & 255]++;
	uint64_t *src = a, *dst = tmp;
	for (int b = 0; b < 8; b++) {
		uint64_t *c = count[b], sum = 0;
		if (c[(src[0] >> (8 * b)) & 255] == n)
			continue; // every key has this byte
		for (int d = 0; d < 256; d++) {
			uint64_t k = c[d];
			c[d] = sum;
			sum += k;
		}
		for (uint64_t i = 0; i < n; i++) {
			const uint64_t *e = src + i * w;
			uint64_t *o = dst + c[(e[0] >> (8 * b)) & 255]++ * w;
			o[0] = e[0];
			if (w > 1)
				o[1] = e[1];
		}
		uint64_t *t = src;
		src = dst;
		dst = t;
	}
	if (src != a)
		memcpy(a, src, n * w * sizeof(*a));
}

void pti_sort_u64(uint64_t *a, uint64_t n, uint64_t *tmp)
{
	sort_radix(a, n, tmp, 1);
}

void pti_sort_pairs(uint64_t *a, uint64_t n, uint64_t *tmp)
{
	sort_radix(a, n, tmp, 2);
}
