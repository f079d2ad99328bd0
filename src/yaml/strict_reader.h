// strict_reader.h — the one strict reader of YAML leaves that every configuration reader
// shares: ratelimitd's own file (src/server/config/*.cc) and envoyproxy/ratelimit rule files
// (src/rls/rule_set_load.cc). "file:line: reason" errors, maps checked against their known keys,
// scalars parsed by hand (yaml-cpp's conversions accept "0x10" or "1e3" as integers and throw),
// and a string naming one of a fixed set read into its enum (one_of).
//
// Why one reader with two dialects: the two files have one set of checks, but not one typing.
// ratelimitd's own file is strict YAML 1.2 (true/false only, an integer is digits, a missing
// value is an error); an Envoy rule file must accept and refuse exactly what envoyproxy/
// ratelimit's yaml.v2 does (YAML 1.1 booleans such as `yes`, a leading '+', a quoted scalar is a
// string and never a number, a missing or null leaf is the Go zero value). Dialect says which;
// everything else (messages, lines, escaping, ranges) is the same code.
// Invariants: a reason quotes the file's bytes with every byte outside printable ASCII written
// as \xNN, so a bad file cannot put an escape sequence or a forged line into a log or a
// terminal; lines are 1-based (1 when yaml-cpp knows none).
// Thread-safety: const methods are pure; set_file is for the owner's thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "ratelimit/clock.h"
#include "ratelimit/status.h"

namespace ratelimit::yaml {

enum class Dialect : uint8_t {
  kStrict,  // ratelimitd's configuration
  kYamlV2,  // envoyproxy/ratelimit's rule files, as Go's yaml.v2 types them
};

// 1-based line of `n` (1 when unknown).
int line_of(const YAML::Node& n);
// A plain (untagged, unquoted) scalar.
bool is_plain(const YAML::Node& n);
// yaml.v2's YAML 1.1 booleans (y, yes, on, true, … in three cases); sets `v`.
bool is_yaml_bool(const std::string& s, bool& v);

class StrictReader {
 public:
  explicit StrictReader(std::string_view file, Dialect dialect = Dialect::kStrict)
      : file_(file), dialect_(dialect) {}

  // The file name the next errors carry (a loader reading several files).
  void set_file(std::string_view file) { file_ = file; }

  // "file:line: reason", invalid_argument, the reason escaped (see top).
  Status error(int line, std::string_view reason) const;
  Status error(const YAML::Node& n, std::string_view reason) const { return error(line_of(n), reason); }

  // A map whose keys must all be in `allowed`; also refuses a key given twice.
  Status check_map(const YAML::Node& n, std::string_view what,
                   std::initializer_list<std::string_view> allowed) const;

  // A scalar's text. kYamlV2: absent or null is "".
  Result<std::string> string(const YAML::Node& n, std::string_view what) const;

  // A string that must be one of `choices`' names; the value paired with it. Otherwise the
  // error lists the names in the order given: "<what> must be a or b, got 'x'" ("a, b or c").
  template <typename T>
  Result<T> one_of(const YAML::Node& n, std::string_view what,
                   std::initializer_list<std::pair<std::string_view, T>> choices) const {
    auto s = string(n, what);
    if (!s) return s.status();
    for (const auto& [name, value] : choices) {
      if (*s == name) return value;
    }
    std::string m = std::string(what) + " must be ";
    size_t i = 0;
    for (const auto& c : choices) {
      if (i > 0) m += i + 1 == choices.size() ? " or " : ", ";
      m += c.first;
      ++i;
    }
    return error(n, m + ", got '" + *s + "'");
  }

  // A whole number in [lo, hi]. kYamlV2: a plain scalar only (a quoted "5" is a string), and a
  // leading '+' is allowed.
  Result<int64_t> integer(const YAML::Node& n, std::string_view what, int64_t lo, int64_t hi) const;
  // A finite number.
  Result<double> number(const YAML::Node& n, std::string_view what) const;
  // kStrict: true or false. kYamlV2: yaml.v2's booleans, plain only; absent or null is false.
  Result<bool> boolean(const YAML::Node& n, std::string_view what) const;
  // "500ms", "1m" … (parse_duration).
  Result<Micros> duration(const YAML::Node& n, std::string_view what) const;
  // Absent, null or a list; anything else is refused.
  Status sequence(const YAML::Node& n, std::string_view what) const;

 private:
  std::string file_;
  Dialect dialect_;
};

}  // namespace ratelimit::yaml
