// plain_body.cc — the fast path of parse_request_body (see request.h, plain_key_policy): the
// body {"key": "...", "policy": "..."} with plain strings, read without Boost.JSON.
//
// Why apart: it is a parser of its own, with one claim — Boost.JSON reads every body it takes as
// the same two strings — which the request fuzz target checks on every input it accepts; the
// full parser and the checks both paths run stay in request.cc.
#include "request.h"

#include "char_class.h"

namespace ratelimit::server {
namespace {

bool json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// A JSON string of printable ASCII without escapes at body[i] ('"'): its contents, and i moved
// past its closing quote; false for anything else (an escape, a control or non-ASCII byte, no
// closing quote), which the full parser then reads.
bool plain_string(std::string_view body, size_t& i, std::string_view& out) {
  if (i >= body.size() || body[i] != '"') return false;
  const size_t start = ++i;
  for (; i < body.size(); ++i) {
    const auto c = static_cast<unsigned char>(body[i]);
    if (c == '"') {
      out = body.substr(start, i - start);
      ++i;
      return true;
    }
    if (!text::is_json_plain(c)) return false;
  }
  return false;
}

// A byte a plain string holds as itself: printable ASCII but the quote and the backslash.
bool plain_char(char c) { return text::is_json_plain(static_cast<unsigned char>(c)); }

// The compact body most clients send, {"key":"...","policy":"..."} with no whitespace, matched
// by its fixed text around the two values (callgrind: ~200 instructions per request where the
// general loop took ~520); false sends every other shape to the general loop, which accepts
// this one too.
bool compact_key_policy(std::string_view body, std::string_view& key, std::string_view& policy) {
  static constexpr std::string_view kHead = R"({"key":")", kMid = R"(","policy":")", kTail = R"("})";
  if (body.size() < kHead.size() + kMid.size() + kTail.size() || !body.starts_with(kHead) || !body.ends_with(kTail)) {
    return false;
  }
  size_t i = kHead.size();
  while (plain_char(body[i])) ++i;  // stops at the latest on kTail's quote
  if (body.compare(i, kMid.size(), kMid) != 0) return false;
  const size_t p = i + kMid.size(), end = body.size() - kTail.size();
  size_t j = p;
  while (j < end && plain_char(body[j])) ++j;
  if (j != end) return false;
  key = body.substr(kHead.size(), i - kHead.size());
  policy = body.substr(p, end - p);
  return true;
}

}  // namespace

bool plain_key_policy(std::string_view body, std::string_view& key, std::string_view& policy) {
  if (compact_key_policy(body, key, policy)) return true;
  size_t i = 0;
  auto skip = [&] {
    while (i < body.size() && json_space(body[i])) ++i;
  };
  auto expect = [&](char c) {
    skip();
    if (i >= body.size() || body[i] != c) return false;
    ++i;
    skip();
    return true;
  };
  bool have_key = false, have_policy = false;
  if (!expect('{')) return false;
  for (int member = 0; member < 2; ++member) {
    std::string_view name, value;
    if (member == 1 && !expect(',')) return false;
    if (!plain_string(body, i, name) || !expect(':') || !plain_string(body, i, value)) return false;
    if (name == "key" && !have_key) {
      key = value;
      have_key = true;
    } else if (name == "policy" && !have_policy) {
      policy = value;
      have_policy = true;
    } else {
      return false;  // another field, or a name given twice: the full parser's rules apply
    }
  }
  if (!expect('}')) return false;
  return i == body.size();
}

}  // namespace ratelimit::server
