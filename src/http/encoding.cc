// encoding.cc — the wire encodings the HTTP answers are written in (see include/ratelimit/http.h):
// structured-field strings (RFC 8941), JSON strings, the field-name check (RFC 9110 tchar) and
// the reason phrases of the statuses ratelimitd answers.
// Why apart from render.cc: these are byte-level encodings used well beyond rendering a decision
// (the HTTP/1.1 writer, the JSON APIs, the logs, the Envoy JSON path, config errors); render.cc
// decides what an answer says.
// Both encodings write through a pointer into room sized once (encoding.h, wire_writer.h).
// Invariants: pure functions, no I/O, no state; every output is valid for where it goes, whatever
// the input (an sf-string replaces a byte it cannot carry with '?', a JSON string replaces
// ill-formed UTF-8 with U+FFFD), so no input can break a header or a body.
#include <array>
#include <cstdint>
#include <cstring>

#include "char_class.h"
#include "encoding.h"
#include "ratelimit/http.h"

namespace ratelimit::http {

namespace {

// The bytes both encodings copy as they are (text::is_json_plain). A table: one load per byte
// instead of four comparisons.
constexpr std::array<bool, 256> kPlain = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) t[static_cast<size_t>(c)] = text::is_json_plain(static_cast<unsigned char>(c));
  return t;
}();
constexpr bool plain(unsigned char c) { return kPlain[c]; }

// True when all 8 bytes of x are plain, tested at once (SWAR): no byte >= 0x80, none < 0x20
// (exact once no high bit is set), none == 0x7f, '"' or '\' (has_zero of x XOR that byte).
constexpr bool all_plain(uint64_t x) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  auto has_zero = [](uint64_t v) { return ((v - kOnes) & ~v & kHigh) != 0; };
  const bool below_space = ((x - kOnes * 0x20) & ~x & kHigh) != 0;
  return (x & kHigh) == 0 && !below_space && !has_zero(x ^ (kOnes * 0x7f)) &&
         !has_zero(x ^ (kOnes * '"')) && !has_zero(x ^ (kOnes * '\\'));
}

// The fast path of both encodings: copies the run of plain bytes from `from` to p, 8 bytes per
// test and store while 8 remain, then byte by byte; returns where the run stops (a byte that
// needs the slow path, or `end`). p and `from` move past the run.
inline const char* copy_plain(char*& p, const char* from, const char* end) {
  char* out = p;  // a local: stores through a char* could alias `p` itself
  while (end - from >= 8) {
    uint64_t x;
    std::memcpy(&x, from, 8);
    if (!all_plain(x)) break;
    std::memcpy(out, &x, 8);
    out += 8;
    from += 8;
  }
  while (from != end && plain(static_cast<unsigned char>(*from))) *out++ = *from++;
  p = out;
  return from;
}

}  // namespace

char* write_sf_string(char* p, std::string_view s) {
  const char* const end = s.data() + s.size();
  *p++ = '"';
  for (const char* i = copy_plain(p, s.data(), end); i != end; i = copy_plain(p, i + 1, end)) {
    if (*i == '"' || *i == '\\') {
      *p++ = '\\';
      *p++ = *i;
    } else {
      *p++ = '?';
    }
  }
  *p++ = '"';
  return p;
}

char* write_json_string(char* p, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  const char* const end = s.data() + s.size();
  *p++ = '"';
  const char* i = copy_plain(p, s.data(), end);
  while (i != end) {
    const auto c = static_cast<unsigned char>(*i);
    if (c < 0x80) {
      if (c == '"' || c == '\\') {
        *p++ = '\\';
        *p++ = static_cast<char>(c);
      } else {  // a control byte or DEL
        std::memcpy(p, "\\u00", 4);
        p[4] = kHex[c >> 4];
        p[5] = kHex[c & 0xf];
        p += 6;
      }
      i = copy_plain(p, i + 1, end);
      continue;
    }
    // Multi-byte UTF-8: copy a well-formed sequence, replace anything else.
    size_t len = 0;
    uint32_t cp = 0;
    if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1fu; }
    else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0fu; }
    else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07u; }
    bool ok = len > 0 && len <= static_cast<size_t>(end - i);
    for (size_t j = 1; ok && j < len; ++j) {
      const auto cc = static_cast<unsigned char>(i[j]);
      ok = (cc & 0xc0u) == 0x80u;
      cp = (cp << 6) | (cc & 0x3fu);
    }
    // Reject overlong forms, surrogates and code points above U+10FFFF.
    if (ok && ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
               (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))) {
      ok = false;
    }
    if (ok) {
      std::memcpy(p, i, len);
      p += len;
      i += len;
    } else {
      std::memcpy(p, "\xef\xbf\xbd", 3);  // U+FFFD
      p += 3;
      ++i;
    }
    i = copy_plain(p, i, end);
  }
  *p++ = '"';
  return p;
}

void append_sf_string(std::string& out, std::string_view s) {
  append(out, [s](auto& w) { w.sf(s); });
}

void append_json_string(std::string& out, std::string_view s) {
  append(out, [s](auto& w) { w.json(s); });
}

bool is_field_name(std::string_view name) {
  if (name.empty()) return false;
  for (const char c : name) {
    if (!text::is_tchar(static_cast<unsigned char>(c))) return false;
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
