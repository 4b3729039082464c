/* structarg.c: C functions that take a struct by value in several
 * positions, for ccall's tests (built with gcc into a shared library). Each
 * copies the struct it received into out and returns its integer arguments
 * combined, so that the test sees every argument as C saw it. */
#include <stdint.h>
#include <string.h>

/* The shape of ncclUniqueId: 128 bytes, alignment 1. */
typedef struct { char internal[128]; } id128;

/* Three 8-byte words: the smallest struct passed in memory. */
typedef struct { uint64_t a, b, c; } words3;

/* As ncclCommInitRank: (ncclComm_t*, int, ncclUniqueId, int). */
int32_t mid(uint8_t *out, int32_t nranks, id128 id, int32_t rank) {
	memcpy(out, id.internal, sizeof id);
	return nranks * 1000 + rank;
}

/* The struct first, then three integers. */
int64_t first(id128 id, uint8_t *out, int64_t a, int64_t b) {
	memcpy(out, id.internal, sizeof id);
	return a * 1000 + b;
}

/* Six integers, then the struct: every register is taken before it. */
int64_t last(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, uint8_t *out, id128 id) {
	memcpy(out, id.internal, sizeof id);
	return ((((a * 10 + b) * 10 + c) * 10 + d) * 10 + e);
}

/* A callee may change its copy: the caller's must not change. */
int32_t scribble(id128 id, uint8_t *out) {
	memcpy(out, id.internal, sizeof id);
	memset(id.internal, 0xEE, sizeof id);
	return (uint8_t)id.internal[0];
}

/* A struct of three words between two integers. */
uint64_t small(int32_t x, words3 w, int32_t y) {
	return w.a * 100 + w.b * 10 + w.c + (uint64_t)x * 1000000 + (uint64_t)y * 10000;
}
