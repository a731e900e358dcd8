/* What the primitives an I/O loop is built from cost on this machine: a system call, a clock read, an atomic add, a
 * timed sleep (the worker's coalescing pause), and an idle wait ended by another thread (a blocking epoll_wait woken
 * by a write), each in wall time and in the CPU time the kernel charges the caller. Built and run by
 * bench/idle_cost.sh. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

static double now_us(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
static double thread_cpu_us(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }

static int to_peer[2], from_peer[2];
static const int ROUNDS = 20000;
static double peer_busy_us = 30;

/* The other side of the wait: answers each byte after `peer_busy_us` of work (spinning, so it stays runnable). */
static void *peer(void *unused) {
    (void)unused;
    char c;
    for (int i = 0; i < ROUNDS; i++) {
        if (read(to_peer[0], &c, 1) != 1) return NULL;
        double t = now_us();
        while (now_us() - t < peer_busy_us) {}
        if (write(from_peer[1], &c, 1) != 1) return NULL;
    }
    return NULL;
}

int main(void) {
    prctl(PR_SET_TIMERSLACK, 1); /* as the I/O workers (os::precise_sleeps) */
    volatile unsigned long long sink = 0;
    long n = 2000000;
    double t0 = now_us();
    for (long i = 0; i < n; i++) sink += syscall(SYS_getppid);
    printf("system call (getppid)           %8.0f ns\n", (now_us() - t0) * 1e3 / n);
    n = 20000000;
    t0 = now_us();
    for (long i = 0; i < n; i++) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); sink += t.tv_nsec; }
    printf("clock_gettime(CLOCK_MONOTONIC)  %8.1f ns\n", (now_us() - t0) * 1e3 / n);
    t0 = now_us();
    for (long i = 0; i < n; i++) sink += __rdtsc();
    printf("rdtsc                           %8.1f ns\n", (now_us() - t0) * 1e3 / n);
    /* A counter bumped among ordinary stores (as reference counts and statistics are in a request's path): with an
     * atomic add (`lock xadd`, which waits for the stores before it), and with a plain load and store. */
    static volatile unsigned long long stored[64];
    static volatile unsigned long long counter;
    n = 200000000;
    double base = 0;
    for (int kind = 0; kind < 3; kind++) {
        t0 = now_us();
        for (long i = 0; i < n; i++) {
            stored[i & 63] = i;
            if (kind == 1) __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
            if (kind == 2) __atomic_store_n(&counter, __atomic_load_n(&counter, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
        }
        double ns = (now_us() - t0) * 1e3 / n;
        if (kind == 0) base = ns;
        else printf("%s %8.1f ns more than the store alone\n", kind == 1 ? "counter, atomic add            " : "counter, plain load and store  ", ns - base);
    }
    sink += stored[0];
    printf("\ntimed sleep (nanosleep)   asked us   wall us/sleep   CPU us/sleep\n");
    int asked[] = {2, 10, 20, 40, 80};
    for (unsigned k = 0; k < sizeof asked / sizeof asked[0]; k++) {
        struct timespec ts = {0, asked[k] * 1000L};
        double c0 = thread_cpu_us(), w0 = now_us();
        for (int i = 0; i < ROUNDS; i++) nanosleep(&ts, NULL);
        printf("                          %8d   %13.1f   %12.1f\n", asked[k], (now_us() - w0) / ROUNDS, (thread_cpu_us() - c0) / ROUNDS);
    }
    if (pipe(to_peer) || pipe(from_peer)) return 1;
    pthread_t t;
    pthread_create(&t, NULL, peer, NULL);
    int ep = epoll_create1(0);
    struct epoll_event e = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, from_peer[0], &e);
    char c = 'x';
    double c0 = thread_cpu_us(), w0 = now_us();
    for (int i = 0; i < ROUNDS; i++) {
        if (write(to_peer[1], &c, 1) != 1) return 1;
        struct epoll_event ev;
        epoll_wait(ep, &ev, 1, -1);
        if (read(from_peer[0], &c, 1) != 1) return 1;
    }
    double wall = (now_us() - w0) / ROUNDS, cpu = (thread_cpu_us() - c0) / ROUNDS;
    pthread_join(t, NULL);
    printf("\nidle wait ended by another thread (write, blocking epoll_wait, read; the peer works %.0f us):\n", peer_busy_us);
    printf("  wall %.1f us per round (%.1f us beyond the peer's work), CPU %.1f us per round\n", wall, wall - peer_busy_us, cpu);
    return (int)(sink & 0);
}
