// grpc_wire.cc — gRPC's framing, timeout and status text (see grpc_wire.h).
#include "grpc_wire.h"

namespace ratelimit::grpc_api {

GrpcCode grpc_code(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return GrpcCode::kOk;
    case StatusCode::kInvalidArgument: return GrpcCode::kInvalidArgument;
    case StatusCode::kDeadlineExceeded: return GrpcCode::kDeadlineExceeded;
    case StatusCode::kResourceExhausted: return GrpcCode::kResourceExhausted;
    case StatusCode::kNotFound: return GrpcCode::kNotFound;
    case StatusCode::kInternal: return GrpcCode::kInternal;
    default: return GrpcCode::kUnavailable;
  }
}

std::string_view code_text(GrpcCode code) {
  static constexpr std::string_view kText[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8",
                                               "9", "10", "11", "12", "13", "14", "15", "16"};
  const auto i = static_cast<size_t>(code);
  return i < std::size(kText) ? kText[i] : "2";
}

std::optional<std::chrono::nanoseconds> parse_timeout(std::string_view v) {
  if (v.size() < 2 || v.size() > 9) return std::nullopt;
  int64_t n = 0;
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    if (v[i] < '0' || v[i] > '9') return std::nullopt;
    n = n * 10 + (v[i] - '0');
  }
  using namespace std::chrono;
  // At most 99,999,999 units: hours fit in nanoseconds' int64 (about 292 years).
  switch (v.back()) {
    case 'H': return duration_cast<nanoseconds>(hours(n));
    case 'M': return duration_cast<nanoseconds>(minutes(n));
    case 'S': return duration_cast<nanoseconds>(seconds(n));
    case 'm': return duration_cast<nanoseconds>(milliseconds(n));
    case 'u': return duration_cast<nanoseconds>(microseconds(n));
    case 'n': return nanoseconds(n);
    default: return std::nullopt;
  }
}

std::string percent_encode(std::string_view m) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(m.size());
  for (const char c : m) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b <= 0x7E && b != '%') {
      out += c;
    } else {
      out += '%';
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
  return out;
}

void append_prefix(std::string& out, uint32_t length) {
  const char p[5] = {0, static_cast<char>(length >> 24), static_cast<char>(length >> 16),
                     static_cast<char>(length >> 8), static_cast<char>(length)};
  out.append(p, 5);
}

bool MessageReader::check_prefix() {
  if (buf_.size() - off_ < 5) return true;
  const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + off_);
  const uint32_t len = uint32_t{p[1]} << 24 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 8 | p[4];
  if (p[0] == 1) {
    error_code_ = GrpcCode::kUnimplemented;
    error_ = Status::invalid_argument("compressed messages are not accepted (no grpc-encoding is)");
    return false;
  }
  if (p[0] != 0) {
    error_code_ = GrpcCode::kInternal;
    error_ = Status::invalid_argument("bad message flag " + std::to_string(p[0]));
    return false;
  }
  if (len > max_bytes_) {
    error_code_ = GrpcCode::kResourceExhausted;
    error_ = Status::resource_exhausted("message of " + std::to_string(len) + " bytes is larger than the limit of " +
                                        std::to_string(max_bytes_));
    return false;
  }
  return true;
}

bool MessageReader::feed(std::string_view bytes) {
  if (error_code_ != GrpcCode::kOk) return false;
  if (off_ > 0 && (off_ == buf_.size() || off_ >= 4096)) {
    buf_.erase(0, off_);
    off_ = 0;
  }
  buf_.append(bytes);
  return check_prefix();
}

std::optional<std::string_view> MessageReader::next() {
  if (error_code_ != GrpcCode::kOk || buf_.size() - off_ < 5 || !check_prefix()) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + off_);
  const uint32_t len = uint32_t{p[1]} << 24 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 8 | p[4];
  if (buf_.size() - off_ - 5 < len) return std::nullopt;
  const std::string_view m(buf_.data() + off_ + 5, len);
  off_ += 5 + len;
  return m;
}

}  // namespace ratelimit::grpc_api
