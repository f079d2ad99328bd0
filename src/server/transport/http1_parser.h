// http1_parser.h — HTTP/1.1 request framing for ratelimitd: Beast's parser with the rules it
// leaves lenient made strict, writing into per-connection buffers that are reused.
//
// Why strict: a request a proxy in front could frame differently (request smuggling) is
// refused, never guessed at — at most one Transfer-Encoding field, whose only coding is
// `chunked`, never beside Content-Length, never in HTTP/1.0; chunk extensions and trailer fields
// bounded like the header (limits.max_header_bytes), trailer fields otherwise ignored (an
// X-Forwarded-For in a trailer must not pick the key). The head is screened before this parser
// sees it (head_scan.h).
// What it does not know: any API. Every header field goes into HeaderFields for the handlers;
// only the fields that frame the message (Transfer-Encoding, Content-Length, Expect) are read.
// Thread-safety: one parser per connection, used by the connection's thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <boost/beast/http/basic_parser.hpp>

#include "handler.h"

namespace ratelimit::server {

// One request as parsed. Reused across the requests of a connection (clear() keeps capacity).
struct Http1Request {
  Method method = Method::kOther;
  unsigned version = 11;
  std::string target;
  std::string body;
  HeaderFields headers;
  bool expect_continue = false;
  // Framing (RFC 9112 §6): the Transfer-Encoding fields seen, and whether Content-Length was.
  unsigned transfer_encodings = 0;
  std::string transfer_encoding;
  bool has_content_length = false;
  // Why the parser refused the request, when the reason is more precise than Beast's error
  // code (a static string).
  std::string_view refusal;

  void clear();
};

class Http1Parser final : public boost::beast::http::basic_parser<true> {
 public:
  // `max_header_bytes` also bounds chunk extensions and trailer fields.
  Http1Parser(Http1Request& request, size_t max_header_bytes)
      : req_(request), max_header_bytes_(max_header_bytes) {}

 private:
  using error_code = boost::system::error_code;
  using string_view = boost::beast::string_view;

  void on_request_impl(boost::beast::http::verb method, string_view, string_view target, int version,
                       error_code&) override;
  void on_response_impl(int, string_view, int, error_code& ec) override;
  void on_field_impl(boost::beast::http::field f, string_view name, string_view value,
                     error_code& ec) override;
  void on_header_impl(error_code& ec) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) override;
  size_t on_body_impl(string_view body, error_code&) override;
  void on_chunk_header_impl(std::uint64_t, string_view extensions, error_code& ec) override;
  size_t on_chunk_body_impl(std::uint64_t, string_view body, error_code&) override;
  void on_finish_impl(error_code&) override {}

  Http1Request& req_;
  size_t max_header_bytes_;
  bool header_done_ = false;
  size_t trailer_bytes_ = 0, extension_bytes_ = 0;
};

}  // namespace ratelimit::server
