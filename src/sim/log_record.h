// log_record.h — turning the named fields of one log line (an access-log format's fields, or
// the members of a JSON object) into a request: its time, its key and its cost.
//
// Why one place: nginx, Apache and JSON lines differ only in how fields are cut out of the
// line; which field is the time, how a key is built from `--key client,path`, what a missing
// header means — those rules are the same for all three and live here.
// Rules:
//   - Time: the finest field the line carries wins: Apache %{usec}t, then %{msec}t, nginx
//     $msec, $time_iso8601 (fractions allowed), %{sec}t, then $time_local / %t (whole
//     seconds, plus %{msec_frac}t or %{usec_frac}t when the format has one). JSON: the
//     member mapped to `time` (--json-fields time=PATH), else the first of time, timestamp,
//     ts, @timestamp, msec, time_iso8601, time_local, date; a number is in --time-unit
//     (seconds by default), a string is a decimal, RFC 3339 or a CLF time.
//   - --request-start subtracts the request's duration ($request_time, %D, %T, %{ms}T or a
//     JSON request_time in seconds): nginx logs a request when it ends, a limiter decides
//     when it arrives.
//   - Key: the named parts joined by one space. Derived names: `client` (the first address
//     of X-Forwarded-For when there is one, else remote_addr), `path` (request_uri or uri
//     without the query, else the path of $request), `method`, `header:Name` (the request
//     header, as nginx's http_name). Any other name is a field as it is. A part the line
//     lacks (a JSON member that is absent) reads as "-" and is counted.
//   - Cost: --cost-field NAME, a whole number 1 ... kMaxCost; 1 without it.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/status.h"

namespace ratelimit::sim {

// One request read from a line. `key` points into the line or into the parser's buffers and
// stays valid until the next parse call.
struct TraceRecord {
  int64_t t_us = 0;
  std::string_view key;
  int64_t cost = 1;
  // How long the request took, when FieldOptions::durations is set and the line says
  // ($request_time, %D, %T, a JSON request_time in seconds); else -1.
  int64_t duration_us = -1;
};

// A request's cost as text: a whole number 1 ... kMaxCost (validate_cost).
Result<int64_t> parse_cost(std::string_view text);

enum class TimeUnit : uint8_t { kSeconds, kMillis, kMicros, kNanos };
// "s", "ms", "us", "ns".
Result<TimeUnit> parse_time_unit(std::string_view text);

struct FieldOptions {
  std::vector<std::string> key = {"client"};  // --key
  std::optional<std::string> cost_field;      // --cost-field
  bool request_start = false;                 // --request-start
  bool durations = false;  // read each request's duration when the format has one (--concurrency)
  // --json-fields: a name the rules above use (time, remote_addr, ...) -> a JSON member path
  // ("client.ip": member ip of member client; a member whose own name holds the dot is
  // found first).
  std::vector<std::pair<std::string, std::string>> json_fields;
  TimeUnit json_time_unit = TimeUnit::kSeconds;  // --time-unit
};

// "client", "remote_addr,path", "header:X-Api-Key" -> the names. Error on an empty part.
Result<std::vector<std::string>> parse_key_list(std::string_view text);
// "time=ts,remote_addr=client.ip" -> pairs. Error on a part without '='.
Result<std::vector<std::pair<std::string, std::string>>> parse_json_fields(std::string_view text);

// The fields of the line being read, by name.
class FieldSource {
 public:
  virtual ~FieldSource() = default;
  // The field's text, or nullopt when the line has no such field.
  virtual std::optional<std::string_view> get(std::string_view name) = 0;
};

// Builds a TraceRecord from a FieldSource by the rules above. Not thread-safe.
class RecordBuilder {
 public:
  // `format_fields`: the fields every line of an access-log format has (then every name
  // --key, --cost-field and the time need is checked here, once), or nullptr for JSON, whose
  // lines may carry any member. Error names the flag and what the format offers.
  static Result<RecordBuilder> create(const FieldOptions& options,
                                      const std::vector<std::string>* format_fields);

  // Error (without a line number; the caller adds it) for a time, duration or cost that does
  // not parse, or a JSON line with no time member.
  Status build(FieldSource& fields, TraceRecord& out);

  // Requests so far with at least one key part missing (keyed "-" for that part).
  int64_t missing_key_parts() const { return missing_key_parts_; }
  // Which field gave the time (for the report): "$msec", "time_local", "JSON ts", ...
  const std::string& time_source() const { return time_source_; }

 private:
  enum class TimeKind : uint8_t { kUsec, kMsec, kSecDecimal, kIso8601, kSec, kClf, kAny };
  enum class DurationKind : uint8_t { kNone, kSecDecimal, kUs, kMs, kSec };
  Result<int64_t> read_time(FieldSource& fields);
  std::optional<std::string_view> key_part(FieldSource& fields, const std::string& name);

  FieldOptions options_;
  bool json_ = false;
  TimeKind time_kind_ = TimeKind::kAny;
  std::string time_field_;                  // access logs: the chosen field
  std::string frac_field_;                  // %{msec_frac}t or %{usec_frac}t, with %t
  int frac_shift_ = 0;                      // 3 for msec_frac, 0 for usec_frac
  DurationKind duration_kind_ = DurationKind::kNone;
  std::string duration_field_;
  std::string time_source_;
  std::string key_buf_;
  int64_t missing_key_parts_ = 0;
};

}  // namespace ratelimit::sim
