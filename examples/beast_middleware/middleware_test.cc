// middleware_test.cc — RateLimitMiddleware in front of a handler, driven by a manual clock:
// admitted requests reach the handler and carry the RateLimit fields; denied ones get the
// same 429 as ratelimitd (Retry-After, RateLimit, JSON body) and never reach the handler;
// keys are independent; time brings the quota back.
#include <gtest/gtest.h>

#include <memory>

#include "rate_limit_middleware.h"
#include "ratelimit/memory_store.h"

namespace example {
namespace {

struct Fixture {
  ratelimit::ManualClock clock{ratelimit::Micros{1'000'000'000'000}};
  std::shared_ptr<ratelimit::MemoryStore> store;
  int handled = 0;
  RateLimitMiddleware app;

  Fixture()
      : store(std::make_shared<ratelimit::MemoryStore>(ratelimit::MemoryStoreOptions{1000, 4, &clock})),
        app(ratelimit::Limiter(ratelimit::Policy::token_bucket(1, 2).value().with_name("hello").value(), store),
            [](const Request& r) {
              auto it = r.find("X-Api-Key");
              return it == r.end() ? std::string() : std::string(it->value());
            },
            [this](const Request& r) {
              ++handled;
              Response res{bhttp::status::ok, r.version()};
              res.body() = "hello";
              res.prepare_payload();
              return res;
            }) {}

  Response call(const std::string& api_key) {
    Request req{bhttp::verb::get, "/", 11};
    if (!api_key.empty()) req.set("X-Api-Key", api_key);
    return app(req);
  }
};

TEST(RateLimitMiddleware, AdmitsWithHeadersThenAnswers429) {
  Fixture f;
  Response a = f.call("alice");
  EXPECT_EQ(a.result_int(), 200u);
  EXPECT_EQ(a.body(), "hello");
  EXPECT_EQ(a["RateLimit-Policy"], "\"hello\";q=2;w=2");
  EXPECT_EQ(a["RateLimit"], "\"hello\";r=1;t=1");
  EXPECT_EQ(f.call("alice").result_int(), 200u);
  Response d = f.call("alice");
  EXPECT_EQ(d.result_int(), 429u);
  EXPECT_EQ(d["Retry-After"], "1");
  EXPECT_EQ(d["RateLimit"], "\"hello\";r=0;t=1");
  EXPECT_EQ(d["Cache-Control"], "no-store");
  EXPECT_EQ(d["Content-Type"], "application/json");
  EXPECT_EQ(d.body(), R"({"allowed":false,"policy":"hello","limit":2,"remaining":0,"reset_ms":2000,)"
                      R"("retry_after_ms":1000,"delay_ms":0})");
  EXPECT_EQ(f.handled, 2);
}

TEST(RateLimitMiddleware, KeysAreIndependentAndTimeRefills) {
  Fixture f;
  f.call("alice");
  f.call("alice");
  EXPECT_EQ(f.call("alice").result_int(), 429u);
  EXPECT_EQ(f.call("bob").result_int(), 200u);
  f.clock.advance(ratelimit::Micros{999'999});
  EXPECT_EQ(f.call("alice").result_int(), 429u);
  f.clock.advance(ratelimit::Micros{1});
  EXPECT_EQ(f.call("alice").result_int(), 200u);
}

TEST(RateLimitMiddleware, EmptyKeySkipsLimitingAndBadKeyIs400) {
  Fixture f;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(f.call("").result_int(), 200u);
  Response bad = f.call(std::string(600, 'k'));
  EXPECT_EQ(bad.result_int(), 400u);
  EXPECT_NE(bad.body().find("invalid_key"), std::string::npos);
  EXPECT_EQ(f.handled, 5);
}

}  // namespace
}  // namespace example
