// http_floor.c — the floor under any HTTP/1.1 server on this machine: a responder with no
// application at all (it finds the end of each request and sends one fixed answer, the bytes
// ratelimitd sends for POST /v1/acquire), in two event-loop patterns:
//   epoll   what ratelimitd's asio loop does per request: epoll_wait (amortised over the ready
//           connections), one recv, one send — two system calls per request;
//   epoll_batch  the same, but the sends of one epoll turn go out in one io_uring_enter (what
//           batching writes per event-loop turn inside an epoll server would save);
//   uring   io_uring (liburing): each turn submits every queued send and re-armed recv and
//           reaps every completion in ONE io_uring_enter (SINGLE_ISSUER | DEFER_TASKRUN), so
//           the system calls per request fall to 1/(requests per turn).
// Why: issue 34 asks whether HTTP/1.1 can cost 1.2x less than nginx per core. The server CPU
// per request of each floor, beside ratelimitd's and nginx's in the same rounds
// (bench/floor/run.sh), splits ratelimitd's cost into the kernel's share (the floor) and its
// own, and prices an io_uring transport before anyone builds one.
// Not a server: no limits, no timeouts, requests up to 4 KiB, answers never fail short on
// loopback (a short send is counted and printed at exit, and a run with any is void).
// usage: http_floor epoll|epoll_batch|uring PORT
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CONNS 4096
#define BUF 4096

static const char kAnswer[] =
    "HTTP/1.1 200 OK\r\nDate: Sat, 05 Dec 2026 21:55:19 GMT\r\n"
    "RateLimit-Policy: \"bench\";q=1000000000;w=1\r\nRateLimit: \"bench\";r=999999999;t=1\r\n"
    "Content-Type: application/json\r\nContent-Length: 121\r\n\r\n"
    "{\"allowed\":true,\"policy\":\"bench\",\"limit\":1000000000,\"remaining\":999999999,"
    "\"reset_ms\":298,\"retry_after_ms\":0,\"delay_ms\":0}";

struct conn {
  char buf[BUF];
  size_t len;
};
static struct conn* conns[MAX_CONNS];
static volatile sig_atomic_t stop;
static unsigned long answers, short_sends;

static void on_term(int sig) { (void)sig; stop = 1; }

// Complete requests at the start of c->buf: how many (each is answered once), consuming them.
static int take_requests(struct conn* c) {
  int n = 0;
  for (;;) {
    char* end = memmem(c->buf, c->len, "\r\n\r\n", 4);
    if (end == NULL) break;
    size_t head = (size_t)(end - c->buf) + 4, body = 0;
    char* cl = memmem(c->buf, head, "Content-Length:", 15);
    if (cl != NULL) body = strtoul(cl + 15, NULL, 10);
    if (c->len < head + body) break;
    memmove(c->buf, c->buf + head + body, c->len - head - body);
    c->len -= head + body;
    ++n;
  }
  return n;
}

static int listen_on(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(fd, (struct sockaddr*)&a, sizeof a) != 0 || listen(fd, 4096) != 0) {
    perror("listen");
    exit(1);
  }
  return fd;
}

static void open_conn(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (fd >= MAX_CONNS) {
    close(fd);
    return;
  }
  conns[fd] = calloc(1, sizeof(struct conn));
}

static void close_conn(int fd) {
  free(conns[fd]);
  conns[fd] = NULL;
  close(fd);
}

static struct io_uring* send_ring;  // epoll_batch: the sends of a turn, submitted at once

static void run_epoll(int lfd) {
  unsigned queued = 0;
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  struct epoll_event evs[256];
  while (!stop) {
    int n = epoll_wait(ep, evs, 256, 200);
    for (int i = 0; i < n; ++i) {
      int fd = evs[i].data.fd;
      if (fd == lfd) {
        int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
        if (c < 0) continue;
        open_conn(c);
        struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
        continue;
      }
      struct conn* c = conns[fd];
      ssize_t r = recv(fd, c->buf + c->len, BUF - c->len, 0);
      if (r <= 0) {
        if (r < 0 && errno == EAGAIN) continue;
        close_conn(fd);  // close() also leaves the epoll set
        continue;
      }
      c->len += (size_t)r;
      for (int k = take_requests(c); k > 0; --k) {
        ++answers;
        if (send_ring != NULL) {
          struct io_uring_sqe* sqe = io_uring_get_sqe(send_ring);
          io_uring_prep_send(sqe, fd, kAnswer, sizeof kAnswer - 1, 0);
          ++queued;
          continue;
        }
        ssize_t s = send(fd, kAnswer, sizeof kAnswer - 1, 0);
        if (s != (ssize_t)(sizeof kAnswer - 1)) ++short_sends;
      }
    }
    if (queued > 0) {  // epoll_batch: every answer of this turn in one io_uring_enter
      io_uring_submit_and_wait(send_ring, queued);
      struct io_uring_cqe* cqe;
      unsigned head, seen = 0;
      io_uring_for_each_cqe(send_ring, head, cqe) {
        ++seen;
        if (cqe->res != (int)(sizeof kAnswer - 1)) ++short_sends;
      }
      io_uring_cq_advance(send_ring, seen);
      queued = 0;
    }
  }
}

