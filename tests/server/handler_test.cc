// handler_test.cc — the transport/handler seam (handler.h): header lookup as both transports
// fill it, route tables, and dispatch's completion contract (inline, or resume() then
// complete()), with per-exchange state reused across requests.
#include <gtest/gtest.h>

#include "handler.h"
#include "metrics.h"  // Endpoint's labels (the transport only declares it)

namespace ratelimit::server {
namespace {

TEST(HeaderFields, FirstIsCaseInsensitiveAndIgnoresLaterDuplicates) {
  HeaderFields h;
  h.add("Authorization", "Bearer one");
  h.add("authorization", "Bearer two");
  h.add("X-Key", "");
  ASSERT_TRUE(h.first("AUTHORIZATION"));
  EXPECT_EQ(*h.first("authorization"), "Bearer one");
  ASSERT_TRUE(h.first("x-key"));  // present, empty
  EXPECT_EQ(*h.first("x-key"), "");
  EXPECT_FALSE(h.first("x-ke"));
  EXPECT_FALSE(h.first("x-keys"));
}

TEST(HeaderFields, ListJoinsEveryOccurrenceInOrder) {
  HeaderFields h;
  std::string out = "stale";
  EXPECT_FALSE(h.list("x-forwarded-for", out));
  EXPECT_EQ(out, "");
  h.add("X-Forwarded-For", "198.51.100.7");
  h.add("Host", "a");
  h.add("x-forwarded-for", "10.0.0.1, 10.0.0.2");
  ASSERT_TRUE(h.list("X-FORWARDED-FOR", out));
  EXPECT_EQ(out, "198.51.100.7, 10.0.0.1, 10.0.0.2");
  h.clear();
  EXPECT_EQ(h.size(), 0U);
  EXPECT_FALSE(h.first("host"));
}

// A handler that answers inline, or later when told to.
class Echo final : public Handler {
 public:
  struct State final : ExchangeState {
    explicit State(Exchange&) { ++created; }
    int requests = 0;
    static inline int created = 0;
  };
  explicit Echo(bool later) : later_(later) {}
  bool handle(Exchange& x) override {
    State& st = x.state<State>();
    ++st.requests;
    x.response.clear();
    x.response.body = std::string(x.request.path()) + " #" + std::to_string(st.requests);
    return !later_;
  }
  void complete(Exchange& x) override { x.response.body += " (completed)"; }

 private:
  const bool later_;
};

class TestExchange final : public Exchange {
 public:
  void resume() override { ++resumed; }
  int resumed = 0;
};

TEST(RouteTable, ExactSubtreeAndFallback) {
  Echo a(false), b(false), other(false);
  RouteTable routes;
  routes.exact("/v1/acquire", a, Endpoint::kAcquire)
      .subtree("/v1/forward-auth", b, Endpoint::kForwardAuth)
      .fallback(other);
  EXPECT_EQ(routes.find("/v1/acquire").handler, &a);
  EXPECT_EQ(routes.find("/v1/acquire/").handler, &other);  // exact means exact
  EXPECT_EQ(routes.find("/v1/forward-auth").handler, &b);
  EXPECT_EQ(routes.find("/v1/forward-auth/app/x").handler, &b);
  EXPECT_EQ(routes.find("/v1/forward-authx").handler, &other);  // a subtree ends at a '/'
  EXPECT_EQ(routes.find("").handler, &other);
  EXPECT_EQ(routes.find("/v1/forward-auth/x").endpoint, Endpoint::kForwardAuth);
  EXPECT_EQ(routes.find("/nothing").endpoint, Endpoint::kOther);
}

TEST(Dispatch, InlineAnswersSetTheRouteEndpointAndReuseState) {
  Echo a(false), other(false);
  RouteTable routes;
  routes.exact("/a", a, Endpoint::kAcquire).fallback(other);
  TestExchange x;
  HeaderFields h;
  x.request.headers = &h;
  x.request.target = "/a?x=1";
  const int before = Echo::State::created;
  ASSERT_TRUE(dispatch(routes, x));
  EXPECT_EQ(x.endpoint, Endpoint::kAcquire);
  EXPECT_EQ(x.response.body, "/a #1");
  ASSERT_TRUE(dispatch(routes, x));
  EXPECT_EQ(x.response.body, "/a #2");  // the same state: created once per exchange
  EXPECT_EQ(Echo::State::created, before + 1);
  x.request.target = "/elsewhere";
  ASSERT_TRUE(dispatch(routes, x));
  EXPECT_EQ(x.endpoint, Endpoint::kOther);
  complete(x);  // nothing pending: nothing happens
  EXPECT_EQ(x.response.body, "/elsewhere #3");
}

TEST(Dispatch, ALaterAnswerIsFinishedByTheSameHandlersComplete) {
  Echo later(true);
  RouteTable routes;
  routes.fallback(later, Endpoint::kJson);
  TestExchange x;
  HeaderFields h;
  x.request.headers = &h;
  x.request.target = "/json";
  EXPECT_FALSE(dispatch(routes, x));
  complete(x);
  EXPECT_EQ(x.response.body, "/json #1 (completed)");
  complete(x);  // once only
  EXPECT_EQ(x.response.body, "/json #1 (completed)");
}

}  // namespace
}  // namespace ratelimit::server
