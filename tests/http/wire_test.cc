// wire_test.cc — the byte writers under every answer (src/common/wire_writer.h, the fast paths
// of src/http/encoding.cc), checked against the plain definitions they replaced: the integer
// writer against std::to_chars at every digit count and both ends of int64/uint64, and the
// sf-string and JSON string encoders against byte-by-byte references (the sf loop they had; the
// JSON rules restated from Unicode's table of well-formed sequences), with every byte value at
// every position of short strings (the 8-byte runs and the byte-wise tail both), every two-byte
// sequence, every multi-byte lead with every second byte, and random strings.
#include <gtest/gtest.h>

#include <charconv>
#include <cstring>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <string>
#include <vector>

#include "ratelimit/http.h"
#include "wire_writer.h"

namespace ratelimit {
namespace {

template <class T>
std::string to_chars_string(T v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  EXPECT_EQ(ec, std::errc());
  return std::string(buf, end);
}

// Writes v with the writer into a buffer of sentinels: the text, and no byte past its end.
template <class T>
std::string written(T v) {
  char buf[48];
  std::memset(buf, '#', sizeof buf);
  char* end = nullptr;
  if constexpr (std::is_signed_v<T>) {
    end = wire::write_int(buf, v);
  } else {
    end = wire::write_uint(buf, v);
  }
  const auto n = static_cast<size_t>(end - buf);
  EXPECT_LE(n, wire::kMaxIntChars);
  for (size_t i = n; i < sizeof buf; ++i) EXPECT_EQ(buf[i], '#') << "written past the end for " << v;
  return std::string(buf, n);
}

// Values of every digit count: 10^k - 1, 10^k, 10^k + 1 and random ones with k + 1 digits.
std::vector<uint64_t> magnitudes() {
  std::vector<uint64_t> out = {0, 1, 9, std::numeric_limits<uint64_t>::max(),
                               std::numeric_limits<uint64_t>::max() - 1};
  std::mt19937_64 rng(34);
  uint64_t p = 1;
  for (int k = 0; k <= 19; ++k, p *= 10) {  // p = 10^k (10^19 still fits)
    out.push_back(p - 1);
    out.push_back(p);
    out.push_back(p + 1);
    const uint64_t span = k < 19 ? p * 9 : std::numeric_limits<uint64_t>::max() - p;
    for (int i = 0; i < 200; ++i) out.push_back(p + rng() % span);
  }
  return out;
}

TEST(WireInt, EveryDigitCountMatchesToChars) {
  for (const uint64_t m : magnitudes()) {
    EXPECT_EQ(wire::decimal_digits(m), static_cast<int>(to_chars_string(m).size())) << m;
    EXPECT_EQ(written(m), to_chars_string(m));
    const auto s = static_cast<int64_t>(m);  // every bit pattern: both signs, all int64 digit counts
    EXPECT_EQ(written(s), to_chars_string(s));
    if (m <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      const int64_t neg = -static_cast<int64_t>(m);
      EXPECT_EQ(written(neg), to_chars_string(neg));
    }
  }
}

TEST(WireInt, Extremes) {
  EXPECT_EQ(written(int64_t{0}), "0");
  EXPECT_EQ(written(int64_t{-1}), "-1");
  EXPECT_EQ(written(std::numeric_limits<int64_t>::min()), "-9223372036854775808");
  EXPECT_EQ(written(std::numeric_limits<int64_t>::min() + 1), "-9223372036854775807");
  EXPECT_EQ(written(std::numeric_limits<int64_t>::max()), "9223372036854775807");
  EXPECT_EQ(written(std::numeric_limits<uint64_t>::max()), "18446744073709551615");
  std::string s = "x=";
  wire::append_int(s, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(s, "x=-9223372036854775808");  // appends, and the string is cut to what was written
}

// The references: the sf-string encoder as it was before the fast path (byte by byte), and the
// JSON one restated from the Unicode table below.
std::string reference_sf(std::string_view s) {
  std::string out = "\"";
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
  return out;
}

// The length of the well-formed UTF-8 sequence at s[i] by the Unicode table of well-formed byte
// sequences (Unicode 15, table 3-7), or 0: an independent statement of what encoding.cc's
// decoder accepts (no overlong form, no surrogate, nothing above U+10FFFF).
size_t well_formed_length(std::string_view s, size_t i) {
  struct Row {
    unsigned char lead_lo, lead_hi, second_lo, second_hi;
    size_t len;
  };
  static constexpr Row kRows[] = {{0xc2, 0xdf, 0x80, 0xbf, 2}, {0xe0, 0xe0, 0xa0, 0xbf, 3},
                                  {0xe1, 0xec, 0x80, 0xbf, 3}, {0xed, 0xed, 0x80, 0x9f, 3},
                                  {0xee, 0xef, 0x80, 0xbf, 3}, {0xf0, 0xf0, 0x90, 0xbf, 4},
                                  {0xf1, 0xf3, 0x80, 0xbf, 4}, {0xf4, 0xf4, 0x80, 0x8f, 4}};
  auto at = [&](size_t j) { return static_cast<unsigned char>(s[j]); };
  for (const Row& r : kRows) {
    if (at(i) < r.lead_lo || at(i) > r.lead_hi) continue;
    if (i + r.len > s.size() || at(i + 1) < r.second_lo || at(i + 1) > r.second_hi) return 0;
    for (size_t j = 2; j < r.len; ++j) {
      if (at(i + j) < 0x80 || at(i + j) > 0xbf) return 0;
    }
    return r.len;
  }
  return 0;
}

std::string reference_json(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += {'\\', static_cast<char>(c)};
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      out += {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
      ++i;
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (const size_t len = well_formed_length(s, i); len > 0) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xef\xbf\xbd";  // U+FFFD for the one byte that starts no well-formed sequence
      ++i;
    }
  }
  out.push_back('"');
  return out;
}

// Both encoders, appended after a prefix that must survive, against the reference.
void expect_encodings_match(const std::string& s) {
  std::string sf = "pre";
  http::append_sf_string(sf, s);
  ASSERT_EQ(sf, "pre" + reference_sf(s)) << "sf-string of a " << s.size() << "-byte input";
  std::string json = "pre";
  http::append_json_string(json, s);
  ASSERT_EQ(json, "pre" + reference_json(s)) << "JSON string of a " << s.size() << "-byte input";
}

TEST(WireStrings, EveryByteAtEveryPosition) {
  // Lengths up to 25: no 8-byte run, one, two and three, each with a byte-wise tail.
  for (size_t len = 0; len <= 25; ++len) {
    for (size_t pos = 0; pos < len; ++pos) {
      for (int b = 0; b < 256; ++b) {
        std::string s(len, 'a');
        s[pos] = static_cast<char>(b);
        expect_encodings_match(s);
      }
    }
  }
  expect_encodings_match("");
}

TEST(WireStrings, EveryTwoByteSequence) {
  // Every pair (UTF-8 leads and continuations, escapes side by side), at the start, across an
  // 8-byte boundary and in the tail.
  for (size_t pos : {0u, 7u, 15u}) {
    for (int a = 0; a < 256; ++a) {
      for (int b = 0; b < 256; ++b) {
        std::string s(18, 'z');
        s[pos] = static_cast<char>(a);
        s[pos + 1] = static_cast<char>(b);
        expect_encodings_match(s);
      }
    }
  }
}

TEST(WireStrings, EveryLeadWithEverySecondByte) {
  // 3- and 4-byte sequences: each lead 0xc0-0xff, every second byte, third and fourth bytes on
  // both sides of the continuation range (the overlong, surrogate and > U+10FFFF edges).
  for (int lead = 0xc0; lead <= 0xff; ++lead) {
    for (int second = 0; second < 256; ++second) {
      for (int third : {0x41, 0x7f, 0x80, 0xbf, 0xc0}) {
        for (int fourth : {0x41, 0x80, 0xbf, 0xc0}) {
          const char seq[] = {static_cast<char>(lead), static_cast<char>(second), static_cast<char>(third),
                              static_cast<char>(fourth)};
          expect_encodings_match("ab" + std::string(seq, 4) + "cdefghij");
        }
      }
    }
  }
}

TEST(WireStrings, RandomStrings) {
  std::mt19937_64 rng(3434);
  const std::string pieces[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                "\xc0\xaf", "\"", "\\", "\x7f", "\x01", "policy_name:1"};
  for (int n = 0; n < 20000; ++n) {
    std::string s;
    const size_t parts = rng() % 12;
    for (size_t i = 0; i < parts; ++i) {
      if (rng() % 3 == 0) {
        s += pieces[rng() % std::size(pieces)];
      } else {
        s.append(rng() % 12, static_cast<char>(0x20 + rng() % 95));
      }
      if (rng() % 5 == 0) s.push_back(static_cast<char>(rng() % 256));
    }
    expect_encodings_match(s);
  }
}

}  // namespace
}  // namespace ratelimit
