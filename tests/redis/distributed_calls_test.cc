// distributed_calls_test.cc — RedisStore's lease/async calls (reserve, add_hits; shared_counts.h)
// against a real redis-server: the shared vectors (tests/vectors/distributed.json) through FCALL
// and through EVALSHA give the core's SharedViews exactly, and the calls share one count with
// exact decisions of the same policy.
#include <gtest/gtest.h>

#include <future>

#include "distributed_vectors.h"
#include "store_test_util.h"

namespace ratelimit::testing {
namespace {

Result<algo::SharedView> run_step(RedisStore& store, const Policy& policy, const std::string& key,
                                  const vectors::DistributedStep& step) {
  std::promise<Result<algo::SharedView>> p;
  auto f = p.get_future();
  auto done = [&p](Result<algo::SharedView> v) { p.set_value(std::move(v)); };
  if (step.op == vectors::DistributedStep::Op::kReserve) {
    store.reserve_async(policy, key, step.give_back_window_us, step.give_back, step.want, done);
  } else {
    store.add_hits_async(policy, key, step.window_us, step.hits, done);
  }
  if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    return Status::deadline_exceeded("no answer in 10 s");
  }
  return f.get();
}

class DistributedCallsTest : public ::testing::TestWithParam<bool> {};

TEST_P(DistributedCallsTest, SharedVectorsGiveTheCoresViews) {
  auto url = shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  auto cases = vectors::load_distributed(std::string(RATELIMIT_VECTORS_DIR) + "/distributed.json");
  ASSERT_TRUE(cases.ok()) << cases.status().to_string();
  ManualClock clock;
  auto o = options_for(*url);
  o.test_clock = &clock;
  o.use_functions = GetParam();
  o.key_prefix = unique_prefix("distributed");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  auto failures = vectors::run_distributed(
      *cases, "k", [&](const Policy& policy, const std::string& key, const vectors::DistributedStep& step) {
        clock.set(Micros{step.t_us});
        return run_step(*store, policy, key, step);
      });
  EXPECT_TRUE(failures.empty()) << vectors::format_failures(failures);
  EXPECT_EQ(store->uses_functions(), GetParam());
  EXPECT_EQ(store->counters().errors, 0u);
}

INSTANTIATE_TEST_SUITE_P(FcallAndEvalsha, DistributedCallsTest, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "fcall" : "evalsha"; });

TEST(DistributedCalls, ShareOneCountWithExactDecisions) {
  auto url = shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  ManualClock clock;
  clock.set(Micros{5'000'000});
  auto o = options_for(*url);
  o.test_clock = &clock;
  o.key_prefix = unique_prefix("distributed-mix");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  for (auto base : {Policy::fixed_window(10, std::chrono::seconds(1)),
                    Policy::sliding_window_counter(10, std::chrono::seconds(1))}) {
    const Policy p = named(std::move(base), "mix");
    const std::string key = std::string("k-") + algorithm_name(p.algorithm());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->acquire(p, key).value().allowed);
    vectors::DistributedStep reserve;
    reserve.want = 100;
    auto v = run_step(*store, p, key, reserve);
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    EXPECT_EQ(v->granted, 7);  // what the exact decisions left
    EXPECT_FALSE(store->acquire(p, key).value().allowed);
    vectors::DistributedStep give_back;
    give_back.give_back_window_us = v->window_start_us;
    give_back.give_back = 2;
    ASSERT_TRUE(run_step(*store, p, key, give_back).ok());
    EXPECT_TRUE(store->acquire(p, key).value().allowed);
    EXPECT_TRUE(store->acquire(p, key).value().allowed);
    EXPECT_FALSE(store->acquire(p, key).value().allowed);
  }
  // A bucket policy is refused before anything is sent.
  vectors::DistributedStep any;
  auto bad = run_step(*store, named(Policy::token_bucket(1, 5), "tb"), "k", any);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ratelimit::testing
