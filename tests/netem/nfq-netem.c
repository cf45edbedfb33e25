/* nfq-netem.c: netem in user space for kernels without the qdisc: NFQUEUE packets held and released on netem's schedule. */
/*
 * Usage: nfq-netem [-s SEED] [-r READYFILE] CONFIG
 *
 * CONFIG has one line per queue: "QUEUE-NUMBER netem options...", the
 * options as tc-netem(8) takes them ("1 delay 50ms 10ms distribution
 * normal loss 1% rate 20mbit"). Lines starting with '#' are comments. A
 * line "seed N" starts every queue's random draws again from N, each time
 * the file is read (TCP and other packets draw from streams of their own,
 * netem.h: two runs after the same seed give their n-th TCP packet the
 * same fate, whatever else went by: paired benchmark runs).
 * iptables rules send a direction's packets to its queue with
 * -j NFQUEUE --queue-num N. Each queue behaves as one netem qdisc.
 *
 * SIGHUP re-reads CONFIG (packets held keep their times; queues named
 * anew are bound, queues no longer named are released); SIGUSR1 prints
 * the counters on stderr; SIGTERM and SIGINT release every held packet
 * and exit. READYFILE is written (with the pid) once every queue is bound.
 *
 * A packet is held by not giving its verdict until its time comes (the
 * kernel keeps it meanwhile); a duplicate is a copy sent through a raw
 * socket at its own time (it leaves by OUTPUT, so it is not queued again).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip6.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>

#include <libnetfilter_queue/libnetfilter_queue.h>
#include <libnfnetlink/libnfnetlink.h>

#include "netem.h"

#define MAX_QUEUES 8
#define KERNEL_QUEUE_MAXLEN 100000
#define NETLINK_RCVBUF (16 * 1024 * 1024)
#define L2_HEADER 14		/* netem on ethernet counts the MAC header */

struct netem;

struct queue {
	struct netem *n;
	int num;			/* -1: free slot */
	int named;			/* in the config just read */
	struct nfq_q_handle *qh;
	struct netem_queue nq;
};

/* A packet whose verdict (or, for a copy, whose send) waits for `when`. */
struct held {
	int64_t when;
	uint64_t order;			/* FIFO among equal times */
	struct queue *q;
	uint32_t id;
	uint8_t *copy;			/* a duplicate's bytes; NULL: verdict */
	size_t copy_len;
};

