/* hash.c - see hash.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "hash.h"
#include "io.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

struct sip {
	uint64_t v0, v1, v2, v3;
};

static inline void sip_round(struct sip *s)
{
	s->v0 += s->v1;
	s->v1 = ROTL(s->v1, 13);
	s->v1 ^= s->v0;
	s->v0 = ROTL(s->v0, 32);
	s->v2 += s->v3;
	s->v3 = ROTL(s->v3, 16);
	s->v3 ^= s->v2;
	s->v0 += s->v3;
	s->v3 = ROTL(s->v3, 21);
	s->v3 ^= s->v0;
	s->v2 += s->v1;
	s->v1 = ROTL(s->v1, 17);
	s->v1 ^= s->v2;
	s->v2 = ROTL(s->v2, 32);
}

static inline struct sip sip_init(struct ncf_hash_key k)
{
	struct sip s = {k.k0 ^ 0x736f6d6570736575ull, k.k1 ^ 0x646f72616e646f6dull,
			k.k0 ^ 0x6c7967656e657261ull, k.k1 ^ 0x7465646279746573ull};
	return s;
}

static inline void sip_block(struct sip *s, uint64_t m, int c)
{
	s->v3 ^= m;
	for (int i = 0; i < c; i++)
		sip_round(s);
	s->v0 ^= m;
}

static inline uint64_t sip_final(struct sip *s, int d)
{
	s->v2 ^= 0xff;
	for (int i = 0; i < d; i++)
		sip_round(s);
	return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

uint64_t ncf_siphash_rounds(struct ncf_hash_key key, const void *p, size_t n, int c, int d)
{
	const unsigned char *b = p;
	struct sip s = sip_init(key);
	size_t full = n & ~(size_t)7;
	for (size_t i = 0; i < full; i += 8)
		sip_block(&s, ncf_get_u64(b + i), c);
	/* the last block: the bytes left, the length's low byte on top */
	uint64_t m = (uint64_t)(n & 0xff) << 56;
	for (size_t k = 0; k < n - full; k++)
		m |= (uint64_t)b[full + k] << (8 * k);
	sip_block(&s, m, c);
	return sip_final(&s, d);
}

uint64_t ncf_siphash(struct ncf_hash_key key, const void *p, size_t n)
{
	return ncf_siphash_rounds(key, p, n, 1, 3);
}

uint64_t ncf_siphash_u32(struct ncf_hash_key key, uint32_t x)
{
	struct sip s = sip_init(key);
	sip_block(&s, (uint64_t)4 << 56 | x, 1);
	return sip_final(&s, 3);
}

/* ---- the process's key ------------------------------------------------------------- */

static struct ncf_hash_key process_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t key_lock = PTHREAD_MUTEX_INITIALIZER;

/* n random bytes from the kernel: getrandom, else /dev/urandom.  Returns
 * 0, or -1 when neither gave them. */
static int kernel_random(void *buf, size_t n)
{
	unsigned char *b = buf;
	size_t got = 0;
	while (got < n) {
		ssize_t r = getrandom(b + got, n - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	if (got == n)
		return 0;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r = read(fd, b, n);
	close(fd);
	return r == (ssize_t)n ? 0 : -1;
}

static void draw_key(void)
{
	struct ncf_hash_key k;
	if (kernel_random(&k, sizeof k) != 0) {
		/* no random source at all: what differs between runs (the clock,
		 * the process, where the stack and the library were mapped),
		 * mixed under a fixed key */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t seed[4] = {(uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec, (uint64_t)getpid(),
				    (uint64_t)(uintptr_t)&k ^ (uint64_t)(uintptr_t)&process_key};
		struct ncf_hash_key fixed = {0x0123456789abcdefull, 0xfedcba9876543210ull};
		k.k0 = ncf_siphash(fixed, seed, sizeof seed);
		seed[0] ^= k.k0;
		k.k1 = ncf_siphash(fixed, seed, sizeof seed);
	}
	process_key = k;
}

struct ncf_hash_key ncf_hash_key(void)
{
	pthread_once(&key_once, draw_key);
	pthread_mutex_lock(&key_lock);
	struct ncf_hash_key k = process_key;
	pthread_mutex_unlock(&key_lock);
	return k;
}

void ncf_hash_key_pin(struct ncf_hash_key key)
{
	pthread_once(&key_once, draw_key);
	pthread_mutex_lock(&key_lock);
	process_key = key;
	pthread_mutex_unlock(&key_lock);
}
