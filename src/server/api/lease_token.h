// lease_token.h — the lease id a ratelimitd client holds: the store's random 128-bit lease id
// together with the policy and key it was taken under, as one URL-safe token, so that
// DELETE /v1/leases/{id} and POST /v1/leases/{id}/renew need no body and any ratelimitd sharing
// the store (Redis) can answer them.
//
// Form: "<32 hex digits>.<base64url(policy)>.<base64url(key)>" (no padding). Only the hex part
// is secret: it is the proof of ownership the store checks; the policy and key parts only say
// where to look, and a token forged from them without the right 128 bits frees nothing.
// Invariants: decode(encode(p, k, id)) == {p, k, id} for every valid policy name, key and
// non-empty id; decode refuses anything else (wrong shape, bad base64, an empty part, an empty
// id) without reading past the text. Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ratelimit/decision.h"

namespace ratelimit::server {

struct LeaseToken {
  std::string policy;
  std::string key;
  LeaseId id;
};

std::string encode_lease_token(std::string_view policy, std::string_view key, const LeaseId& id);
// nullopt for anything that encode_lease_token cannot have produced (or longer than max_bytes).
std::optional<LeaseToken> decode_lease_token(std::string_view token, size_t max_bytes = 2048);

}  // namespace ratelimit::server