struct netem {
	struct nfq_handle *h;
	struct queue queues[MAX_QUEUES];
	struct held *heap;
	size_t nheld, cap;
	uint64_t order;
	uint64_t seed;
	uint64_t reseed;	/* a "seed" line's, this reading */
	int reseeding;
	const char *config;
	int raw4, raw6;
	int timer_fd;
};

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
die(const char *what)
{
	fprintf(stderr, "nfq-netem: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* ---- the heap of held packets, earliest first */

static int
held_before(const struct held *a, const struct held *b)
{
	return a->when < b->when || (a->when == b->when && a->order < b->order);
}

static void
heap_push(struct netem *n, const struct held *h)
{
	size_t i;

	if (n->nheld == n->cap) {
		n->cap = n->cap ? 2 * n->cap : 1024;
		if ((n->heap = realloc(n->heap, n->cap * sizeof(*n->heap))) == NULL)
			die("realloc");
	}
	i = n->nheld++;
	n->heap[i] = *h;
	n->heap[i].order = n->order++;
	while (i > 0 && held_before(&n->heap[i], &n->heap[(i - 1) / 2])) {
		struct held t = n->heap[i];

		n->heap[i] = n->heap[(i - 1) / 2];
		n->heap[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

static void
sift_down(struct netem *n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		struct held t;

		if (l < n->nheld && held_before(&n->heap[l], &n->heap[m]))
			m = l;
		if (r < n->nheld && held_before(&n->heap[r], &n->heap[m]))
			m = r;
		if (m == i)
			break;
		t = n->heap[i];
		n->heap[i] = n->heap[m];
		n->heap[m] = t;
		i = m;
	}
}

static struct held
heap_pop(struct netem *n)
{
	struct held top = n->heap[0];

	n->heap[0] = n->heap[--n->nheld];
	sift_down(n, 0);
	return top;
}

/* ---- release */

static void
send_copy(struct netem *n, const uint8_t *p, size_t len)
{
	struct sockaddr_storage to;
	socklen_t tolen;
	int fd;

	memset(&to, 0, sizeof(to));
	if (len >= sizeof(struct ip) && (p[0] >> 4) == 4) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&to;

		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, p + 16, 4);
		tolen = sizeof(*s4);
		fd = n->raw4;
	} else if (len >= sizeof(struct ip6_hdr) && (p[0] >> 4) == 6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&to;

		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, p + 24, 16);
		tolen = sizeof(*s6);
		fd = n->raw6;
	} else {
		return;
	}
	/* A copy lost here is a copy netem would have lost too. */
	(void)sendto(fd, p, len, MSG_DONTWAIT, (struct sockaddr *)&to, tolen);
}

static void
release(struct netem *n, struct held *h)
{
	netem_sent(&h->q->nq);
	if (h->copy != NULL) {
		send_copy(n, h->copy, h->copy_len);
		free(h->copy);
	} else if (h->q->qh != NULL) {
		nfq_set_verdict(h->q->qh, h->id, NF_ACCEPT, 0, NULL);
	}
}

static void
release_due(struct netem *n, int64_t until)
{
	while (n->nheld > 0 && n->heap[0].when <= until) {
		struct held h = heap_pop(n);

		release(n, &h);
	}
}

static void
arm_timer(struct netem *n)
{
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	if (n->nheld > 0) {
		int64_t when = n->heap[0].when;

		if (when <= 0)
			when = 1;
		its.it_value.tv_sec = when / 1000000000;
		its.it_value.tv_nsec = when % 1000000000;
	}
	if (timerfd_settime(n->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) != 0)
		die("timerfd_settime");
}

/* ---- arrival */

static void
hold(struct netem *n, struct queue *q, int64_t when, uint32_t id,
    const uint8_t *copy, size_t len)
{
	struct held h;

	memset(&h, 0, sizeof(h));
	h.q = q;
	h.id = id;
	h.when = when;
	if (copy != NULL) {
		if ((h.copy = malloc(len)) == NULL)
			die("malloc");
		memcpy(h.copy, copy, len);
		h.copy_len = len;
	}
	heap_push(n, &h);
}

/* TCP (IPv4, or IPv6 with TCP as its first next header) or not. */
static int
packet_class(const unsigned char *ip, int len)
{
	if (len >= 20 && ip[0] >> 4 == 4 && ip[9] == IPPROTO_TCP)
		return NETEM_CLASS_TCP;
	if (len >= 40 && ip[0] >> 4 == 6 && ip[6] == IPPROTO_TCP)
		return NETEM_CLASS_TCP;
	return NETEM_CLASS_OTHER;
}

static int
on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa,
    void *arg)
{
	struct queue *q = arg;
	struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
	unsigned char *payload = NULL;
	int len = nfq_get_payload(nfa, &payload);
	int64_t t = now_ns(), when, copy_when;
	uint32_t id;
	int dup, unused;

	(void)msg;
	if (ph == NULL)
		return 0;
	id = ntohl(ph->packet_id);
	if (len < 0)
		len = 0;
	netem_queue_class(&q->nq, packet_class(payload, len));
	if (netem_enqueue(&q->nq, t, (size_t)len + L2_HEADER, 0, &when, &dup) ==
	    NETEM_DROP) {
		nfq_set_verdict(qh, id, NF_DROP, 0, NULL);
		return 0;
	}
	hold(q->n, q, when, id, NULL, 0);
	/* The copy goes through the queue again, with its own fate. */
	if (dup && len > 0 && netem_enqueue(&q->nq, t, (size_t)len + L2_HEADER, 1,
	    &copy_when, &unused) == NETEM_SEND)
		hold(q->n, q, copy_when, 0, payload, (size_t)len);
	return 0;
}

/* ---- queues and the configuration */

static struct queue *
queue_find(struct netem *n, int num)
{
	int i;

	for (i = 0; i < MAX_QUEUES; i++)
		if (n->queues[i].num == num)
			return &n->queues[i];
	return NULL;
}

static int
queue_bind(struct netem *n, struct queue *q, int num)
{
	q->num = num;
	q->qh = nfq_create_queue(n->h, (uint16_t)num, on_packet, q);
	if (q->qh == NULL) {
		fprintf(stderr, "nfq-netem: cannot bind queue %d: %s\n", num,
		    strerror(errno));
		q->num = -1;
		return -1;
	}
	if (nfq_set_mode(q->qh, NFQNL_COPY_PACKET, 0xffff) < 0 ||
	    nfq_set_queue_maxlen(q->qh, KERNEL_QUEUE_MAXLEN) < 0) {
		fprintf(stderr, "nfq-netem: cannot configure queue %d\n", num);
		return -1;
	}
	return 0;
}

