// trace.cc — trace line parsing and the streaming line reader (see trace.h).
#include "trace.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <sys/stat.h>

#include "ratelimit/policy.h"
#include "timestamps.h"

namespace ratelimit::sim {
namespace {

constexpr size_t kChunkBytes = 1 << 20;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Splits off the next CSV field from `rest`, unquoting into `buf` when quoted. On return,
// `rest` starts after the separating comma (or is empty) and `had_comma` tells which.
Result<std::string_view> next_field(std::string_view& rest, std::string& buf, bool& had_comma) {
  std::string_view s = rest;
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  if (!s.empty() && s.front() == '"') {
    buf.clear();
    size_t i = 1;
    for (;;) {
      if (i >= s.size()) return Status::invalid_argument("unterminated quoted field");
      if (s[i] == '"') {
        if (i + 1 < s.size() && s[i + 1] == '"') {
          buf.push_back('"');
          i += 2;
          continue;
        }
        ++i;
        break;
      }
      buf.push_back(s[i++]);
    }
    std::string_view after = trim(s.substr(i));
    if (!after.empty() && after.front() != ',') {
      return Status::invalid_argument("unexpected text after a quoted field");
    }
    had_comma = !after.empty();
    rest = had_comma ? after.substr(1) : std::string_view{};
    return std::string_view(buf);
  }
  const size_t comma = s.find(',');
  had_comma = comma != std::string_view::npos;
  std::string_view field = trim(had_comma ? s.substr(0, comma) : s);
  rest = had_comma ? s.substr(comma + 1) : std::string_view{};
  return field;
}

}  // namespace

Result<TraceFormat> parse_trace_format(std::string_view name) {
  if (name == "auto") return TraceFormat::kAuto;
  if (name == "csv") return TraceFormat::kCsv;
  if (name == "combined") return TraceFormat::kCombined;
  return Status::invalid_argument("unknown trace format '" + printable(name) +
                                  "' (expected auto, csv or combined)");
}

const char* trace_format_name(TraceFormat f) {
  switch (f) {
    case TraceFormat::kAuto: return "auto";
    case TraceFormat::kCsv: return "csv";
    case TraceFormat::kCombined: return "combined";
  }
  return "auto";
}

bool is_blank_or_comment(std::string_view line) {
  const std::string_view t = trim(line);
  return t.empty() || t.front() == '#';
}

TraceFormat detect_trace_format(std::string_view first_content_line) {
  LineParser p(TraceFormat::kCombined);
  TraceRecord r;
  auto kind = p.parse(first_content_line, true, r);
  return kind.ok() && *kind == LineKind::kRecord ? TraceFormat::kCombined : TraceFormat::kCsv;
}

Result<LineKind> LineParser::parse(std::string_view line, bool first_content_line,
                                   TraceRecord& out) {
  if (is_blank_or_comment(line)) return LineKind::kSkip;
  if (format_ == TraceFormat::kCombined) return parse_combined(line, out);
  return parse_csv(line, first_content_line, out);
}

Result<LineKind> LineParser::parse_csv(std::string_view line, bool first_content_line,
                                       TraceRecord& out) {
  std::string_view rest = line;
  bool comma = false;
  std::string ts_buf;
  auto ts = next_field(rest, ts_buf, comma);
  if (!ts) return ts.status();
  if (first_content_line && !ts->empty() && is_letter(ts->front())) return LineKind::kSkip;
  if (ts->empty()) return Status::invalid_argument("empty timestamp");
  auto t = parse_trace_timestamp(*ts);
  if (!t) return t.status();
  out.t_us = *t;
  out.key = "-";
  out.cost = 1;
  if (!comma) return LineKind::kRecord;
  auto key = next_field(rest, field_buf_, comma);
  if (!key) return key.status();
  if (key->empty()) return Status::invalid_argument("empty key");
  out.key = *key;
  if (!comma) return LineKind::kRecord;
  std::string cost_buf;
  auto cost = next_field(rest, cost_buf, comma);
  if (!cost) return cost.status();
  if (comma) return Status::invalid_argument("too many fields (expected timestamp[,key[,cost]])");
  int64_t c = 0;
  const auto* end = cost->data() + cost->size();
  auto [ptr, ec] = std::from_chars(cost->data(), end, c);
  if (ec != std::errc() || ptr != end) {
    return Status::invalid_argument("cost '" + printable(*cost) + "' is not a whole number");
  }
  if (auto s = validate_cost(c); !s.is_ok()) return s;
  out.cost = c;
  return LineKind::kRecord;
}

Result<LineKind> LineParser::parse_combined(std::string_view line, TraceRecord& out) {
  const size_t space = line.find(' ');
  if (space == 0 || space == std::string_view::npos) {
    return Status::invalid_argument("not an access-log line (expected 'client - user [time] ...')");
  }
  const size_t open = line.find(" [", space);
  const size_t close = open == std::string_view::npos ? open : line.find(']', open);
  if (close == std::string_view::npos || (close + 1 < line.size() && line[close + 1] != ' ')) {
    return Status::invalid_argument(
        "not an access-log line (expected 'client - user [10/Oct/2000:13:55:36 -0700] ...')");
  }
  auto t = parse_clf_time(line.substr(open + 2, close - open - 2));
  if (!t) return t.status();
  out.t_us = *t;
  out.key = line.substr(0, space);
  out.cost = 1;
  return LineKind::kRecord;
}

Result<LineReader> LineReader::open(const std::string& path) {
  LineReader r;
  r.path_ = path;
  if (path == "-") {
    r.file_ = std::unique_ptr<std::FILE, Closer>(stdin, Closer{false});
    return r;
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return Status::invalid_argument("cannot open trace '" + path + "': " + std::strerror(errno));
  }
  r.file_ = std::unique_ptr<std::FILE, Closer>(f, Closer{true});
  struct stat st {};
  if (fstat(fileno(f), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      return Status::invalid_argument("cannot read trace '" + path + "': it is a directory");
    }
    if (S_ISREG(st.st_mode)) r.size_bytes_ = static_cast<uint64_t>(st.st_size);
  }
  return r;
}

Result<bool> LineReader::next(std::string_view& line) {
  for (;;) {
    const size_t nl = buf_.find('\n', pos_);
    if (nl != std::string::npos || (eof_ && pos_ < buf_.size())) {
      const size_t end = nl != std::string::npos ? nl : buf_.size();
      if (end - pos_ > kMaxLineBytes) {
        return Status::invalid_argument("line " + std::to_string(line_number_ + 1) +
                                        " is longer than 1 MiB");
      }
      line = std::string_view(buf_).substr(pos_, end - pos_);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      pos_ = nl != std::string::npos ? nl + 1 : buf_.size();
      ++line_number_;
      return true;
    }
    if (eof_) return false;
    buf_.erase(0, pos_);
    pos_ = 0;
    if (buf_.size() > kMaxLineBytes) {
      return Status::invalid_argument("line " + std::to_string(line_number_ + 1) +
                                      " is longer than 1 MiB");
    }
    const size_t old = buf_.size();
    buf_.resize(old + kChunkBytes);
    const size_t n = std::fread(buf_.data() + old, 1, kChunkBytes, file_.get());
    buf_.resize(old + n);
    bytes_read_ += n;
    if (n == 0) {
      if (std::ferror(file_.get()) != 0) {
        return Status::invalid_argument("cannot read trace '" + path_ + "': " +
                                        std::strerror(errno));
      }
      eof_ = true;
    }
  }
}

}  // namespace ratelimit::sim
