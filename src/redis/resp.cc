// resp.cc — RESP encoding and reply text (see resp.h).
#include "resp.h"

#include <hiredis/hiredis.h>

#include <vector>

namespace ratelimit::redis_detail {

std::string encode_command(std::span<const std::string> argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  ptrs.reserve(argv.size());
  lens.reserve(argv.size());
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  char* cmd = nullptr;
  // hiredis 0.14 returns int, hiredis >= 1.0 long long: `auto` keeps whichever it is, so a
  // command above 2 GiB is never truncated (or made negative) on the newer library.
  const auto len = redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), ptrs.data(),
                                          lens.data());
  static_assert(sizeof(len) >= sizeof(int));
  std::string out;
  if (len > 0 && cmd != nullptr) out.assign(cmd, static_cast<size_t>(len));
  redisFreeCommand(cmd);
  return out;
}

std::string reply_text(const redisReply* r) {
  if (r == nullptr) return "no reply";
  if (r->str != nullptr) return std::string(r->str, r->len);
  return "reply of type " + std::to_string(r->type);
}

}  // namespace ratelimit::redis_detail