/* Held packets of a queue going away leave now, as when a netem qdisc is
 * replaced by one without delay. */
static void
queue_release(struct netem *n, struct queue *q)
{
	size_t i = 0, j;

	while (i < n->nheld) {
		if (n->heap[i].q != q) {
			i++;
			continue;
		}
		release(n, &n->heap[i]);
		n->heap[i] = n->heap[--n->nheld];
	}
	for (j = n->nheld / 2; j-- > 0;)
		sift_down(n, j);
	nfq_destroy_queue(q->qh);
	q->qh = NULL;
	q->num = -1;
}

/* One config line: 0 done, -1 bad (reported). */
static int
config_line(struct netem *n, const char *line, int lineno)
{
	struct netem_parse_error err;
	struct netem_params p;
	struct queue *q;
	char *end;
	long num;
	char desc[256];

	while (*line == ' ' || *line == '\t')
		line++;
	if (*line == '#' || *line == '\n' || *line == '\0')
		return 0;
	if (strncmp(line, "seed ", 5) == 0) {
		errno = 0;
		n->reseed = strtoull(line + 5, &end, 0);
		if (errno != 0 || end == line + 5 || strspn(end, " \t\n") != strlen(end)) {
			fprintf(stderr, "nfq-netem: %s:%d: seed wants a number\n",
			    n->config, lineno);
			return -1;
		}
		n->reseeding = 1;
		return 0;
	}
	num = strtol(line, &end, 10);
	if (end == line || num < 0 || num > 65535) {
		fprintf(stderr, "nfq-netem: %s:%d: a line starts with the queue "
		    "number (0..65535)\n", n->config, lineno);
		return -1;
	}
	if (netem_params_parse_line(&p, end, &err) != 0) {
		fprintf(stderr, "nfq-netem: %s:%d: %s\n", n->config, lineno, err.text);
		return -1;
	}
	if ((q = queue_find(n, (int)num)) == NULL) {
		if ((q = queue_find(n, -1)) == NULL) {
			fprintf(stderr, "nfq-netem: %s:%d: more than %d queues\n",
			    n->config, lineno, MAX_QUEUES);
			return -1;
		}
		if (queue_bind(n, q, (int)num) != 0)
			return -1;
		netem_queue_init(&q->nq, &p, n->seed + (uint64_t)num);
	} else {
		/* As `tc qdisc change`: new parameters, same packets. */
		q->nq.p = p;
	}
	q->named = 1;
	netem_params_format(&p, desc, sizeof(desc));
	fprintf(stderr, "nfq-netem: queue %ld: %s\n", num, desc);
	return 0;
}

static int
read_config(struct netem *n)
{
	char line[1024];
	FILE *f = fopen(n->config, "re");
	int lineno = 0, bad = 0, i;

	if (f == NULL) {
		fprintf(stderr, "nfq-netem: %s: %s\n", n->config, strerror(errno));
		return -1;
	}
	for (i = 0; i < MAX_QUEUES; i++)
		n->queues[i].named = 0;
	n->reseeding = 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (config_line(n, line, ++lineno) != 0)
			bad = 1;
	if (ferror(f))
		bad = 1;
	fclose(f);
	if (bad)
		return -1;
	for (i = 0; i < MAX_QUEUES; i++)
		if (n->queues[i].num >= 0 && !n->queues[i].named)
			queue_release(n, &n->queues[i]);
	if (n->reseeding) {
		n->seed = n->reseed;
		for (i = 0; i < MAX_QUEUES; i++)
			if (n->queues[i].num >= 0)
				netem_queue_reseed(&n->queues[i].nq,
				    n->seed + (uint64_t)n->queues[i].num);
		fprintf(stderr, "nfq-netem: random draws from seed %llu\n",
		    (unsigned long long)n->seed);
	}
	return 0;
}

static void
print_stats(const struct netem *n)
{
	int i;

	for (i = 0; i < MAX_QUEUES; i++) {
		const struct netem_queue *q = &n->queues[i].nq;

		if (n->queues[i].num < 0)
			continue;
		fprintf(stderr, "nfq-netem: queue %d: in %llu lost %llu duplicated "
		    "%llu reordered %llu over limit %llu held %u\n",
		    n->queues[i].num, (unsigned long long)q->n_in,
		    (unsigned long long)q->n_lost, (unsigned long long)q->n_dup,
		    (unsigned long long)q->n_reordered,
		    (unsigned long long)q->n_overlimit, q->held);
	}
}

