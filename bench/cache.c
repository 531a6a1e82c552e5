/* A cache's load: Zipf-distributed GETs, a SET of the same key after every miss.
 *
 *   gcc -O2 -o cache bench/cache.c -lm
 *   cache [--host H] [--port P] [--clients N] [--pipeline N] [--keys N] [--value-size B]
 *         [--zipf S] [--seconds S] [--warmup S] [--seed N]
 *   cache --respond [--port P]     the ceiling's responder (see below), until killed
 *   cache --ceiling [options]      the same load against a forked --respond on --port
 *
 * The server is used as a cache in front of a slower store, cache-aside: each request GETs
 * a key; a nil reply (a miss) is followed by SET key value on the same connection, the
 * fill an application does after reading the store. Keys are picked by a Zipf law over
 * their ranks (rank r, from 0, with probability proportional to 1/(r+1)^S; S = 0.99 by
 * default, as YCSB's zipfian), from an exact table of the cumulative distribution with a
 * guide table (one entry per 1/N of probability) that narrows the binary search to a few
 * entries. A rank's key is "key:" and 16 hex digits of a bijective 64-bit hash of the rank,
 * so the hot keys are scattered over the key space and never collide.
 *
 * Defaults: 2,500,000 keys of 200-byte values, 500 MB of values alone, 5x a maxmemory of
 * 100 MB (about 8x with Redis' per-key overhead, ~310 bytes a key: some 330,000 keys fit,
 * and at S = 0.99 those hottest 13% of the keys draw about 86% of the GETs, the hit rate of
 * a cache that always held the right keys). 50 connections, pipeline 1, 10 s of warm-up
 * (the cache fills; counted nowhere) then 20 s measured.
 *
 * One thread, epoll, non-blocking sockets, raw RESP. Every connection keeps --pipeline
 * requests in flight: each reply is answered at once by the connection's next request (the
 * SET after a miss, else a new GET). Error replies are counted and the load goes on: -OOM
 * to a SET (oom=), other errors to SETs (set_errors=) and to GETs (get_errors=); the first
 * error text is printed on stderr. A connection the server closes is counted (closed=) and
 * the others go on.
 *
 * A separate control connection sends INFO memory every 100 ms without blocking the load
 * and keeps the largest used_memory (max_used= over the whole run, warm-up included;
 * max_used_measured= after the warm-up). A third, blocking, connection reads INFO stats at
 * the end of the warm-up and at the end: evicted=, server_hits=, server_misses= are the
 * differences (the measured window), evicted_total= the server's whole count.
 *
 * Prints one line at the end (counts of the measured window; gets and hits are counted when
 * their replies arrive, cmds counts GETs and SETs):
 *   hits= misses= gets= sets= cmds= seconds= hit_rate= gets_per_s= cmds_per_s= oom=
 *   set_errors= get_errors= closed= max_used= max_used_measured= samples= evicted=
 *   evicted_total= server_hits= server_misses=
 *
 * The ceiling: --respond listens on 127.0.0.1:PORT and answers every GET with a nil ($-1),
 * every SET with +OK, PING with +PONG, INFO with zeros, at once and storing nothing (it
 * polls epoll for a while before it sleeps, as bench/ceiling.c does). Every GET is then a
 * miss, so half the commands are SETs, the heavier half for the generator to write: its
 * cmds_per_s is the most this generator produces on this machine, whatever the server.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *host = "127.0.0.1";
static int port = 6379;
static int clients = 50;
static int pipeline = 1;
static uint64_t keys = 2500000;
static int value_size = 200;
static double zipf_s = 0.99;
static double seconds = 20;
static double warmup = 10;
static uint64_t seed = 1;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

/* ---- Randomness and the Zipf law -------------------------------------------------------- */

static uint64_t rng[4];

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** */
static uint64_t next_random(void) {
    uint64_t result = rotl(rng[1] * 5, 7) * 9, t = rng[1] << 17;
    rng[2] ^= rng[0];
    rng[3] ^= rng[1];
    rng[1] ^= rng[2];
    rng[0] ^= rng[3];
    rng[2] ^= t;
    rng[3] = rotl(rng[3], 45);
    return result;
}

