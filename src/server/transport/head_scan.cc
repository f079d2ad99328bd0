// head_scan.cc — the request head screening (see head_scan.h).
#include "head_scan.h"

#include <bit>
#include <cstring>

namespace ratelimit::server {
namespace {

// The bytes of `x` below 0x20 (CR, LF, HTAB, NUL, another control) or equal to 0x7f — the
// only bytes the scan acts on — as the high bit of each (Bit Twiddling Hacks, "hasless"; 0x7f
// as a zero byte of x ^ 0x7f..). Zero exactly when there is none; the lowest bit set is always
// the first such byte (a borrow only runs upwards from one), higher bits may be spurious.
uint64_t control_bytes(uint64_t x) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  const uint64_t del = x ^ (0x7f * kOnes);
  return (((x - 0x20 * kOnes) & ~x) | ((del - kOnes) & ~del)) & kHigh;
}

}  // namespace

HeadScan scan_request_head(std::string_view bytes) {
  HeadScan r;
  const size_t n = bytes.size();
  for (size_t i = 0; i < n; ++i) {
    // Printable runs (most of a head) are passed 8 bytes at a time, up to the first byte the
    // loop must judge (little-endian: the word's first byte is its lowest); that byte is
    // judged below as before.
    for (uint64_t word = 0; i + 8 <= n; i += 8) {
      std::memcpy(&word, bytes.data() + i, 8);
      if (const uint64_t found = control_bytes(word)) {
        if constexpr (std::endian::native == std::endian::little) i += static_cast<size_t>(std::countr_zero(found) / 8);
        break;
      }
    }
    if (i == n) break;
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
