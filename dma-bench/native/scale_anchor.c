/*
 * scale_anchor: a native server for `dma-bench scale --anchor`, to tell dma's own per-transfer
 * cost apart from libfabric's, the kernel's and the targets'. It drives the SAME passive endpoints
 * dma-bench's client processes hold, the same way dma's FabricService does in that benchmark:
 *
 *   - one RDM endpoint on the named libfabric provider, with dma's fi_getinfo hints (caps
 *     FI_MSG|FI_RMA|FI_READ|FI_WRITE|FI_REMOTE_READ|FI_REMOTE_WRITE, mode 0, mr_mode
 *     FI_MR_LOCAL|FI_MR_VIRT_ADDR|FI_MR_ALLOCATED|FI_MR_PROV_KEY, FI_SOURCE with -b), the entry
 *     whose provider name is exactly the one asked for preferred, an FI_AV_TABLE address vector
 *     and an FI_CQ_FORMAT_CONTEXT completion queue without a wait object;
 *   - writes posted with fi_writemsg(FI_COMPLETION | FI_DELIVERY_COMPLETE), each window slot
 *     writing from its own bytes of one buffer (registered when the provider wants FI_MR_LOCAL);
 *   - completions reaped 16 at a time with fi_cq_read; a post answered -FI_EAGAIN is retried after
 *     the queue was read again.
 *
 * Targets come from a file, one per line: "<address hex> <remote key> <remote address>" (decimal;
 * further fields are ignored), the first three fields of dma's Advertisement. All are inserted
 * into the address vector, each gets one write (connections are set up outside the measurement,
 * as dma-bench touches every new client), then --rounds alternations of two phases run: writes
 * round robin over all targets, then over the first --subset. Each phase has an unmeasured warmup,
 * then -t of measurement, then stops posting and drains.
 *
 * Output (stdout, one line): ANCHOR all <transfers/s> subset <transfers/s> errors <n>
 * Exit 0 when every write succeeded, 1 when some failed (counted, with fi_cq_readerr's text on
 * stderr, the line still printed), 2 on bad usage or set-up failure, 3 when no completion came
 * for 10 s (the run is aborted).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define BATCH 16
#define STALL_NANOS (10LL * 1000 * 1000 * 1000)
/* The newest API version dma asks for (dma-libfabric Native.NEWEST_VERIFIED_API). */
#define NEWEST_API FI_VERSION(2, 6)

struct target {
	fi_addr_t fi_addr;
	uint64_t key;
	uint64_t raddr;
};

/* One write in flight. The context comes first: the completion's op_context points at it. */
struct slot {
	struct fi_context2 ctx;
	int index;
	int in_flight;
	int pending;		/* its post met -FI_EAGAIN; retried after the next queue read */
};

static struct {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	void *desc;
	char *buf;
	size_t size;
	struct target *targets;
	long ntargets;
	struct slot *slots;
	int window;
	/* the phase in progress */
	long among;		/* targets picked from: the first `among` */
	uint64_t next;		/* round-robin cursor */
	long once_end;		/* >= 0: one write to each target up to this, then stop */
	int stopping;
	long in_flight;
	long completed;		/* successful completions while measuring */
	int measuring;
	long errors;
	int64_t last_progress;	/* when the last completion (or the phase start) was */
} s = {.once_end = -1};

