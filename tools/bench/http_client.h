// http_client.h — the smallest blocking HTTP/1.1 client a load generator needs: one keep-alive
// connection per object, a request and its Content-Length body (no chunked bodies: ratelimitd
// always sends a length), and a field of a flat JSON answer. Why not Boost.Beast: a generator
// thread per connection must cost less than the server it measures, and this is two syscalls a
// request. Invariants: every send/recv is bounded (5 s); after any failure the connection is
// closed and every later request() returns 0. Not thread-safe: one per thread.
#pragma once

#include <string>

namespace ratelimit::bench {

class Http {
 public:
  // Connects to an IPv4 host:port (a failure shows as request() returning 0).
  Http(const std::string& host, int port);
  ~Http();
  Http(const Http&) = delete;
  Http& operator=(const Http&) = delete;
  // The reply's status and body in `out`; 0 on any failure.
  int request(const std::string& method, const std::string& target, const std::string& body, std::string& out);

 private:
  bool fill();
  int close();
  int fd_ = -1;
  std::string buf_;
};

// `"name":<integer>` or `"name":"<string>"` of a flat JSON answer; "" when absent.
std::string json_field(const std::string& body, const std::string& name);

}  // namespace ratelimit::bench
