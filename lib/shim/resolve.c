/* resolve.c: find the real socket functions behind ours, once. */
#include "config.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include "shim.h"

struct shim_real shim_real;
__thread int shim_busy __attribute__((tls_model("initial-exec")));

/* Missing libc symbols cannot happen on a sane system; if they do, running
 * on would call through NULL, so stop with a message instead. */
static void *
must_resolve(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (p == NULL) {
		static const char msg[] = "librock: cannot resolve a libc function, aborting\n";
		(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
		abort();
	}
	return p;
}

#define RESOLVE(f) \
	__atomic_store_n((void **)&shim_real.f, must_resolve(#f), __ATOMIC_RELEASE)
/* A call libc may lack (glibc before 2.34 has no execveat): NULL then. */
#define RESOLVE_OPTIONAL(f) \
	__atomic_store_n((void **)&shim_real.f, dlsym(RTLD_NEXT, #f), __ATOMIC_RELEASE)

void
shim_resolve(void)
{
	RESOLVE(connect);
	RESOLVE(bind);
	RESOLVE(listen);
	RESOLVE(accept);
	RESOLVE(accept4);
	RESOLVE(setsockopt);
	RESOLVE(getsockopt);
	RESOLVE(close);
	RESOLVE(dup);
	RESOLVE(dup2);
	RESOLVE(dup3);
	RESOLVE(sendto);
	RESOLVE(sendmsg);
	RESOLVE(send);
	RESOLVE(recv);
	RESOLVE(recvfrom);
	RESOLVE(recvmsg);
	RESOLVE(read);
	RESOLVE(write);
	RESOLVE(readv);
	RESOLVE(writev);
	RESOLVE(sendfile);
	RESOLVE(splice);
	RESOLVE(sendmmsg);
	RESOLVE(recvmmsg);
	RESOLVE(shutdown);
	RESOLVE(getpeername);
	RESOLVE(getsockname);
	RESOLVE(fcntl);
	RESOLVE(poll);
	RESOLVE(ppoll);
	RESOLVE(select);
	RESOLVE(pselect);
	RESOLVE(epoll_ctl);
	RESOLVE(epoll_wait);
	RESOLVE(epoll_pwait);
	RESOLVE(getaddrinfo);
	RESOLVE(daemon);
	RESOLVE(execve);
	RESOLVE(execvp);
	RESOLVE(execvpe);
	RESOLVE(fexecve);
	RESOLVE_OPTIONAL(execveat);
	RESOLVE(fdopen);
	RESOLVE(fclose);
	RESOLVE(vdprintf);
	__atomic_store_n((void **)&shim_real.vdprintf_chk,
	    dlsym(RTLD_NEXT, "__vdprintf_chk"), __ATOMIC_RELEASE);
	/* Last: shim_state() uses it as the "all resolved" flag. */
	RESOLVE(socket);
}
