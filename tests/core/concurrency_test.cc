// concurrency_test.cc — the concurrency algorithm's pure function (src/core/concurrency.cc)
// beyond the shared vectors: lease ids (hex form, randomness source, fork safety) and a
// randomized run against a naive model that holds the algorithm to its contract — never more
// than `limit` units held, ownership-checked release, expiry at exactly expires_us, and
// retry_after exact to the microsecond when no lease is released.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <random>
#include <set>

#include "ratelimit/algorithms.h"
#include "ratelimit/store.h"

namespace ratelimit {
namespace {

TEST(LeaseId, HexRoundTripsAndRejectsAnythingElse) {
  const LeaseId id = new_lease_id();
  const std::string hex = id.to_hex();
  ASSERT_EQ(hex.size(), 32u);
  EXPECT_EQ(LeaseId::from_hex(hex), id);
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  EXPECT_EQ(LeaseId::from_hex(upper), id);
  EXPECT_FALSE(LeaseId::from_hex(hex.substr(1)));
  EXPECT_FALSE(LeaseId::from_hex(hex + "0"));
  EXPECT_FALSE(LeaseId::from_hex(std::string(31, '0') + "g"));
  EXPECT_FALSE(LeaseId::from_hex(""));
  EXPECT_TRUE(LeaseId{}.empty());
  EXPECT_FALSE(id.empty());
}

TEST(LeaseId, NewIdsAreDistinctAndUseEveryBit) {
  std::set<LeaseId> seen;
  uint8_t any_or = 0, all_and = 0xff;
  for (int i = 0; i < 100'000; ++i) {
    const LeaseId id = new_lease_id();
    ASSERT_TRUE(seen.insert(id).second) << "repeated id after " << i;
    any_or |= id.bytes[15];
    all_and &= id.bytes[15];
  }
  EXPECT_EQ(any_or, 0xff);
  EXPECT_EQ(all_and, 0);
}

// A forked child must not hand out the ids its parent's buffer still holds.
TEST(LeaseId, AForkedChildNeverRepeatsItsParentsIds) {
  (void)new_lease_id();  // the parent's thread now has a filled buffer
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const LeaseId id = new_lease_id();
    const ssize_t n = write(fds[1], id.bytes.data(), id.bytes.size());
    _exit(n == 16 ? 0 : 1);
  }
  const LeaseId parent = new_lease_id();
  LeaseId child;
  ASSERT_EQ(read(fds[0], child.bytes.data(), child.bytes.size()), 16);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  close(fds[0]);
  close(fds[1]);
  EXPECT_NE(parent, child);
}

// A naive model: a map of live leases. The algorithm must agree with it on every answer.
TEST(ConcurrencyAlgorithm, RandomOpsAgreeWithANaiveModel) {
  std::mt19937_64 rng(20);
  for (int run = 0; run < 20; ++run) {
    const int64_t limit = 1 + static_cast<int64_t>(rng() % 8);
    const int64_t ttl = 1000 + static_cast<int64_t>(rng() % 5000);
    const Policy p = Policy::concurrency(limit, Micros{ttl}).value();
    algo::ConcurrencyState s;
    struct Held {
      int64_t expires, weight;
    };
    std::map<LeaseId, Held> model;
    std::vector<LeaseId> issued;
    int64_t now = 1'000'000;
    for (int step = 0; step < 2000; ++step) {
      now += static_cast<int64_t>(rng() % 700);
      std::erase_if(model, [&](const auto& e) { return e.second.expires <= now; });
      int64_t held = 0;
      for (const auto& [id, h] : model) held += h.weight;
      const uint64_t dice = rng() % 10;
      if (dice < 5) {
        const int64_t cost = 1 + static_cast<int64_t>(rng() % (limit + 1));
        const LeaseId id = new_lease_id();
        const Decision d = algo::decide(p, s, now, cost, algo::Op::kAcquire, id);
        if (cost > limit) {
          ASSERT_EQ(d.reason, DecisionReason::kExceedsCapacity);
        } else if (held + cost <= limit) {
          ASSERT_TRUE(d.allowed);
          ASSERT_EQ(d.lease, id);
          model[id] = {now + ttl, cost};
          issued.push_back(id);
          held += cost;
        } else {
          ASSERT_EQ(d.reason, DecisionReason::kOverLimit);
          ASSERT_GT(d.retry_after.count(), 0);
          // Exact: the same request is denied 1 us before retry_after, admitted at it.
          algo::ConcurrencyState before = s, at = s;
          const int64_t t = now + d.retry_after.count();
          EXPECT_FALSE(algo::decide(p, before, t - 1, cost, algo::Op::kPeek, {}).allowed);
          EXPECT_TRUE(algo::decide(p, at, t, cost, algo::Op::kPeek, {}).allowed);
        }
      } else if (dice < 8 && !issued.empty()) {
        const LeaseId id = issued[rng() % issued.size()];
        const bool release = dice < 7;
        const Decision d = algo::decide(p, s, now, 1, release ? algo::Op::kRelease
                                                              : algo::Op::kRenew, id);
        const bool live = model.count(id) == 1;
        ASSERT_EQ(d.allowed, live);
        ASSERT_EQ(d.reason, live ? DecisionReason::kWithinLimit : DecisionReason::kLeaseNotHeld);
        if (live && release) {
          held -= model[id].weight;
          model.erase(id);
        } else if (live) {
          model[id].expires = std::max(model[id].expires, now + ttl);
        }
      } else {
        // A foreign id frees nothing.
        const Decision d = algo::decide(p, s, now, 1, algo::Op::kRelease, new_lease_id());
        ASSERT_EQ(d.reason, DecisionReason::kLeaseNotHeld);
      }
      int64_t state_held = 0;
      for (const auto& e : s.leases) state_held += e.weight;
      ASSERT_EQ(state_held, held) << "run " << run << " step " << step;
      ASSERT_LE(state_held, limit);
      ASSERT_EQ(s.leases.size(), model.size());
      ASSERT_TRUE(std::is_sorted(s.leases.begin(), s.leases.end(),
                                 [](const auto& a, const auto& b) {
                                   return a.expires_us < b.expires_us;
                                 }));
    }
  }
}

// A concurrency key evicted while leases are live comes back holding their units, owned by
// nobody, until the last would have expired: never more admitted than before the eviction.
TEST(ConcurrencyAlgorithm, AnEvictionResidueKeepsTheLiveUnitsUntilTheLastExpiry) {
  const Policy p = Policy::concurrency(5, Micros{1000}).value();
  algo::AlgorithmState s = algo::fresh_state(p);
  const LeaseId a = new_lease_id(), b = new_lease_id();
  ASSERT_TRUE(algo::decide(p, s, 0, 2, algo::Op::kAcquire, a).allowed);
  ASSERT_TRUE(algo::decide(p, s, 300, 1, algo::Op::kAcquire, b).allowed);
  const algo::Residue r = algo::residue_of(p, s, 500);
  EXPECT_EQ(r.used, 3);
  EXPECT_EQ(r.idle_at_us, 1300);
  algo::AlgorithmState back = algo::state_from_residue(p, r, 500);
  EXPECT_EQ(algo::decide(p, back, 500, 3, algo::Op::kPeek, {}).reason, DecisionReason::kOverLimit);
  EXPECT_TRUE(algo::decide(p, back, 500, 2, algo::Op::kPeek, {}).allowed);
  EXPECT_EQ(algo::decide(p, back, 600, 1, algo::Op::kRelease, a).reason, DecisionReason::kLeaseNotHeld);
  EXPECT_EQ(algo::decide(p, back, 1299, 1, algo::Op::kPeek, {}).remaining, 2);
  EXPECT_EQ(algo::decide(p, back, 1300, 1, algo::Op::kPeek, {}).remaining, 5);
}

TEST(ConcurrencyPolicy, ParametersAreValidated) {
  EXPECT_FALSE(Policy::concurrency(0, Micros{1'000'000}).ok());
  EXPECT_FALSE(Policy::concurrency(kMaxConcurrencyLimit + 1, Micros{1'000'000}).ok());
  EXPECT_FALSE(Policy::concurrency(10, Micros{999}).ok());
  EXPECT_FALSE(Policy::concurrency(10, kMaxConcurrencyLeaseTtl + Micros{1}).ok());
  const Policy p = Policy::concurrency(10, Micros{30'000'000}).value();
  EXPECT_EQ(p.algorithm(), Algorithm::kConcurrency);
  EXPECT_EQ(p.lease_ttl(), Micros{30'000'000});
  EXPECT_EQ(parse_algorithm("concurrency").value(), Algorithm::kConcurrency);
}

TEST(ConcurrencyPolicy, IsDecidedAloneNeverInAllOrNothing) {
  const Policy c = Policy::concurrency(2, Micros{1'000'000}).value().with_name("c").value();
  const Policy r = Policy::fixed_window(2, Micros{1'000'000}).value().with_name("r").value();
  const std::vector<Policy> both{r, c};
  EXPECT_EQ(validate_acquire_all(both, "k", 1).code(), StatusCode::kInvalidArgument);
  const StoreOp ops[] = {{&r, "k", 1, StoreOp::Kind::kAcquire}, {&c, "k", 1, StoreOp::Kind::kAcquire}};
  EXPECT_EQ(validate_decide_many(ops, Atomicity::kAllOrNothing).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(validate_decide_many(ops, Atomicity::kIndependent).is_ok());
  const StoreOp release_rate{&r, "k", 1, StoreOp::Kind::kRelease, new_lease_id()};
  EXPECT_EQ(validate_decide_many({&release_rate, 1}, Atomicity::kIndependent).code(),
            StatusCode::kInvalidArgument);
  const StoreOp release_nothing{&c, "k", 1, StoreOp::Kind::kRelease};
  EXPECT_EQ(validate_decide_many({&release_nothing, 1}, Atomicity::kIndependent).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ratelimit
