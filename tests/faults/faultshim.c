/*
 * faultshim.c -- a fault injector for the end-to-end tests and benches,
 * loaded into ringproxy with LD_PRELOAD. It owns two faults, both read
 * from a control file that the test rewrites while the proxy runs:
 *
 *   alloc_rate=R    each malloc, calloc, realloc, strdup's malloc,
 *                   posix_memalign, aligned_alloc and memalign fails
 *                   (NULL, errno ENOMEM) with probability R (0..1);
 *   spare=NAME      an allocation called from a library whose path holds
 *                   NAME never fails (one NAME; dladdr on the caller,
 *                   looked up only for an allocation about to fail): for
 *                   a library with a crash of its own on a failed
 *                   allocation, which would end a test before it saw
 *                   ours;
 *   wall_offset=S   time(), gettimeofday() and clock_gettime() of the
 *                   CLOCK_REALTIME family run S seconds off (negative:
 *                   the wall clock jumped back); the monotonic clocks
 *                   are left alone.
 *
 * FAULTSHIM_CTL names the file (no file: no faults), FAULTSHIM_SEED seeds
 * the draws (each thread draws from its own xorshift64* stream, the
 * seed mixed with the thread's order of first allocation), so a run is
 * repeatable up to the threads' interleaving. The file is read again
 * at most every 50 ms (by whichever thread allocates or asks the time),
 * so switching the faults off takes effect within that.
 *
 * Every thread may call in; no lock is taken on the allocation path
 * (one relaxed atomic load a call, a try-lock around the re-read).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef void *(*faultshim_malloc_fn)(size_t);
typedef void *(*faultshim_calloc_fn)(size_t, size_t);
typedef void *(*faultshim_realloc_fn)(void *, size_t);
typedef int (*faultshim_memalign_fn)(void **, size_t, size_t);
typedef void *(*faultshim_aligned_fn)(size_t, size_t);
typedef void (*faultshim_free_fn)(void *);
typedef int (*faultshim_clock_fn)(clockid_t, struct timespec *);

static faultshim_malloc_fn faultshim_real_malloc;
static faultshim_calloc_fn faultshim_real_calloc;
static faultshim_realloc_fn faultshim_real_realloc;
static faultshim_memalign_fn faultshim_real_posix_memalign;
static faultshim_aligned_fn faultshim_real_aligned_alloc;
static faultshim_aligned_fn faultshim_real_memalign;
static faultshim_free_fn faultshim_real_free;
static faultshim_clock_fn faultshim_real_clock_gettime;

/* dlsym may allocate before the real calloc is known: such early
 * allocations come from this arena and are never freed. */
static _Alignas(16) char faultshim_boot[65536];
static atomic_size_t faultshim_boot_used;
/* initial-exec: a preloaded library has static TLS, and the general model
 * calls __tls_get_addr, which is not ready while ld.so itself allocates */
static _Thread_local int faultshim_resolving __attribute__((tls_model("initial-exec")));

/* The faults now in force: the rate in parts per 2^32, the offset in ns. */
static _Atomic uint64_t faultshim_rate;
static _Atomic int64_t faultshim_offset_ns;
static _Atomic int64_t faultshim_read_at_ns;     /* monotonic, last read */
static atomic_flag faultshim_reading = ATOMIC_FLAG_INIT;
static const char *faultshim_ctl;
static char faultshim_spare[2][64];      /* double-buffered: readers */
static atomic_int faultshim_spare_at;    /* take the one published */
static uint64_t faultshim_seed = 1;
static atomic_uint faultshim_threads;
static _Atomic uint64_t faultshim_failed;        /* how many it failed */

static _Thread_local uint64_t faultshim_state __attribute__((tls_model("initial-exec")));

static void *faultshim_boot_alloc(size_t n)
{
	size_t at = atomic_fetch_add(&faultshim_boot_used, (n + 15) & ~(size_t)15);

	if (at + n > sizeof(faultshim_boot))
		return NULL;
	return faultshim_boot + at;
}

static int faultshim_is_boot(const void *p)
{
	return (const char *)p >= faultshim_boot && (const char *)p < faultshim_boot + sizeof(faultshim_boot);
}

/* Set by the constructor: before it, another library's start (ASan's,
 * whose dlsym is not ready yet) may allocate, and is served from the
 * arena without looking anything up. */
