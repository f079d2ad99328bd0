// grpc_wire.h — gRPC over HTTP/2 as bytes and fields (the "gRPC over HTTP2" protocol document):
// the 5-byte message prefix, grpc-timeout, the status codes and grpc-message's percent
// encoding. Pure functions, no I/O, no protobuf: the handlers (grpc_handler.cc) and the fuzz
// target use them.
// Thread-safety: stateless functions; a MessageReader belongs to one stream.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ratelimit/status.h"

namespace ratelimit::grpc_api {

// grpc-status values (google.rpc.Code) used here.
enum class GrpcCode : uint8_t {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kResourceExhausted = 8,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
};

// Our Status as a gRPC code (kInvalidArgument → INVALID_ARGUMENT, a store's error UNAVAILABLE,
// its timeout DEADLINE_EXCEEDED ...).
GrpcCode grpc_code(const Status& s);
// "0" ... "16" for the grpc-status field.
std::string_view code_text(GrpcCode code);

// grpc-timeout: 1 to 8 ASCII digits and a unit (H M S m u n). nullopt when malformed.
[[nodiscard]] std::optional<std::chrono::nanoseconds> parse_timeout(std::string_view value);

// grpc-message: percent-encodes every byte outside 0x20..0x7E and '%' itself.
std::string percent_encode(std::string_view message);

// Appends the 5-byte prefix (uncompressed, big-endian length) of a message of `length` bytes.
void append_prefix(std::string& out, uint32_t length);

// Splits a stream's request body into messages. feed() the DATA bytes as they come; next()
// gives each whole message. A message announced larger than `max_bytes` is refused as soon as
// its prefix arrives (RESOURCE_EXHAUSTED), a compressed one (flag 1: we accept no
// grpc-encoding) as UNIMPLEMENTED, a flag other than 0 or 1 as INTERNAL.
class MessageReader {
 public:
  explicit MessageReader(size_t max_bytes = 4 * 1024 * 1024) : max_bytes_(max_bytes) {}
  void reset(size_t max_bytes) {
    max_bytes_ = max_bytes;
    buf_.clear();
    off_ = 0;
    error_ = {};
    error_code_ = GrpcCode::kOk;
  }
  // Appends bytes (ignored once an error was found). Returns false on a framing error.
  bool feed(std::string_view bytes);
  // The next whole message, or nullopt (need more bytes, or an error). The view stays valid
  // until the next feed() or reset().
  std::optional<std::string_view> next();
  // Bytes of an unfinished message (0 when the body ended on a message boundary).
  size_t partial() const { return buf_.size() - off_; }
  // The framing error, if any (code and message for the trailers).
  const Status& error() const { return error_; }
  GrpcCode error_code() const { return error_code_; }

 private:
  bool check_prefix();
  size_t max_bytes_;
  std::string buf_;
  size_t off_ = 0;
  Status error_;
  GrpcCode error_code_ = GrpcCode::kOk;
};

}  // namespace ratelimit::grpc_api