/* splitmix64's finalizer: a bijection of 64-bit integers (rank -> key name). */
static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static double *cdf;     /* cdf[r]: P(rank <= r); cdf[keys - 1] = 1 */
static uint32_t *guide; /* guide[b]: the first rank with cdf > b / keys; keys + 1 entries */

static void build_zipf(void) {
    cdf = malloc(keys * sizeof *cdf);
    guide = malloc((keys + 1) * sizeof *guide);
    if (!cdf || !guide) die("malloc zipf table");
    double sum = 0;
    for (uint64_t r = 0; r < keys; r++) {
        sum += exp(-zipf_s * log((double)(r + 1)));
        cdf[r] = sum;
    }
    for (uint64_t r = 0; r < keys; r++) cdf[r] /= sum;
    cdf[keys - 1] = 1.0;
    uint64_t r = 0;
    for (uint64_t b = 0; b < keys; b++) {
        double threshold = (double)b / (double)keys;
        while (r < keys - 1 && cdf[r] <= threshold) r++;
        guide[b] = (uint32_t)r;
    }
    guide[keys] = (uint32_t)(keys - 1);
}

static uint64_t next_rank(void) {
    double u = (next_random() >> 11) * 0x1.0p-53; /* [0, 1) */
    uint64_t b = (uint64_t)(u * (double)keys);
    if (b >= keys) b = keys - 1;
    uint64_t lo = guide[b], hi = guide[b + 1]; /* the answer is in [lo, hi] */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (cdf[mid] > u) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* ---- Requests ----------------------------------------------------------------------------- */

enum { KEY_LEN = 20 }; /* "key:" + 16 hex digits */
static char *value;
static char set_tail[64]; /* "$<value_size>\r\n" */
static size_t set_tail_len;

static char *put(char *p, const char *s, size_t n) {
    memcpy(p, s, n);
    return p + n;
}

static char *put_key(char *p, uint64_t rank) {
    static const char hex[] = "0123456789abcdef";
    uint64_t h = mix64(rank);
    memcpy(p, "key:", 4);
    for (int i = 15; i >= 0; i--) {
        p[4 + i] = hex[h & 15];
        h >>= 4;
    }
    return p + KEY_LEN;
}

static size_t max_request(void) { return 64 + KEY_LEN + set_tail_len + (size_t)value_size; }

static char *put_get(char *p, uint64_t rank) {
    p = put(p, "*2\r\n$3\r\nGET\r\n$20\r\n", 18);
    p = put_key(p, rank);
    return put(p, "\r\n", 2);
}

static char *put_set(char *p, uint64_t rank) {
    p = put(p, "*3\r\n$3\r\nSET\r\n$20\r\n", 18);
    p = put_key(p, rank);
    p = put(p, "\r\n", 2);
    p = put(p, set_tail, set_tail_len);
    p = put(p, value, (size_t)value_size);
    return put(p, "\r\n", 2);
}

/* ---- Replies ------------------------------------------------------------------------------ */

enum reply { R_STATUS, R_ERROR, R_INT, R_NIL, R_BULK, R_OTHER };

/* The length of the complete reply at p (0 when incomplete); its kind in *kind. */
static size_t parse_reply(const char *p, size_t n, enum reply *kind) {
    const char *nl = memchr(p, '\n', n);
    if (!nl) return 0;
    size_t line = (size_t)(nl - p) + 1;
    switch (p[0]) {
    case '+': *kind = R_STATUS; return line;
    case '-': *kind = R_ERROR; return line;
    case ':': *kind = R_INT; return line;
    case '$':
    case '*': {
        long long len = strtoll(p + 1, NULL, 10);
        if (len < 0) {
            *kind = R_NIL;
            return line;
        }
        if (p[0] == '*') {
            fprintf(stderr, "cache: unexpected array reply\n");
            exit(1);
        }
        if (n < line + (size_t)len + 2) return 0;
        *kind = R_BULK;
        return line + (size_t)len + 2;
    }
    default:
        fprintf(stderr, "cache: unexpected reply byte 0x%02x\n", (unsigned char)p[0]);
        exit(1);
    }
}

/* ---- Counters ----------------------------------------------------------------------------- */

struct counts {
    uint64_t hits, misses, gets, sets, oom, set_errors, get_errors;
};
static struct counts total;
static int closed;
static char first_error[256];

static void note_error(const char *p, size_t n) {
    if (first_error[0]) return;
    while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == '\n')) n--;
    if (n >= sizeof first_error) n = sizeof first_error - 1;
    memcpy(first_error, p, n);
    first_error[n] = 0;
}

