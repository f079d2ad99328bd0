// http1_writer.cc — HTTP/1.1 response serialisation (see http1_writer.h).
#include "http1_writer.h"

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

void write_http1_response(const http::Response& response, const Http1Framing& framing, std::string& out) {
  out.clear();
  out += framing.version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  out += std::to_string(response.status);
  out += ' ';
  out += http::reason_phrase(response.status);
  out += "\r\nDate: ";
  out += http_date();
  for (const http::Field& f : response.fields) {
    out += "\r\n";
    out += f.name;
    out += ": ";
    out += f.value;
  }
  out += "\r\nContent-Type: ";
  out += response.content_type;
  out += "\r\nContent-Length: ";
  out += std::to_string(response.body.size());
  if (!framing.keep_alive) out += "\r\nConnection: close";
  else if (framing.version == 10) out += "\r\nConnection: keep-alive";
  out += "\r\n\r\n";
  if (!framing.head_only) out += response.body;
}

}  // namespace ratelimit::server
