// resp_parser.cc — RESP request framing and reply encoding (see resp_parser.h).
#include "resp_parser.h"

#include <charconv>

namespace ratelimit::server {
namespace {

// Beyond any bound we accept; keeps the header's arithmetic far from overflow.
constexpr size_t kMaxHeaderDigits = 18;

// The decimal number of a "*<n>\r\n" or "$<len>\r\n" header whose digits start at `at`.
// kCommand: `value` and `next` (after the CRLF) are set.
RespParse header_number(std::string_view in, size_t at, int64_t& value, size_t& next) {
  size_t i = at;
  const bool negative = i < in.size() && in[i] == '-';
  if (negative) ++i;
  int64_t v = 0;
  size_t digits = 0;
  while (i < in.size() && in[i] >= '0' && in[i] <= '9') {
    if (++digits > kMaxHeaderDigits) return RespParse::kMalformed;
    v = v * 10 + (in[i] - '0');
    ++i;
  }
  if (i == in.size()) return RespParse::kNeedMore;
  if (in[i] != '\r' || digits == 0) return RespParse::kMalformed;
  if (i + 1 == in.size()) return RespParse::kNeedMore;
  if (in[i + 1] != '\n') return RespParse::kMalformed;
  value = negative ? -v : v;
  next = i + 2;
  return RespParse::kCommand;
}

RespParse malformed(std::string& error, std::string text) {
  error = std::move(text);
  return RespParse::kMalformed;
}

RespParse parse_multibulk(std::string_view in, const RespBounds& bounds, RespCommand& out, std::string& error) {
  int64_t count = 0;
  size_t pos = 0;
  const RespParse head = header_number(in, 1, count, pos);
  if (head == RespParse::kMalformed) return malformed(error, "Protocol error: invalid multibulk length");
  if (head == RespParse::kNeedMore) return head;
  if (count <= 0) {  // Redis skips an empty or null multibulk without a reply
    out.length = pos;
    return RespParse::kSkip;
  }
  if (static_cast<uint64_t>(count) > bounds.max_args) {
    return malformed(error, "Protocol error: invalid multibulk length (at most " + std::to_string(bounds.max_args) +
                                " arguments)");
  }
  for (int64_t k = 0; k < count; ++k) {
    if (pos == in.size()) return RespParse::kNeedMore;
    if (in[pos] != '$') return malformed(error, std::string("Protocol error: expected '$', got '") + in[pos] + "'");
    int64_t len = 0;
    size_t data = 0;
    const RespParse bulk = header_number(in, pos + 1, len, data);
    if (bulk == RespParse::kNeedMore) return bulk;
    if (bulk == RespParse::kMalformed || len < 0 || static_cast<uint64_t>(len) > bounds.max_command_bytes) {
      return malformed(error, "Protocol error: invalid bulk length");
    }
    const size_t end = data + static_cast<size_t>(len) + 2;
    if (end > bounds.max_command_bytes) {
      return malformed(error, "Protocol error: command too big (limits.max_body_bytes " +
                                  std::to_string(bounds.max_command_bytes) + ")");
    }
    if (end > in.size()) return RespParse::kNeedMore;
    if (in[end - 2] != '\r' || in[end - 1] != '\n') {
      return malformed(error, "Protocol error: expected CRLF after a bulk string");
    }
    out.args.push_back(in.substr(data, static_cast<size_t>(len)));
    pos = end;
  }
  out.length = pos;
  return RespParse::kCommand;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// One quoted argument from line[i] (the character after the opening quote) into `arg`; i ends
// after the closing quote. False: unbalanced, or a closing quote not followed by a blank.
bool quoted(std::string_view line, size_t& i, char quote, std::string& arg) {
  auto at = [&](size_t k) { return k < line.size() ? line[k] : '\0'; };
  for (; i < line.size(); ++i) {
    const char c = line[i];
    if (c == quote) {
      if (i + 1 < line.size() && !is_space(line[i + 1])) return false;
      ++i;
      return true;
    }
    if (c != '\\' || i + 1 == line.size()) {
      arg += c;
    } else if (quote == '\'') {  // only \' is an escape inside single quotes
      if (at(i + 1) == '\'') ++i;
      arg += line[i];
    } else if (at(i + 1) == 'x' && hex_value(at(i + 2)) >= 0 && hex_value(at(i + 3)) >= 0) {
      arg += static_cast<char>(hex_value(line[i + 2]) * 16 + hex_value(line[i + 3]));
      i += 3;
    } else {
      const char e = line[++i];
      arg += e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e == 'b' ? '\b' : e == 'a' ? '\a' : e;
    }
  }
  return false;
}

// Redis's sdssplitargs over one line into out.scratch; false on unbalanced quotes.
bool split_inline(std::string_view line, RespCommand& out) {
  // Views into scratch must not move: it never grows past the line's length.
  out.scratch.reserve(line.size());
  std::vector<std::pair<size_t, size_t>> spans;
  size_t i = 0;
  std::string arg;
  while (true) {
    while (i < line.size() && is_space(line[i])) ++i;
    if (i == line.size()) break;
    arg.clear();
    bool done = false;
    while (!done && i < line.size()) {
      const char c = line[i];
      if (is_space(c)) {
        done = true;
      } else if (c == '"' || c == '\'') {
        ++i;
        if (!quoted(line, i, c, arg)) return false;
        done = true;
      } else {
        arg += c;
        ++i;
      }
    }
    spans.emplace_back(out.scratch.size(), arg.size());
    out.scratch += arg;
  }
  for (const auto& [at, n] : spans) out.args.push_back(std::string_view(out.scratch).substr(at, n));
  return true;
}

RespParse parse_inline(std::string_view in, const RespBounds& bounds, RespCommand& out, std::string& error) {
  const size_t nl = in.find('\n');
  if (nl == std::string_view::npos ? in.size() > bounds.max_command_bytes : nl + 1 > bounds.max_command_bytes) {
    return malformed(error, "Protocol error: too big inline request");
  }
  if (nl == std::string_view::npos) return RespParse::kNeedMore;
  std::string_view line = in.substr(0, nl);
  line = line.substr(0, line.find('\0'));  // Redis splits a C string: a NUL ends the line
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  out.inline_form = true;
  out.length = nl + 1;
  if (!split_inline(line, out)) return malformed(error, "Protocol error: unbalanced quotes in request");
  if (out.args.empty()) return RespParse::kSkip;
  if (out.args.size() > bounds.max_args) {
    return malformed(error, "Protocol error: too many arguments (at most " + std::to_string(bounds.max_args) + ")");
  }
  return RespParse::kCommand;
}

}  // namespace

RespParse parse_resp_command(std::string_view in, const RespBounds& bounds, RespCommand& out, std::string& error) {
  out.clear();
  if (in.empty()) return RespParse::kNeedMore;
  const RespParse r = in.front() == '*' ? parse_multibulk(in, bounds, out, error) : parse_inline(in, bounds, out, error);
  if (r == RespParse::kNeedMore || r == RespParse::kMalformed) out.clear();
  return r;
}

void RespReply::line(char type, std::string_view text) {
  out_ += type;
  for (char c : text) out_ += c == '\r' || c == '\n' ? ' ' : c;
  out_ += "\r\n";
}

void RespReply::simple(std::string_view text) { line('+', text); }
void RespReply::error(std::string_view text) { line('-', text); }

void RespReply::integer(int64_t v) {
  char digits[24];
  const auto r = std::to_chars(digits, digits + sizeof digits, v);
  line(':', std::string_view(digits, static_cast<size_t>(r.ptr - digits)));
}

void RespReply::bulk(std::string_view bytes) {
  out_ += '$';
  out_ += std::to_string(bytes.size());
  out_ += "\r\n";
  out_ += bytes;
  out_ += "\r\n";
}

void RespReply::null() { out_ += protocol_ >= 3 ? "_\r\n" : "$-1\r\n"; }

void RespReply::array(size_t n) { line('*', std::to_string(n)); }

void RespReply::map(size_t pairs) {
  if (protocol_ >= 3) {
    line('%', std::to_string(pairs));
  } else {
    array(2 * pairs);
  }
}

void RespReply::boolean(bool v) {
  if (protocol_ >= 3) {
    out_ += v ? "#t\r\n" : "#f\r\n";
  } else {
    integer(v ? 1 : 0);
  }
}

}  // namespace ratelimit::server