/* ---- main loop */

static void
read_packets(struct netem *n)
{
	char buf[0x10000 + 512] __attribute__((aligned));
	ssize_t got;

	while ((got = recv(nfq_fd(n->h), buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		nfq_handle_packet(n->h, buf, (int)got);
	if (got < 0 && errno == ENOBUFS)
		fprintf(stderr, "nfq-netem: netlink overrun: packets lost\n");
}

/* 1: keep going; 0: time to stop. */
static int
on_signal(struct netem *n, int sfd)
{
	struct signalfd_siginfo si;

	if (read(sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		return 1;
	switch (si.ssi_signo) {
	case SIGHUP:
		if (read_config(n) != 0)
			fprintf(stderr, "nfq-netem: configuration not (fully) "
			    "applied\n");
		return 1;
	case SIGUSR1:
		print_stats(n);
		return 1;

	default:
		return 0;
	}
}

static void
setup(struct netem *n, sigset_t *sigs)
{
	int one = 1, i;

	for (i = 0; i < MAX_QUEUES; i++) {
		n->queues[i].num = -1;
		n->queues[i].n = n;
	}
	if ((n->h = nfq_open()) == NULL)
		die("nfq_open (is nfnetlink_queue available?)");
	nfnl_rcvbufsiz(nfq_nfnlh(n->h), NETLINK_RCVBUF);
	setsockopt(nfq_fd(n->h), SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof(one));
	if ((n->raw4 = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW)) < 0 ||
	    (n->raw6 = socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW)) < 0)
		die("raw socket");
	if ((n->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC)) < 0)
		die("timerfd_create");
	sigemptyset(sigs);
	sigaddset(sigs, SIGHUP);
	sigaddset(sigs, SIGUSR1);
	sigaddset(sigs, SIGTERM);
	sigaddset(sigs, SIGINT);
	sigprocmask(SIG_BLOCK, sigs, NULL);
}

static void
run(struct netem *n, int sfd)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev, out[4];
	int fds[3] = { nfq_fd(n->h), n->timer_fd, sfd }, i, k, cnt;
	uint64_t ticks;

	if (ep < 0)
		die("epoll_create1");
	for (i = 0; i < 3; i++) {
		ev.events = EPOLLIN;
		ev.data.fd = fds[i];
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) != 0)
			die("epoll_ctl");
	}
	for (;;) {
		cnt = epoll_wait(ep, out, 4, -1);
		if (cnt < 0 && errno == EINTR)
			continue;
		if (cnt < 0)
			die("epoll_wait");
		for (k = 0; k < cnt; k++) {
			if (out[k].data.fd == sfd && !on_signal(n, sfd))
				return;
			if (out[k].data.fd == n->timer_fd)
				(void)!read(n->timer_fd, &ticks, sizeof(ticks));
			if (out[k].data.fd == fds[0])
				read_packets(n);
		}
		release_due(n, now_ns());
		arm_timer(n);
	}
}

int
main(int argc, char **argv)
{
	struct netem n;
	const char *ready = NULL;
	sigset_t sigs;
	int c, sfd, fd, i;

	memset(&n, 0, sizeof(n));
	n.seed = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
	while ((c = getopt(argc, argv, "s:r:")) != -1) {
		switch (c) {
		case 's':
			n.seed = strtoull(optarg, NULL, 0);
			break;
		case 'r':
			ready = optarg;
			break;
		default:
			fprintf(stderr, "usage: nfq-netem [-s SEED] [-r READYFILE] CONFIG\n");
			return 2;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "usage: nfq-netem [-s SEED] [-r READYFILE] CONFIG\n");
		return 2;
	}
	n.config = argv[optind];
	setup(&n, &sigs);
	if ((sfd = signalfd(-1, &sigs, SFD_CLOEXEC)) < 0)
		die("signalfd");
	if (read_config(&n) != 0)
		return 2;
	if (ready != NULL) {
		char pid[32];
		int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());

		if ((fd = open(ready, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0 ||
		    write(fd, pid, (size_t)len) != len)
			die(ready);
		close(fd);
	}
	run(&n, sfd);
	release_due(&n, INT64_MAX);
	print_stats(&n);
	for (i = 0; i < MAX_QUEUES; i++)
		if (n.queues[i].qh != NULL)
			nfq_destroy_queue(n.queues[i].qh);
	nfq_close(n.h);
	free(n.heap);
	return 0;
}