/* ---- Connections -------------------------------------------------------------------------- */

struct pending {
    uint64_t rank;
    int is_set;
};

struct conn {
    int fd;
    char *in, *out;
    size_t in_len, in_cap, out_len, out_off, out_cap;
    struct pending *queue; /* a ring of `pipeline` entries, oldest first */
    int head, count;
    int writing, dead;
};

static int poller;

static int connect_to(const char *h, int p) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    char service[16];
    snprintf(service, sizeof service, "%d", p);
    int err = getaddrinfo(h, service, &hints, &res);
    if (err) {
        fprintf(stderr, "cache: %s: %s\n", h, gai_strerror(err));
        exit(1);
    }
    int fd = -1;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        fprintf(stderr, "cache: cannot connect to %s:%d: %s\n", h, p, strerror(errno));
        exit(1);
    }
    int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    return fd;
}

static void set_events(struct conn *c, uint32_t events) {
    struct epoll_event e = {.events = events, .data.ptr = c};
    if (epoll_ctl(poller, EPOLL_CTL_MOD, c->fd, &e) != 0) die("epoll_ctl");
}

static void close_conn(struct conn *c) {
    if (c->dead) return;
    epoll_ctl(poller, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->dead = 1;
    closed++;
}

static void flush(struct conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                if (!c->writing) set_events(c, EPOLLIN | EPOLLOUT);
                c->writing = 1;
                return;
            }
            close_conn(c);
            return;
        }
        c->out_off += (size_t)w;
    }
    c->out_off = c->out_len = 0;
    if (c->writing) set_events(c, EPOLLIN);
    c->writing = 0;
}

/* Queues the connection's next request: SET rank if is_set, else GET of a new rank. */
static void send_next(struct conn *c, int is_set, uint64_t rank) {
    if (c->out_len + max_request() > c->out_cap) {
        fprintf(stderr, "cache: output buffer overflow\n");
        exit(1);
    }
    if (!is_set) rank = next_rank();
    char *end = is_set ? put_set(c->out + c->out_len, rank) : put_get(c->out + c->out_len, rank);
    c->out_len = (size_t)(end - c->out);
    c->queue[(c->head + c->count) % pipeline] = (struct pending){rank, is_set};
    c->count++;
}

static void on_reply(struct conn *c, struct pending req, enum reply kind, const char *p,
                     size_t n) {
    if (req.is_set) {
        total.sets++;
        if (kind == R_ERROR) {
            if (n >= 4 && memcmp(p, "-OOM", 4) == 0) total.oom++;
            else total.set_errors++;
            note_error(p, n);
        }
        send_next(c, 0, 0);
        return;
    }
    total.gets++;
    if (kind == R_NIL) {
        total.misses++;
        send_next(c, 1, req.rank);
    } else if (kind == R_BULK) {
        total.hits++;
        send_next(c, 0, 0);
    } else {
        total.get_errors++;
        note_error(p, n);
        send_next(c, 0, 0);
    }
}

static void on_readable(struct conn *c) {
    if (c->in_len == c->in_cap) {
        fprintf(stderr, "cache: a reply larger than the input buffer\n");
        exit(1);
    }
    ssize_t r = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) {
        close_conn(c);
        return;
    }
    c->in_len += (size_t)r;
    size_t pos = 0;
    while (c->count > 0 && pos < c->in_len) {
        enum reply kind;
        size_t n = parse_reply(c->in + pos, c->in_len - pos, &kind);
        if (n == 0) break;
        struct pending req = c->queue[c->head];
        c->head = (c->head + 1) % pipeline;
        c->count--;
        on_reply(c, req, kind, c->in + pos, n);
        pos += n;
    }
    if (pos > 0) {
        memmove(c->in, c->in + pos, c->in_len - pos);
        c->in_len -= pos;
    }
    flush(c);
}

