/* nfq-fin.c: a box on the path that ends a TCP stream it does not own: the first data segment from a port past a byte count goes on with FIN set. */
/*
 * Usage: nfq-fin [-a] [-r READYFILE] QUEUE SPORT[-LAST] BYTES
 *
 * An iptables rule sends the packets to the queue (-j NFQUEUE --queue-num
 * QUEUE). IPv4 TCP segments from source port SPORT (to LAST) are counted; the first
 * one carrying data after BYTES bytes of payload is passed on with its FIN
 * flag set (checksum mended), once; every other packet passes untouched.
 * The receiver's kernel then reads an end of file the sender never sent,
 * as it would from a middlebox or an attacker that injects one. Prints
 * "fin: set after N bytes (to port P)" on stderr when it did. With -a,
 * every stream from SPORT (up to 256, told apart by their destination)
 * gets its own FIN past its own BYTES. READYFILE gets the pid
 * once the queue is bound.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <libnetfilter_queue/libnetfilter_queue.h>

#include "testtool.h"

#define TCP_FLAGS_WORD 12	/* data offset and flags, one 16-bit word */
#define FIN_BIT 0x0001

#define FLOWS 256

/* One stream's count: its destination (the receiver's address and port). */
struct flow {
	uint32_t daddr;
	uint16_t dport;
	unsigned long long seen;
	int done;
};

struct fin {
	uint16_t sport, sport_last;
	unsigned long long after;
	int each;		/* -a: every stream, each after its own count */
	int nflows;
	struct flow flows[FLOWS];
};

/* The count the segment adds to: the one stream's, or its own with -a
 * (NULL once FLOWS streams are counted: the rest pass untouched). */
static struct flow *
flow_of(struct fin *f, const struct iphdr *ip, const struct tcphdr *tcp)
{
	int i;

	if (!f->each)
		return &f->flows[0];
	for (i = 0; i < f->nflows; i++)
		if (f->flows[i].daddr == ip->daddr && f->flows[i].dport == tcp->dest)
			return &f->flows[i];
	if (f->nflows == FLOWS)
		return NULL;
	f->flows[f->nflows] = (struct flow){ ip->daddr, tcp->dest, 0, 0 };
	return &f->flows[f->nflows++];
}

/* RFC 1624: the checksum after one 16-bit word changed from old to new. */
static uint16_t
checksum_update(uint16_t sum, uint16_t old, uint16_t new)
{
	uint32_t s = (uint16_t)~ntohs(sum) + (uint16_t)~old + new;

	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return htons((uint16_t)~s);
}

/* 1: the packet was changed. */
static int
maybe_fin(struct fin *f, uint8_t *p, int len)
{
	const struct iphdr *ip = (const struct iphdr *)p;
	struct tcphdr *tcp;
	uint16_t old, new;
	size_t ihl, doff, data;
	struct flow *fl;

	if (len < (int)sizeof(*ip) || ip->version != 4 || ip->protocol != IPPROTO_TCP)
		return 0;
	ihl = (size_t)ip->ihl * 4;
	if ((size_t)len < ihl + sizeof(*tcp))
		return 0;
	tcp = (struct tcphdr *)(p + ihl);
	doff = (size_t)tcp->doff * 4;
	if (ntohs(tcp->source) < f->sport || ntohs(tcp->source) > f->sport_last ||
	    (size_t)len < ihl + doff ||
	    ntohs(ip->tot_len) < ihl + doff)
		return 0;
	data = ntohs(ip->tot_len) - ihl - doff;
	if (data == 0 || (fl = flow_of(f, ip, tcp)) == NULL || fl->done)
		return 0;
	fl->seen += data;
	if (fl->seen <= f->after)
		return 0;
	memcpy(&old, (uint8_t *)tcp + TCP_FLAGS_WORD, 2);
	new = htons((uint16_t)(ntohs(old) | FIN_BIT));
	memcpy((uint8_t *)tcp + TCP_FLAGS_WORD, &new, 2);
	tcp->check = checksum_update(tcp->check, ntohs(old), ntohs(new));
	fl->done = 1;
	fprintf(stderr, "fin: set after %llu bytes (to port %u)\n",
	    fl->seen - data, ntohs(tcp->dest));
	return 1;
}

static int
on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa,
    void *arg)
{
	struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
	unsigned char *p;
	int len = nfq_get_payload(nfa, &p);
	uint32_t id;

	(void)msg;
	if (ph == NULL)
		return 0;
	id = ntohl(ph->packet_id);
	if (len > 0 && maybe_fin(arg, p, len))
		return nfq_set_verdict(qh, id, NF_ACCEPT, (uint32_t)len, p);
	return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
}

int
main(int argc, char **argv)
{
	static struct fin f;
	struct nfq_handle *h;
	struct nfq_q_handle *qh;
	const char *ready = NULL;
	char buf[65536 + 256];
	FILE *rf;
	ssize_t got;
	char *dash;
	int opt;

	while ((opt = getopt(argc, argv, "ar:")) != -1) {
		if (opt == 'a') {
			f.each = 1;
		} else if (opt == 'r') {
			ready = optarg;
		} else {
			fprintf(stderr, "usage: nfq-fin [-a] [-r READYFILE] QUEUE SPORT[-LAST] BYTES\n");
			return 2;
		}
	}
	if (argc - optind != 3) {
		fprintf(stderr, "usage: nfq-fin [-a] [-r READYFILE] QUEUE SPORT[-LAST] BYTES\n");
		return 2;
	}
	if ((dash = strchr(argv[optind + 1], '-')) != NULL)
		*dash++ = '\0';
	f.sport = (uint16_t)tt_number(argv[optind + 1], 65535);
	f.sport_last = dash != NULL ? (uint16_t)tt_number(dash, 65535) : f.sport;
	f.after = (unsigned long long)tt_number(argv[optind + 2], LLONG_MAX);
	signal(SIGTERM, SIG_DFL);
	if ((h = nfq_open()) == NULL)
		tt_die("nfq_open (is nfnetlink_queue available?)");
	if ((qh = nfq_create_queue(h, (uint16_t)tt_number(argv[optind], 65535),
	    on_packet, &f)) == NULL)
		tt_die("nfq_create_queue");
	if (nfq_set_mode(qh, NFQNL_COPY_PACKET, 0xffff) < 0)
		tt_die("nfq_set_mode");
	if (ready != NULL) {
		if ((rf = fopen(ready, "w")) == NULL)
			tt_die(ready);
		fprintf(rf, "%ld\n", (long)getpid());
		fclose(rf);
	}
	for (;;) {
		got = recv(nfq_fd(h), buf, sizeof(buf), 0);
		if (got < 0 && (errno == EINTR || errno == ENOBUFS))
			continue;
		if (got < 0)
			tt_die("recv");
		nfq_handle_packet(h, buf, (int)got);
	}
}
