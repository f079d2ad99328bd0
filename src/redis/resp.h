// resp.h — RESP helpers shared by every layer of the Redis store: encoding a command (the RESP
// array of bulk strings that redisFormatCommandArgv makes, without its printf) and naming a
// reply in messages. Pure code, no I/O.
#pragma once

#include <span>
#include <string>
#include <string_view>

struct redisReply;

namespace ratelimit::redis_detail {

// RESP bytes of a command: any bytes are safe in arguments.
std::string encode_command(std::span<const std::string> argv);

// A reply's text for messages: the string or error, else its type; "no reply" for null.
std::string reply_text(const redisReply* reply);

// The bytes a reply carries (a string, status, error or verbatim reply); empty for any other
// reply and for null. Points into the reply: valid while it is.
std::string_view reply_str(const redisReply* reply);

}  // namespace ratelimit::redis_detail
