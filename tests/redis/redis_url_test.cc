// redis_url_test.cc — the URL forms RedisStoreOptions::url accepts, and precise errors for
// everything else (a password never appears in a message).
#include <gtest/gtest.h>

#include "ratelimit/redis_store.h"

namespace ratelimit {
namespace {

TEST(RedisUrl, HostPortDb) {
  auto u = parse_redis_url("redis://127.0.0.1:6380/3");
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  EXPECT_FALSE(u->is_unix);
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 6380);
  EXPECT_EQ(u->db, 3);
  EXPECT_FALSE(u->has_password);
}

TEST(RedisUrl, DefaultsPortAndDb) {
  auto u = parse_redis_url("redis://localhost");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "localhost");
  EXPECT_EQ(u->port, 6379);
  EXPECT_EQ(u->db, 0);
  auto v = parse_redis_url("redis://localhost:7000/");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->port, 7000);
}

TEST(RedisUrl, Credentials) {
  auto u = parse_redis_url("redis://alice:p%40ss:w@redis.local:6379/1");
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  EXPECT_EQ(u->user, "alice");
  EXPECT_EQ(u->password, "p@ss:w");
  EXPECT_TRUE(u->has_password);
  EXPECT_EQ(u->host, "redis.local");
  auto p = parse_redis_url("redis://:secret@h:1");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->user, "");
  EXPECT_EQ(p->password, "secret");
}

TEST(RedisUrl, Ipv6) {
  auto u = parse_redis_url("redis://[::1]:6390/2");
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 6390);
  EXPECT_EQ(u->db, 2);
}

TEST(RedisUrl, UnixSocket) {
  auto u = parse_redis_url("unix:///run/redis/redis.sock");
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  EXPECT_TRUE(u->is_unix);
  EXPECT_EQ(u->path, "/run/redis/redis.sock");
  auto v = parse_redis_url("unix://bob:pw@/tmp/r.sock?db=4");
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(v->path, "/tmp/r.sock");
  EXPECT_EQ(v->user, "bob");
  EXPECT_EQ(v->password, "pw");
  EXPECT_EQ(v->db, 4);
}

TEST(RedisUrl, RejectsBadInputWithoutLeakingThePassword) {
  for (const char* bad : {"", "http://x", "redis://", "redis://h:0", "redis://h:65536",
                          "redis://h:abc", "redis://h:1/x", "redis://h:1/-1", "redis://[::1",
                          "unix://", "unix://relative.sock", "unix:///s?x=1",
                          "redis://hunter2@h:1", "redis://u:%zz@h"}) {
    auto u = parse_redis_url(bad);
    EXPECT_FALSE(u.ok()) << bad;
    if (!u.ok()) {
      EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument) << bad;
      EXPECT_EQ(u.status().message().find("hunter2"), std::string::npos) << bad;
    }
  }
}

TEST(FailurePolicyName, RoundTrips) {
  EXPECT_EQ(*parse_failure_policy("open"), FailurePolicy::kOpen);
  EXPECT_EQ(*parse_failure_policy("closed"), FailurePolicy::kClosed);
  EXPECT_STREQ(failure_policy_name(FailurePolicy::kClosed), "closed");
  EXPECT_FALSE(parse_failure_policy("OPEN").ok());
}

}  // namespace
}  // namespace ratelimit
