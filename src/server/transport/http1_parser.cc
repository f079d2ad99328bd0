// http1_parser.cc — strict HTTP/1.1 request framing (see http1_parser.h).
#include "http1_parser.h"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>

namespace ratelimit::server {
namespace {

namespace bhttp = boost::beast::http;
using boost::beast::iequals;

boost::beast::string_view trim(boost::beast::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

}  // namespace

void Http1Request::clear() {
  method = Method::kOther;
  target.clear();
  body.clear();
  headers.clear();
  expect_continue = false;
  transfer_encodings = 0;
  transfer_encoding.clear();
  has_content_length = false;
  refusal = {};
}

void Http1Parser::on_request_impl(bhttp::verb method, string_view, string_view target, int version,
                                  error_code&) {
  switch (method) {
    case bhttp::verb::get: req_.method = Method::kGet; break;
    case bhttp::verb::head: req_.method = Method::kHead; break;
    case bhttp::verb::post: req_.method = Method::kPost; break;
    case bhttp::verb::delete_: req_.method = Method::kDelete; break;
    default: req_.method = Method::kOther; break;
  }
  req_.version = static_cast<unsigned>(version);
  req_.target.assign(target.data(), target.size());
}

void Http1Parser::on_response_impl(int, string_view, int, error_code& ec) {
  ec = bhttp::error::bad_method;  // never called for a request parser
}

void Http1Parser::on_field_impl(bhttp::field f, string_view name, string_view value, error_code& ec) {
  if (header_done_) {  // a trailer field
    trailer_bytes_ += name.size() + value.size() + 4;
    if (trailer_bytes_ > max_header_bytes_) {
      req_.refusal = "the trailer fields exceed limits.max_header_bytes";
      ec = bhttp::error::header_limit;
    }
    return;
  }
  if (f == bhttp::field::transfer_encoding) {
    ++req_.transfer_encodings;
    req_.transfer_encoding.assign(value.data(), value.size());
  } else if (f == bhttp::field::content_length) {
    req_.has_content_length = true;
  } else if (f == bhttp::field::expect && iequals(value, "100-continue")) {
    req_.expect_continue = true;
  }
  req_.headers.add(std::string_view(name.data(), name.size()), std::string_view(value.data(), value.size()));
}

void Http1Parser::on_header_impl(error_code& ec) {
  header_done_ = true;
  if (req_.transfer_encodings == 0) return;
  if (req_.transfer_encodings > 1) {
    req_.refusal = "Transfer-Encoding is given more than once";
  } else if (req_.has_content_length) {
    req_.refusal = "both Transfer-Encoding and Content-Length are given";
  } else if (req_.version < 11) {
    req_.refusal = "Transfer-Encoding in an HTTP/1.0 request";
  } else if (!iequals(trim(req_.transfer_encoding), "chunked")) {
    req_.refusal = "the only transfer coding accepted is 'chunked'";
  } else {
    return;
  }
  ec = bhttp::error::bad_transfer_encoding;
}

void Http1Parser::on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) {
  if (length) req_.body.reserve(static_cast<size_t>(*length));
}

size_t Http1Parser::on_body_impl(string_view body, error_code&) {
  req_.body.append(body.data(), body.size());
  return body.size();
}

void Http1Parser::on_chunk_header_impl(std::uint64_t, string_view extensions, error_code& ec) {
  extension_bytes_ += extensions.size();
  if (extension_bytes_ > max_header_bytes_) {
    req_.refusal = "the chunk extensions exceed limits.max_header_bytes";
    ec = bhttp::error::header_limit;
  }
}

size_t Http1Parser::on_chunk_body_impl(std::uint64_t, string_view body, error_code&) {
  req_.body.append(body.data(), body.size());
  return body.size();
}

}  // namespace ratelimit::server
