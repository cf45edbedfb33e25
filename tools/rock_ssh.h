/* rock_ssh.h: `rock ssh`'s bootstrap of a per-user rockd, for the wrapper. */
#ifndef ROCK_SSH_H
#define ROCK_SSH_H

/*
 * argv is ssh's command line (argv[0] "ssh"), ssh the program's path.
 * Unless ROCK_PORT_MAP is set or ssh is asked for no remote session,
 * start `rockd --session` on the host over ssh and set ROCK_PORT_MAP and
 * ROCK_SERVER_KEY so that ssh's connection becomes a rock to it, pinned
 * to its key; without rockd there, say so once and change nothing.
 * 0 to go on and run ssh; else the exit status to end with (ssh could not
 * reach the host: its error was shown).
 */
int rock_ssh_session(const char *ssh, int argc, char **argv, int verbose);

#endif