/* ---- The control connections -------------------------------------------------------------- */

struct control {
    int fd;
    char *buf;
    size_t len, cap;
    int waiting;
};
static struct control sampler;
static long long max_used = -1, max_used_measured = -1;
static long samples;
static int warmed;

static const char info_memory[] = "*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n";
static const char info_stats[] = "*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n";

/* A field of an INFO text ("name:value" lines), -1 when absent. */
static long long info_field(const char *text, const char *name) {
    size_t n = strlen(name);
    for (const char *p = text; (p = strstr(p, name)); p += n) {
        if ((p == text || p[-1] == '\n') && p[n] == ':') return strtoll(p + n + 1, NULL, 10);
    }
    return -1;
}

/* The body of a complete bulk reply in buf (NUL-terminated in place), or NULL. */
static char *complete_bulk(char *buf, size_t len) {
    char *nl = memchr(buf, '\n', len);
    if (!nl) return NULL;
    if (buf[0] != '$') {
        fprintf(stderr, "cache: INFO answered %.*s\n", (int)(nl - buf), buf);
        exit(1);
    }
    long long body = strtoll(buf + 1, NULL, 10);
    size_t start = (size_t)(nl - buf) + 1;
    if (body < 0 || len < start + (size_t)body + 2) return NULL;
    buf[start + (size_t)body] = 0;
    return buf + start;
}

static void sampler_readable(void) {
    if (sampler.len + 4096 > sampler.cap) {
        sampler.cap *= 2;
        sampler.buf = realloc(sampler.buf, sampler.cap);
        if (!sampler.buf) die("realloc");
    }
    ssize_t r = read(sampler.fd, sampler.buf + sampler.len, sampler.cap - sampler.len - 1);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) {
        fprintf(stderr, "cache: the control connection closed\n");
        exit(1);
    }
    sampler.len += (size_t)r;
    char *body = complete_bulk(sampler.buf, sampler.len);
    if (!body) return;
    long long used = info_field(body, "used_memory");
    if (used >= 0) {
        samples++;
        if (used > max_used) max_used = used;
        if (warmed && used > max_used_measured) max_used_measured = used;
    }
    sampler.len = 0;
    sampler.waiting = 0;
}

static void sample(void) {
    if (sampler.waiting) return; /* the last one not answered yet: skip a beat */
    if (write(sampler.fd, info_memory, sizeof info_memory - 1) != sizeof info_memory - 1)
        die("write INFO memory");
    sampler.waiting = 1;
}

struct server_stats {
    long long evicted, hits, misses;
};

/* INFO stats over the blocking connection fd. */
static struct server_stats read_stats(int fd) {
    static char *buf;
    static size_t cap = 1 << 16;
    if (!buf) buf = malloc(cap);
    if (write(fd, info_stats, sizeof info_stats - 1) != sizeof info_stats - 1)
        die("write INFO stats");
    size_t len = 0;
    char *body;
    for (;;) {
        if (len + 4096 > cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r <= 0) die("read INFO stats");
        len += (size_t)r;
        if ((body = complete_bulk(buf, len))) break;
    }
    return (struct server_stats){info_field(body, "evicted_keys"),
                                 info_field(body, "keyspace_hits"),
                                 info_field(body, "keyspace_misses")};
}

/* ---- The load ----------------------------------------------------------------------------- */