enum { kAccept = 1, kRecv = 2, kSend = 3 };
#define UD(kind, fd) (((unsigned long long)(fd) << 8) | (kind))

static void arm_recv(struct io_uring* ring, int fd) {
  struct io_uring_sqe* sqe = io_uring_get_sqe(ring);
  struct conn* c = conns[fd];
  io_uring_prep_recv(sqe, fd, c->buf + c->len, BUF - c->len, 0);
  io_uring_sqe_set_data64(sqe, UD(kRecv, fd));
}

static void run_uring(int lfd) {
  struct io_uring ring;
  struct io_uring_params p = {.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN};
  int rc = io_uring_queue_init_params(4096, &ring, &p);
  if (rc != 0) {
    fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-rc));
    exit(1);
  }
  struct io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  io_uring_prep_multishot_accept(sqe, lfd, NULL, NULL, 0);
  io_uring_sqe_set_data64(sqe, UD(kAccept, 0));
  struct __kernel_timespec wait = {.tv_sec = 0, .tv_nsec = 200 * 1000 * 1000};
  while (!stop) {
    struct io_uring_cqe* cqe;
    io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &wait, NULL);
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      ++seen;
      unsigned long long ud = io_uring_cqe_get_data64(cqe);
      int kind = (int)(ud & 0xff), fd = (int)(ud >> 8);
      if (kind == kAccept) {
        if (cqe->res >= 0) {
          open_conn(cqe->res);
          if (cqe->res < MAX_CONNS) arm_recv(&ring, cqe->res);
        }
        if (!(cqe->flags & IORING_CQE_F_MORE)) {  // the multishot accept ended: re-arm it
          sqe = io_uring_get_sqe(&ring);
          io_uring_prep_multishot_accept(sqe, lfd, NULL, NULL, 0);
          io_uring_sqe_set_data64(sqe, UD(kAccept, 0));
        }
      } else if (kind == kSend) {
        if (cqe->res != (int)(sizeof kAnswer - 1)) ++short_sends;
      } else if (cqe->res <= 0) {
        close_conn(fd);
      } else {
        struct conn* c = conns[fd];
        c->len += (size_t)cqe->res;
        for (int k = take_requests(c); k > 0; --k) {
          sqe = io_uring_get_sqe(&ring);
          io_uring_prep_send(sqe, fd, kAnswer, sizeof kAnswer - 1, 0);
          io_uring_sqe_set_data64(sqe, UD(kSend, fd));
          ++answers;
        }
        arm_recv(&ring, fd);
      }
    }
    io_uring_cq_advance(&ring, seen);
  }
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "epoll") != 0 && strcmp(argv[1], "epoll_batch") != 0 &&
                    strcmp(argv[1], "uring") != 0)) {
    fprintf(stderr, "usage: http_floor epoll|epoll_batch|uring PORT\n");
    return 2;
  }
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  signal(SIGPIPE, SIG_IGN);
  int lfd = listen_on(atoi(argv[2]));
  static struct io_uring ring;
  if (strcmp(argv[1], "epoll_batch") == 0) {
    struct io_uring_params p = {.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN};
    if (io_uring_queue_init_params(1024, &ring, &p) != 0) return 1;
    send_ring = &ring;
  }
  if (strcmp(argv[1], "uring") != 0) run_epoll(lfd);
  else run_uring(lfd);
  fprintf(stderr, "%s: %lu answers, %lu short sends\n", argv[1], answers, short_sends);
  return short_sends == 0 ? 0 : 1;
}
