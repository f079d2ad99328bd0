// resp.cc — RESP encoding and reply text (see resp.h).
#include "resp.h"

#include <hiredis/hiredis.h>

#include <charconv>

namespace ratelimit::redis_detail {

namespace {

void append_count(std::string& out, char kind, size_t n) {
  char buf[24];
  buf[0] = kind;
  auto [end, ec] = std::to_chars(buf + 1, buf + sizeof buf - 2, n);
  *end++ = '\r';
  *end++ = '\n';
  out.append(buf, end);
}

}  // namespace

std::string encode_command(std::span<const std::string> argv) {
  // "*<argc>\r\n" then "$<len>\r\n<bytes>\r\n" per argument; sized once, no printf (hiredis'
  // redisFormatCommandArgv formats every length with sprintf, a visible cost per decision).
  size_t size = 24;
  for (const std::string& a : argv) size += 24 + a.size();
  std::string out;
  out.reserve(size);
  append_count(out, '*', argv.size());
  for (const std::string& a : argv) {
    append_count(out, '$', a.size());
    out += a;
    out += "\r\n";
  }
  return out;
}

std::string_view reply_str(const redisReply* r) {
  if (r == nullptr || r->str == nullptr) return {};
  return {r->str, r->len};
}

std::string reply_text(const redisReply* r) {
  if (r == nullptr) return "no reply";
  if (r->str != nullptr) return std::string(r->str, r->len);
  return "reply of type " + std::to_string(r->type);
}

}  // namespace ratelimit::redis_detail
