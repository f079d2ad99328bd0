// timestamps.cc — parsing and formatting of request times (see timestamps.h for the rules).
#include "timestamps.h"

#include <array>
#include <cmath>
#include <cstdio>

namespace ratelimit::sim {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void civil_from_days(int64_t z, int64_t& y, int64_t& m, int64_t& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y = yoe + era * 400 + (m <= 2 ? 1 : 0);
}

int64_t days_in_month(int64_t y, int64_t m) {
  static constexpr std::array<int64_t, 12> kDays = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[static_cast<size_t>(m - 1)];
}

// Reads exactly `n` digits at text[pos...]; false if any is not a digit.
bool take_digits(std::string_view text, size_t& pos, size_t n, int64_t& out) {
  if (pos + n > text.size()) return false;
  out = 0;
  for (size_t i = 0; i < n; ++i) {
    const char c = text[pos + i];
    if (!is_digit(c)) return false;
    out = out * 10 + (c - '0');
  }
  pos += n;
  return true;
}

bool take_char(std::string_view text, size_t& pos, char c) {
  if (pos < text.size() && text[pos] == c) {
    ++pos;
    return true;
  }
  return false;
}

// Fraction digits (after the '.') to µs, rounded to nearest, halves up. Returns false if there
// are no digits. `carry` becomes 1 when rounding reaches a whole second.
bool take_fraction(std::string_view text, size_t& pos, int64_t& micros) {
  const size_t start = pos;
  micros = 0;
  int digits = 0;
  bool round_up = false;
  while (pos < text.size() && is_digit(text[pos])) {
    const int64_t v = text[pos] - '0';
    if (digits < 6) micros = micros * 10 + v;
    else if (digits == 6) round_up = v >= 5;
    ++digits;
    ++pos;
  }
  if (pos == start) return false;
  for (int i = digits; i < 6; ++i) micros *= 10;
  if (round_up) ++micros;  // may reach 1000000: the caller adds it to the seconds
  return true;
}

Status time_error(std::string_view text, const char* expected) {
  return Status::invalid_argument("invalid time '" + printable(text) + "' (expected " +
                                  expected + ")");
}

Result<int64_t> civil_to_us(std::string_view text, const char* expected, int64_t y, int64_t mo,
                            int64_t d, int64_t h, int64_t mi, int64_t s, int64_t micros,
                            int64_t offset_s) {
  if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 ||
      s > 60) {
    return time_error(text, expected);
  }
  const int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - offset_s;
  const int64_t us = secs * 1'000'000 + micros;
  if (us < 0 || us > kMaxTimestampUs) {
    return Status::invalid_argument("time '" + printable(text) +
                                    "' is outside 1970-01-01 ... 9999-12-31 UTC");
  }
  return us;
}

}  // namespace

bool seconds_in_range(double seconds) {
  const double us = seconds * 1e6;
  return std::isfinite(us) && us >= 0 && us <= static_cast<double>(kMaxTimestampUs);
}

int64_t seconds_to_us(double seconds) { return std::llround(seconds * 1e6); }

Result<int64_t> parse_decimal_scaled(std::string_view text, int shift, const char* expected) {
  size_t pos = 0;
  while (pos < text.size() && is_digit(text[pos])) ++pos;
  const std::string_view int_part = text.substr(0, pos);
  std::string_view frac_part;
  if (take_char(text, pos, '.')) {
    const size_t start = pos;
    while (pos < text.size() && is_digit(text[pos])) ++pos;
    frac_part = text.substr(start, pos - start);
  }
  if ((int_part.empty() && frac_part.empty()) || pos != text.size()) {
    return time_error(text, expected);
  }
  // The digits of int_part and frac_part with the point moved `shift` places right: the
  // first int_part.size() + shift digits are the integer, the next one rounds it.
  auto digit = [&](int64_t k) -> int64_t {
    const auto n = static_cast<int64_t>(int_part.size());
    if (k < n) return int_part[static_cast<size_t>(k)] - '0';
    if (k - n < static_cast<int64_t>(frac_part.size())) {
      return frac_part[static_cast<size_t>(k - n)] - '0';
    }
    return 0;
  };
  const int64_t whole_digits = static_cast<int64_t>(int_part.size()) + shift;
  int64_t v = 0;
  for (int64_t k = 0; k < whole_digits; ++k) {
    const int64_t d = digit(k);
    if (v > (kMaxTimestampUs - d) / 10) {
      return Status::invalid_argument("time '" + printable(text) + "' is too large");
    }
    v = v * 10 + d;
  }
  if (whole_digits >= 0 && digit(whole_digits) >= 5) ++v;
  if (v > kMaxTimestampUs) {
    return Status::invalid_argument("time '" + printable(text) + "' is too large");
  }
  return v;
}

Result<int64_t> parse_decimal_seconds(std::string_view text) {
  return parse_decimal_scaled(text, 6, "seconds as a decimal such as 12.5, or RFC 3339");
}

