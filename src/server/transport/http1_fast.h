// http1_fast.h — a fast parse of the common HTTP/1.1 request (issue 34): a short head of plain
// fields and a Content-Length body already buffered, read in one pass into the same
// Http1Request Beast's Http1Parser fills — or declined.
//
// Why: Beast's parse (field-name lookup, token lists, per-field callbacks) was the largest piece
// of user-space CPU per request; the request every client sends (POST /v1/acquire with Host,
// Content-Type, Content-Length) needs none of its generality.
// Invariants: it never refuses. Anything it is not certain Beast would accept exactly so is
// declined, and then nothing was written and nothing consumed: Beast parses the same bytes as
// before, so every error answer, cap and hardening rule stays Beast's and Http1Parser's.
// Accepted, the request, keep_alive and the bytes consumed equal Beast's (checked byte for byte
// by the differential fuzz target tests/fuzz/request_fuzz.cc).
// Thread-safety: a pure function of its arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "http1_parser.h"

namespace ratelimit::server {

struct FastParse {
  size_t consumed = 0;     // the head and its body
  bool keep_alive = false;  // what Beast's keep_alive() says
};

// `bytes` starts with a request head that scan_request_head screened as kComplete with length
// `head_length`, and holds whatever has arrived after it. Accepts only: GET, HEAD, POST or
// DELETE, a target of the bytes Beast accepts, HTTP/1.1 or HTTP/1.0; at most a few fields of
// token names; no Transfer-Encoding, Expect, Upgrade or Proxy-Connection; at most one
// Content-Length of plain digits, below `max_body_bytes`, its body wholly in `bytes`; at most
// one Connection field, `close` or `keep-alive`; the head shorter than `max_header_bytes`.
// True: `out` holds the request (every field set) and `result` what to consume and keep-alive.
// False: declined; `out` and `result` untouched.
bool parse_common_request(std::string_view bytes, size_t head_length, size_t max_header_bytes,
                          uint64_t max_body_bytes, Http1Request& out, FastParse& result);

}  // namespace ratelimit::server