static int64_t now_nanos(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void fail(const char *step, long rc)
{
	fprintf(stderr, "scale_anchor: %s: %s (%ld)\n", step, fi_strerror((int)-rc), rc);
	exit(2);
}

#define CHECK(step, call)                       \
	do {                                    \
		long rc_ = (long)(call);        \
		if (rc_ != 0)                   \
			fail(step, rc_);        \
	} while (0)

static void usage(void)
{
	fprintf(stderr,
		"usage: scale_anchor -p PROVIDER -f TARGETS [-b NODE] [-s BYTES] [-w WINDOW]\n"
		"                    [-t TIME] [--warmup TIME] [--rounds N] [--subset N]\n"
		"  -p  libfabric provider: net, tcp, \"tcp;ofi_rxm\", shm\n"
		"  -f  targets, one a line: <address hex> <remote key> <remote address>\n"
		"  -b  source node (FI_SOURCE), e.g. 127.0.0.1\n"
		"  -s  bytes per write (default 4096)   -w  writes in flight (default 64)\n"
		"  -t  measured time per phase (default 1s; 250ms, 2s or 1.5)\n"
		"  --warmup  unmeasured time before each phase (default 200ms)\n"
		"  --rounds  alternations of all and subset (default 3)\n"
		"  --subset  the fixed subset (default 64)\n");
	exit(2);
}

/* "2s", "250ms", "1.5" (seconds) to nanoseconds, or -1. */
static int64_t parse_time(const char *text)
{
	char *end;
	double v = strtod(text, &end);
	if (end == text || v < 0)
		return -1;
	if (strcmp(end, "ms") == 0)
		return (int64_t)(v * 1e6);
	if (strcmp(end, "s") == 0 || *end == '\0')
		return (int64_t)(v * 1e9);
	return -1;
}

static long parse_long(const char *text, const char *what)
{
	char *end;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || v < 1) {
		fprintf(stderr, "scale_anchor: %s must be a positive number, not \"%s\"\n", what, text);
		exit(2);
	}
	return v;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Reads the targets and inserts their addresses into the address vector. */
static void load_targets(const char *path)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		fprintf(stderr, "scale_anchor: cannot open %s: %s\n", path, strerror(errno));
		exit(2);
	}
	long capacity = 1024;
	s.targets = calloc(capacity, sizeof(*s.targets));
	char *line = NULL;
	size_t line_cap = 0;
	unsigned char *addr = NULL;
	long number = 0;
	while (getline(&line, &line_cap, f) >= 0) {
		number++;
		char hex[4096];
		uint64_t key, raddr;
		if (line[0] == '\n' || line[0] == '\0')
			continue;
		if (sscanf(line, "%4095s %" SCNu64 " %" SCNu64, hex, &key, &raddr) != 3) {
			fprintf(stderr, "scale_anchor: %s line %ld: want <hex> <key> <address>\n",
				path, number);
			exit(2);
		}
		size_t len = strlen(hex);
		if (len == 0 || len % 2 != 0) {
			fprintf(stderr, "scale_anchor: %s line %ld: odd or empty address\n", path,
				number);
			exit(2);
		}
		addr = realloc(addr, len / 2);
		for (size_t i = 0; i < len / 2; i++) {
			int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
			if (hi < 0 || lo < 0) {
				fprintf(stderr, "scale_anchor: %s line %ld: not hex\n", path, number);
				exit(2);
			}
			addr[i] = (unsigned char)(hi << 4 | lo);
		}
		if (s.ntargets == capacity) {
			capacity *= 2;
			s.targets = realloc(s.targets, capacity * sizeof(*s.targets));
		}
		struct target *t = &s.targets[s.ntargets];
		/* One at a time, as dma's addPeer inserts each peer. */
		int n = fi_av_insert(s.av, addr, 1, &t->fi_addr, 0, NULL);
		if (n != 1) {
			fprintf(stderr, "scale_anchor: fi_av_insert of target %ld returned %d (%s)\n",
				s.ntargets, n, n < 0 ? fi_strerror(-n) : "not inserted");
			exit(2);
		}
		t->key = key;
		t->raddr = raddr;
		s.ntargets++;
	}
	free(line);
	free(addr);
	fclose(f);
	if (s.ntargets == 0) {
		fprintf(stderr, "scale_anchor: %s names no target\n", path);
		exit(2);
	}
}

