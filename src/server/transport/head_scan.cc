// head_scan.cc — the request head screening (see head_scan.h).
#include "head_scan.h"

namespace ratelimit::server {

HeadScan scan_request_head(std::string_view bytes) {
  HeadScan r;
  const size_t n = bytes.size();
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == '\r') {
      if (i + 1 == n) return r;  // need the next byte
      if (bytes[i + 1] != '\n') return {HeadScan::State::kMalformed, 0, "a CR not followed by LF"};
      if (i + 2 == n) return r;
      const char next = bytes[i + 2];
      if (next == '\r') {
        if (i + 3 == n) return r;
        if (bytes[i + 3] != '\n') return {HeadScan::State::kMalformed, 0, "a CR not followed by LF"};
        return {HeadScan::State::kComplete, i + 4, {}};
      }
      if (next == ' ' || next == '\t') {
        return {HeadScan::State::kMalformed, 0, "a folded header line (obs-fold)"};
      }
      ++i;  // past the LF
      continue;
    }
    if (c == '\n') return {HeadScan::State::kMalformed, 0, "a bare LF (lines must end with CRLF)"};
    if (c == 0) return {HeadScan::State::kMalformed, 0, "a NUL byte in the header"};
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      return {HeadScan::State::kMalformed, 0, "a control character in the header"};
    }
  }
  return r;
}

}  // namespace ratelimit::server
