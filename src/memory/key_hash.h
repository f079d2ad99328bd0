// key_hash.h — the hash that places (policy name, key) in a shard and a table slot.
//
// Why our own: std::hash<string_view> is fine but slower on short keys; this one mixes eight
// bytes per 64x64->128-bit multiply (the wyhash construction), is seeded per store so keys
// chosen to collide in one process do not collide in another, and hashes the name (through
// its precomputed hash) and the key as separate fields, so ("ab", "c") and ("a", "bc") never
// mean the same input.
// Not cryptographic. Internal to src/memory.
// Invariants: deterministic for a given seed; the top bits of key_hash choose the shard, the
// low 32 bits the table position, so the two are independent.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace ratelimit::memory {

__extension__ using Uint128 = unsigned __int128;

inline uint64_t mix(uint64_t a, uint64_t b) {
  const Uint128 r = static_cast<Uint128>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}

inline uint64_t load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline uint64_t load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Byte equality of two strings of length n, inlined (the keys and names compared here are
// short; a call to memcmp costs more than the comparison).
inline bool same_bytes(const char* a, const char* b, size_t n) {
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8) {
      if (load64(a + i) != load64(b + i)) return false;
    }
    return load64(a + n - 8) == load64(b + n - 8);
  }
  if (n >= 4) return load32(a) == load32(b) && load32(a + n - 4) == load32(b + n - 4);
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

inline constexpr uint64_t kP0 = 0xa0761d6478bd642fULL;
inline constexpr uint64_t kP1 = 0xe7037ed1a0b428dbULL;
inline constexpr uint64_t kP2 = 0x8ebc6af09c88c6e3ULL;

// Folds one length-delimited field into `h`.
inline uint64_t hash_field(std::string_view s, uint64_t h) {
  const char* p = s.data();
  size_t n = s.size();
  h = mix(h ^ kP0, n ^ kP1);
  while (n >= 8) {
    h = mix(h ^ load64(p), kP1);
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t w;
    if (n >= 4) {
      w = (load32(p) << 32) | load32(p + n - 4);
    } else {
      const auto* u = reinterpret_cast<const unsigned char*>(p);
      w = (uint64_t{u[0]} << 16) | (uint64_t{u[n / 2]} << 8) | u[n - 1];
    }
    h = mix(h ^ w, kP2);
  }
  return h;
}

// The policy name's hash under the store's seed (also the key of the shard's policy table),
// from Policy::name_hash(), the unseeded hash the Policy computed once: one multiply per
// request instead of hashing the name again. Two names whose unseeded hashes collide keep
// colliding under every seed; that costs probe length, never correctness (the shard compares
// the names), and names are the operator's choice, not the client's.
inline uint64_t name_hash(uint64_t seed, uint64_t policy_name_hash) {
  return mix(seed ^ kP0, policy_name_hash ^ kP1);
}
// The hash of (policy name, key), from the name's hash.
inline uint64_t key_hash(uint64_t policy_name_hash, std::string_view key) {
  return mix(hash_field(key, policy_name_hash), kP0);
}

}  // namespace ratelimit::memory
