// lease_token.cc — encoding and decoding of ratelimitd's lease tokens (see lease_token.h).
#include "lease_token.h"

#include <array>

namespace ratelimit::server {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void append_base64url(std::string& out, std::string_view in) {
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(in[i]) << 16 | static_cast<uint8_t>(in[i + 1]) << 8 |
                       static_cast<uint8_t>(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kAlphabet[(v >> s) & 63]);
  }
  const size_t rest = in.size() - i;
  if (rest == 0) return;
  uint32_t v = static_cast<uint8_t>(in[i]) << 16;
  if (rest == 2) v |= static_cast<uint8_t>(in[i + 1]) << 8;
  out.push_back(kAlphabet[(v >> 18) & 63]);
  out.push_back(kAlphabet[(v >> 12) & 63]);
  if (rest == 2) out.push_back(kAlphabet[(v >> 6) & 63]);
}

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

// Strict: no padding, no stray bits in the last sextet (so each text has one decoding and one
// encoding), a length that base64url without padding can have.
bool decode_base64url(std::string_view in, std::string& out) {
  if (in.size() % 4 == 1) return false;
  out.clear();
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = sextet(c);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return (acc & ((1U << bits) - 1)) == 0;
}

}  // namespace

std::string encode_lease_token(std::string_view policy, std::string_view key, const LeaseId& id) {
  std::string out = id.to_hex();
  out.push_back('.');
  append_base64url(out, policy);
  out.push_back('.');
  append_base64url(out, key);
  return out;
}

std::optional<LeaseToken> decode_lease_token(std::string_view token, size_t max_bytes) {
  if (token.size() > max_bytes || token.size() < 36 || token[32] != '.') return std::nullopt;
  auto id = LeaseId::from_hex(token.substr(0, 32));
  if (!id || id->empty()) return std::nullopt;
  const std::string_view rest = token.substr(33);
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == rest.size()) return std::nullopt;
  LeaseToken t;
  t.id = *id;
  if (!decode_base64url(rest.substr(0, dot), t.policy)) return std::nullopt;
  if (!decode_base64url(rest.substr(dot + 1), t.key)) return std::nullopt;
  if (t.policy.empty() || t.key.empty()) return std::nullopt;
  return t;
}

}  // namespace ratelimit::server
