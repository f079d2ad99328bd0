// log_record.cc — time, key and cost from named fields (see log_record.h for the rules).
#include "log_record.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "ratelimit/policy.h"
#include "timestamps.h"
#include "text.h"

namespace ratelimit::sim {
namespace {

constexpr const char* kJsonTimeNames[] = {"time",          "timestamp",  "ts",   "@timestamp",
                                          "msec",          "time_iso8601", "time_local", "date"};

using text::trim_ows;

bool looks_like_address(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
           c == '.' || c == ':';
  });
}

std::string_view strip_query(std::string_view uri) { return uri.substr(0, uri.find('?')); }

// "GET /a?b HTTP/1.1" -> token 0 "GET", token 1 "/a?b".
std::optional<std::string_view> request_token(std::string_view request, int n) {
  size_t pos = 0;
  for (int i = 0; i <= n; ++i) {
    while (pos < request.size() && request[pos] == ' ') ++pos;
    const size_t end = std::min(request.size(), request.find(' ', pos));
    if (pos >= end) return std::nullopt;
    if (i == n) return request.substr(pos, end - pos);
    pos = end;
  }
  return std::nullopt;
}

std::string header_field(std::string_view header) {
  std::string out = "http_";
  for (char c : header) {
    out += c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::string field_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

int unit_shift(TimeUnit u) {
  switch (u) {
    case TimeUnit::kSeconds: return 6;
    case TimeUnit::kMillis: return 3;
    case TimeUnit::kMicros: return 0;
    case TimeUnit::kNanos: return -3;
  }
  return 6;
}

// A JSON time: a number (or a string of digits) in `unit`, RFC 3339 or a CLF time.
Result<int64_t> any_time(std::string_view text, TimeUnit unit) {
  constexpr const char* kExpected = "a number of seconds (see --time-unit), RFC 3339 or a CLF time";
  if (text.empty()) return Status::invalid_argument("empty time");
  if (text.find('/') != std::string_view::npos) return parse_clf_time(text);
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits > 0 && digits < text.size() && text[digits] == '-') return parse_rfc3339(text);
  if (text.find_first_of("eE") != std::string_view::npos) {
    // A JSON number in exponent form ("1.7145648e9"): as a double, the only lossy case.
    char* end = nullptr;
    const std::string copy(text);
    const double v = std::strtod(copy.c_str(), &end);
    const double us = v * std::pow(10.0, unit_shift(unit));
    if (end != copy.c_str() + copy.size() || !std::isfinite(us) || us < 0 ||
        us > static_cast<double>(kMaxTimestampUs)) {
      return Status::invalid_argument("invalid time '" + printable(text) + "' (expected " +
                                      kExpected + ")");
    }
    return std::llround(us);
  }
  return parse_decimal_scaled(text, unit_shift(unit), kExpected);
}

// A whole number (no fraction) times 10^shift: %{usec}t, %{msec}t, %{sec}t, %D, %T.
Result<int64_t> whole(std::string_view text, int shift, const char* expected) {
  if (text.find('.') != std::string_view::npos) {
    return Status::invalid_argument("invalid time '" + printable(text) + "' (expected " + expected +
                                    ")");
  }
  return parse_decimal_scaled(text, shift, expected);
}

}  // namespace

Result<int64_t> parse_cost(std::string_view text) {
  int64_t v = 0;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || text.empty()) {
    return Status::invalid_argument("cost '" + printable(text) + "' is not a whole number");
  }
  if (auto s = validate_cost(v); !s.is_ok()) return s;
  return v;
}

Result<TimeUnit> parse_time_unit(std::string_view text) {
  if (text == "s") return TimeUnit::kSeconds;
  if (text == "ms") return TimeUnit::kMillis;
  if (text == "us") return TimeUnit::kMicros;
  if (text == "ns") return TimeUnit::kNanos;
  return Status::invalid_argument("--time-unit: expected s, ms, us or ns, got '" + printable(text) +
                                  "'");
}

Result<std::vector<std::string>> parse_key_list(std::string_view text) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    const size_t comma = std::min(text.size(), text.find(',', pos));
    const std::string_view part = trim_ows(text.substr(pos, comma - pos));
    if (part.empty()) {
      return Status::invalid_argument("--key: empty name in '" + printable(text) +
                                      "' (expected names such as client or client,path)");
    }
    out.emplace_back(part);
    if (comma == text.size()) break;
    pos = comma + 1;
  }
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> parse_json_fields(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t pos = 0;
  for (;;) {
    const size_t comma = std::min(text.size(), text.find(',', pos));
    const std::string_view part = trim_ows(text.substr(pos, comma - pos));
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == part.size()) {
      return Status::invalid_argument("--json-fields: expected NAME=MEMBER[,NAME=MEMBER...] such as "
                                      "time=ts,remote_addr=client.ip, got '" + printable(part) + "'");
    }
    out.emplace_back(std::string(trim_ows(part.substr(0, eq))), std::string(trim_ows(part.substr(eq + 1))));
    if (comma == text.size()) break;
    pos = comma + 1;
  }
  return out;
}

