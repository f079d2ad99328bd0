// resp_parser.h — framing of Redis-protocol (RESP2/RESP3) requests for ratelimitd's resp_listen:
// one command at a time from the front of the bytes a connection has read, and the reply
// encodings (RESP2 and RESP3) its answers are written in.
//
// What a request is, as Redis reads one (networking.c, processMultibulkBuffer and
// processInlineBuffer): either a multibulk — "*<n>\r\n" then n bulk strings "$<len>\r\n<bytes>\r\n"
// — or an inline command, a line split on blanks with Redis's quoting rules (sdssplitargs:
// "..." with \n \r \t \b \a \xHH escapes, '...' with \'). A count <= 0 and a blank line are
// no command at all (skipped, no reply). Anything else is a protocol error, answered by Redis's
// own message ("Protocol error: ...") and the connection closed, because the stream position
// is lost.
// Why bounded here: a client declares sizes before it sends them ("$999999999"). A declared bulk
// or a command larger than RespBounds::max_command_bytes, more than max_args elements, or an
// element that is not a bulk string (a nested array: requests are one level deep) is refused as
// soon as its header is read, before anything is buffered for it; so a connection holds at most
// max_command_bytes of one command, whatever it announces.
// Stricter than Redis where Redis is lenient: the two bytes after a bulk must be CRLF (Redis
// skips them unread); counts and lengths are plain decimal.
// Invariants: parse_resp_command never reads past `in`; on kCommand and kSkip, `length` bytes of
// `in` were the command; the verdict on a prefix never contradicts the verdict on the whole
// (checked by tests/fuzz/resp_fuzz.cc).
// Thread-safety: pure functions over caller-owned buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ratelimit::server {

struct RespBounds {
  size_t max_command_bytes = 8 * 1024;  // a whole command as sent (limits.max_body_bytes)
  size_t max_args = 1024;               // elements of one command
};

// One command as parsed. Reused across the commands of a connection (clear() keeps capacity).
struct RespCommand {
  // The elements, args[0] the command's name as sent. Multibulk: views into the input (valid
  // while the input is); inline: views into `scratch` (the unquoted text).
  std::vector<std::string_view> args;
  std::string scratch;
  size_t length = 0;  // bytes of input the command took (kCommand, kSkip)
  bool inline_form = false;

  void clear() {
    args.clear();
    scratch.clear();
    length = 0;
    inline_form = false;
  }
};

enum class RespParse : uint8_t {
  kNeedMore,   // the command is not whole yet (and within bounds so far)
  kCommand,    // `out` holds a command of `out.length` bytes
  kSkip,       // `out.length` bytes held no command (a blank inline line, "*0", "*-1"): no reply
  kMalformed,  // `error` holds Redis's message; answer it and close
};

// Parses the command at the front of `in`.
[[nodiscard]] RespParse parse_resp_command(std::string_view in, const RespBounds& bounds, RespCommand& out,
                                           std::string& error);

// Appends replies in the protocol a connection speaks (2, or 3 after HELLO 3). Text given to
// simple() and error() must be one line: CR and LF are replaced by spaces.
class RespReply {
 public:
  RespReply(std::string& out, int protocol) : out_(out), protocol_(protocol) {}

  int protocol() const { return protocol_; }
  void simple(std::string_view text);  // +text
  void error(std::string_view text);   // -text (text starts with its code: "ERR ...", "NOAUTH ...")
  void integer(int64_t v);             // :v
  void bulk(std::string_view bytes);   // $len bytes
  void null();                         // RESP2 $-1, RESP3 _
  void array(size_t n);                // *n, then n replies
  void map(size_t pairs);              // RESP3 %pairs; RESP2 *2·pairs (a flat array), then 2·pairs replies
  void boolean(bool v);                // RESP3 #t/#f; RESP2 :1/:0

 private:
  void line(char type, std::string_view text);
  std::string& out_;
  int protocol_;
};

}  // namespace ratelimit::server
