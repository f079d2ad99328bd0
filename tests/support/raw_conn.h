// raw_conn.h — one TCP connection over loopback for tests that must send bytes exactly as
// written (request-smuggling framings, partial heads, an HTTP/2 preface) and read what comes
// back with a deadline: the transport's unit tests (tests/server/http1_test.cc) and the real
// binary's hardening tests (e2e_hardening_test.cc).
//
// Why not an HTTP client: a client normalises or refuses the very bytes under test. Every wait
// here is bounded by its timeout (poll with a deadline); nothing blocks forever.
// Thread-safety: one connection per thread.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace ratelimit::test_support {

using namespace std::chrono_literals;

// One TCP connection from `source` (a loopback address) to 127.0.0.1:port.
class RawConn {
 public:
  RawConn(uint16_t port, const char* source = "127.0.0.1") {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    sockaddr_in src{};
    src.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &src.sin_addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) return;
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(port);
    ::inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&dst), sizeof dst) == 0;
  }
  ~RawConn() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  bool connected() const { return connected_; }
  // This end's port (0 when unknown).
  uint16_t local_port() const {
    sockaddr_in a{};
    socklen_t n = sizeof a;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n) != 0) return 0;
    return ntohs(a.sin_port);
  }
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Reads until the peer closes (EOF or reset) or `timeout` passes. `closed` tells which.
  std::string read_all(std::chrono::milliseconds timeout, bool& closed) {
    std::string out;
    closed = false;
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return out;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed = true;
        return out;
      }
      out.append(buf, static_cast<size_t>(n));
    }
  }
  // Reads until `text` has arrived (or the peer closes, or `timeout`).
  std::string read_until(std::string_view text, std::chrono::milliseconds timeout) {
    std::string out;
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (out.find(text) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // One request on this connection; the whole answer (up to Content-Length), or "".
  std::string exchange(std::string_view request, std::chrono::milliseconds timeout = 5s) {
    if (!send(request)) return {};
    std::string out = read_until("\r\n\r\n", timeout);
    const size_t head_end = out.find("\r\n\r\n");
    if (head_end == std::string::npos) return out;
    const size_t cl = out.find("Content-Length: ");
    const size_t len = cl == std::string::npos ? 0 : std::stoul(out.substr(cl + 16));
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (out.size() < head_end + 4 + len && std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // True if the peer closes within `timeout` (bytes it sends meanwhile are discarded).
  bool wait_closed(std::chrono::milliseconds timeout) {
    bool closed = false;
    read_all(timeout, closed);
    return closed;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// The status code of the first response in `bytes` ("" if there is none).
inline std::string status_of(const std::string& bytes) {
  if (bytes.size() < 12 || bytes.compare(0, 7, "HTTP/1.") != 0) return {};
  return bytes.substr(9, 3);
}

}  // namespace ratelimit::test_support
