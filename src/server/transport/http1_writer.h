// http1_writer.h — serialising an http::Response as HTTP/1.1 bytes into a reused buffer.
//
// Why by hand: a decision answer is a status line, a Date, a few rate-limit fields and a small
// JSON body; writing them straight into one buffer the connection reuses costs no allocation
// per request and lets the connection send head and body in one write.
// What it does not know: which API produced the response, or the socket it goes to.
// Thread-safety: pure functions (the Date cache is per thread).
#pragma once

#include <string>
#include <string_view>

#include "ratelimit/http.h"

namespace ratelimit::server {

// How the answer is framed on this connection.
struct Http1Framing {
  unsigned version = 11;   // of the request: 10 answers HTTP/1.0
  bool keep_alive = true;  // false: "Connection: close" (the connection closes after it)
  bool head_only = false;  // a HEAD request: the head, Content-Length of the body, no body
};

// Replaces `out` with the status line, Date, `response.fields` in order, Content-Type,
// Content-Length, the Connection field the framing needs, and the body.
void write_http1_response(const http::Response& response, const Http1Framing& framing, std::string& out);

// The "Date" field's value for now (RFC 9110 IMF-fixdate), recomputed at most once per second
// per thread.
std::string_view http_date();

}  // namespace ratelimit::server
