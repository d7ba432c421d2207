/* duty.c: one thread that takes a fixed share of a core, busy for BUSY_US microseconds, then asleep
 * for IDLE_US, until killed. Beside a pipelined `dma-bench run` it shows what any thread that
 * needs part of a core costs the worker and the target when they already own both cores, which is
 * the position the carriers of virtual threads are in (docs/performance.md, "Virtual threads
 * blocking on futures"). Check its share with `ps -o pcpu= -p PID` after a few seconds: a sleep
 * overshoots its request by tens of microseconds, so 50/50 takes about 0.4 of a core.
 *
 *   gcc -O2 -o /tmp/duty dma-bench/scripts/duty.c
 *   /tmp/duty BUSY_US IDLE_US & ...; kill %1
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_seconds(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s BUSY_US IDLE_US\n", argv[0]);
		return 2;
	}
	double busy = atof(argv[1]) * 1e-6;
	useconds_t idle = (useconds_t)atol(argv[2]);
	volatile unsigned long spins = 0;
	for (;;) {
		double end = now_seconds() + busy;
		while (now_seconds() < end)
			spins++;
		usleep(idle);
	}
}
