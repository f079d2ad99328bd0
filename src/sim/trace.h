// trace.h — reading request traces, streamed line by line: a CSV of
// `timestamp[,key[,cost]]`, an access log (nginx or Apache, predefined or any log_format /
// LogFormat string; see log_format.h), or JSON lines (one object a line; see log_record.h).
//
// Why streaming: production logs run to tens of millions of lines; the reader holds one
// buffer (1 MiB plus the longest line, itself capped at kMaxLineBytes) whatever the file size.
// Formats:
//   CSV       timestamp[,key[,cost]] — timestamp in seconds as a decimal ("12.5",
//             "1714564800.123") or RFC 3339 ("2024-05-01T12:00:00.123Z"); key defaults to
//             "-" (one client), cost to 1. Fields may be double-quoted ("a,b" with "" for a
//             quote) and are trimmed of spaces. Blank lines and lines starting with '#' are
//             skipped, and so is a header on the first content line (a first field that
//             starts with a letter, such as "timestamp").
//   combined  the combined log format (nginx's and Apache's default), also accepting the
//             common format (no referer and user agent) and nginx's `main` (plus
//             "$http_x_forwarded_for"); keyed by `client` unless --key says otherwise.
//   log       any nginx log_format or Apache LogFormat string (--log-format).
//   json      one JSON object a line; members mapped with --json-fields.
// Auto-detection looks at the first content line: '{' means JSON, a valid combined line
// means combined, anything else CSV.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "log_record.h"
#include "ratelimit/status.h"

namespace ratelimit::sim {

enum class TraceFormat : uint8_t { kAuto, kCsv, kCombined, kLog, kJson };

// "auto", "csv", "combined", "json" ("log" is chosen by giving --log-format).
Result<TraceFormat> parse_trace_format(std::string_view name);
const char* trace_format_name(TraceFormat f);

// How to read a trace: the format, the --log-format string (for kLog) and the field rules
// (key, cost, JSON mapping) for access logs and JSON.
struct TraceSpec {
  TraceFormat format = TraceFormat::kAuto;
  std::string log_format;
  FieldOptions fields;
  bool fields_given = false;  // --key, --cost-field or --request-start were given
};

enum class LineKind : uint8_t { kRecord, kSkip };

// Parses one line (without its line break). kSkip for blank/comment lines (and, when
// `first_content_line`, a CSV header). Error messages do not include the line number (the
// caller adds it). Movable, not thread-safe.
class LineParser {
 public:
  // CSV, combined or JSON with the default field rules. Precondition: not kAuto or kLog.
  explicit LineParser(TraceFormat format);
  // Any format; `format` is the resolved one (not kAuto). Error for a --log-format that does
  // not compile, or a --key / --cost-field the format cannot give, or field options on a CSV.
  static Result<LineParser> create(TraceFormat format, const TraceSpec& spec);
  LineParser(LineParser&&) noexcept;
  LineParser& operator=(LineParser&&) noexcept;
  ~LineParser();

  Result<LineKind> parse(std::string_view line, bool first_content_line, TraceRecord& out);

  // Requests whose key lacked a part (see RecordBuilder::missing_key_parts).
  int64_t missing_key_parts() const;
  // "csv", "combined", "nginx log_format '...'", "JSON lines", with the time's source.
  std::string describe() const;

 private:
  struct Impl;
  explicit LineParser(std::unique_ptr<Impl> impl);
  Result<LineKind> parse_csv(std::string_view line, bool first_content_line, TraceRecord& out);
  std::unique_ptr<Impl> impl_;
};

// JSON if `first_content_line` starts with '{', combined if it is a valid combined line, CSV
// otherwise.
TraceFormat detect_trace_format(std::string_view first_content_line);

// True for blank lines and '#' comments (skipped by every format).
bool is_blank_or_comment(std::string_view line);

inline constexpr size_t kMaxLineBytes = 1 << 20;

// Reads a file (or standard input for "-") line by line in 1 MiB chunks.
class LineReader {
 public:
  // Error (with the path and the system's reason) if the file cannot be opened.
  static Result<LineReader> open(const std::string& path);

  // The next line, without "\n" or "\r\n"; valid until the next call. Returns false at the
  // end of the file; an error if reading fails or a line exceeds kMaxLineBytes.
  Result<bool> next(std::string_view& line);

  int64_t line_number() const { return line_number_; }  // of the line last returned, from 1
  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t size_bytes() const { return size_bytes_; }    // 0 if unknown (a pipe)
  const std::string& path() const { return path_; }

 private:
  LineReader() = default;
  struct Closer {
    bool owned = true;
    void operator()(std::FILE* f) const {
      if (owned) std::fclose(f);
    }
  };
  std::unique_ptr<std::FILE, Closer> file_{nullptr, Closer{}};
  std::string path_;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
  int64_t line_number_ = 0;
  uint64_t bytes_read_ = 0;
  uint64_t size_bytes_ = 0;
};

}  // namespace ratelimit::sim
