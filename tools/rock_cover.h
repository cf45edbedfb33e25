/* rock_cover.h: the wrapper's check that preloading will reach the program. */
#ifndef ROCK_COVER_H
#define ROCK_COVER_H

/* Why librock cannot reach the sockets of the program at PATH ("is a Go
 * program: ..."), or NULL if it can or the file cannot be inspected. */
const char *rock_uncovered_reason(const char *path);

#endif
