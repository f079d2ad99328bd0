// head_scan.h — the screening of an HTTP/1.1 request head before the parser reads it: what a
// lenient parser would accept and a proxy in front might frame differently (request smuggling).
//
// Why its own file in the transport: the HTTP/1.1 connection (http1_connection.cc) runs it on
// every request, and it is untrusted-input code the fuzzer reaches directly (tests/fuzz); it
// knows nothing of any API.
// Thread-safety: a pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ratelimit::server {

// Screening of a request head (request line and header fields) before the HTTP parser reads
// it, for what a lenient parser would accept and a proxy in front might read differently
// (RFC 9112 §2.2, §5.2): a bare LF or CR, obs-fold (a line that starts with SP or HTAB), NUL or
// another control character. One home for the rule, pure, so the fuzzer reaches it.
struct HeadScan {
  enum class State : uint8_t { kNeedMore, kComplete, kMalformed };
  State state = State::kNeedMore;
  size_t length = 0;        // kComplete: bytes of the head, final CRLF CRLF included
  std::string_view reason;  // kMalformed: what was found (a static string)
};
// Scans `bytes` (what has arrived of a request so far, starting at its first byte).
// kNeedMore: no fault yet and the head's end not seen.
HeadScan scan_request_head(std::string_view bytes);


}  // namespace ratelimit::server
