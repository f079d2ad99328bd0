// trace.h — reading request traces: a CSV of `timestamp[,key[,cost]]` or an nginx/Apache
// access log in the common/combined format, streamed line by line.
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
//   combined  host ident user [10/Oct/2000:13:55:36 -0700] "request" ... — the client
//             address (first field) is the key, the bracketed time the timestamp, cost 1.
//             The common log format (without referer and user agent) parses the same way.
// Auto-detection looks at the first content line: a valid access-log line means combined,
// anything else CSV.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "ratelimit/status.h"

namespace ratelimit::sim {

enum class TraceFormat : uint8_t { kAuto, kCsv, kCombined };

// "auto", "csv", "combined".
Result<TraceFormat> parse_trace_format(std::string_view name);
const char* trace_format_name(TraceFormat f);

// One request read from a line. `key` points into the line or into the parser's buffer and
// stays valid until the next parse call.
struct TraceRecord {
  int64_t t_us = 0;
  std::string_view key;
  int64_t cost = 1;
};

enum class LineKind : uint8_t { kRecord, kSkip };

// Parses one line (without its line break). kSkip for blank/comment lines (and, when
// `first_content_line`, a CSV header). Error messages do not include the line number (the
// caller adds it).
class LineParser {
 public:
  explicit LineParser(TraceFormat format) : format_(format) {}
  Result<LineKind> parse(std::string_view line, bool first_content_line, TraceRecord& out);

 private:
  Result<LineKind> parse_csv(std::string_view line, bool first_content_line, TraceRecord& out);
  Result<LineKind> parse_combined(std::string_view line, TraceRecord& out);
  TraceFormat format_;
  std::string field_buf_;  // an unquoted copy of a quoted key
};

// Picks combined if `first_content_line` is a valid access-log line, CSV otherwise.
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
