// resp_words.h — what every Redis-protocol command of ratelimitd (resp_api.h, resp_native.h)
// reads and refuses alike: command names and keywords compared as Redis does (ASCII case
// folded), integers as Redis reads them, and Redis's words for a refusal.
// Thread-safety: pure functions over the caller's RespCall.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "resp_connection.h"

namespace ratelimit::server {

// `a` equals `lower` (lower case) with ASCII letters folded.
bool resp_iequals(std::string_view a, std::string_view lower);
// A whole decimal integer ('-' allowed, no blank, no '+'), as Redis reads one; nullopt otherwise.
std::optional<int64_t> resp_integer(std::string_view s);
// An error reply (`message` starts with its code: "ERR ...") counted with `status`.
void resp_refuse(RespCall& call, std::string_view message, unsigned status = 400);
// "ERR wrong number of arguments for '<command>' command".
void resp_wrong_arity(RespCall& call);

}  // namespace ratelimit::server