static atomic_bool faultshim_ready;

static void faultshim_resolve(void)
{
	if (faultshim_real_calloc || faultshim_resolving || !atomic_load(&faultshim_ready))
		return;
	faultshim_resolving = 1;
	faultshim_real_malloc = (faultshim_malloc_fn)dlsym(RTLD_NEXT, "malloc");
	faultshim_real_realloc = (faultshim_realloc_fn)dlsym(RTLD_NEXT, "realloc");
	faultshim_real_free = (faultshim_free_fn)dlsym(RTLD_NEXT, "free");
	faultshim_real_posix_memalign = (faultshim_memalign_fn)dlsym(RTLD_NEXT, "posix_memalign");
	faultshim_real_aligned_alloc = (faultshim_aligned_fn)dlsym(RTLD_NEXT, "aligned_alloc");
	faultshim_real_memalign = (faultshim_aligned_fn)dlsym(RTLD_NEXT, "memalign");
	faultshim_real_clock_gettime = (faultshim_clock_fn)dlsym(RTLD_NEXT, "clock_gettime");
	faultshim_real_calloc = (faultshim_calloc_fn)dlsym(RTLD_NEXT, "calloc");
	faultshim_resolving = 0;
}

static int64_t faultshim_mono_ns(void)
{
	struct timespec ts;

	faultshim_resolve();
	if (!faultshim_real_clock_gettime || faultshim_real_clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) < 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Read the control file again when 50 ms have passed since the last read. */
static void faultshim_refresh(void)
{
	int64_t now = faultshim_mono_ns(), at = atomic_load_explicit(&faultshim_read_at_ns, memory_order_relaxed);
	char buf[256];
	double rate = 0, off = 0;
	int next = !atomic_load(&faultshim_spare_at);
	ssize_t n = 0;
	int fd;

	if (!faultshim_ctl || (at && now - at < 50000000) || atomic_flag_test_and_set(&faultshim_reading))
		return;
	atomic_store_explicit(&faultshim_read_at_ns, now ? now : 1, memory_order_relaxed);
	fd = open(faultshim_ctl, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = '\0';
	for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		if (strncmp(line, "alloc_rate=", 11) == 0)
			rate = strtod(line + 11, NULL);
		else if (strncmp(line, "wall_offset=", 12) == 0)
			off = strtod(line + 12, NULL);
		else if (strncmp(line, "spare=", 6) == 0)
			snprintf(faultshim_spare[next], sizeof(faultshim_spare[next]), "%.*s",
				 (int)strcspn(line + 6, "\n"), line + 6);
	}
	if (!strstr(buf, "spare="))
		faultshim_spare[next][0] = '\0';
	atomic_store(&faultshim_spare_at, next);
	rate = rate < 0 ? 0 : rate > 1 ? 1 : rate;
	atomic_store_explicit(&faultshim_rate, (uint64_t)(rate * 4294967296.0), memory_order_relaxed);
	atomic_store_explicit(&faultshim_offset_ns, (int64_t)(off * 1e9), memory_order_relaxed);
	atomic_flag_clear(&faultshim_reading);
}

__attribute__((constructor)) static void faultshim_init(void)
{
	const char *seed = getenv("FAULTSHIM_SEED");

	faultshim_ctl = getenv("FAULTSHIM_CTL");
	if (seed)
		faultshim_seed = strtoull(seed, NULL, 0) | 1;
	atomic_store(&faultshim_ready, true);
	faultshim_resolve();
	faultshim_refresh();
}

/* Whether caller (an allocation's return address) is in the library
 * spare= names. */
static int faultshim_spared(const void *caller)
{
	const char *spare = faultshim_spare[atomic_load(&faultshim_spare_at)];
	Dl_info info;

	return spare[0] && dladdr(caller, &info) && info.dli_fname && strstr(info.dli_fname, spare);
}

/* Whether this allocation (called from caller) fails. */
static int faultshim_fail(const void *caller)
{
	uint64_t rate, x;

	if (faultshim_resolving)
		return 0;
	faultshim_refresh();
	rate = atomic_load_explicit(&faultshim_rate, memory_order_relaxed);
	if (rate == 0)
		return 0;
	if (faultshim_state == 0)
		faultshim_state = faultshim_seed * 0x9e3779b97f4a7c15ull +
				  (uint64_t)(atomic_fetch_add(&faultshim_threads, 1) + 1) * 0xbf58476d1ce4e5b9ull;
	/* xorshift64* (Vigna, "An experimental exploration of Marsaglia's
	 * xorshift generators, scrambled", 2016) */
	x = faultshim_state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	faultshim_state = x;
	if (((x * 0x2545f4914f6cdd1dull) >> 32) >= rate || faultshim_spared(caller))
		return 0;
	atomic_fetch_add_explicit(&faultshim_failed, 1, memory_order_relaxed);
	errno = ENOMEM;
	return 1;
}

void *malloc(size_t n)
{
	faultshim_resolve();
	if (!faultshim_real_malloc)
		return faultshim_boot_alloc(n);
	return faultshim_fail(__builtin_return_address(0)) ? NULL : faultshim_real_malloc(n);
}

void *calloc(size_t k, size_t n)
{
	faultshim_resolve();
	if (!faultshim_real_calloc) {
		void *p = n && k > SIZE_MAX / n ? NULL : faultshim_boot_alloc(k * n);

		return p;       /* the arena is zero: static storage */
	}
	return faultshim_fail(__builtin_return_address(0)) ? NULL : faultshim_real_calloc(k, n);
}

void *realloc(void *p, size_t n)
{
	faultshim_resolve();
	if (faultshim_is_boot(p) || !faultshim_real_realloc) {
		void *q = malloc(n);

		if (q && p) {
			size_t room = (size_t)(faultshim_boot + sizeof(faultshim_boot) - (char *)p);

			memcpy(q, p, n < room ? n : room);  /* the old size is not kept */
		}
		return q;
	}
	/* realloc(p, 0) frees: never "fails" */
	return n && faultshim_fail(__builtin_return_address(0)) ? NULL : faultshim_real_realloc(p, n);
}

void free(void *p)
{
	if (!p || faultshim_is_boot(p))
		return;
	faultshim_resolve();
	if (faultshim_real_free)
		faultshim_real_free(p);
}

/* Aligned blocks from the arena, before the real allocator is known. */
static void *faultshim_boot_aligned(size_t align, size_t n)
{
	char *p = faultshim_boot_alloc(n + align);

	return p ? (void *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1)) : NULL;
}

