// support_test.cc — the test helpers themselves: a throwaway server comes up, answers, dies
// abruptly and comes back on the same port.
#include <gtest/gtest.h>

#include "redis_server.h"

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

}  // namespace
}  // namespace ratelimit::testing
