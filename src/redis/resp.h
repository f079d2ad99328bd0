// resp.h — RESP helpers shared by every layer of the Redis store: encoding a command (the RESP
// array of bulk strings that redisFormatCommandArgv makes, without its printf) and naming a
// reply in messages. Pure code, no I/O.
#pragma once

#include <span>
#include <string>

struct redisReply;

namespace ratelimit::redis_detail {

// RESP bytes of a command: any bytes are safe in arguments.
std::string encode_command(std::span<const std::string> argv);

// A reply's text for messages: the string or error, else its type; "no reply" for null.
std::string reply_text(const redisReply* reply);

}  // namespace ratelimit::redis_detail
