/* heap.c: rockd hands the heap pages its sessions freed back to the system, so that its RSS follows the sessions it holds. */
#include "config.h"

#ifdef HAVE_MALLOC_TRIM
#include <malloc.h>
#endif

#include <event2/event.h>

#include "rockd.h"

/*
 * Every handshake and every burst of data leaves freed memory between the
 * blocks of the sessions that stay: a ring's storage (4 KiB at least) goes
 * back to malloc a tick after its rock falls idle, but the pages stay
 * resident, since live blocks lie around them. glibc returns such pages
 * only from the top of the heap, or when asked: 9,900 idle rocks each
 * echoed once held 7.5 KiB of RSS per session, 3.5 KiB after
 * malloc_trim(0). Asked every HEAP_TRIM_S; giving those 40 MB back took
 * 3 ms.
 */
#define HEAP_TRIM_S 10

#ifdef HAVE_MALLOC_TRIM
static void
heap_tick(evutil_socket_t fd, short what, void *arg)
{
	struct rockd *d = arg;
	int64_t t0 = rockd_now_ms();
	int gave = malloc_trim(0);

	(void)fd;
	(void)what;
	rlog_debug(&d->log, "heap: %s in %lld ms", gave ? "pages given back" :
	    "nothing to give back", (long long)(rockd_now_ms() - t0));
}
#endif

int
rockd_heap_start(struct rockd *d)
{
#ifdef HAVE_MALLOC_TRIM
	static const struct timeval every = { HEAP_TRIM_S, 0 };

	if ((d->heap_trim = event_new(d->base, -1, EV_PERSIST, heap_tick,
	    d)) == NULL || event_add(d->heap_trim, &every) != 0) {
		rlog_error(&d->log, "heap: cannot set its timer");
		return -1;
	}
#else
	(void)d;
#endif
	return 0;
}

void
rockd_heap_stop(struct rockd *d)
{
	if (d->heap_trim != NULL)
		event_free(d->heap_trim);
	d->heap_trim = NULL;
}
