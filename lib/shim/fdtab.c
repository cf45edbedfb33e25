/* fdtab.c: two bytes of shim knowledge per descriptor, in lazily mapped pages. */
#include "config.h"

#include <stdint.h>
#include <sys/mman.h>

#include "shim.h"

/* 2^20 descriptors is Linux's default nr_open; above it we know nothing,
 * which is safe: unknown descriptors are classified by asking the kernel. */
#define PAGE_BITS 12
#define PAGE_SIZE_ENTRIES (1u << PAGE_BITS)
#define NPAGES 256u

static uint16_t *pages[NPAGES];

/* mmap, not malloc: this runs inside the program's socket calls, possibly
 * from a signal handler or between fork and exec. */
static uint16_t *
page_for(int fd, int create)
{
	unsigned idx = (unsigned)fd >> PAGE_BITS;
	uint16_t *page, *expected = NULL;

	if (fd < 0 || idx >= NPAGES)
		return NULL;
	page = __atomic_load_n(&pages[idx], __ATOMIC_ACQUIRE);
	if (page != NULL || !create)
		return page;
	page = mmap(NULL, PAGE_SIZE_ENTRIES * sizeof(*page), PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return NULL;
	if (!__atomic_compare_exchange_n(&pages[idx], &expected, page, 0,
	    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		munmap(page, PAGE_SIZE_ENTRIES * sizeof(*page));
		page = expected;
	}
	return page;
}

unsigned
shim_fd_get(int fd)
{
	uint16_t *page = page_for(fd, 0);

	if (page == NULL)
		return 0;
	return __atomic_load_n(&page[fd & (PAGE_SIZE_ENTRIES - 1)],
	    __ATOMIC_RELAXED);
}

void
shim_fd_set(int fd, enum shim_fd_state state, unsigned opts)
{
	uint16_t *page = page_for(fd, state != SHIM_FD_UNKNOWN || opts != 0);

	if (page == NULL)
		return;
	__atomic_store_n(&page[fd & (PAGE_SIZE_ENTRIES - 1)],
	    (uint16_t)((unsigned)state << SHIM_FD_STATE_SHIFT |
	    (opts & SHIM_FD_OPTS_MASK)), __ATOMIC_RELAXED);
}

void
shim_fd_add_opts(int fd, unsigned opts)
{
	uint16_t *page = page_for(fd, 1);

	if (page == NULL)
		return;
	__atomic_fetch_or(&page[fd & (PAGE_SIZE_ENTRIES - 1)],
	    (uint16_t)(opts & SHIM_FD_OPTS_MASK), __ATOMIC_RELAXED);
}

/* Options set through one number go unseen by the other's entry: neither
 * is "born here with nothing else set" any more. */
void
shim_fd_copy(int from, int to)
{
	unsigned entry = shim_fd_get(from) & ~SHIM_FD_BORN;

	shim_fd_set(from, shim_fd_state_of(entry), entry & SHIM_FD_OPTS_MASK);
	shim_fd_set(to, shim_fd_state_of(entry), entry & SHIM_FD_OPTS_MASK);
}

/* Before fork: the child may set options on the sockets it shares. */
void
shim_fd_forget_births(void)
{
	unsigned p, i;

	for (p = 0; p < NPAGES; p++) {
		uint16_t *page = __atomic_load_n(&pages[p], __ATOMIC_ACQUIRE);

		if (page == NULL)
			continue;
		for (i = 0; i < PAGE_SIZE_ENTRIES; i++)
			__atomic_fetch_and(&page[i], (uint16_t)~SHIM_FD_BORN,
			    __ATOMIC_RELAXED);
	}
}

void *
shim_fdmap_get(const struct shim_fdmap *m, int fd)
{
	unsigned idx = (unsigned)fd >> SHIM_FDMAP_BITS;

	if (fd < 0 || idx >= SHIM_FDMAP_PAGES || m->pages[idx] == NULL)
		return NULL;
	return m->pages[idx][fd & ((1u << SHIM_FDMAP_BITS) - 1)];
}

int
shim_fdmap_set(struct shim_fdmap *m, int fd, void *p)
{
	unsigned idx = (unsigned)fd >> SHIM_FDMAP_BITS;

	if (fd < 0 || idx >= SHIM_FDMAP_PAGES)
		return -1;
	if (m->pages[idx] == NULL) {
		void *page;

		if (p == NULL)
			return 0;
		page = mmap(NULL, sizeof(void *) << SHIM_FDMAP_BITS,
		    PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (page == MAP_FAILED)
			return -1;
		m->pages[idx] = page;
	}
	m->pages[idx][fd & ((1u << SHIM_FDMAP_BITS) - 1)] = p;
	return 0;
}
