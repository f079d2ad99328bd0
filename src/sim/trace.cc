// trace.cc — trace line parsing and the streaming line reader (see trace.h).
#include "trace.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <sys/stat.h>

#include <deque>
#include <nlohmann/json.hpp>
#include <optional>

#include "log_format.h"
#include "ratelimit/policy.h"
#include "timestamps.h"
#include "text.h"

namespace ratelimit::sim {
namespace {

constexpr size_t kChunkBytes = 1 << 20;

using text::trim_ows;

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
    std::string_view after = trim_ows(s.substr(i));
    if (!after.empty() && after.front() != ',') {
      return Status::invalid_argument("unexpected text after a quoted field");
    }
    had_comma = !after.empty();
    rest = had_comma ? after.substr(1) : std::string_view{};
    return std::string_view(buf);
  }
  const size_t comma = s.find(',');
  had_comma = comma != std::string_view::npos;
  std::string_view field = trim_ows(had_comma ? s.substr(0, comma) : s);
  rest = had_comma ? s.substr(comma + 1) : std::string_view{};
  return field;
}

}  // namespace

Result<TraceFormat> parse_trace_format(std::string_view name) {
  if (name == "auto") return TraceFormat::kAuto;
  if (name == "csv") return TraceFormat::kCsv;
  if (name == "combined") return TraceFormat::kCombined;
  if (name == "json") return TraceFormat::kJson;
  if (name == "log") return TraceFormat::kLog;
  return Status::invalid_argument("unknown trace format '" + printable(name) +
                                  "' (expected auto, csv, combined or json; give --log-format for "
                                  "any other access-log layout)");
}

const char* trace_format_name(TraceFormat f) {
  switch (f) {
    case TraceFormat::kAuto: return "auto";
    case TraceFormat::kCsv: return "csv";
    case TraceFormat::kCombined: return "combined";
    case TraceFormat::kLog: return "log";
    case TraceFormat::kJson: return "json";
  }
  return "auto";
}

bool is_blank_or_comment(std::string_view line) {
  const std::string_view t = trim_ows(line);
  return t.empty() || t.front() == '#';
}

namespace {

// An access-log line's fields, by name, for RecordBuilder.
class LogFields : public FieldSource {
 public:
  LogFields(const AccessLogFormat& format, const std::vector<std::string_view>& values)
      : format_(format), values_(values) {}
  std::optional<std::string_view> get(std::string_view name) override {
    const int i = format_.field_index(name);
    if (i < 0) return std::nullopt;
    return values_[static_cast<size_t>(i)];
  }

 private:
  const AccessLogFormat& format_;
  const std::vector<std::string_view>& values_;
};

// A JSON object's members, by name through the --json-fields mapping. Numbers and other
// non-strings are given as their JSON text (kept in `scratch` until the next line).
class JsonFields : public FieldSource {
 public:
  JsonFields(const nlohmann::json& doc, const std::vector<std::pair<std::string, std::string>>& map,
             std::deque<std::string>& scratch)
      : doc_(doc), map_(map), scratch_(scratch) {}
  std::optional<std::string_view> get(std::string_view name) override {
    std::string_view path = name;
    for (const auto& [from, to] : map_) {
      if (from == name) path = to;
    }
    const nlohmann::json* v = find(path);
    if (v == nullptr || v->is_null()) return std::nullopt;
    if (v->is_string()) return std::string_view(v->get_ref<const std::string&>());
    if (used_ == scratch_.size()) scratch_.emplace_back();
    std::string& buf = scratch_[used_++];
    buf = v->dump();
    return std::string_view(buf);
  }

 private:
  // The member named `path`, else the dotted walk ("client.ip").
  const nlohmann::json* find(std::string_view path) const {
    const nlohmann::json* node = &doc_;
    if (auto it = node->find(path); it != node->end()) return &*it;
    size_t pos = 0;
    while (pos <= path.size()) {
      const size_t dot = std::min(path.size(), path.find('.', pos));
      if (!node->is_object()) return nullptr;
      auto it = node->find(path.substr(pos, dot - pos));
      if (it == node->end()) return nullptr;
      node = &*it;
      pos = dot + 1;
    }
    return node;
  }
  const nlohmann::json& doc_;
  const std::vector<std::pair<std::string, std::string>>& map_;
  std::deque<std::string>& scratch_;
  size_t used_ = 0;
};

// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string json_error(const std::exception& e) {
  std::string m = e.what();
  const size_t close = m.find("] ");
  if (m.rfind("[json.exception", 0) == 0 && close != std::string::npos) m = m.substr(close + 2);
  return m;
}

}  // namespace

