// log.h — ratelimitd's log: one line per event on stderr, as text
// ("<UTC time> <level> <message>") or as JSON ({"level":"info","msg":"...","time":"..."}, the
// keys logrus uses, so envoyproxy/ratelimit's LOG_FORMAT=json consumers read it unchanged).
// Why so small: the service logs events (start, reload, shutdown, failures), never requests,
// and callers never pass secrets (the admin token, a Redis password) to it.
// One home for --log-level/--log-format and envoyproxy/ratelimit's LOG_LEVEL/LOG_FORMAT: both
// are parsed by parse_log_level/parse_log_format and applied with set_log_options.
// Thread-safe: lines from several threads never interleave; set_log_options before serving.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ratelimit::server {

enum class LogLevel : uint8_t { kDebug, kInfo, kWarn, kError };
enum class LogFormat : uint8_t { kText, kJson };

// Case-insensitive debug, info, warn, error; also logrus' trace (= debug), warning (= warn),
// fatal and panic (= error), as envoyproxy/ratelimit's LOG_LEVEL accepts them. nullopt otherwise.
[[nodiscard]] std::optional<LogLevel> parse_log_level(std::string_view text);
// "text" or "json" (exactly). nullopt otherwise.
[[nodiscard]] std::optional<LogFormat> parse_log_format(std::string_view text);

// Lines below `level` are dropped. Defaults: info, text.
void set_log_options(LogLevel level, LogFormat format);
bool log_enabled(LogLevel level);

void log_line(LogLevel level, std::string_view message);
// `level` is "debug", "info", "warn" or "error" (anything else logs as error).
void log_line(std::string_view level, std::string_view message);

}  // namespace ratelimit::server
