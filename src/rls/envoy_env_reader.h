// envoy_env_reader.h — how one envoyproxy/ratelimit environment variable is read (internal to
// src/rls): the typed conversions of kelseyhightower/envconfig (Go's ParseBool and ParseInt with
// base prefixes), each naming the variable and the value in its error. Shared by the parts of
// parse_envoy_env: envoy_env.cc (the settings, section by section) and envoy_env_ignored.cc
// (what is refused or ignored, with the start-up notices).
// Invariants: an unset variable leaves `out` at its default; a refused value names the
// variable, the value (control bytes escaped, so the message stays one line) and the rule.
// Thread-safety: a Reader borrows the lookup; use it on one thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "envoy_env.h"

namespace ratelimit::rls::env_detail {

class Reader {
 public:
  explicit Reader(const EnvLookup& lookup) : lookup_(lookup) {}

  std::optional<std::string> raw(std::string_view name) const { return lookup_(name); }

  Status text(std::string_view name, std::string& out) const;
  Status boolean(std::string_view name, bool& out) const;
  Status integer(std::string_view name, int64_t lo, int64_t hi, int64_t& out) const;
  Status port(std::string_view name, uint16_t& out) const;
  // text(), then `out` must be one of `allowed` (compared in ASCII upper case when
  // `any_case`, as envoyproxy/ratelimit compares REDIS_TYPE and LOG_LEVEL); else "<why>".
  Status one_of(std::string_view name, std::string& out, std::initializer_list<std::string_view> allowed,
                std::string_view why, bool any_case = false) const;

  // "NAME: 'value' why" as kInvalidArgument.
  static Status bad(std::string_view name, std::string_view value, std::string_view why);
  // Go's strconv.ParseBool.
  static std::optional<bool> parse_bool(std::string_view v);
  // Go's strconv.ParseInt(v, 0, 64): optional sign, then 0x/0o/0b/0 prefixes; '_' only
  // between digits after a prefix.
  static std::optional<int64_t> parse_go_int(std::string_view v);

 private:
  const EnvLookup& lookup_;
};

// The accepted spellings of a boolean, for messages.
inline constexpr std::string_view kNotABoolean =
    "is not a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)";

// The settings that are valid for envoyproxy/ratelimit but refused or ignored here: CONFIG_TYPE
// other than FILE and the refused-when-enabled ones fail; the ignored ones add a notice each.
Status refuse_or_note_unimplemented(const Reader& r, EnvoySettings& s);

}  // namespace ratelimit::rls::env_detail
