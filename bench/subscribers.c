/* Pub/sub fan-out, measured where it matters: on the subscribers' side.
 *
 *   subscribers PORT CHANNEL COUNT MESSAGES MESSAGE_BYTES
 *
 * Opens COUNT connections to 127.0.0.1:PORT, subscribes each to CHANNEL (RESP2), prints
 * "ready" once every subscription is confirmed, then reads until each connection has
 * received MESSAGES messages of MESSAGE_BYTES bytes each (the whole `*3 message CHANNEL
 * payload` frame: every message of a run has the same size, so bytes count messages).
 * Prints "<messages delivered> <seconds from the first byte to the last>" and exits; exits
 * 1 after 120 s without the last byte.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void read_exact(int fd, char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0) {
            perror("read confirmation");
            exit(1);
        }
        got += (size_t)r;
    }
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s PORT CHANNEL COUNT MESSAGES MESSAGE_BYTES\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    const char *channel = argv[2];
    int count = atoi(argv[3]);
    long long messages = atoll(argv[4]);
    long long message_bytes = atoll(argv[5]);
    long long want = messages * message_bytes;
    struct pollfd *fds = calloc((size_t)count, sizeof *fds);
    long long *got = calloc((size_t)count, sizeof *got);
    char request[512], confirmation[512];
    size_t channel_len = strlen(channel);
    int request_len = snprintf(request, sizeof request,
                               "*2\r\n$9\r\nSUBSCRIBE\r\n$%zu\r\n%s\r\n", channel_len, channel);
    int confirmation_len = snprintf(confirmation, sizeof confirmation,
                                    "*3\r\n$9\r\nsubscribe\r\n$%zu\r\n%s\r\n:1\r\n",
                                    channel_len, channel);
    for (int i = 0; i < count; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
            perror("connect");
            return 1;
        }
        if (write(fd, request, (size_t)request_len) != request_len) {
            perror("write");
            return 1;
        }
        char reply[512];
        read_exact(fd, reply, (size_t)confirmation_len);
        if (memcmp(reply, confirmation, (size_t)confirmation_len) != 0) {
            fprintf(stderr, "unexpected reply to SUBSCRIBE\n");
            return 1;
        }
        fds[i].fd = fd;
        fds[i].events = POLLIN;
    }
    printf("ready\n");
    fflush(stdout);
    static char buf[1 << 16];
    int done = 0;
    double first = 0, last = 0, started = now_s();
    while (done < count) {
        if (poll(fds, (nfds_t)count, 1000) < 0) {
            perror("poll");
            return 1;
        }
        if (now_s() - started > 120) {
            fprintf(stderr, "timed out with %d of %d subscribers done\n", done, count);
            return 1;
        }
        for (int i = 0; i < count; i++) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t r = read(fds[i].fd, buf, sizeof buf);
            if (r <= 0) {
                fprintf(stderr, "subscriber %d closed\n", i);
                return 1;
            }
            if (first == 0)
                first = now_s();
            got[i] += r;
            if (got[i] >= want && fds[i].fd >= 0) {
                done++;
                last = now_s();
                fds[i].events = 0;
            }
        }
    }
    printf("%lld %.6f\n", messages * count, last - first);
    return 0;
}
