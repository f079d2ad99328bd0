// redis_server.h — test support: a throwaway redis-server on a free loopback port, a tiny
// blocking Redis client for assertions, and the shared test Redis URL.
//
// Why: tests that need Redis run against a real redis-server, never a mock (DESIGN.md).
// scripts/test starts one and exports RATELIMIT_TEST_REDIS_URL; tests that kill or restart
// Redis start their own with RedisServer so they never disturb the shared one.
// Invariants: a RedisServer listens only on 127.0.0.1, persists nothing (--save '',
// --appendonly no, its own temporary --dir) and is killed (by its pid, never by name) when the
// object dies. Every wait is bounded. Not thread-safe: use one object from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "child_process.h"  // run_program, start_child
#include "ratelimit/status.h"

namespace ratelimit::testing {

// RATELIMIT_TEST_REDIS_URL when set and non-empty (scripts/test exports it), else nullopt.
std::optional<std::string> test_redis_url_from_env();

// A free TCP port on 127.0.0.1 (bound to port 0 and released; another process could take it
// before it is used, which start() then reports).
Result<uint16_t> free_loopback_port();

// Certificates for TLS tests, generated with the openssl CLI into a temporary directory that
// the object removes: a CA, a server certificate it signed for localhost and 127.0.0.1, a
// client certificate it signed, and a second, unrelated CA (the "wrong CA"). EC P-256 keys.
class TestCertificates {
 public:
  ~TestCertificates();
  Status generate();
  std::string ca_file() const { return dir_ + "/ca.crt"; }
  std::string other_ca_file() const { return dir_ + "/other-ca.crt"; }
  std::string server_cert() const { return dir_ + "/server.crt"; }
  std::string server_key() const { return dir_ + "/server.key"; }
  std::string client_cert() const { return dir_ + "/client.crt"; }
  std::string client_key() const { return dir_ + "/client.key"; }

 private:
  std::string dir_;
};

class RedisServer {
 public:
  RedisServer() = default;
  ~RedisServer();  // kills the server if running and removes its directory
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts redis-server (found on PATH) on `port` (0: a free one) and waits, at most
  // `timeout`, until it answers PING. Extra arguments are appended to the command line
  // (e.g. {"--requirepass", "s3cret"}). Error if already running or if it does not come up
  // (the message includes the server's log).
  Status start(uint16_t port = 0, std::vector<std::string> extra_args = {},
               std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  // As start(), with TLS on a second free port (tls_port()) beside the plain one (for the
  // harness' PING and for assertions): --tls-cert-file etc. from `certs`; with
  // `require_client_cert` the server refuses clients without a certificate the CA signed.
  Status start_tls(const TestCertificates& certs, bool require_client_cert = false,
                   std::vector<std::string> extra_args = {});
  // Starts redis-sentinel on a free port, monitoring `master_name` at 127.0.0.1:`master_port`
  // with a quorum of `quorum`, down-after 1 s and failover-timeout 5 s (small, for tests).
  Status start_sentinel(uint16_t master_port, const std::string& master_name, int quorum);
  // SIGKILL and reap: as abrupt as a crash. No-op when not running.
  void kill();
  // Starts again on the same port with the same arguments (after kill()).
  Status restart(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

  bool running() const { return pid_ > 0; }
  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  uint16_t tls_port() const { return tls_port_; }
  // "redis://127.0.0.1:<port>/0".
  std::string url() const;

 private:
  Status make_dir();

  pid_t pid_ = -1;
  uint16_t port_ = 0;
  uint16_t tls_port_ = 0;
  bool sentinel_ = false;
  std::vector<std::string> extra_args_;
  std::string dir_;
};

// The Redis every non-destructive test shares: RATELIMIT_TEST_REDIS_URL if set, otherwise a
// RedisServer started on first use and kept for the life of the test process — so the tests
// run (never skip) with or without scripts/test. Aborts the calling test with a message via
// the returned error if no server can be had.
Result<std::string> shared_test_redis_url();

// One Redis reply, flattened for assertions.
struct Reply {
  enum class Type { kNil, kString, kInteger, kArray, kStatus, kError } type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<Reply> elements;
  bool is_error() const { return type == Type::kError; }
};

// A blocking connection for test assertions and fault injection (SCRIPT FLUSH, PTTL, KEYS).
// Each command has a 5 s timeout. Not thread-safe.
class RedisClient {
 public:
  // `url` as accepted by parse_redis_url (TCP or unix, AUTH and SELECT applied).
  static Result<RedisClient> connect(const std::string& url);
  RedisClient(RedisClient&& other) noexcept;
  RedisClient& operator=(RedisClient&& other) noexcept;
  ~RedisClient();
  // Sends one command; a transport failure is an error, a Redis error is a Reply of kError.
  Result<Reply> command(const std::vector<std::string>& args);

 private:
  RedisClient() = default;
  void* ctx_ = nullptr;  // redisContext*
};

}  // namespace ratelimit::testing
