// encoding.cc — the wire encodings the HTTP answers are written in (see include/ratelimit/http.h):
// structured-field strings (RFC 8941), JSON strings, the field-name check (RFC 9110 tchar) and
// the reason phrases of the statuses ratelimitd answers.
// Why apart from render.cc: these are byte-level encodings used well beyond rendering a decision
// (the HTTP/1.1 writer, the JSON APIs, the logs, the Envoy JSON path, config errors); render.cc
// decides what an answer says.
// Invariants: pure functions, no I/O, no state; every output is valid for where it goes, whatever
// the input (an sf-string replaces a byte it cannot carry with '?', a JSON string replaces
// ill-formed UTF-8 with U+FFFD), so no input can break a header or a body.
#include <cstdint>

#include "ratelimit/http.h"

namespace ratelimit::http {

void append_sf_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c >= 0x20 && c <= 0x7e) {
      out.push_back(c);
    } else {
      out.push_back('?');
    }
  }
  out.push_back('"');
}

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c == '"' || c == '\\') {
        out.push_back('\\');
        out.push_back(static_cast<char>(c));
      } else if (c < 0x20 || c == 0x7f) {
        out += "\\u00";
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 0xf]);
      } else {
        out.push_back(static_cast<char>(c));
      }
      ++i;
      continue;
    }
    // Multi-byte UTF-8: copy a well-formed sequence, replace anything else.
    size_t len = 0;
    uint32_t cp = 0;
    if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1fu; }
    else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0fu; }
    else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07u; }
    bool ok = len > 0 && i + len <= s.size();
    for (size_t j = 1; ok && j < len; ++j) {
      const auto cc = static_cast<unsigned char>(s[i + j]);
      ok = (cc & 0xc0u) == 0x80u;
      cp = (cp << 6) | (cc & 0x3fu);
    }
    // Reject overlong forms, surrogates and code points above U+10FFFF.
    if (ok && ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
               (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))) {
      ok = false;
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xef\xbf\xbd";  // U+FFFD
      ++i;
    }
  }
  out.push_back('"');
}

bool is_field_name(std::string_view name) {
  if (name.empty()) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

std::string_view reason_phrase(unsigned status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

}  // namespace ratelimit::http