static int run(void) {
    signal(SIGPIPE, SIG_IGN);
    rng[0] = mix64(seed);
    rng[1] = mix64(rng[0]);
    rng[2] = mix64(rng[1]);
    rng[3] = mix64(rng[2]);
    build_zipf();
    value = malloc((size_t)value_size);
    for (int i = 0; i < value_size; i++) value[i] = (char)('a' + i % 26);
    set_tail_len = (size_t)snprintf(set_tail, sizeof set_tail, "$%d\r\n", value_size);

    poller = epoll_create1(0);
    if (poller < 0) die("epoll_create1");
    int stats_fd = connect_to(host, port);
    sampler.fd = connect_to(host, port);
    sampler.cap = 1 << 16;
    sampler.buf = malloc(sampler.cap);
    fcntl(sampler.fd, F_SETFL, O_NONBLOCK);
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &sampler};
    epoll_ctl(poller, EPOLL_CTL_ADD, sampler.fd, &e);

    struct conn *conns = calloc((size_t)clients, sizeof *conns);
    for (int i = 0; i < clients; i++) {
        struct conn *c = &conns[i];
        c->fd = connect_to(host, port);
        fcntl(c->fd, F_SETFL, O_NONBLOCK);
        c->in_cap = (size_t)pipeline * ((size_t)value_size + 64) + 65536;
        c->out_cap = (size_t)pipeline * max_request() + 4096;
        c->in = malloc(c->in_cap);
        c->out = malloc(c->out_cap);
        c->queue = calloc((size_t)pipeline, sizeof *c->queue);
        struct epoll_event ce = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(poller, EPOLL_CTL_ADD, c->fd, &ce);
    }

    struct counts at_warm = {0};
    struct server_stats stats_warm = {0, 0, 0};
    double start = now_s(), warm_end = start + warmup, end = warm_end + seconds;
    double measured_start = start, next_sample = start;
    if (warmup <= 0) {
        stats_warm = read_stats(stats_fd);
        warmed = 1;
        measured_start = now_s();
    }
    for (int i = 0; i < clients; i++) {
        for (int j = 0; j < pipeline; j++) send_next(&conns[i], 0, 0);
        flush(&conns[i]);
    }

    enum { EVENTS = 256 };
    struct epoll_event events[EVENTS];
    double t = start;
    for (;;) {
        double wake = next_sample;
        if (!warmed && warm_end < wake) wake = warm_end;
        if (end < wake) wake = end;
        int timeout = wake > t ? (int)((wake - t) * 1000) + 1 : 0;
        int ready = epoll_wait(poller, events, EVENTS, timeout);
        if (ready < 0 && errno != EINTR) die("epoll_wait");
        for (int i = 0; i < ready; i++) {
            if (events[i].data.ptr == &sampler) {
                sampler_readable();
                continue;
            }
            struct conn *c = events[i].data.ptr;
            if (c->dead) continue;
            if (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) on_readable(c);
            if (!c->dead && (events[i].events & EPOLLOUT)) flush(c);
        }
        t = now_s();
        if (t >= next_sample) {
            sample();
            while (next_sample <= t) next_sample += 0.1;
        }
        if (!warmed && t >= warm_end) {
            stats_warm = read_stats(stats_fd);
            at_warm = total;
            warmed = 1;
            t = measured_start = now_s();
        }
        if (t >= end) break;
        if (closed == clients) {
            fprintf(stderr, "cache: the server closed every connection\n");
            break;
        }
    }
    double elapsed = t - measured_start;
    struct server_stats stats_end = read_stats(stats_fd);

    struct counts m = {
        total.hits - at_warm.hits,       total.misses - at_warm.misses,
        total.gets - at_warm.gets,       total.sets - at_warm.sets,
        total.oom - at_warm.oom,         total.set_errors - at_warm.set_errors,
        total.get_errors - at_warm.get_errors,
    };
    uint64_t cmds = m.gets + m.sets;
    if (first_error[0]) fprintf(stderr, "cache: first error reply: %s\n", first_error);
    printf("hits=%llu misses=%llu gets=%llu sets=%llu cmds=%llu seconds=%.3f hit_rate=%.4f "
           "gets_per_s=%.0f cmds_per_s=%.0f oom=%llu set_errors=%llu get_errors=%llu "
           "closed=%d max_used=%lld max_used_measured=%lld samples=%ld evicted=%lld "
           "evicted_total=%lld server_hits=%lld server_misses=%lld\n",
           (unsigned long long)m.hits, (unsigned long long)m.misses,
           (unsigned long long)m.gets, (unsigned long long)m.sets, (unsigned long long)cmds,
           elapsed, m.hits + m.misses ? (double)m.hits / (double)(m.hits + m.misses) : 0.0,
           elapsed > 0 ? m.gets / elapsed : 0.0, elapsed > 0 ? cmds / elapsed : 0.0,
           (unsigned long long)m.oom, (unsigned long long)m.set_errors,
           (unsigned long long)m.get_errors, closed, max_used, max_used_measured, samples,
           stats_end.evicted - stats_warm.evicted, stats_end.evicted,
           stats_end.hits - stats_warm.hits, stats_end.misses - stats_warm.misses);
    fflush(stdout);
    return closed == clients ? 1 : 0;
}

