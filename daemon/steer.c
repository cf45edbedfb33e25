/* steer.c: the SO_REUSEPORT program that gives every connection from one client address to the same worker's listener. */
#include "config.h"

#include <errno.h>
#include <linux/filter.h>
#include <sys/socket.h>

#include "rockd.h"

#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif
#ifndef SO_DETACH_REUSEPORT_BPF
#define SO_DETACH_REUSEPORT_BPF 68
#endif

/* Offsets from the IP header (SKF_NET_OFF): a listener's program runs
 * with the packet at the TCP payload, so the addresses are reached
 * through the network header, for an IPv4 connection to an IPv6
 * listener as well. */
#define NET(off) ((__u32)(SKF_NET_OFF + (off)))

/*
 * Socket index = the source address mod N: IPv4's 32 bits, IPv6's 128
 * folded by XOR. A client's rocks then share one worker, so one control
 * group and one heartbeat, and a reconnect from an unchanged address
 * lands on the worker that holds its rock. A plain modulus, not a mixing
 * hash: neighbouring addresses go to different workers, which spreads a
 * subnet's clients evenly. An index past the group's size (a worker
 * being restarted) leaves the choice to the kernel's hash.
 */
static const struct sock_filter steer_program[] = {
	BPF_STMT(BPF_LD | BPF_B | BPF_ABS, NET(0)),	/* version, IHL */
	BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 4),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 6, 2, 0),
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NET(12)),	/* IPv4 source */
	BPF_JUMP(BPF_JMP | BPF_JA, 13, 0, 0),	/* to the modulus */
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NET(8)),	/* IPv6 source, 4 words */
	BPF_STMT(BPF_ST, 0),
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NET(12)),
	BPF_STMT(BPF_LDX | BPF_W | BPF_MEM, 0),
	BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0),
	BPF_STMT(BPF_ST, 0),
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NET(16)),
	BPF_STMT(BPF_LDX | BPF_W | BPF_MEM, 0),
	BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0),
	BPF_STMT(BPF_ST, 0),
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NET(20)),
	BPF_STMT(BPF_LDX | BPF_W | BPF_MEM, 0),
	BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0),
	BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, 0),		/* N, filled in */
	BPF_STMT(BPF_RET | BPF_A, 0),
};
#define STEER_LEN (sizeof(steer_program) / sizeof(steer_program[0]))

int
rockd_steer_attach(int fd, int nworkers)
{
	struct sock_filter code[STEER_LEN];
	struct sock_fprog prog = { STEER_LEN, code };
	unsigned i;

	if (nworkers < 1)
		return -EINVAL;
	for (i = 0; i < STEER_LEN; i++)
		code[i] = steer_program[i];
	code[STEER_LEN - 2].k = (__u32)nworkers;
	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
	    sizeof(prog)) != 0)
		return -errno;
	return 0;
}

/* The program belongs to the listener's whole group and outlives the
 * socket that set it: a group taken over from a rockd that spread
 * otherwise loses it. */
int
rockd_steer_detach(int fd)
{
	int unused = 0;

	if (setsockopt(fd, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, &unused,
	    sizeof(unused)) != 0 && errno != ENOENT)
		return -errno;
	return 0;
}
