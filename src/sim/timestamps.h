// timestamps.h — how ratelimit-sim turns times into integer microseconds and back.
//
// Why one place: every request time the simulator feeds to the algorithms is an integer number
// of microseconds (the library's unit), and the conversion must be defined once so that the
// built-in patterns, trace files and the tests agree on every boundary (is 3.9 + 0.1 exactly
// 4.0 s? — yes: 4000000 µs).
// Rules:
//   - A time computed as a double number of seconds (the built-in patterns) becomes
//     llround(seconds * 1e6): the double product, rounded to the nearest µs, halves away from 0.
//   - A time written as decimal text ("12.3456789") is read exactly, digit by digit, and
//     rounded the same way (to the nearest µs, halves up), so no binary rounding creeps in.
//   - Valid times are 0 ... kMaxTimestampUs (the end of year 9999 UTC); anything else is an
//     error value with a message naming the text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ratelimit/clock.h"
#include "ratelimit/status.h"

namespace ratelimit::sim {

// 9999-12-31T23:59:59.999999Z in µs since the Unix epoch.
inline constexpr int64_t kMaxTimestampUs = 253'402'300'799'999'999;

// llround(seconds * 1e6). Precondition: 0 <= seconds * 1e6 <= kMaxTimestampUs (callers check
// with seconds_in_range first).
int64_t seconds_to_us(double seconds);
bool seconds_in_range(double seconds);

// "12", "12.5", ".25", "1700000000.123456789" (seconds since an arbitrary origin, usually
// the Unix epoch). No sign, no exponent.
Result<int64_t> parse_decimal_seconds(std::string_view text);

// A decimal ("1714564800123", "0.250") times 10^shift, rounded to the nearest integer (halves
// up): shift 6 reads seconds as µs, 3 milliseconds, 0 microseconds, -3 nanoseconds. The result
// must not exceed kMaxTimestampUs. Errors quote the text and `expected`.
Result<int64_t> parse_decimal_scaled(std::string_view text, int shift, const char* expected);

// RFC 3339: "2024-05-01T12:00:00Z", "2024-05-01T14:00:00.250+02:00" ('t', 'z' and a space
// for 'T' accepted). Returns µs since the Unix epoch.
Result<int64_t> parse_rfc3339(std::string_view text);

// The bracketed time of the common/combined log format: "10/Oct/2000:13:55:36 -0700".
Result<int64_t> parse_clf_time(std::string_view text);

// Either of the two forms a CSV trace allows: RFC 3339 if the text contains '-' after
// its first digits ("2024-..."), decimal seconds otherwise.
Result<int64_t> parse_trace_timestamp(std::string_view text);

// The resolution of a stream of timestamps: the largest of 1 s, 100 ms, 10 ms, ... 1 µs that
// divides every time added (1 s before any). A one-second access log gives 1 s, $msec 1 ms
// (or 10 ms by chance on a handful of lines — the figure is what the data shows).
class TimeResolution {
 public:
  void add(int64_t t_us) {
    while (resolution_us_ > 1 && t_us % resolution_us_ != 0) resolution_us_ /= 10;
  }
  int64_t resolution_us() const { return resolution_us_; }

 private:
  int64_t resolution_us_ = 1'000'000;
};

// `text` as it may appear in an error message: at most `max_chars` characters (then "..."),
// bytes outside printable ASCII as \xNN, so a binary file never floods a terminal.
std::string printable(std::string_view text, size_t max_chars = 60);

// µs as seconds with no trailing zeros: 5100000 -> "5.1", 30000000 -> "30", 1 -> "0.000001".
std::string format_seconds(int64_t us);

// A duration for people: "1s", "2s", "500ms", "1.5s", "250us".
std::string format_duration(Micros d);

// µs since the Unix epoch as RFC 3339 UTC with the fraction only when non-zero.
std::string format_rfc3339(int64_t us);

}  // namespace ratelimit::sim
