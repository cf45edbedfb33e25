/* ka-bench: micro-benchmark of socket()/connect() cost, run raw and under librock keepalive-only mode (see ka-bench.sh). */

/*
 * Usage: ka-bench MODE ITERATIONS
 *
 *   socket   loop: socket(AF_INET, SOCK_STREAM, 0) + close()
 *   connect  setup once: listener on 127.0.0.1, ephemeral port, backlog 1024;
 *            loop: socket, blocking connect, accept, close accepted,
 *            close client
 *   verify   one connection to an own listener; prints the keepalive
 *            settings seen via getsockopt() (ITERATIONS may be omitted)
 *
 * socket/connect print one line "MODE ITERATIONS NS_PER_OP", where the time
 * is CLOCK_MONOTONIC wall time around the loop only.
 * verify prints "verify keepalive=K idle=I intvl=N probes=P" for the
 * connected client socket, followed by accepted_keepalive=K accepted_idle=I
 * for the socket returned by accept().
 *
 * Every call is checked; on failure a message goes to stderr and the exit
 * status is 1.
 */

#define _GNU_SOURCE 1

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *progname = "ka-bench";

static void die(const char *what) __attribute__((noreturn));
static void usage(void) __attribute__((noreturn));

static void die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", progname, what, strerror(errno));
    exit(1);
}

static void usage(void)
{
    fprintf(stderr, "usage: %s socket|connect ITERATIONS\n"
                    "       %s verify\n", progname, progname);
    exit(1);
}

static void xclose(int fd, const char *what)
{
    if (close(fd) != 0)
        die(what);
}

static double now_ns(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        die("clock_gettime");
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Listener on 127.0.0.1, kernel-chosen port; its address goes to *addr. */
static int make_listener(struct sockaddr_in *addr)
{
    socklen_t len = sizeof(*addr);
    int fd;

    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket (listener)");
    memset(addr, 0, sizeof(*addr));
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr->sin_port = 0;
    if (bind(fd, (struct sockaddr *)addr, sizeof(*addr)) != 0)
        die("bind (listener)");
    if (listen(fd, 1024) != 0)
        die("listen");
    if (getsockname(fd, (struct sockaddr *)addr, &len) != 0)
        die("getsockname (listener)");
    if (len != sizeof(*addr) || addr->sin_family != AF_INET) {
        fprintf(stderr, "%s: getsockname (listener): unexpected address\n",
                progname);
        exit(1);
    }
    return fd;
}

static void bench_socket(long iterations)
{
    double t0, t1;
    long i;

    t0 = now_ns();
    for (i = 0; i < iterations; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);

        if (fd < 0)
            die("socket");
        xclose(fd, "close");
    }
    t1 = now_ns();
    printf("socket %ld %.1f\n", iterations, (t1 - t0) / (double)iterations);
}

/*
 * Close order: the accepted (server-side) socket is closed first, the client
 * second.  The side that closes first is the one that ends up in TIME_WAIT,
 * so the TIME_WAIT entries are keyed (listener port, client port) on the
 * server side and the client never holds its ephemeral ports in TIME_WAIT.
 * When connect() later hands out a port used before, the SYN finds the
 * server-side TIME_WAIT entry and Linux recycles it (the new SYN has a
 * higher sequence number/timestamp), so the loop runs indefinitely.
 * Closing the client first instead leaves the ephemeral ports in client-side
 * TIME_WAIT: with net.ipv4.tcp_tw_reuse=0 connect() fails with EADDRNOTAVAIL
 * after ~28k iterations (the default 32768-60999 range), and with the
 * default tcp_tw_reuse=2 (reuse on loopback) it works but each connect()
 * spends its time searching the port space for a reusable TIME_WAIT entry
 * (measured ~1.9x slower), i.e. it would benchmark the port allocator.
 * Both sockets get a normal FIN/FIN close; no SO_LINGER (RST on close) or
 * SO_REUSEADDR, which would change what is measured.  No data is ever
 * sent, so close() never turns into a RST either.
 */
