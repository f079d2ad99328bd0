// wire_writer.h — writing an answer's text (an HTTP/1.1 head, a field value, a JSON body) into
// a std::string with plain pointer stores: size it once, write every piece, trim it once.
//
// Why: an answer is ~15 small pieces (literals, integers, names). Appended one by one, each
// piece pays a capacity check, a length update and usually a call (std::to_chars followed by
// std::string::append cost ~175 instructions per integer); written through a pointer into room
// reserved up front, a piece costs little more than its bytes (issue 34).
// How: an emitter, a generic lambda taking `auto& w`, runs twice (append_with): over a Measure,
// which adds up an upper bound of every piece, then over a Writer, into that many bytes; the
// string is then cut to what was written.
// Invariants: a Writer member writes at most what the Measure member of the same name counts,
// and both passes run the same emitter code, so a write never passes the room reserved for it;
// the bytes are those of appending the same pieces one by one (write_int == std::to_chars).
// Thread-safety: pure functions and stateless types.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ratelimit::wire {

// The longest decimal integer: "-9223372036854775808" (int64), "18446744073709551615" (uint64).
inline constexpr size_t kMaxIntChars = 20;

// Decimal digits of v (1 for 0).
inline int decimal_digits(uint64_t v) {
  static constexpr uint64_t kPow10[20] = {1ull,
                                          10ull,
                                          100ull,
                                          1000ull,
                                          10000ull,
                                          100000ull,
                                          1000000ull,
                                          10000000ull,
                                          100000000ull,
                                          1000000000ull,
                                          10000000000ull,
                                          100000000000ull,
                                          1000000000000ull,
                                          10000000000000ull,
                                          100000000000000ull,
                                          1000000000000000ull,
                                          10000000000000000ull,
                                          100000000000000000ull,
                                          1000000000000000000ull,
                                          10000000000000000000ull};
  // v | 1 has v's digit count (a power of ten minus one is odd) and makes 0 count as 1 digit.
  // t = floor(bit_width * log10(2)) (1233 / 4096 ~ log10 2) is the digit count or one less.
  const uint64_t u = v | 1;
  const auto t = static_cast<int>((static_cast<unsigned>(std::bit_width(u)) * 1233u) >> 12);
  return t + (u >= kPow10[t] ? 1 : 0);
}

// Writes v in decimal at p (exactly decimal_digits(v) chars); returns the end. From the right,
// four digits per 64-bit division (the other divisions are 32-bit), two digits per store.
inline char* write_uint(char* p, uint64_t v) {
  static constexpr char kPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  char* const end = p + decimal_digits(v);
  char* q = end;
  while (v >= 10000) {
    const auto four = static_cast<uint32_t>(v % 10000);
    v /= 10000;
    q -= 4;
    std::memcpy(q, kPairs + (four / 100) * 2, 2);
    std::memcpy(q + 2, kPairs + (four % 100) * 2, 2);
  }
  auto rest = static_cast<uint32_t>(v);  // < 10000
  while (rest >= 100) {  // once at most
    q -= 2;
    std::memcpy(q, kPairs + (rest % 100) * 2, 2);
    rest /= 100;
  }
  if (rest >= 10) {
    std::memcpy(q - 2, kPairs + rest * 2, 2);
  } else {
    q[-1] = static_cast<char>('0' + rest);
  }
  return end;
}

// Writes v in decimal ('-' first when negative, INT64_MIN included); returns the end.
inline char* write_int(char* p, int64_t v) {
  if (v >= 0) return write_uint(p, static_cast<uint64_t>(v));
  *p++ = '-';
  return write_uint(p, 0 - static_cast<uint64_t>(v));  // modulo 2^64: INT64_MIN's magnitude too
}

// The first pass: an upper bound of the bytes each piece takes.
struct Measure {
  size_t n = 0;
  void lit(std::string_view s) { n += s.size(); }
  void ch(char) { n += 1; }
  void num(int64_t) { n += kMaxIntChars; }
  void num(uint64_t) { n += kMaxIntChars; }
};

// The second pass: the pieces themselves, at p.
struct Writer {
  explicit Writer(char* at) : p(at) {}
  char* p;
  void lit(std::string_view s) {
    if (s.empty()) return;  // a default string_view's data() is null: no memcpy from it
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  }
  void ch(char c) { *p++ = c; }
  void num(int64_t v) { p = write_int(p, v); }
  void num(uint64_t v) { p = write_uint(p, v); }
};

// Appends to `out` what `emit` writes: emit(M&) bounds it, emit(W&) writes it. M and W may add
// members of their own (the HTTP string encodings do) under the invariant at the top.
template <class M = Measure, class W = Writer, class Emit>
void append_with(std::string& out, Emit&& emit) {
  M m;
  emit(m);
  const size_t base = out.size();
  out.resize(base + m.n);  // within the capacity a reused string kept: no allocation
  W w(out.data() + base);
  emit(w);
  out.resize(static_cast<size_t>(w.p - out.data()));
}

// Appends v in decimal to `out` (the bytes of std::to_chars).
inline void append_int(std::string& out, int64_t v) {
  append_with(out, [v](auto& w) { w.num(v); });
}

}  // namespace ratelimit::wire
