// quota_sync_test.cc — the pure parts of the RLQS demand exchange between instances
// (src/rlqs/quota_sync.h) and the service's side of it, on a ManualClock: a bucket's clients as a
// field's value and back (expiries carried across clocks by their age, malformed entries
// skipped), the hash key of a bucket (long ones shortened, distinct ones kept distinct), and two
// QuotaServices — two instances — exchanging their clients by hand so that each assigns its own
// clients their shares of the whole fleet. The exchange through a real Redis between real
// daemons is tests/grpc/rlqs_instances_e2e_test.cc.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "quota_sync.h"
#include "ratelimit/clock.h"
#include "test_rules.h"
#include "ratelimit/store.h"

namespace ratelimit::rlqs {
namespace {

using fair_share::RemoteClient;

TEST(QuotaSyncCodec, ClientsRoundTripWithTheirAge) {
  const std::vector<RemoteClient> clients = {{10'000, 3'000'000}, {std::nullopt, 2'000'500}, {0, 1'000'200}};
  const std::string v = encode_clients(clients, 1'000'000);
  EXPECT_EQ(v, "10000:2000 ?:1000 0:1");  // at least 1 ms left
  // Read 300 ms after it was written (store's clock), at the reader's 50 s.
  EXPECT_EQ(decode_clients(v, 50'000'000, 300),
            (std::vector<RemoteClient>{{10'000, 51'700'000}, {std::nullopt, 50'700'000}}));  // the third expired
  EXPECT_TRUE(decode_clients("", 0, 0).empty());
  // Malformed entries are skipped, the others kept.
  EXPECT_EQ(decode_clients("x:5 5 -1:5 7:0 7:-3 9:x 1000000000001:5 ?:5 :5 8:5", 0, 0),
            (std::vector<RemoteClient>{{std::nullopt, 5'000}, {8, 5'000}}));
}

TEST(QuotaSyncCodec, KeysFitTheStoreAndStayDistinct) {
  EXPECT_EQ(sync_key("5:envoy4:name3:api"), "rlqs:5:envoy4:name3:api");
  const std::string long_a(1000, 'a');
  std::string long_b = long_a;
  long_b.back() = 'b';
  EXPECT_LE(sync_key(long_a).size(), kMaxKeyLength);
  EXPECT_NE(sync_key(long_a), sync_key(long_b));
}

std::shared_ptr<const QuotaRules> rules() {
  auto r = std::make_shared<QuotaRules>();
  r->rules.push_back(limit_rule("api", 300));
  return r;
}

TEST(QuotaSyncService, TwoInstancesAssignTheirShareOfTheFleet) {
  ManualClock clock;
  QuotaService one(rules(), {100, &clock}), two(rules(), {100, &clock});
  const uint64_t a = one.new_client(), c = one.new_client(), b = two.new_client();
  std::vector<BucketAnswer> out;
  const BucketKey api = {{"name", "api"}};
  auto report = [&](QuotaService& q, uint64_t client, uint64_t allowed, uint64_t denied, int64_t elapsed) {
    q.report(client, "envoy", std::vector<BucketReport>{{api, allowed, denied, elapsed}}, out);
    return out.at(0).assignment.tokens_per_fill;
  };
  // First reports, then the exchange (what QuotaSync does through the store).
  report(one, a, 0, 0, 0);
  report(one, c, 0, 0, 0);
  report(two, b, 0, 0, 0);
  auto exchange = [&] {
    std::vector<BucketClients> l1 = one.local_clients(), l2 = two.local_clients();
    ASSERT_EQ(l1.size(), 1U);
    ASSERT_EQ(l2.size(), 1U);
    EXPECT_EQ(l1[0].key, l2[0].key) << "one bucket, one key in every instance";
    one.set_remote(l1[0].key, l2[0].clients);
    two.set_remote(l2[0].key, l1[0].clients);
  };
  exchange();
  clock.advance(Micros{1'000'000});
  report(one, a, 10, 0, 1'000'000);
  report(two, b, 100, 0, 1'000'000);
  report(one, c, 100, 900, 1'000'000);
  exchange();
  clock.advance(Micros{1'000'000});
  EXPECT_EQ(report(one, a, 10, 0, 1'000'000), 10);
  EXPECT_EQ(report(two, b, 100, 0, 1'000'000), 100);
  EXPECT_EQ(report(one, c, 190, 810, 1'000'000), 190);
  EXPECT_EQ(one.buckets(1).at(0).remote_clients, 1U);
  EXPECT_EQ(two.buckets(1).at(0).remote_clients, 2U);
  // No exchange any more (the store is down): the remote clients leave at their expiry, then
  // each instance divides the whole limit among its own clients.
  clock.advance(Micros{1'000'000});
  report(one, a, 10, 0, 1'000'000);
  report(two, b, 100, 0, 1'000'000);
  report(one, c, 190, 810, 1'000'000);
  clock.advance(Micros{1'000'000});
  EXPECT_EQ(report(two, b, 100, 0, 1'000'000), 300);
  EXPECT_EQ(report(one, c, 190, 810, 1'000'000), 290);
  EXPECT_EQ(two.buckets(1).at(0).remote_clients, 0U);
  // An unknown bucket's remote clients are ignored.
  one.set_remote("nothing", {{1, 1}});
  EXPECT_EQ(one.stats().buckets, 1U);
}

}  // namespace
}  // namespace ratelimit::rlqs
