// alias_bomb.h — the review's YAML alias bomb (issue 23 item 3), for the tests of every reader:
// nine levels of nine aliases, 9^9 (387,420,489) leaves once expanded, in about 400 bytes.
#pragma once

#include <string>

namespace ratelimit::testing_yaml {

// The bomb's lines, each indented by `indent` spaces, the first anchor on the first line.
inline std::string alias_bomb_lines(int indent) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  std::string out = pad + "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    const std::string prev = std::string("*") + static_cast<char>(c - 1);
    out += pad + c + ": &" + c + " [";
    for (int k = 0; k < 9; ++k) out += (k > 0 ? "," : "") + prev;
    out += "]\n";
  }
  return out;
}

// An envoyproxy/ratelimit rule file whose `metadata` holds the bomb (from line 5 on).
inline std::string envoy_metadata_bomb() {
  return "domain: bomb\n"
         "descriptors:\n"
         "  - key: k\n"
         "    rate_limit: {unit: second, requests_per_unit: 1}\n"
         "    metadata:\n" +
         alias_bomb_lines(6);
}

}  // namespace ratelimit::testing_yaml