/* ---- The ceiling's responder -------------------------------------------------------------- */

struct peer {
    int fd;
    char *buf;
    size_t len, cap;
};

static const char info_zero[] = "# Memory\r\nused_memory:0\r\n# Stats\r\nevicted_keys:0\r\n"
                                "keyspace_hits:0\r\nkeyspace_misses:0\r\n";

/* The length of the complete command at p (0 when incomplete), its first argument's bytes
 * in *name and *name_len. An inline command (no '*') is one line. */
static size_t parse_command(const char *p, size_t n, const char **name, size_t *name_len) {
    const char *nl = memchr(p, '\n', n);
    if (!nl) return 0;
    size_t pos = (size_t)(nl - p) + 1;
    if (p[0] != '*') {
        *name = p;
        *name_len = strcspn(p, " \r\n");
        return pos;
    }
    long args = strtol(p + 1, NULL, 10);
    *name = NULL;
    *name_len = 0;
    for (long a = 0; a < args; a++) {
        if (pos >= n) return 0;
        nl = memchr(p + pos, '\n', n - pos);
        if (!nl) return 0;
        long len = strtol(p + pos + 1, NULL, 10);
        size_t data = (size_t)(nl - p) + 1;
        if (n < data + (size_t)len + 2) return 0;
        if (a == 0) {
            *name = p + data;
            *name_len = (size_t)len;
        }
        pos = data + (size_t)len + 2;
    }
    return pos;
}

static int is(const char *name, size_t len, const char *word) {
    return len == strlen(word) && strncasecmp(name, word, len) == 0;
}

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                poll(&pfd, 1, 1000);
                continue;
            }
            return; /* the peer's gone: its read will tell */
        }
        p += w;
        n -= (size_t)w;
    }
}

static void respond(int listen_port) {
    signal(SIGPIPE, SIG_IGN);
    int yes = 1;
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    struct sockaddr_in address = {
        .sin_family = AF_INET,
        .sin_port = htons((unsigned short)listen_port),
        .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
    };
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 ||
        listen(listener, 511) != 0)
        die("cache --respond: listen");
    int ep = epoll_create1(0);
    struct epoll_event le = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, listener, &le);

    char info_reply[256];
    int info_len = snprintf(info_reply, sizeof info_reply, "$%zu\r\n%s\r\n",
                            sizeof info_zero - 1, info_zero);
    size_t out_cap = 1 << 20;
    char *out = malloc(out_cap);
    enum { EVENTS = 256, POLLS_BEFORE_SLEEP = 200 };
    struct epoll_event events[EVENTS];
    for (;;) {
        int ready = 0;
        for (int i = 0; i < POLLS_BEFORE_SLEEP && ready == 0; i++)
            ready = epoll_wait(ep, events, EVENTS, 0);
        if (ready == 0) ready = epoll_wait(ep, events, EVENTS, -1);
        for (int i = 0; i < ready; i++) {
            struct peer *peer = events[i].data.ptr;
            if (!peer) {
                int fd = accept(listener, NULL, NULL);
                if (fd < 0) continue;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
                fcntl(fd, F_SETFL, O_NONBLOCK);
                peer = calloc(1, sizeof *peer);
                peer->fd = fd;
                peer->cap = 1 << 16;
                peer->buf = malloc(peer->cap);
                struct epoll_event pe = {.events = EPOLLIN, .data.ptr = peer};
                epoll_ctl(ep, EPOLL_CTL_ADD, fd, &pe);
                continue;
            }
            int fd = peer->fd;
            if (peer->len == peer->cap) {
                peer->cap *= 2;
                peer->buf = realloc(peer->buf, peer->cap);
            }
            ssize_t r = read(fd, peer->buf + peer->len, peer->cap - peer->len);
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (r <= 0) {
                epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                close(fd);
                free(peer->buf);
                free(peer);
                continue;
            }
            peer->len += (size_t)r;
            size_t pos = 0, out_len = 0;
            for (;;) {
                const char *name;
                size_t name_len;
                size_t n = parse_command(peer->buf + pos, peer->len - pos, &name, &name_len);
                if (n == 0) break;
                pos += n;
                if (out_len + sizeof info_reply > out_cap) {
                    write_all(fd, out, out_len);
                    out_len = 0;
                }
                if (is(name, name_len, "GET")) out_len = put(out + out_len, "$-1\r\n", 5) - out;
                else if (is(name, name_len, "PING")) out_len = put(out + out_len, "+PONG\r\n", 7) - out;
                else if (is(name, name_len, "INFO"))
                    out_len = put(out + out_len, info_reply, (size_t)info_len) - out;
                else out_len = put(out + out_len, "+OK\r\n", 5) - out;
            }
            if (pos > 0) {
                memmove(peer->buf, peer->buf + pos, peer->len - pos);
                peer->len -= pos;
            }
            if (out_len > 0) write_all(fd, out, out_len);
        }
    }
}

