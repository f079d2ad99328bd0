// redis_tls_test.cc — RedisStore over TLS (rediss://) against a real redis-server started with
// --tls-port and certificates generated here with the openssl CLI: exact decisions through the
// encrypted link, AUTH over TLS, a client certificate, and every way verification must refuse
// (a wrong CA, a wrong server name, a TLS client on a plain port) reported at connect() as a
// clear error, quickly, never a hang and never a silent fallback.
#include <gtest/gtest.h>

#include "ratelimit/redis_store.h"
#include "redis_server.h"
#include "store_test_util.h"

namespace ratelimit::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

class RedisTls : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(certs_.generate().is_ok()); }

  RedisStoreOptions options(const std::string& url) const {
    RedisStoreOptions o;
    o.url = url;
    o.connections = 2;
    o.connect_timeout = milliseconds(2000);
    o.key_prefix = unique_prefix("tls");
    o.tls.ca_file = certs_.ca_file();
    return o;
  }
  static std::string tls_url(const RedisServer& s, const std::string& cred = "") {
    return "rediss://" + cred + "127.0.0.1:" + std::to_string(s.tls_port()) + "/0";
  }
  // Connects, expecting a failure; returns it, and checks that it came quickly (no hang).
  static Status expect_refused(RedisStoreOptions o) {
    const auto start = steady_clock::now();
    auto store = RedisStore::connect(std::move(o));
    EXPECT_LT(steady_clock::now() - start, seconds(4));
    EXPECT_FALSE(store.ok());
    return store.ok() ? Status() : store.status();
  }

  TestCertificates certs_;
};

TEST_F(RedisTls, ExactOverTlsWithTheRightCa) {
  RedisServer server;
  ASSERT_TRUE(server.start_tls(certs_).is_ok());
  auto store = must_connect(options(tls_url(server)));
  ASSERT_NE(store, nullptr);
  expect_exactly_ten(*store, "k");
  // The store's connections are on the TLS port (the plain one is only the harness').
  auto client = RedisClient::connect(server.url());
  ASSERT_TRUE(client.ok());
  auto clients = client->command({"CLIENT", "LIST"});
  ASSERT_TRUE(clients.ok());
  EXPECT_NE(clients->str.find("laddr=127.0.0.1:" + std::to_string(server.tls_port())),
            std::string::npos)
      << clients->str;
}

TEST_F(RedisTls, AuthOverTls) {
  RedisServer server;
  ASSERT_TRUE(server.start_tls(certs_, false, {"--requirepass", "tls-s3cret"}).is_ok());
  auto store = must_connect(options(tls_url(server, ":tls-s3cret@")));
  ASSERT_NE(store, nullptr);
  expect_exactly_ten(*store, "k");

  Status wrong = expect_refused(options(tls_url(server, ":nope@")));
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument) << wrong.to_string();
  EXPECT_EQ(wrong.message().find("nope"), std::string::npos) << "the password leaked";
  Status missing = expect_refused(options(tls_url(server)));
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument) << missing.to_string();
  EXPECT_NE(missing.message().find("NOAUTH"), std::string::npos) << missing.to_string();
}

TEST_F(RedisTls, WrongCaIsAClearErrorAtConnect) {
  RedisServer server;
  ASSERT_TRUE(server.start_tls(certs_).is_ok());
  auto o = options(tls_url(server));
  o.tls.ca_file = certs_.other_ca_file();
  Status s = expect_refused(o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("certificate"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("tls.ca_file"), std::string::npos) << s.to_string();

  // verify: false accepts any certificate (encrypted, unauthenticated): only by explicit choice.
  o.tls.verify = false;
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  expect_exactly_ten(*store, "k");
}

TEST_F(RedisTls, ServerNameIsVerified) {
  RedisServer server;
  ASSERT_TRUE(server.start_tls(certs_).is_ok());
  // The certificate names localhost and 127.0.0.1: both pass, another name does not.
  auto by_name = options("rediss://localhost:" + std::to_string(server.tls_port()));
  EXPECT_NE(must_connect(by_name), nullptr);
  auto o = options(tls_url(server));
  o.tls.server_name = "redis.example.com";
  Status s = expect_refused(o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("mismatch"), std::string::npos) << s.to_string();
  o.tls.server_name = "localhost";
  EXPECT_NE(must_connect(o), nullptr);
}

TEST_F(RedisTls, ClientCertificateWhenTheServerRequiresOne) {
  RedisServer server;
  ASSERT_TRUE(server.start_tls(certs_, /*require_client_cert=*/true).is_ok());
  Status s = expect_refused(options(tls_url(server)));
  EXPECT_NE(s.code(), StatusCode::kOk);
  auto o = options(tls_url(server));
  o.tls.cert_file = certs_.client_cert();
  o.tls.key_file = certs_.client_key();
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  expect_exactly_ten(*store, "k");
}

// A plain Redis waits for a command while the client waits for the TLS ServerHello: the
// connect timeout bounds it, and the message names the rediss:// URL.
TEST_F(RedisTls, TlsClientOnAPlainPortFailsWithinTheConnectTimeout) {
  RedisServer server;
  ASSERT_TRUE(server.start().is_ok());
  auto o = options("rediss://127.0.0.1:" + std::to_string(server.port()));
  o.connect_timeout = milliseconds(500);
  Status s = expect_refused(o);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.to_string();
  EXPECT_NE(s.message().find("rediss://127.0.0.1:"), std::string::npos) << s.to_string();
}

TEST_F(RedisTls, UnusableFilesAreNamedAtConnect) {
  auto o = options("rediss://127.0.0.1:1");
  o.tls.ca_file = "/nonexistent/ca.pem";
  auto r = RedisStore::connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("/nonexistent/ca.pem"), std::string::npos);

  o = options("rediss://127.0.0.1:1");
  o.tls.cert_file = certs_.client_cert();
  r = RedisStore::connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("key_file"), std::string::npos) << r.status().to_string();

  o.tls.key_file = certs_.server_key();  // a key, but not the certificate's
  r = RedisStore::connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("mismatch"), std::string::npos)
      << r.status().to_string();

  o = options("rediss://127.0.0.1:1");
  o.tls.ca_file = certs_.client_key();  // not a certificate
  r = RedisStore::connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no usable PEM certificate"), std::string::npos)
      << r.status().to_string();
}

TEST(RedisTlsUrl, SchemesParse) {
  auto u = parse_redis_url("rediss://:pw@cache.example.com:6380/2");
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "cache.example.com");
  EXPECT_EQ(u->port, 6380);
  EXPECT_EQ(u->db, 2);
  EXPECT_EQ(u->password, "pw");
  auto plain = parse_redis_url("redis://cache.example.com");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tls);
  EXPECT_FALSE(parse_redis_url("rediss:/x").ok());
}

}  // namespace
}  // namespace ratelimit::testing
