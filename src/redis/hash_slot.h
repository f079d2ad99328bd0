// hash_slot.h — Redis Cluster's key -> slot mapping: CRC16 (XMODEM) of the key's hash tag,
// modulo 16384, exactly as the cluster specification defines it. Pure code.
//
// Why here and not in the router: the invoker and the store compute a command's slot from its
// first key; the router only looks the slot up. The store's keys all carry a brace-free tag
// `{<escaped user key>}` right after the brace-free prefix, so every key of one user key (the
// sliding log's `#log` set, every policy of an acquire_all) hashes to one slot.
#pragma once

#include <cstdint>
#include <string_view>

namespace ratelimit::redis_detail {

inline constexpr int kSlotCount = 16384;
// A command with no key (or a router that does not route by slot).
inline constexpr int kAnySlot = -1;

// CRC16-CCITT (XMODEM: poly 0x1021, init 0, no reflection): crc16("123456789") == 0x31C3.
uint16_t crc16(std::string_view data);

// The slot of `key`: of the part between the first '{' and the next '}' when that part is
// non-empty, else of the whole key. 0 ... 16383.
int key_hash_slot(std::string_view key);

}  // namespace ratelimit::redis_detail
