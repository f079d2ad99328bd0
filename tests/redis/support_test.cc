// support_test.cc — the test helpers themselves: a throwaway server comes up, answers, dies
// abruptly and comes back on the same port; await_window_room leaves the room it promises,
// also in Redis' clock (TIME), which the Redis store's windows follow.
#include <gtest/gtest.h>

#include "redis_server.h"
#include "window_room.h"

namespace ratelimit::testing {
namespace {

TEST(RedisServerHelper, StartKillRestartOnSamePort) {
  RedisServer server;
  ASSERT_TRUE(server.start().is_ok());
  const uint16_t port = server.port();
  auto client = RedisClient::connect(server.url());
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  auto pong = client->command({"PING"});
  ASSERT_TRUE(pong.ok());
  EXPECT_EQ(pong->str, "PONG");
  ASSERT_TRUE(client->command({"SET", "k", "v"}).ok());

  server.kill();
  EXPECT_FALSE(server.running());
  EXPECT_FALSE(client->command({"PING"}).ok());  // the connection died with the server

  ASSERT_TRUE(server.restart().is_ok());
  EXPECT_EQ(server.port(), port);
  auto again = RedisClient::connect(server.url());
  ASSERT_TRUE(again.ok());
  auto v = again->command({"GET", "k"});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->type, Reply::Type::kNil);  // nothing persisted across the crash
}

TEST(RedisServerHelper, SharedUrlAnswers) {
  auto url = shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  auto client = RedisClient::connect(*url);
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  auto pong = client->command({"PING"});
  ASSERT_TRUE(pong.ok());
  EXPECT_EQ(pong->str, "PONG");
}

// Windows of 1 s and 300 ms, room 700 and 200 ms: most starts must wait, so this checks the
// waiting path too. After it returns, this clock and Redis' TIME are in a window with the room
// left, less the time the check itself takes: 300 ms of slack (a stalled thread), still well
// above zero, which is what a test that counts in the window needs.
TEST(WindowRoom, ReturnsWithTheRoomLeftOnThisClockAndRedis) {
  using std::chrono::milliseconds;
  auto url = shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  auto client = RedisClient::connect(*url);
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  for (int i = 0; i < 5; ++i) {
    await_window_room({milliseconds(1000), milliseconds(300)}, milliseconds(200));
    await_window_room(milliseconds(1000), milliseconds(700));
    EXPECT_GE(window_time_left(milliseconds(1000)), milliseconds(400)) << i;
    auto t = client->command({"TIME"});
    ASSERT_TRUE(t.ok() && t->elements.size() == 2);
    const int64_t redis_us = std::stoll(t->elements[0].str) * 1'000'000 + std::stoll(t->elements[1].str);
    EXPECT_GE(1'000'000 - redis_us % 1'000'000, 300'000) << "Redis' TIME is not this clock: " << i;
  }
  EXPECT_THROW(await_window_room(milliseconds(300), milliseconds(300)), std::invalid_argument);
  const Policy fw = Policy::fixed_window(1, milliseconds(400)).value();
  await_window_room(fw, milliseconds(300));
  EXPECT_GE(window_time_left(milliseconds(400)), milliseconds(100));  // 300 ms, less a stall
  // A sliding log is not aligned to the clock: no room to wait for, even with a tiny window.
  const Policy swl = Policy::sliding_window_log(1, milliseconds(10)).value();
  EXPECT_NO_THROW(await_window_room(swl, milliseconds(300)));
}

}  // namespace
}  // namespace ratelimit::testing
