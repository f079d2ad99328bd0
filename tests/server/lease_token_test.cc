// lease_token_test.cc — the lease token of ratelimitd's lease API (src/server/lease_token.h):
// it round-trips every policy name and key (any bytes), and anything it cannot have produced is
// refused.
#include <gtest/gtest.h>

#include <random>

#include "lease_token.h"
#include "ratelimit/store.h"

namespace ratelimit::server {
namespace {

TEST(LeaseToken, RoundTripsAnyKeyAndIsUrlSafe) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string key(1 + rng() % 300, '\0');
    for (char& c : key) c = static_cast<char>(rng() % 256);
    const std::string policy = "db_" + std::to_string(i);
    const LeaseId id = new_lease_id();
    const std::string t = encode_lease_token(policy, key, id);
    for (char c : t) {
      ASSERT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') << t;
    }
    auto back = decode_lease_token(t);
    ASSERT_TRUE(back.has_value()) << t;
    EXPECT_EQ(back->policy, policy);
    EXPECT_EQ(back->key, key);
    EXPECT_EQ(back->id, id);
  }
}

TEST(LeaseToken, RefusesWhatItCannotHaveProduced) {
  const LeaseId id = new_lease_id();
  const std::string good = encode_lease_token("db", "tenant:7", id);
  ASSERT_TRUE(decode_lease_token(good));
  const std::string hex = id.to_hex();
  for (const std::string& bad : {
           std::string(), std::string("x"), hex, hex + ".", hex + ".ZGI", hex + ".ZGI.",
           hex + "..dGVuYW50Ojc", hex.substr(1) + ".ZGI.dGVuYW50Ojc",
           std::string(32, '0') + ".ZGI.dGVuYW50Ojc",   // the empty id is never issued
           hex + ".ZGI=.dGVuYW50Ojc",                      // padding
           hex + ".ZGJ.dGVuYW50Ojc",                       // stray bits in the last sextet
           hex + ".Z.dGVuYW50Ojc",                         // impossible length
           hex + ".ZGI.dGVuYW50Ojc.more", hex + ".ZG!.dGVuYW50Ojc", good + std::string(3000, 'A')}) {
    EXPECT_FALSE(decode_lease_token(bad)) << bad;
  }
}

}  // namespace
}  // namespace ratelimit::server