Result<RecordBuilder> RecordBuilder::create(const FieldOptions& options,
                                            const std::vector<std::string>* format_fields) {
  RecordBuilder b;
  b.options_ = options;
  if (b.options_.key.empty()) b.options_.key = {"client"};
  for (std::string& k : b.options_.key) {
    if (k.substr(0, 7) == "header:" || k.substr(0, 7) == "header.") k = header_field(k.substr(7));
  }
  b.json_ = format_fields == nullptr;
  if (b.json_) {
    b.time_kind_ = TimeKind::kAny;
    b.time_source_ = "JSON member";
    if (options.request_start || options.durations) {
      b.duration_kind_ = DurationKind::kSecDecimal;
      b.duration_field_ = "request_time";
    }
    return b;
  }
  const auto& names = *format_fields;
  auto has = [&](std::string_view n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  struct Choice {
    const char* field;
    TimeKind kind;
    const char* shown;
  };
  for (const Choice& c : {Choice{"apache_usec", TimeKind::kUsec, "%{usec}t"},
                          Choice{"apache_msec", TimeKind::kMsec, "%{msec}t"},
                          Choice{"msec", TimeKind::kSecDecimal, "$msec"},
                          Choice{"time_iso8601", TimeKind::kIso8601, "$time_iso8601"},
                          Choice{"apache_sec", TimeKind::kSec, "%{sec}t"},
                          Choice{"time_local", TimeKind::kClf, "$time_local / %t"}}) {
    if (has(c.field)) {
      b.time_field_ = c.field;
      b.time_kind_ = c.kind;
      b.time_source_ = c.shown;
      break;
    }
  }
  if (b.time_field_.empty()) {
    return Status::invalid_argument(
        "--log-format: the format has no time field (nginx: $msec, $time_iso8601 or "
        "$time_local; Apache: %{usec}t, %{msec}t or %t); its fields are " + field_list(names));
  }
  if (b.time_kind_ == TimeKind::kClf) {
    if (has("apache_usec_frac")) {
      b.frac_field_ = "apache_usec_frac";
      b.frac_shift_ = 0;
      b.time_source_ = "%t + %{usec_frac}t";
    } else if (has("apache_msec_frac")) {
      b.frac_field_ = "apache_msec_frac";
      b.frac_shift_ = 3;
      b.time_source_ = "%t + %{msec_frac}t";
    }
  }
  if (options.request_start || options.durations) {
    struct Dur {
      const char* field;
      DurationKind kind;
    };
    for (const Dur& d : {Dur{"apache_duration_us", DurationKind::kUs},
                         Dur{"request_time", DurationKind::kSecDecimal},
                         Dur{"apache_duration_ms", DurationKind::kMs},
                         Dur{"apache_duration_s", DurationKind::kSec}}) {
      if (has(d.field)) {
        b.duration_field_ = d.field;
        b.duration_kind_ = d.kind;
        break;
      }
    }
    if (b.duration_kind_ == DurationKind::kNone && options.request_start) {
      return Status::invalid_argument("--request-start needs the request's duration in the format "
                                      "($request_time, or Apache's %D or %T)");
    }
  }
  for (const std::string& k : b.options_.key) {
    bool ok = has(k);
    if (k == "client") ok = has("remote_addr") || has("http_x_forwarded_for");
    if (k == "path") ok = has("request_uri") || has("uri") || has("request");
    if (k == "method") ok = has("request_method") || has("request");
    if (!ok) {
      return Status::invalid_argument("--key " + k + ": the log format has no such field (its "
                                      "fields: " + field_list(names) +
                                      "; derived: client, path, method, header:NAME)");
    }
  }
  if (options.cost_field && !has(*options.cost_field)) {
    return Status::invalid_argument("--cost-field " + *options.cost_field +
                                    ": the log format has no such field (its fields: " +
                                    field_list(names) + ")");
  }
  return b;
}

std::optional<std::string_view> RecordBuilder::key_part(FieldSource& fields, const std::string& name) {
  if (name == "client") {
    if (auto xff = fields.get("http_x_forwarded_for")) {
      const std::string_view first = trim_ows(xff->substr(0, xff->find(',')));
      if (looks_like_address(first)) return first;
    }
    return fields.get("remote_addr");
  }
  if (name == "path") {
    if (auto u = fields.get("request_uri")) return strip_query(*u);
    if (auto u = fields.get("uri")) return strip_query(*u);
    if (auto r = fields.get("request")) {
      if (auto t = request_token(*r, 1)) return strip_query(*t);
    }
    return std::nullopt;
  }
  if (name == "method") {
    if (auto m = fields.get("request_method")) return m;
    if (auto r = fields.get("request")) return request_token(*r, 0);
    return std::nullopt;
  }
  return fields.get(name);
}

Result<int64_t> RecordBuilder::read_time(FieldSource& fields) {
  if (json_) {
    for (const char* name : kJsonTimeNames) {
      if (auto v = fields.get(name)) return any_time(*v, options_.json_time_unit);
      // With a mapping for time, only the mapped member counts.
      if (name == std::string_view("time") &&
          std::any_of(options_.json_fields.begin(), options_.json_fields.end(),
                      [](const auto& m) { return m.first == "time"; })) {
        break;
      }
    }
    return Status::invalid_argument(
        "no time member (looked for time, timestamp, ts, @timestamp, msec, time_iso8601, "
        "time_local, date; name yours with --json-fields time=MEMBER)");
  }
  const auto text = fields.get(time_field_).value_or(std::string_view{});
  switch (time_kind_) {
    case TimeKind::kUsec:
      return whole(text, 0, "%{usec}t: whole microseconds since the epoch");
    case TimeKind::kMsec:
      return whole(text, 3, "%{msec}t: whole milliseconds since the epoch");
    case TimeKind::kSecDecimal:
      return parse_decimal_scaled(text, 6, "$msec: seconds such as 1714564800.123");
    case TimeKind::kIso8601: return parse_rfc3339(text);
    case TimeKind::kSec:
      return whole(text, 6, "%{sec}t: whole seconds since the epoch");
    case TimeKind::kClf: {
      auto t = parse_clf_time(text);
      if (!t || frac_field_.empty()) return t;
      const auto frac_text = fields.get(frac_field_).value_or(std::string_view{});
      auto frac = parse_decimal_scaled(frac_text, frac_shift_, "a fraction of a second in digits");
      if (!frac) return frac.status();
      if (*frac >= 1'000'000) {
        return Status::invalid_argument("fraction '" + printable(frac_text) + "' is a second or more");
      }
      return *t + *frac;
    }
    case TimeKind::kAny: return any_time(text, options_.json_time_unit);
  }
  return Status::internal("unknown time kind");
}

Status RecordBuilder::build(FieldSource& fields, TraceRecord& out) {
  auto t = read_time(fields);
  if (!t) return t.status();
  int64_t t_us = *t;
  out.duration_us = -1;
  const auto text = duration_kind_ == DurationKind::kNone ? std::nullopt : fields.get(duration_field_);
  if (duration_kind_ != DurationKind::kNone && !text && json_ && options_.request_start) {
    return Status::invalid_argument("--request-start: no request_time member (map yours with "
                                    "--json-fields request_time=MEMBER)");
  }
  // A JSON line without the member has no duration (--concurrency then uses --hold).
  if (duration_kind_ != DurationKind::kNone && (text || !json_)) {
    const std::string_view d = text.value_or(std::string_view{});
    const int shift = duration_kind_ == DurationKind::kSecDecimal ? 6
                      : duration_kind_ == DurationKind::kMs       ? 3
                      : duration_kind_ == DurationKind::kSec      ? 6
                                                                  : 0;
    auto dur = duration_kind_ == DurationKind::kSecDecimal
                   ? parse_decimal_scaled(d, shift, "a request duration in seconds")
                   : whole(d, shift, "a request duration in whole units");
    if (!dur) return dur.status();
    if (options_.request_start) {
      if (*dur > t_us) return Status::invalid_argument("request duration exceeds its time");
      t_us -= *dur;
    }
    out.duration_us = *dur;
  }
  out.t_us = t_us;
  out.cost = 1;
  if (options_.cost_field) {
    const auto c = fields.get(*options_.cost_field);
    if (!c) return Status::invalid_argument("no cost field " + *options_.cost_field);
    auto v = parse_cost(*c);
    if (!v) return v.status();
    out.cost = *v;
  }
  bool missing = false;
  if (options_.key.size() == 1) {
    auto part = key_part(fields, options_.key.front());
    missing = !part || part->empty();
    out.key = missing ? std::string_view("-") : *part;
  } else {
    key_buf_.clear();
    for (const std::string& name : options_.key) {
      auto part = key_part(fields, name);
      if (!key_buf_.empty()) key_buf_ += ' ';
      if (!part || part->empty()) {
        missing = true;
        key_buf_ += '-';
      } else {
        key_buf_ += *part;
      }
    }
    out.key = key_buf_;
  }
  if (missing) ++missing_key_parts_;
  return {};
}

}  // namespace ratelimit::sim
