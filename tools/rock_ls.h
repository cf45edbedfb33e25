/* rock_ls.h: rock's ls and kill subcommands (rock_ls.c). */
#ifndef ROCK_LS_H
#define ROCK_LS_H

/* argv[0] is the subcommand's name; the exit status is returned. */
int rock_ls_main(int argc, char **argv);
int rock_kill_main(int argc, char **argv);

#endif
