// http1_writer.cc — HTTP/1.1 response serialisation (see http1_writer.h).
#include "http1_writer.h"

#include <charconv>
#include <ctime>

namespace ratelimit::server {

std::string_view http_date() {
  thread_local std::time_t cached_at = 0;
  thread_local char buf[64] = {};
  const std::time_t now = std::time(nullptr);
  if (now != cached_at) {
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    cached_at = now;
  }
  return buf;
}

namespace {

void append_number(std::string& out, uint64_t v) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;  // 24 chars always hold a uint64
  out.append(buf, end);
}

}  // namespace

void write_http1_response(const http::Response& response, const Http1Framing& framing, std::string& out) {
  using namespace std::string_view_literals;  // appends of known length: no strlen per piece
  out.clear();
  out += framing.version == 10 ? "HTTP/1.0 "sv : "HTTP/1.1 "sv;
  append_number(out, response.status);
  out += ' ';
  out += http::reason_phrase(response.status);
  out += "\r\nDate: "sv;
  out += http_date();
  for (const http::Field& f : response.fields) {
    out += "\r\n"sv;
    out += f.name;
    out += ": "sv;
    out += f.value;
  }
  out += "\r\nContent-Type: "sv;
  out += response.content_type;
  out += "\r\nContent-Length: "sv;
  append_number(out, response.body.size());
  if (!framing.keep_alive) out += "\r\nConnection: close"sv;
  else if (framing.version == 10) out += "\r\nConnection: keep-alive"sv;
  out += "\r\n\r\n"sv;
  if (!framing.head_only) out += response.body;
}

}  // namespace ratelimit::server
