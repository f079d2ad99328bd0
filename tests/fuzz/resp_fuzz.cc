// resp_fuzz.cc — libFuzzer target for the Redis-protocol request framing of resp_listen
// (resp_parser.h). Built by scripts/fuzz with clang (-fsanitize=fuzzer,address,undefined); built
// by CMake with a corpus-replay main.
// Invariants checked beyond "no crash": a command is within its bounds (length, arguments, every
// argument inside the input or the unquoted scratch); the verdict on a prefix never contradicts
// the verdict on the whole (a connection reads a command in pieces); the input is walked command
// by command as a connection would, always making progress.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "resp_parser.h"

namespace {

using ratelimit::server::RespBounds;
using ratelimit::server::RespCommand;
using ratelimit::server::RespParse;

void check_command(std::string_view in, const RespBounds& b, const RespCommand& c) {
  if (c.length == 0 || c.length > in.size() || c.length > b.max_command_bytes + 1) std::abort();
  if (c.args.empty() || c.args.size() > b.max_args) std::abort();
  for (std::string_view a : c.args) {
    const bool in_input = a.data() >= in.data() && a.data() + a.size() <= in.data() + c.length;
    const bool in_scratch = a.data() >= c.scratch.data() && a.data() + a.size() <= c.scratch.data() + c.scratch.size();
    if (!in_input && !in_scratch && !a.empty()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const RespBounds bounds{512, 16};
  RespCommand whole, prefix;
  std::string error;
  const RespParse w = parse_resp_command(in, bounds, whole, error);
  if (w == RespParse::kMalformed && error.rfind("Protocol error: ", 0) != 0) std::abort();
  if (w == RespParse::kCommand) check_command(in, bounds, whole);
  if (w == RespParse::kSkip && (whole.length == 0 || whole.length > in.size() || !whole.args.empty())) std::abort();
  if (size > 0) {
    const RespParse p = parse_resp_command(in.substr(0, size - 1), bounds, prefix, error);
    if (p == RespParse::kMalformed && w != RespParse::kMalformed) std::abort();
    if ((p == RespParse::kCommand || p == RespParse::kSkip) && (w != p || whole.length != prefix.length)) std::abort();
    if (p == RespParse::kCommand && whole.args != prefix.args) std::abort();
  }
  // As a connection: command after command until more is needed or the stream is refused.
  std::string_view rest = in;
  while (!rest.empty()) {
    RespCommand c;
    const RespParse r = parse_resp_command(rest, bounds, c, error);
    if (r == RespParse::kNeedMore || r == RespParse::kMalformed) break;
    if (c.length == 0) std::abort();
    rest.remove_prefix(c.length);
  }
  return 0;
}
