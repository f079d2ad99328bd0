// hash_slot.cc — CRC16 and the hash-tag rule of Redis Cluster (see hash_slot.h).
#include "hash_slot.h"

#include <array>

namespace ratelimit::redis_detail {
namespace {

constexpr std::array<uint16_t, 256> make_table() {
  std::array<uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    unsigned crc = i << 8;
    for (int b = 0; b < 8; ++b) crc = (crc & 0x8000u) != 0 ? (crc << 1) ^ 0x1021u : crc << 1;
    t[i] = static_cast<uint16_t>(crc & 0xFFFFu);
  }
  return t;
}

constexpr std::array<uint16_t, 256> kTable = make_table();

}  // namespace

uint16_t crc16(std::string_view data) {
  unsigned crc = 0;
  for (char c : data) {
    const unsigned byte = static_cast<unsigned char>(c);
    crc = ((crc << 8) ^ kTable[((crc >> 8) ^ byte) & 0xFFu]) & 0xFFFFu;
  }
  return static_cast<uint16_t>(crc);
}

int key_hash_slot(std::string_view key) {
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return crc16(key) % kSlotCount;
}

}  // namespace ratelimit::redis_detail
