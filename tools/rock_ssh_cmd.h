/* rock_ssh_cmd.h: the ssh commands rock ssh runs before ssh itself, and the words of ssh's command line. */
#ifndef ROCK_SSH_CMD_H
#define ROCK_SSH_CMD_H

#include <stdio.h>

/* Long enough to type a password or touch a key. */
#define ANSWER_TIMEOUT_MS (60 * 1000)
#define SSH_EXIT_FAILED 255	/* ssh's own failure: no connection */

struct ssh_args {
	int host;	/* index of the destination; -1: none */
	int cmd;	/* index of the remote command; argc: none */
	int session;	/* 0: ssh is asked for no remote command */
	const char *config;	/* -F's file; NULL: none */
};

/* Options come before the destination and may follow it: ssh parses
 * them again there, up to the command or "--". */
void ssh_split(int argc, char **argv, struct ssh_args *a);
/* argv up to cmd without the user's -s and -t (see the .c); rewritten
 * words in *buf, *n the count; NULL out of memory. */
char **without_session_flags(char **argv, int cmd, char **buf, int *n);

/* Where ssh's own connection goes, as ssh -G resolves options and
 * config: the destination, or the first hop of its ProxyJump. */
struct ssh_hop {
	char host[256];		/* hostname, after the config's HostName */
	char user[256];
	unsigned port;
	int family;		/* AddressFamily: AF_UNSPEC, AF_INET, AF_INET6 */
	char jump[512];		/* ProxyJump's first hop; "": none */
	int proxy_command;	/* ProxyCommand: ssh makes no connection */
	int control_path;	/* ControlPath: a master may be running */
};

/* ssh -G for argv up to cmd: 0 and the hop, or -1 (ssh said no). */
int ssh_resolve(const char *ssh, char **argv, int cmd, struct ssh_hop *h);
/* 1: ssh -O check finds a live master for the destination. */
int master_alive(const char *ssh, char **argv, int cmd);
/* Run rockd --session --persist S (S 0: without it) over ssh (argv
 * up to cmd, never a master): 0 and its line; ssh's exit status, or -1 (no ssh), -2 (no
 * line in time), -3 (no line). ssh's complaints go to err. */
int bootstrap(const char *ssh, char **argv, int cmd, int persist_s,
    char *line, size_t size, FILE *err);
/* "ROCKD-SESSION 1 PORT KEY": 0 with the port and the key's text. */
int parse_answer(const char *line, unsigned *port, char *key);
/* ssh's first line of complaint in f, for a message. */
void first_line(FILE *f, char *buf, size_t size);

#endif
