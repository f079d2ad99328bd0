// log.cc — see log.h. A mutex keeps each line whole; time is UTC with millisecond precision.
#include "log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace ratelimit::server {

void log_line(std::string_view level, std::string_view message) {
  static std::mutex mu;
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  std::lock_guard lock(mu);
  std::fprintf(stderr, "%s.%03dZ %.*s %.*s\n", stamp, static_cast<int>(ms),
               static_cast<int>(level.size()), level.data(), static_cast<int>(message.size()),
               message.data());
  std::fflush(stderr);
}

}  // namespace ratelimit::server
