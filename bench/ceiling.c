// The load generator's ceiling: a TCP responder that does no server work at all.
//
//   gcc -O2 -o ceiling bench/ceiling.c && ./ceiling PORT
//
// It answers "+OK" to every command it receives (a command is counted by a '*' at the start
// of a line, which is how every redis-benchmark request begins) and keeps nothing. Driven by
// redis-benchmark exactly as bench/compare.sh drives the real servers, its requests/s is the
// most that redis-benchmark on this machine can produce for a row: no server, however fast,
// can show a higher figure, so ceiling/redis is the highest latch/redis ratio a row can show.
//
// Before it blocks in epoll_wait it polls for a short while, so that a client's write
// rarely has to wake it: a sleeping server makes every client pay for wake-ups, and the
// ceiling should be the best a server could do for its clients, not the cheapest.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

enum { EVENTS = 1024, BUFFER = 1 << 16, POLLS_BEFORE_SLEEP = 200 };

static char input[BUFFER];
static char replies[BUFFER];

static void watch(int poller, int fd) {
    struct epoll_event event = {.events = EPOLLIN, .data.fd = fd};
    epoll_ctl(poller, EPOLL_CTL_ADD, fd, &event);
}

// The commands that start in this chunk: a '*' at the start of a line, or at the start of
// the chunk (no redis-benchmark argument holds a '*', so one there begins a command).
static int commands_in(const char *bytes, ssize_t length) {
    int count = 0;
    for (ssize_t i = 0; i < length; i++)
        if (bytes[i] == '*' && (i == 0 || bytes[i - 1] == '\n')) count++;
    return count;
}

static void answer(int poller, int fd) {
    ssize_t length = read(fd, input, sizeof input);
    if (length <= 0) {
        epoll_ctl(poller, EPOLL_CTL_DEL, fd, NULL);
        close(fd);
        return;
    }
    size_t bytes = (size_t)commands_in(input, length) * 5;
    if (bytes > sizeof replies) bytes = sizeof replies - sizeof replies % 5;
    if (bytes > 0 && write(fd, replies, bytes) < 0) {
        epoll_ctl(poller, EPOLL_CTL_DEL, fd, NULL);
        close(fd);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PORT\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i + 5 <= sizeof replies; i += 5) memcpy(replies + i, "+OK\r\n", 5);

    int yes = 1;
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    struct sockaddr_in address = {
        .sin_family = AF_INET,
        .sin_port = htons((unsigned short)atoi(argv[1])),
        .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
    };
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 ||
        listen(listener, 511) != 0) {
        perror("ceiling: listen");
        return 1;
    }
    int poller = epoll_create1(0);
    watch(poller, listener);

    struct epoll_event events[EVENTS];
    for (;;) {
        int ready = 0;
        for (int poll = 0; poll < POLLS_BEFORE_SLEEP && ready == 0; poll++)
            ready = epoll_wait(poller, events, EVENTS, 0);
        if (ready == 0) ready = epoll_wait(poller, events, EVENTS, -1);
        for (int i = 0; i < ready; i++) {
            int fd = events[i].data.fd;
            if (fd != listener) {
                answer(poller, fd);
                continue;
            }
            int client = accept(listener, NULL, NULL);
            if (client < 0) continue;
            setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
            fcntl(client, F_SETFL, O_NONBLOCK);
            watch(poller, client);
        }
    }
}
