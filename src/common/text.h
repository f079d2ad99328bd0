// text.h — trimming, the one definition our parsers share: HTTP's optional whitespace (the
// header-field values, X-Forwarded-For and Forwarded elements, the trusted-proxy list, the
// simulator's key and trace fields) and any ASCII whitespace (log-format specs).
//
// Why one home: five files each had their own copy, and a parser that trims one character
// more than another reads the same field differently. Invariants: pure, no allocation; the
// result is a view into the argument.
#pragma once

#include <cctype>
#include <string_view>

namespace ratelimit::text {

// Without leading and trailing SP and HTAB (RFC 9110 §5.6.3, OWS).
inline std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Without leading and trailing ASCII whitespace (std::isspace in the C locale).
inline std::string_view trim_space(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
  return s;
}

}  // namespace ratelimit::text
