// delay_proxy.cc — DelayProxy (contract in delay_proxy.h): an acceptor thread and one thread per
// connection that polls both sockets, stamps what it reads with the time it may leave
// (arrival + delay), and writes what is due unless the link is cut.
#include "delay_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <string>

namespace ratelimit::testing {
namespace {

constexpr size_t kMaxHeld = size_t{4} << 20;
constexpr int kTickMs = 5;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Close with RST (SO_LINGER 0): what a refused or reset connection looks like to the peer.
void reset(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

struct Chunk {
  int64_t due_us;
  std::string bytes;
  size_t sent = 0;
};

// One direction of a connection: bytes read from `from`, waiting to be written to `to`.
struct Direction {
  int from, to;
  std::deque<Chunk> queue;
  size_t held = 0;
  bool eof = false;
};

// Writes every due chunk (or as much as the socket takes); false when `to` failed.
bool flush_due(Direction& d, int64_t now) {
  while (!d.queue.empty() && d.queue.front().due_us <= now) {
    Chunk& c = d.queue.front();
    const ssize_t n = ::send(d.to, c.bytes.data() + c.sent, c.bytes.size() - c.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
    c.sent += static_cast<size_t>(n);
    d.held -= static_cast<size_t>(n);
    if (c.sent < c.bytes.size()) return true;  // the socket is full: later
    d.queue.pop_front();
  }
  return true;
}

}  // namespace

DelayProxy::~DelayProxy() {
  stopping_.store(true);
  if (acceptor_.joinable()) acceptor_.join();
  std::lock_guard lock(mu_);
  for (auto& t : threads_) t.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

Status DelayProxy::start(uint16_t target_port) {
  target_ = target_port;
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listen_fd_ < 0) return Status::unavailable(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_fd_, 64) != 0) {
    return Status::unavailable(std::string("bind/listen: ") + std::strerror(errno));
  }
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
  return {};
}

void DelayProxy::accept_loop() {
  while (!stopping_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, kTickMs) <= 0) continue;
    const int client = ::accept(listen_fd_, nullptr, nullptr);
    if (client < 0) continue;
    accepted_.fetch_add(1);
    if (mode_.load() == Mode::kRefuse) {
      reset(client);
      continue;
    }
    const int server = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(target_);
    if (server < 0 || ::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      if (server >= 0) ::close(server);
      reset(client);
      continue;
    }
    int one = 1;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard lock(mu_);
    threads_.emplace_back([this, client, server] { pump(client, server); });
  }
}

void DelayProxy::pump(int client, int server) {
  Direction dirs[2] = {{client, server, {}, 0, false}, {server, client, {}, 0, false}};
  char buf[64 * 1024];
  bool open = true;
  while (open && !stopping_.load()) {
    const Mode mode = mode_.load();
    if (mode == Mode::kRefuse) break;
    pollfd p[2];
    nfds_t n = 0;
    int index[2];
    for (int i = 0; i < 2; ++i) {
      if (dirs[i].eof || dirs[i].held >= kMaxHeld) continue;
      p[n] = {dirs[i].from, POLLIN, 0};
      index[n++] = i;
    }
    int timeout = kTickMs;
    const int64_t now = now_us();
    if (mode == Mode::kForward) {
      for (const Direction& d : dirs) {
        if (!d.queue.empty()) {
          timeout = static_cast<int>(std::min<int64_t>(timeout, std::max<int64_t>(0, (d.queue.front().due_us - now + 999) / 1000)));
        }
      }
    }
    ::poll(p, n, timeout);
    for (nfds_t k = 0; k < n; ++k) {
      if ((p[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      Direction& d = dirs[index[k]];
      const ssize_t got = ::recv(d.from, buf, sizeof buf, MSG_DONTWAIT);
      if (got > 0) {
        d.queue.push_back({now_us() + delay_us_.load(), std::string(buf, static_cast<size_t>(got))});
        d.held += static_cast<size_t>(got);
      } else if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        d.eof = true;
      }
    }
    if (mode_.load() == Mode::kForward) {
      const int64_t t = now_us();
      for (Direction& d : dirs) {
        if (!flush_due(d, t)) open = false;
      }
    }
    // A side that closed ends the connection once what it sent has been delivered.
    for (const Direction& d : dirs) {
      if (d.eof && d.queue.empty()) open = false;
    }
  }
  if (mode_.load() == Mode::kRefuse) {
    reset(client);
    reset(server);
  } else {
    ::close(client);
    ::close(server);
  }
}

}  // namespace ratelimit::testing
