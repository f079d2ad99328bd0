// http_client.cc — see http_client.h.
#include "http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

namespace ratelimit::bench {
namespace {

// Where header `name` (lower case, with its colon) starts its value in `head`; npos when absent.
size_t find_header(std::string head, const char* name) {
  std::transform(head.begin(), head.end(), head.begin(), [](unsigned char c) { return std::tolower(c); });
  const size_t at = head.find(name);
  return at == std::string::npos ? at : at + std::strlen(name);
}

}  // namespace

Http::Http(const std::string& host, int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  timeval tv{5, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) close();
}

Http::~Http() { close(); }

int Http::request(const std::string& method, const std::string& target, const std::string& body, std::string& out) {
  if (fd_ < 0) return 0;
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                    "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  for (size_t sent = 0; sent < req.size();) {
    const ssize_t n = ::send(fd_, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return close();
    sent += static_cast<size_t>(n);
  }
  size_t head_end;
  while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos) {
    if (!fill()) return close();
  }
  const int status = buf_.size() > 12 ? std::atoi(buf_.c_str() + 9) : 0;
  size_t length = 0;
  const size_t cl = find_header(buf_.substr(0, head_end), "content-length:");
  if (cl != std::string::npos) length = std::strtoul(buf_.c_str() + cl, nullptr, 10);
  while (buf_.size() < head_end + 4 + length) {
    if (!fill()) return close();
  }
  out.assign(buf_, head_end + 4, length);
  buf_.erase(0, head_end + 4 + length);
  return status;
}

bool Http::fill() {
  char tmp[4096];
  const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
  if (n <= 0) return false;
  buf_.append(tmp, static_cast<size_t>(n));
  return true;
}

int Http::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  return 0;
}

std::string json_field(const std::string& body, const std::string& name) {
  const size_t at = body.find("\"" + name + "\":");
  if (at == std::string::npos) return "";
  const size_t v = at + name.size() + 3;
  if (v < body.size() && body[v] == '"') {
    const size_t end = body.find('"', v + 1);
    return end == std::string::npos ? "" : body.substr(v + 1, end - v - 1);
  }
  size_t end = v;
  while (end < body.size() && (std::isdigit(static_cast<unsigned char>(body[end])) || body[end] == '-')) ++end;
  return body.substr(v, end - v);
}

}  // namespace ratelimit::bench
