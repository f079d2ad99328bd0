// hash_slot_test.cc — Redis Cluster's key -> slot rule (CRC16 XMODEM of the hash tag), checked
// against the specification's values, and the store's key layout: every key of one user key
// (each policy, the sliding log's set) lands in one slot, so multi-key scripts are single-slot.
#include "hash_slot.h"

#include <gtest/gtest.h>

#include "ratelimit/redis_store.h"
#include "script_codec.h"

namespace ratelimit::redis_detail {
namespace {

TEST(HashSlot, Crc16IsXmodem) {
  EXPECT_EQ(crc16("123456789"), 0x31C3);  // the cluster specification's check value
  EXPECT_EQ(crc16(""), 0);
}

TEST(HashSlot, SlotsOfKnownKeys) {
  EXPECT_EQ(key_hash_slot("foo"), 12182);  // redis-cli: "Redirected to slot [12182]"
  EXPECT_EQ(key_hash_slot("123456789"), 0x31C3 % 16384);
}

TEST(HashSlot, HashTagRules) {
  EXPECT_EQ(key_hash_slot("{user1000}.following"), key_hash_slot("{user1000}.followers"));
  EXPECT_EQ(key_hash_slot("{user1000}.following"), key_hash_slot("user1000"));
  EXPECT_EQ(key_hash_slot("foo{}{bar}"), crc16("foo{}{bar}") % 16384);  // empty tag: whole key
  EXPECT_EQ(key_hash_slot("foo{{bar}}zap"), key_hash_slot("{bar"));     // first '{' to next '}'
  EXPECT_EQ(key_hash_slot("foo{bar}{zap}"), key_hash_slot("bar"));      // the first tag only
  EXPECT_EQ(key_hash_slot("no}tag{"), crc16("no}tag{") % 16384);
}

TEST(HashSlot, AllKeysOfOneUserKeyShareASlot) {
  const std::vector<std::string> users = {"user:42", "}{", "%7B", "a{b}c", std::string(512, 'x')};
  for (const std::string& user : users) {
    const std::string fw = redis_state_key("rl:", user, "per_second");
    const std::string swl = redis_state_key("rl:", user, "per_hour");
    EXPECT_EQ(key_hash_slot(fw), key_hash_slot(log_key(swl))) << user;
    EXPECT_EQ(key_hash_slot(fw), key_hash_slot(escape_key(user))) << user;
  }
}

}  // namespace
}  // namespace ratelimit::redis_detail