/* ---- Options ------------------------------------------------------------------------------ */

static void usage(const char *self) {
    fprintf(stderr,
            "usage: %s [--host H] [--port P] [--clients N] [--pipeline N] [--keys N]\n"
            "          [--value-size B] [--zipf S] [--seconds S] [--warmup S] [--seed N]\n"
            "          [--respond | --ceiling]   (see the header of bench/cache.c)\n",
            self);
    exit(2);
}

int main(int argc, char **argv) {
    static const struct option options[] = {
        {"host", required_argument, 0, 'h'},     {"port", required_argument, 0, 'p'},
        {"clients", required_argument, 0, 'c'},  {"pipeline", required_argument, 0, 'P'},
        {"keys", required_argument, 0, 'k'},     {"value-size", required_argument, 0, 'v'},
        {"zipf", required_argument, 0, 'z'},     {"seconds", required_argument, 0, 's'},
        {"warmup", required_argument, 0, 'w'},   {"seed", required_argument, 0, 'r'},
        {"respond", no_argument, 0, 'R'},        {"ceiling", no_argument, 0, 'C'},
        {0, 0, 0, 0},
    };
    int mode = 0, o;
    while ((o = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (o) {
        case 'h': host = optarg; break;
        case 'p': port = atoi(optarg); break;
        case 'c': clients = atoi(optarg); break;
        case 'P': pipeline = atoi(optarg); break;
        case 'k': keys = strtoull(optarg, NULL, 10); break;
        case 'v': value_size = atoi(optarg); break;
        case 'z': zipf_s = atof(optarg); break;
        case 's': seconds = atof(optarg); break;
        case 'w': warmup = atof(optarg); break;
        case 'r': seed = strtoull(optarg, NULL, 10); break;
        case 'R':
        case 'C': mode = o; break;
        default: usage(argv[0]);
        }
    }
    if (optind != argc || clients < 1 || pipeline < 1 || keys < 1 || keys > UINT32_MAX ||
        value_size < 0 || seconds <= 0 || warmup < 0 || zipf_s < 0)
        usage(argv[0]);
    if (mode == 'R') respond(port);
    if (mode == 'C') {
        pid_t child = fork();
        if (child < 0) die("fork");
        if (child == 0) respond(port);
        for (int i = 0; i < 200; i++) { /* until it listens */
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port),
                                    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
            int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
            close(fd);
            if (ok) break;
            usleep(10000);
        }
        host = "127.0.0.1";
        int status = run();
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        return status;
    }
    return run();
}
