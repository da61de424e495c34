/* The machine's kernel-side costs, for `just calibrate` (harness/calibrate.py):
 *   wakeup_cross_cpu_us  pipe ping-pong between two processes pinned to two different CPUs, per round trip
 *   wakeup_same_cpu_us   the same, both pinned to one CPU (a context switch each way)
 *   syscall_ns           getppid() through syscall(2), per call
 *   loopback_rtt_us      1-byte TCP ping-pong over 127.0.0.1 (TCP_NODELAY), per round trip, unpinned
 * Each is measured `repeats` times for about `ms` milliseconds; one JSON line with every repeat:
 *   kernel [repeats [ms]]      (defaults: 3 repeats of 300 ms)
 * Build: cc -O2 -o kernel kernel.c */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCH 200

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) {
    fprintf(stderr, "calibrate/kernel: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) die("sched_setaffinity");
}

static void full(int rc, const char *what) {
    if (rc != 1) die(what);
}

/* A child echoing every byte from `in` to `out` until EOF; the parent times its round trips. */
static double ping_pong(int cpu_parent, int cpu_child, double seconds) {
    int to_child[2], to_parent[2];
    char b = 'x';
    if (pipe(to_child) || pipe(to_parent)) die("pipe");
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        alarm((unsigned)seconds + 30);  /* never outlives a parent stuck or gone */
        close(to_child[1]);
        close(to_parent[0]);
        if (cpu_child >= 0) pin(cpu_child);
        while (read(to_child[0], &b, 1) == 1)
            if (write(to_parent[1], &b, 1) != 1) break;
        _exit(0);
    }
    close(to_child[0]);
    close(to_parent[1]);
    if (cpu_parent >= 0) pin(cpu_parent);
    for (int i = 0; i < 1000; i++) {  /* warm-up: both processes placed and running */
        full(write(to_child[1], &b, 1), "write");
        full(read(to_parent[0], &b, 1), "read");
    }
    long n = 0;
    double start = now(), end;
    do {
        for (int i = 0; i < BATCH; i++) {
            full(write(to_child[1], &b, 1), "write");
            full(read(to_parent[0], &b, 1), "read");
        }
        n += BATCH;
    } while ((end = now()) - start < seconds);
    close(to_child[1]);
    close(to_parent[0]);
    waitpid(pid, NULL, 0);
    return (end - start) / n * 1e6;
}

static double syscall_ns(double seconds) {
    long n = 0;
    double start = now(), end;
    do {
        for (int i = 0; i < 10000; i++) syscall(SYS_getppid);
        n += 10000;
    } while ((end = now()) - start < seconds);
    return (end - start) / n * 1e9;
}

static double loopback_rtt(double seconds) {
    int one = 1;
    char b = 'x';
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0) die("socket");
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) || listen(listener, 1) ||
        getsockname(listener, (struct sockaddr *)&addr, &len))
        die("listen on 127.0.0.1");
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        alarm((unsigned)seconds + 30);
        int c = accept(listener, NULL, NULL);
        if (c < 0) _exit(1);
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        while (read(c, &b, 1) == 1)
            if (write(c, &b, 1) != 1) break;
        _exit(0);
    }
    close(listener);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&addr, sizeof addr)) die("connect to 127.0.0.1");
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    for (int i = 0; i < 1000; i++) {
        full(write(s, &b, 1), "send");
        full(read(s, &b, 1), "recv");
    }
    long n = 0;
    double start = now(), end;
    do {
        for (int i = 0; i < BATCH; i++) {
            full(write(s, &b, 1), "send");
            full(read(s, &b, 1), "recv");
        }
        n += BATCH;
    } while ((end = now()) - start < seconds);
    close(s);
    waitpid(pid, NULL, 0);
    return (end - start) / n * 1e6;
}

static void print_list(const char *key, const double *v, int n, int last) {
    printf("\"%s\":[", key);
    for (int i = 0; i < n; i++) printf(i ? ",%.4f" : "%.4f", v[i]);
    printf("]%s", last ? "" : ",");
}

int main(int argc, char **argv) {
    int repeats = argc > 1 ? atoi(argv[1]) : 3;
    double seconds = (argc > 2 ? atof(argv[2]) : 300) / 1000;
    if (repeats < 1 || repeats > 100 || seconds <= 0) {
        fprintf(stderr, "usage: kernel [repeats (1-100) [milliseconds per repeat]]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) die("sched_getaffinity");
    int cpus[2] = {-1, -1}, found = 0;
    for (int c = 0; c < CPU_SETSIZE && found < 2; c++)
        if (CPU_ISSET(c, &allowed)) cpus[found++] = c;

    double cross[100], same[100], sys[100], tcp[100];
    for (int r = 0; r < repeats; r++) {  /* interleaved, so a slow moment touches every metric alike */
        cross[r] = found == 2 ? ping_pong(cpus[0], cpus[1], seconds) : -1;
        same[r] = ping_pong(cpus[0], cpus[0], seconds);
        sys[r] = syscall_ns(seconds);
        tcp[r] = loopback_rtt(seconds);
        sched_setaffinity(0, sizeof allowed, &allowed);  /* ping_pong pinned this process: undo */
    }
    printf("{\"cpus\":[%d,%d],", cpus[0], cpus[1]);
    if (found == 2) print_list("wakeup_cross_cpu_us", cross, repeats, 0);
    print_list("wakeup_same_cpu_us", same, repeats, 0);
    print_list("syscall_ns", sys, repeats, 0);
    print_list("loopback_rtt_us", tcp, repeats, 1);
    printf("}\n");
    return 0;
}