static void open_fabric(const char *prov, const char *node)
{
	struct fi_info *hints = fi_allocinfo();
	if (hints == NULL)
		fail("fi_allocinfo", -FI_ENOMEM);
	hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	hints->mode = 0;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup(prov);
	uint32_t version = fi_version();
	if (version > NEWEST_API)
		version = NEWEST_API;
	struct fi_info *list = NULL;
	CHECK("fi_getinfo", fi_getinfo(version, node, NULL, node ? FI_SOURCE : 0, hints, &list));
	fi_freeinfo(hints);
	struct fi_info *chosen = NULL;
	for (struct fi_info *e = list; e != NULL; e = e->next) {
		if (strcmp(e->fabric_attr->prov_name, prov) == 0) {
			chosen = e;
			break;
		}
	}
	if (chosen == NULL)
		chosen = list;
	s.info = fi_dupinfo(chosen);
	fi_freeinfo(list);
	fprintf(stderr, "scale_anchor: provider %s, fabric %s, domain %s, libfabric %u.%u\n",
		s.info->fabric_attr->prov_name, s.info->fabric_attr->name,
		s.info->domain_attr->name, FI_MAJOR(fi_version()), FI_MINOR(fi_version()));

	CHECK("fi_fabric", fi_fabric(s.info->fabric_attr, &s.fabric, NULL));
	CHECK("fi_domain", fi_domain(s.fabric, s.info, &s.domain, NULL));
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	CHECK("fi_av_open", fi_av_open(s.domain, &av_attr, &s.av, NULL));
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
	CHECK("fi_cq_open", fi_cq_open(s.domain, &cq_attr, &s.cq, NULL));
	CHECK("fi_endpoint", fi_endpoint(s.domain, s.info, &s.ep, NULL));
	CHECK("fi_ep_bind(av)", fi_ep_bind(s.ep, &s.av->fid, 0));
	CHECK("fi_ep_bind(cq)", fi_ep_bind(s.ep, &s.cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK("fi_enable", fi_enable(s.ep));

	size_t bytes = s.size * (size_t)s.window;
	s.buf = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
	if (s.buf == NULL)
		fail("aligned_alloc", -FI_ENOMEM);
	memset(s.buf, 0x5a, bytes);
	uint64_t mr_mode = s.info->domain_attr->mr_mode;
	if (mr_mode & FI_MR_LOCAL) {
		CHECK("fi_mr_reg", fi_mr_reg(s.domain, s.buf, bytes, FI_WRITE | FI_READ, 0, 0, 0,
					     &s.mr, NULL));
		if (mr_mode & FI_MR_ENDPOINT) {
			CHECK("fi_mr_bind", fi_mr_bind(s.mr, &s.ep->fid, 0));
			CHECK("fi_mr_enable", fi_mr_enable(s.mr));
		}
		s.desc = fi_mr_desc(s.mr);
	}
}

/* Posts the slot's next write, or leaves it idle. Returns the post's result (0 when idle). */
static ssize_t post(struct slot *slot)
{
	long target;
	if (s.stopping || (s.once_end >= 0 && (long)s.next >= s.once_end)) {
		slot->pending = 0;
		return 0;
	}
	if (s.once_end >= 0) {
		target = (long)s.next;
	} else {
		target = (long)(s.next % (uint64_t)s.among);
	}
	struct target *t = &s.targets[target];
	struct iovec iov = {.iov_base = s.buf + (size_t)slot->index * s.size, .iov_len = s.size};
	struct fi_rma_iov rma = {.addr = t->raddr, .len = s.size, .key = t->key};
	void *desc = s.desc;
	struct fi_msg_rma msg = {
		.msg_iov = &iov,
		.desc = &desc,
		.iov_count = 1,
		.addr = t->fi_addr,
		.rma_iov = &rma,
		.rma_iov_count = 1,
		.context = &slot->ctx,
		.data = 0,
	};
	ssize_t rc = fi_writemsg(s.ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
	if (rc == 0) {
		s.next++;
		slot->in_flight = 1;
		slot->pending = 0;
		s.in_flight++;
	} else if (rc == -FI_EAGAIN) {
		slot->pending = 1;
	} else {
		fprintf(stderr, "scale_anchor: fi_writemsg to target %ld: %s (%zd)\n", target,
			fi_strerror((int)-rc), rc);
		s.errors++;
		s.next++; /* the next target; the slot tries again after the next queue read */
		slot->pending = 1;
	}
	return rc;
}

static void completed(struct slot *slot, int ok)
{
	slot->in_flight = 0;
	s.in_flight--;
	if (ok && s.measuring)
		s.completed++;
	post(slot);
}

/* One queue read, then the retries of posts that met -FI_EAGAIN. Returns completions seen. */
static long progress(void)
{
	struct fi_cq_entry entries[BATCH];
	long seen = 0;
	ssize_t n = fi_cq_read(s.cq, entries, BATCH);
	if (n > 0) {
		for (ssize_t i = 0; i < n; i++)
			completed((struct slot *)entries[i].op_context, 1);
		seen = n;
	} else if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};
		ssize_t r = fi_cq_readerr(s.cq, &err, 0);
		if (r == 1) {
			char text[256];
			fprintf(stderr, "scale_anchor: write failed: %s (%d)%s%s\n",
				fi_strerror(err.err), err.err,
				err.prov_errno ? ", provider: " : "",
				err.prov_errno ? fi_cq_strerror(s.cq, err.prov_errno,
								err.err_data, text,
								sizeof(text))
					       : "");
			s.errors++;
			if (err.op_context != NULL) {
				completed((struct slot *)err.op_context, 0);
				seen = 1;
			}
		} else if (r != -FI_EAGAIN) {
			fail("fi_cq_readerr", r);
		}
	} else if (n != -FI_EAGAIN) {
		fail("fi_cq_read", n);
	}
	for (int i = 0; i < s.window; i++) {
		if (s.slots[i].pending && !s.slots[i].in_flight) {
			if (s.stopping)
				s.slots[i].pending = 0;
			else if (post(&s.slots[i]) == -FI_EAGAIN)
				break; /* still full: the next read frees room */
		}
	}
	return seen;
}

/* Reads the queue until nothing is in flight; aborts after 10 s without a completion. */
static void drain(const char *what)
{
	s.stopping = 1;
	s.last_progress = now_nanos();
	while (s.in_flight > 0) {
		if (progress() > 0) {
			s.last_progress = now_nanos();
		} else if (now_nanos() - s.last_progress > STALL_NANOS) {
			fprintf(stderr,
				"scale_anchor: %s: %ld writes still in flight after 10 s without a"
				" completion\n", what, s.in_flight);
			exit(3);
		}
	}
	for (int i = 0; i < s.window; i++)
		s.slots[i].pending = 0;
}

static void start(void)
{
	s.stopping = 0;
	s.last_progress = now_nanos();
	for (int i = 0; i < s.window; i++)
		if (!s.slots[i].in_flight && post(&s.slots[i]) == -FI_EAGAIN)
			break;
}

/* One write to every target, so connections are made outside the measurement. */
static void touch_all(void)
{
	s.once_end = s.ntargets;
	s.next = 0;
	start();
	while ((long)s.next < s.once_end || s.in_flight > 0) {
		if (progress() > 0) {
			s.last_progress = now_nanos();
		} else if (now_nanos() - s.last_progress > STALL_NANOS) {
			fprintf(stderr,
				"scale_anchor: touching every target: %" PRIu64 " of %ld written, no"
				" completion for 10 s\n", s.next, s.ntargets);
			exit(3);
		}
	}
	drain("touching every target");
	s.once_end = -1;
	s.next = 0;
}

/* One phase over the first `among` targets; adds its completions and seconds. */
static void phase(long among, int64_t warmup, int64_t measured, const char *name, double *count_sum,
		  double *seconds_sum)
{
	s.among = among;
	s.measuring = 0;
	s.completed = 0;
	start();
	int64_t begin = now_nanos();
	int64_t measure_start = begin + warmup;
	int64_t measure_end = measure_start + measured;
	int64_t started = 0, ended = 0;
	long count = 0;
	for (;;) {
		if (progress() > 0) {
			s.last_progress = now_nanos();
		} else if (now_nanos() - s.last_progress > STALL_NANOS) {
			fprintf(stderr, "scale_anchor: %s phase: no completion for 10 s (%ld in flight)\n",
				name, s.in_flight);
			exit(3);
		}
		int64_t t = now_nanos();
		if (!s.measuring && started == 0 && t >= measure_start) {
			s.completed = 0;
			s.measuring = 1;
			started = t;
		} else if (s.measuring && t >= measure_end) {
			s.measuring = 0;
			count = s.completed;
			ended = t;
			break;
		}
	}
	drain(name);
	*count_sum += (double)count;
	*seconds_sum += (ended - started) / 1e9;
}

int main(int argc, char **argv)
{
	const char *prov = NULL, *file = NULL, *node = NULL;
	int64_t measured = 1000000000LL, warmup = 200000000LL;
	long rounds = 3, subset = 64;
	s.size = 4096;
	s.window = 64;
	static const struct option longs[] = {
		{"warmup", required_argument, NULL, 'W'},
		{"rounds", required_argument, NULL, 'r'},
		{"subset", required_argument, NULL, 'k'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "p:f:b:s:w:t:h", longs, NULL)) != -1) {
		switch (c) {
		case 'p': prov = optarg; break;
		case 'f': file = optarg; break;
		case 'b': node = optarg; break;
		case 's': s.size = (size_t)parse_long(optarg, "-s"); break;
		case 'w': s.window = (int)parse_long(optarg, "-w"); break;
		case 't': measured = parse_time(optarg); break;
		case 'W': warmup = parse_time(optarg); break;
		case 'r': rounds = parse_long(optarg, "--rounds"); break;
		case 'k': subset = parse_long(optarg, "--subset"); break;
		default: usage();
		}
	}
	if (prov == NULL || file == NULL || optind != argc || measured <= 0 || warmup < 0)
		usage();

	open_fabric(prov, node);
	load_targets(file);
	s.slots = calloc((size_t)s.window, sizeof(*s.slots));
	for (int i = 0; i < s.window; i++)
		s.slots[i].index = i;
	if (subset > s.ntargets)
		subset = s.ntargets;

	touch_all();
	long touch_errors = s.errors;
	double all_count = 0, all_seconds = 0, subset_count = 0, subset_seconds = 0;
	for (long r = 0; r < rounds; r++) {
		phase(s.ntargets, warmup, measured, "all", &all_count, &all_seconds);
		phase(subset, warmup, measured, "subset", &subset_count, &subset_seconds);
	}
	/* As dma-bench: completions over the summed measured time of each kind of phase. */
	printf("ANCHOR all %.1f subset %.1f errors %ld\n", all_count / all_seconds,
	       subset_count / subset_seconds, s.errors);
	fflush(stdout);
	if (touch_errors > 0)
		fprintf(stderr, "scale_anchor: %ld of the errors were in the first touch\n",
			touch_errors);

	if (s.mr)
		fi_close(&s.mr->fid);
	fi_close(&s.ep->fid);
	fi_close(&s.av->fid);
	fi_close(&s.cq->fid);
	fi_close(&s.domain->fid);
	fi_close(&s.fabric->fid);
	fi_freeinfo(s.info);
	free(s.slots);
	free(s.targets);
	free(s.buf);
	return s.errors > 0 ? 1 : 0;
}