Result<int64_t> parse_rfc3339(std::string_view text) {
  constexpr const char* kExpected = "RFC 3339 such as 2024-05-01T12:00:00.250Z";
  size_t pos = 0;
  int64_t y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0, micros = 0, oh = 0, om = 0;
  if (!take_digits(text, pos, 4, y) || !take_char(text, pos, '-') ||
      !take_digits(text, pos, 2, mo) || !take_char(text, pos, '-') ||
      !take_digits(text, pos, 2, d)) {
    return time_error(text, kExpected);
  }
  if (!(take_char(text, pos, 'T') || take_char(text, pos, 't') || take_char(text, pos, ' ')) ||
      !take_digits(text, pos, 2, h) || !take_char(text, pos, ':') ||
      !take_digits(text, pos, 2, mi) || !take_char(text, pos, ':') ||
      !take_digits(text, pos, 2, s)) {
    return time_error(text, kExpected);
  }
  if (take_char(text, pos, '.') && !take_fraction(text, pos, micros)) {
    return time_error(text, kExpected);
  }
  int64_t offset_s = 0;
  if (take_char(text, pos, 'Z') || take_char(text, pos, 'z')) {
    offset_s = 0;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int64_t sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    if (!take_digits(text, pos, 2, oh) || !take_char(text, pos, ':') ||
        !take_digits(text, pos, 2, om) || oh > 23 || om > 59) {
      return time_error(text, kExpected);
    }
    offset_s = sign * (oh * 3600 + om * 60);
  } else {
    return time_error(text, kExpected);
  }
  if (pos != text.size()) return time_error(text, kExpected);
  return civil_to_us(text, kExpected, y, mo, d, h, mi, s, micros, offset_s);
}

Result<int64_t> parse_clf_time(std::string_view text) {
  constexpr const char* kExpected = "a log time such as 10/Oct/2000:13:55:36 -0700";
  static constexpr std::array<std::string_view, 12> kMonths = {
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  size_t pos = 0;
  int64_t y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0, oh = 0, om = 0;
  if (!take_digits(text, pos, 2, d) || !take_char(text, pos, '/') || pos + 3 > text.size()) {
    return time_error(text, kExpected);
  }
  const std::string_view month = text.substr(pos, 3);
  for (size_t i = 0; i < kMonths.size(); ++i) {
    if (month == kMonths[i]) mo = static_cast<int64_t>(i) + 1;
  }
  pos += 3;
  if (mo == 0 || !take_char(text, pos, '/') || !take_digits(text, pos, 4, y) ||
      !take_char(text, pos, ':') || !take_digits(text, pos, 2, h) ||
      !take_char(text, pos, ':') || !take_digits(text, pos, 2, mi) ||
      !take_char(text, pos, ':') || !take_digits(text, pos, 2, s) ||
      !take_char(text, pos, ' ') || pos >= text.size() ||
      (text[pos] != '+' && text[pos] != '-')) {
    return time_error(text, kExpected);
  }
  const int64_t sign = text[pos] == '-' ? -1 : 1;
  ++pos;
  if (!take_digits(text, pos, 2, oh) || !take_digits(text, pos, 2, om) || oh > 23 || om > 59 ||
      pos != text.size()) {
    return time_error(text, kExpected);
  }
  return civil_to_us(text, kExpected, y, mo, d, h, mi, s, 0, sign * (oh * 3600 + om * 60));
}

Result<int64_t> parse_trace_timestamp(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size() && is_digit(text[pos])) ++pos;
  if (pos > 0 && pos < text.size() && text[pos] == '-') return parse_rfc3339(text);
  return parse_decimal_seconds(text);
}

std::string printable(std::string_view text, size_t max_chars) {
  std::string out;
  size_t shown = 0;
  for (char c : text) {
    if (shown == max_chars) return out + "...";
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(u));
      out += buf;
    }
    ++shown;
  }
  return out;
}

std::string format_seconds(int64_t us) {
  const bool neg = us < 0;
  const uint64_t a = neg ? static_cast<uint64_t>(-(us + 1)) + 1 : static_cast<uint64_t>(us);
  std::string out = (neg ? "-" : "") + std::to_string(a / 1'000'000);
  uint64_t frac = a % 1'000'000;
  if (frac != 0) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%06llu", static_cast<unsigned long long>(frac));
    std::string f(buf);
    while (!f.empty() && f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out;
}

std::string format_duration(Micros d) {
  const int64_t us = d.count();
  if (us % 1'000'000 == 0) return std::to_string(us / 1'000'000) + "s";
  if (us >= 1'000'000) return format_seconds(us) + "s";
  if (us % 1'000 == 0) return std::to_string(us / 1'000) + "ms";
  return std::to_string(us) + "us";
}

std::string format_rfc3339(int64_t us) {
  const int64_t secs = us >= 0 ? us / 1'000'000 : (us - 999'999) / 1'000'000;
  const int64_t frac = us - secs * 1'000'000;
  const int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
  const int64_t rem = secs - days * 86400;
  int64_t y = 0, m = 0, d = 0;
  civil_from_days(days, y, m, d);
  char buf[160];  // room for any int64 fields, so the compiler can prove no truncation
  std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld",
                static_cast<long long>(y), static_cast<long long>(m), static_cast<long long>(d),
                static_cast<long long>(rem / 3600), static_cast<long long>(rem / 60 % 60),
                static_cast<long long>(rem % 60));
  std::string out(buf);
  if (frac != 0) out += format_seconds(frac).substr(1);  // ".25"
  return out + "Z";
}

}  // namespace ratelimit::sim
