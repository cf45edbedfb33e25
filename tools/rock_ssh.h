/* rock_ssh.h: `rock ssh`: a per-user rockd for ssh's connection, found or started, for the wrapper. */
#ifndef ROCK_SSH_H
#define ROCK_SSH_H

/*
 * argv is ssh's command line (argv[0] "ssh"), ssh the program's path.
 * Unless ROCK_PORT_MAP is set or ssh is asked for no remote session:
 * find the session rockd remembered for the host ssh connects to (the
 * first jump host with a ProxyJump), else a rockd the probe cache knows,
 * else start `rockd --session` there over ssh; set ROCK_PORT_MAP and
 * ROCK_SERVER_KEY so that ssh's connection becomes a rock to it, pinned
 * to its key. Without rockd there, say so once and change nothing.
 * 0 to go on and run ssh; else the exit status to end with.
 */
int rock_ssh_session(const char *ssh, int argc, char **argv, int verbose);

#endif
