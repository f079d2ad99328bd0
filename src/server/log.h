// log.h — ratelimitd's log: one line per event on stderr, "<UTC time> <level> <message>".
// Why so small: the service logs events (start, reload, shutdown, failures), never requests,
// and callers never pass secrets (the admin token, a Redis password) to it.
// Thread-safe: lines from several threads never interleave.
#pragma once

#include <string_view>

namespace ratelimit::server {

void log_line(std::string_view level, std::string_view message);

}  // namespace ratelimit::server