struct LineParser::Impl {
  TraceFormat format = TraceFormat::kCsv;
  std::optional<AccessLogFormat> log;
  std::optional<RecordBuilder> builder;
  FieldOptions fields;
  std::vector<std::string_view> values;
  nlohmann::json doc;
  std::deque<std::string> scratch;
  std::string field_buf;  // CSV: an unquoted copy of a quoted key
};

LineParser::LineParser(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LineParser::LineParser(LineParser&&) noexcept = default;
LineParser& LineParser::operator=(LineParser&&) noexcept = default;
LineParser::~LineParser() = default;

LineParser::LineParser(TraceFormat format)
    : LineParser(create(format, TraceSpec{}).value().impl_) {}

Result<LineParser> LineParser::create(TraceFormat format, const TraceSpec& spec) {
  auto impl = std::make_unique<Impl>();
  impl->format = format;
  impl->fields = spec.fields;
  switch (format) {
    case TraceFormat::kAuto:
      return Status::invalid_argument("the trace format must be resolved before parsing");
    case TraceFormat::kCsv:
      if (spec.fields_given) {
        return Status::invalid_argument(
            "--key, --cost-field and --request-start apply to access logs and JSON lines; a "
            "CSV trace is timestamp[,key[,cost]]");
      }
      break;
    case TraceFormat::kCombined:
    case TraceFormat::kLog: {
      auto f = format == TraceFormat::kCombined ? Result<AccessLogFormat>(AccessLogFormat::combined())
                                                : AccessLogFormat::compile(spec.log_format);
      if (!f) return f.status();
      auto b = RecordBuilder::create(spec.fields, &f->field_names());
      if (!b) return b.status();
      impl->log.emplace(std::move(*f));
      impl->builder.emplace(std::move(*b));
      break;
    }
    case TraceFormat::kJson: {
      auto b = RecordBuilder::create(spec.fields, nullptr);
      if (!b) return b.status();
      impl->builder.emplace(std::move(*b));
      break;
    }
  }
  return LineParser(std::move(impl));
}

int64_t LineParser::missing_key_parts() const {
  return impl_->builder ? impl_->builder->missing_key_parts() : 0;
}

std::string LineParser::describe() const {
  const Impl& m = *impl_;
  switch (m.format) {
    case TraceFormat::kCsv: return "csv";
    case TraceFormat::kCombined:
      return "combined access log (time from " + m.builder->time_source() + ")";
    case TraceFormat::kLog:
      return "access log '" + printable(m.log->description(), 100) + "' (time from " +
             m.builder->time_source() + ")";
    case TraceFormat::kJson: return "JSON lines";
    case TraceFormat::kAuto: break;
  }
  return "auto";
}

TraceFormat detect_trace_format(std::string_view first_content_line) {
  const std::string_view t = trim_ows(first_content_line);
  if (!t.empty() && t.front() == '{') return TraceFormat::kJson;
  LineParser p(TraceFormat::kCombined);
  TraceRecord r;
  auto kind = p.parse(first_content_line, true, r);
  return kind.ok() && *kind == LineKind::kRecord ? TraceFormat::kCombined : TraceFormat::kCsv;
}

Result<LineKind> LineParser::parse(std::string_view line, bool first_content_line,
                                   TraceRecord& out) {
  if (is_blank_or_comment(line)) return LineKind::kSkip;
  Impl& m = *impl_;
  switch (m.format) {
    case TraceFormat::kCsv: return parse_csv(line, first_content_line, out);
    case TraceFormat::kCombined:
    case TraceFormat::kLog: {
      if (auto s = m.log->match(line, m.values); !s.is_ok()) return s;
      LogFields fields(*m.log, m.values);
      if (auto s = m.builder->build(fields, out); !s.is_ok()) return s;
      return LineKind::kRecord;
    }
    case TraceFormat::kJson: {
      try {
        m.doc = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        return Status::invalid_argument("not a JSON object: " + json_error(e));
      }
      if (!m.doc.is_object()) {
        return Status::invalid_argument("not a JSON object: '" + printable(line, 40) + "'");
      }
      JsonFields fields(m.doc, m.fields.json_fields, m.scratch);
      if (auto s = m.builder->build(fields, out); !s.is_ok()) return s;
      return LineKind::kRecord;
    }
    case TraceFormat::kAuto: break;
  }
  return Status::internal("unresolved trace format");
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
  auto key = next_field(rest, impl_->field_buf, comma);
  if (!key) return key.status();
  if (key->empty()) return Status::invalid_argument("empty key");
  out.key = *key;
  if (!comma) return LineKind::kRecord;
  std::string cost_buf;
  auto cost = next_field(rest, cost_buf, comma);
  if (!cost) return cost.status();
  if (comma) return Status::invalid_argument("too many fields (expected timestamp[,key[,cost]])");
  auto c = parse_cost(*cost);
  if (!c) return c.status();
  out.cost = *c;
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