static void bench_connect(long iterations)
{
    struct sockaddr_in addr;
    double t0, t1;
    int lfd;
    long i;

    lfd = make_listener(&addr);

    t0 = now_ns();
    for (i = 0; i < iterations; i++) {
        int cfd, afd;

        cfd = socket(AF_INET, SOCK_STREAM, 0);
        if (cfd < 0)
            die("socket");
        if (connect(cfd, (struct sockaddr *)&addr, sizeof(addr)) != 0)
            die("connect");
        afd = accept(lfd, NULL, NULL);
        if (afd < 0)
            die("accept");
        xclose(afd, "close (accepted)");
        xclose(cfd, "close (client)");
    }
    t1 = now_ns();
    printf("connect %ld %.1f\n", iterations, (t1 - t0) / (double)iterations);

    xclose(lfd, "close (listener)");
}

static int get_int_opt(int fd, int level, int name, const char *what)
{
    int val = -1;
    socklen_t len = sizeof(val);

    if (getsockopt(fd, level, name, &val, &len) != 0)
        die(what);
    return val;
}

static void verify(void)
{
    struct sockaddr_in addr;
    int lfd, cfd, afd;
    int ka, idle, intvl, probes, aka, aidle;

    lfd = make_listener(&addr);
    cfd = socket(AF_INET, SOCK_STREAM, 0);
    if (cfd < 0)
        die("socket");
    if (connect(cfd, (struct sockaddr *)&addr, sizeof(addr)) != 0)
        die("connect");
    afd = accept(lfd, NULL, NULL);
    if (afd < 0)
        die("accept");

    ka = get_int_opt(cfd, SOL_SOCKET, SO_KEEPALIVE, "getsockopt SO_KEEPALIVE");
    idle = get_int_opt(cfd, IPPROTO_TCP, TCP_KEEPIDLE,
                       "getsockopt TCP_KEEPIDLE");
    intvl = get_int_opt(cfd, IPPROTO_TCP, TCP_KEEPINTVL,
                        "getsockopt TCP_KEEPINTVL");
    probes = get_int_opt(cfd, IPPROTO_TCP, TCP_KEEPCNT,
                         "getsockopt TCP_KEEPCNT");
    aka = get_int_opt(afd, SOL_SOCKET, SO_KEEPALIVE,
                      "getsockopt SO_KEEPALIVE (accepted)");
    aidle = get_int_opt(afd, IPPROTO_TCP, TCP_KEEPIDLE,
                        "getsockopt TCP_KEEPIDLE (accepted)");

    printf("verify keepalive=%d idle=%d intvl=%d probes=%d "
           "accepted_keepalive=%d accepted_idle=%d\n",
           ka, idle, intvl, probes, aka, aidle);

    xclose(afd, "close (accepted)");
    xclose(cfd, "close (client)");
    xclose(lfd, "close (listener)");
}

static long parse_iterations(const char *s)
{
    char *end;
    long n;

    errno = 0;
    n = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || n <= 0 || n == LONG_MAX) {
        fprintf(stderr, "%s: bad ITERATIONS '%s' (want a positive integer)\n",
                progname, s);
        exit(1);
    }
    return n;
}

int main(int argc, char **argv)
{
    const char *mode;

    if (argc < 2)
        usage();
    mode = argv[1];

    if (strcmp(mode, "verify") == 0) {
        if (argc > 3)
            usage();
        verify();
    } else if (strcmp(mode, "socket") == 0) {
        if (argc != 3)
            usage();
        bench_socket(parse_iterations(argv[2]));
    } else if (strcmp(mode, "connect") == 0) {
        if (argc != 3)
            usage();
        bench_connect(parse_iterations(argv[2]));
    } else {
        usage();
    }

    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: error writing to stdout\n", progname);
        return 1;
    }
    return 0;
}
