// http1_fast.cc — the fast parse of the common request (see http1_fast.h). Each rule below is
// Beast 1.81's (boost/beast/http/impl/basic_parser.ipp, detail/basic_parser.ipp), narrowed:
// where Beast would do more than one thing, the input is declined.
#include "http1_fast.h"

#include <array>
#include <span>

#include <boost/beast/core/string.hpp>

#include "char_class.h"

namespace ratelimit::server {
namespace {

// Enough for the fields real clients send to this API; a longer head goes to Beast.
constexpr size_t kMaxFields = 24;

enum Class : uint8_t {
  kTchar = 1,   // a token character (RFC 9110 §5.6.2): a field name's, Beast's parse_field table
  kTarget = 2,  // a byte Beast accepts in a request target (is_pathchar): 0x21-0x7e, 0x80-0xff
  kValue = 4,   // a byte of a field value up to its CR: not a control other than HTAB, not DEL
};

constexpr std::array<uint8_t, 256> make_classes() {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c) {
    const bool tchar = text::is_tchar(static_cast<unsigned char>(c));
    t[c] = static_cast<uint8_t>((tchar ? kTchar : 0) | ((c > 0x20 && c != 0x7f) ? kTarget : 0) |
                                ((c >= 0x20 && c != 0x7f) || c == '\t' ? kValue : 0));
  }
  return t;
}
constexpr std::array<uint8_t, 256> kClasses = make_classes();

bool is(uint8_t cls, char c) { return (kClasses[static_cast<unsigned char>(c)] & cls) != 0; }

// Whether the field name `name` (token characters only) is `lower` (lower-case letters and '-')
// in any case, as Beast's iequals. OR 0x20 is exact here: a token character that becomes a
// lower-case letter is that letter in either case, and one that becomes '-' (0x2d) is '-'
// (0x0d, the only other, is no token character).
bool name_is(std::string_view name, std::string_view lower) {
  if (name.size() != lower.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if ((name[i] | 0x20) != lower[i]) return false;
  }
  return true;
}

// A Connection value is compared as Beast compares it (its own iequals).
bool value_is(std::string_view value, std::string_view lower) {
  return boost::beast::iequals(boost::beast::string_view(value.data(), value.size()),
                               boost::beast::string_view(lower.data(), lower.size()));
}

bool is_ows(char c) { return c == ' ' || c == '\t'; }

}  // namespace

bool parse_common_request(std::string_view bytes, size_t head_length, size_t max_header_bytes,
                          uint64_t max_body_bytes, Http1Request& out, FastParse& result) {
  if (head_length < 4 || head_length > bytes.size() || head_length >= max_header_bytes) return false;
  const char* const h = bytes.data();
  const size_t end = head_length - 2;  // the final CRLF: the field lines end before it
  size_t i = 0;

  // request-line = method SP request-target SP HTTP-version CRLF
  Method method;
  if (bytes.starts_with("GET ")) {
    method = Method::kGet, i = 4;
  } else if (bytes.starts_with("POST ")) {
    method = Method::kPost, i = 5;
  } else if (bytes.starts_with("HEAD ")) {
    method = Method::kHead, i = 5;
  } else if (bytes.starts_with("DELETE ")) {
    method = Method::kDelete, i = 7;
  } else {
    return false;
  }
  const size_t target_at = i;
  while (i < end && is(kTarget, h[i])) ++i;
  if (i == target_at || i + 11 > end || h[i] != ' ') return false;
  const size_t target_len = i - target_at;
  const std::string_view version = bytes.substr(i + 1, 10);
  unsigned http_version;
  if (version == "HTTP/1.1\r\n") {
    http_version = 11;
  } else if (version == "HTTP/1.0\r\n") {
    http_version = 10;
  } else {
    return false;
  }
  i += 11;
  const size_t block_at = i;  // the field lines: their offsets below are from here

  // header-field = field-name ":" OWS field-value OWS CRLF; Beast trims SP and HTAB both ends.
  std::array<HeaderFields::Field, kMaxFields> fields;
  size_t n = 0;
  bool has_length = false, has_connection = false, close = false, keep_alive_token = false;
  uint64_t length = 0;
  while (i < end) {
    if (n == kMaxFields) return false;
    const size_t name_at = i;
    while (i < end && is(kTchar, h[i])) ++i;
    if (i == name_at || i == end || h[i] != ':') return false;
    const std::string_view name = bytes.substr(name_at, i - name_at);
    ++i;
    while (i < end && is_ows(h[i])) ++i;
    const size_t value_at = i;
    while (i < end && is(kValue, h[i])) ++i;
    // The line must end in CRLF, not be folded (the screen refuses obs-fold; declined anyway).
    if (i >= end || h[i] != '\r' || h[i + 1] != '\n' || is_ows(h[i + 2])) return false;
    size_t value_end = i;
    while (value_end > value_at && is_ows(h[value_end - 1])) --value_end;
    const std::string_view value = bytes.substr(value_at, value_end - value_at);
    i += 2;

    // The fields that frame the message or the connection (Beast's do_field, Http1Parser's
    // on_field_impl): only the plain forms are taken.
    switch (name.size()) {
      case 6:  // Expect: 100-continue needs an interim answer
        if (name_is(name, "expect")) return false;
        break;
      case 7:
        if (name_is(name, "upgrade")) return false;
        break;
      case 10:
        if (name_is(name, "connection")) {
          if (has_connection) return false;
          has_connection = true;
          if (value_is(value, "close")) {
            close = true;
          } else if (value_is(value, "keep-alive")) {
            keep_alive_token = true;
          } else {
            return false;
          }
        }
        break;
      case 14:
        if (name_is(name, "content-length")) {
          if (has_length || value.empty() || value.size() > 19) return false;  // 19 digits fit 64 bits
          has_length = true;
          for (const char c : value) {
            if (c < '0' || c > '9') return false;
            length = length * 10 + static_cast<uint64_t>(c - '0');
          }
        }
        break;
      case 16:
        if (name_is(name, "proxy-connection")) return false;
        break;
      case 17:
        if (name_is(name, "transfer-encoding")) return false;
        break;
      default:
        break;
    }
    fields[n++] = {static_cast<uint32_t>(name_at - block_at), static_cast<uint32_t>(name.size()),
                   static_cast<uint32_t>(value_at - block_at), static_cast<uint32_t>(value.size())};
  }
  if (i != end) return false;  // cannot happen: the screen ended the head with CRLF CRLF
  // Beast refuses a length above body_limit; one at the limit is declined too. The whole body
  // must have arrived (else Beast reads the rest, as before).
  if (has_length && (length >= max_body_bytes || length > bytes.size() - head_length)) return false;

  out.method = method;
  out.version = http_version;
  out.target.assign(h + target_at, target_len);
  out.body.assign(h + head_length, static_cast<size_t>(length));
  out.headers.assign(bytes.substr(block_at, end - block_at), std::span(fields.data(), n));
  out.expect_continue = false;
  out.transfer_encodings = 0;
  out.transfer_encoding.clear();
  out.has_content_length = has_length;
  out.refusal = {};
  result.consumed = head_length + static_cast<size_t>(length);
  // Beast: HTTP/1.1 persists unless `close` was given; HTTP/1.0 only with `keep-alive`.
  result.keep_alive = http_version == 11 ? !close : keep_alive_token;
  return true;
}

}  // namespace ratelimit::server