int posix_memalign(void **out, size_t align, size_t n)
{
	faultshim_resolve();
	if (!faultshim_real_posix_memalign) {
		*out = faultshim_boot_aligned(align, n);
		return *out ? 0 : ENOMEM;
	}
	if (faultshim_fail(__builtin_return_address(0)))
		return ENOMEM;
	return faultshim_real_posix_memalign(out, align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
	faultshim_resolve();
	if (!faultshim_real_aligned_alloc)
		return faultshim_boot_aligned(align, n);
	return faultshim_fail(__builtin_return_address(0)) ? NULL : faultshim_real_aligned_alloc(align, n);
}

void *memalign(size_t align, size_t n)
{
	faultshim_resolve();
	if (!faultshim_real_memalign)
		return faultshim_boot_aligned(align, n);
	return faultshim_fail(__builtin_return_address(0)) ? NULL : faultshim_real_memalign(align, n);
}

/* ---- the wall clock ------------------------------------------------- */

static int faultshim_is_wall(clockid_t id)
{
	return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
	int64_t off;
	int rc;

	faultshim_resolve();
	if (!faultshim_real_clock_gettime)
		return (int)syscall(SYS_clock_gettime, id, ts);
	rc = faultshim_real_clock_gettime(id, ts);
	if (rc < 0 || !faultshim_is_wall(id))
		return rc;
	faultshim_refresh();
	off = atomic_load_explicit(&faultshim_offset_ns, memory_order_relaxed);
	if (off) {
		int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + off;

		ts->tv_sec = (time_t)(ns / 1000000000);
		ts->tv_nsec = (long)(ns % 1000000000);
	}
	return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	struct timespec ts;

	(void)tz;
	if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
		return -1;
	tv->tv_sec = ts.tv_sec;
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}

time_t time(time_t *out)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (out)
		*out = ts.tv_sec;
	return ts.tv_sec;
}
