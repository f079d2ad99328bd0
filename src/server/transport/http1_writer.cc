// http1_writer.cc — HTTP/1.1 response serialisation (see http1_writer.h).
// The head and the body are one emitter (wire_writer.h): `out` is sized once and written through
// a pointer, not appended to piece by piece (issue 34).
#include "http1_writer.h"

#include <ctime>

#include "wire_writer.h"

namespace ratelimit::server {

std::string_view http_date() {
  thread_local std::time_t cached_at = 0;
  thread_local char buf[64] = {};
  thread_local size_t len = 0;
  const std::time_t now = std::time(nullptr);
  if (now != cached_at) {
    std::tm tm{};
    gmtime_r(&now, &tm);
    len = std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    cached_at = now;
  }
  return {buf, len};
}

void write_http1_response(const http::Response& response, const Http1Framing& framing, std::string& out) {
  using namespace std::string_view_literals;  // literals of known length: no strlen per piece
  const std::string_view date = http_date();
  const std::string_view reason = http::reason_phrase(response.status);
  out.clear();
  wire::append_with(out, [&](auto& w) {
    w.lit(framing.version == 10 ? "HTTP/1.0 "sv : "HTTP/1.1 "sv);
    w.num(uint64_t{response.status});
    w.ch(' ');
    w.lit(reason);
    w.lit("\r\nDate: "sv);
    w.lit(date);
    for (const http::Field& f : response.fields) {
      w.lit("\r\n"sv);
      w.lit(f.name);
      w.lit(": "sv);
      w.lit(f.value);
    }
    w.lit("\r\nContent-Type: "sv);
    w.lit(response.content_type);
    w.lit("\r\nContent-Length: "sv);
    w.num(uint64_t{response.body.size()});
    if (!framing.keep_alive) {
      w.lit("\r\nConnection: close"sv);
    } else if (framing.version == 10) {
      w.lit("\r\nConnection: keep-alive"sv);
    }
    w.lit("\r\n\r\n"sv);
    if (!framing.head_only) w.lit(response.body);
  });
}

}  // namespace ratelimit::server
