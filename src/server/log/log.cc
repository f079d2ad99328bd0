// log.cc — see log.h. A mutex keeps each line whole; time is UTC with millisecond precision.
// The JSON form escapes the message as a JSON string (http::append_json_string: invalid UTF-8
// becomes U+FFFD), so every line parses whatever a message holds.
#include "log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

#include "mutex.h"
#include "ratelimit/http.h"

namespace ratelimit::server {
namespace {

std::atomic<LogLevel> g_level{LogLevel::kInfo};
std::atomic<LogFormat> g_format{LogFormat::kText};

constexpr const char* kNames[] = {"debug", "info", "warn", "error"};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != b[i]) return false;
  }
  return true;
}

}  // namespace

std::optional<LogLevel> parse_log_level(std::string_view t) {
  if (iequals(t, "debug") || iequals(t, "trace")) return LogLevel::kDebug;
  if (iequals(t, "info")) return LogLevel::kInfo;
  if (iequals(t, "warn") || iequals(t, "warning")) return LogLevel::kWarn;
  if (iequals(t, "error") || iequals(t, "fatal") || iequals(t, "panic")) return LogLevel::kError;
  return std::nullopt;
}

std::optional<LogFormat> parse_log_format(std::string_view t) {
  if (t == "text") return LogFormat::kText;
  if (t == "json") return LogFormat::kJson;
  return std::nullopt;
}

void set_log_options(LogLevel level, LogFormat format) {
  g_level.store(level, std::memory_order_relaxed);
  g_format.store(format, std::memory_order_relaxed);
}

bool log_enabled(LogLevel level) { return level >= g_level.load(std::memory_order_relaxed); }

void log_line(LogLevel level, std::string_view message) {
  if (!log_enabled(level)) return;
  static Mutex mu;
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[40];
  const size_t n = std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(stamp + n, sizeof stamp - n, ".%03dZ", static_cast<int>(ms));
  const char* name = kNames[static_cast<size_t>(level)];
  std::string line;
  line.reserve(message.size() + 64);
  if (g_format.load(std::memory_order_relaxed) == LogFormat::kJson) {
    line = "{\"level\":\"";
    line += name;
    line += "\",\"msg\":";
    http::append_json_string(line, message);
    line += ",\"time\":\"";
    line += stamp;
    line += "\"}\n";
  } else {
    line = stamp;
    line += ' ';
    line += name;
    line += ' ';
    line += message;
    line += '\n';
  }
  MutexLock lock(mu);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void log_line(std::string_view level, std::string_view message) {
  log_line(parse_log_level(level).value_or(LogLevel::kError), message);
}

}  // namespace ratelimit::server
