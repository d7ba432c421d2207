/* twocopy.c: the copies of a bounced shm write (1 MiB unless SIZE says otherwise), without
 * libfabric, to tell what the bounce copy costs by itself from what dma adds around it
 * (docs/performance.md, "shm: the bounce buffer").
 *
 * mode 1: thread B copies a hot source into a hot destination, over and over.
 * mode 2: thread A copies the hot source into slot i of a ring of SLOTS x SIZE (the bounce
 *   buffers) and thread B copies slot i into the hot destination once A is done with it; A runs
 *   at most SLOTS ahead of B. The rate is what B moves.
 * modes 3 and 4: as 1 and 2, but B reads with process_vm_readv, as shm's cross-memory attach does
 *   at the target: 3 is C's path (the target reads the caller's operand), 4 is dma's (the target
 *   reads a bounce buffer the worker has just filled).
 * A runs on CPU 0, B on CPU 1. In modes 2 and 4 it also prints A's own copy rate (bytes over the
 * time A spent inside memcpy) and the share of the run A spent copying.
 *
 * Environment: HUGE=1 puts the ring in one mapping advised MADV_HUGEPAGE (transparent huge pages,
 * as dma's shm bounce buffers are); SOURCES=1 gives A a source per slot instead of one, as
 * dma-bench gives each transfer of its window an operand of its own.
 *
 *   gcc -O2 -pthread -o /tmp/twocopy dma-bench/scripts/twocopy.c
 *   /tmp/twocopy MODE SLOTS SECONDS [SIZE]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

static size_t SZ = 1u << 20;
static int slots;
static double secs;
static char *src, *dst, **ring, *sources;
static _Atomic long produced, consumed;
static _Atomic int stop;
static double copying; /* seconds A spent in memcpy; read after the join */

static void cma(char *to, char *from)
{
	struct iovec l = {to, SZ}, r = {from, SZ};
	if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != SZ) {
		perror("process_vm_readv");
		exit(1);
	}
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

static void *producer(void *arg)
{
	(void)arg;
	pin(0);
	while (!atomic_load(&stop)) {
		long p = atomic_load(&produced);
		if (p - atomic_load(&consumed) >= slots)
			continue;
		double t1 = now();
		memcpy(ring[p % slots], sources ? sources + (p % slots) * SZ : src, SZ);
		copying += now() - t1;
		atomic_store(&produced, p + 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int mode = atoi(argv[1]);
	slots = atoi(argv[2]);
	secs = atof(argv[3]);
	if (argc > 4)
		SZ = strtoul(argv[4], NULL, 0);
	src = aligned_alloc(4096, SZ);
	dst = aligned_alloc(4096, SZ);
	memset(src, 1, SZ);
	memset(dst, 2, SZ);
	if (getenv("SOURCES")) {
		sources = aligned_alloc(4096, SZ * slots);
		memset(sources, 1, SZ * slots);
	}
	ring = malloc(sizeof(char *) * slots);
	if (getenv("HUGE")) {
		size_t huge = 2u << 20, bytes = (SZ * slots + huge - 1) & ~(huge - 1);
		char *m = mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);
		if (m == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		char *base = (char *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
		if (madvise(base, bytes, MADV_HUGEPAGE))
			perror("madvise");
		for (int i = 0; i < slots; i++)
			ring[i] = base + (size_t)i * SZ;
	} else {
		for (int i = 0; i < slots; i++)
			ring[i] = aligned_alloc(4096, SZ);
	}
	for (int i = 0; i < slots; i++)
		memset(ring[i], 3, SZ);
	pthread_t a;
	if (mode == 2 || mode == 4)
		pthread_create(&a, NULL, producer, NULL);
	pin(1);
	double t0 = now(), t;
	long n = 0;
	do {
		if (mode == 2 || mode == 4) {
			while (atomic_load(&produced) <= n)
				;
			if (mode == 2)
				memcpy(dst, ring[n % slots], SZ);
			else
				cma(dst, ring[n % slots]);
			atomic_store(&consumed, n + 1);
		} else if (mode == 1) {
			memcpy(dst, src, SZ);
		} else {
			cma(dst, src);
		}
		n++;
		t = now();
	} while (t - t0 < secs);
	atomic_store(&stop, 1);
	if (mode == 2 || mode == 4)
		pthread_join(a, NULL);
	printf("mode %d slots %d size %zu: %.0f MB/s", mode, slots, SZ,
	       (double)n * SZ / (t - t0) / 1e6);
	if (copying > 0)
		printf("; A copies at %.0f MB/s, %.0f %% of the run",
		       (double)atomic_load(&produced) * SZ / copying / 1e6, copying / (t - t0) * 100);
	printf("\n");
	return 0;
}
