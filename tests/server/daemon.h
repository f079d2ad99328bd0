// daemon.h — test support for the end-to-end tests: start the real ratelimitd binary
// (RATELIMIT_BIN_DIR/ratelimitd) on a free loopback port with a given YAML configuration,
// signal it, wait for it; and a small blocking HTTP/1.1 client (Beast) to talk to it.
//
// Why the real binary: the e2e tests check what a user of ratelimitd sees — flags, config
// file, signals, exit codes, bytes on the wire — not a server object inside the test.
// Invariants: the daemon listens on 127.0.0.1 only (--listen 127.0.0.1:0, the bound port is
// read from its log); it is killed (by pid) when the Daemon object dies; every wait is bounded.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/json/value.hpp>
#include <sys/types.h>

#include "holder_count.h"

namespace ratelimit::e2e {

class Daemon {
 public:
  Daemon();
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Writes `yaml` to a temporary config file and starts ratelimitd on it with
  // --listen 127.0.0.1:0 plus `extra_args`; waits (at most 10 s) until it logs its port.
  // Returns false (with the log in `error`) if it exits or does not come up.
  bool start(const std::string& yaml, const std::vector<std::string>& extra_args = {});
  // Runs ratelimitd with `args` to completion (at most 10 s); returns its exit code and
  // fills `output` with stdout+stderr.
  static int run(const std::vector<std::string>& args, std::string& output);

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& config_path() const { return config_path_; }
  std::string dir() const { return dir_; }
  void rewrite_config(const std::string& yaml);
  void signal(int sig);
  // Waits for the process to exit; its exit code, or -1 if it did not exit in time (or died
  // from a signal).
  int wait_exit(std::chrono::milliseconds timeout);
  std::string log() const;
  // Waits (bounded) until the log contains `text`.
  bool wait_log(std::string_view text, std::chrono::milliseconds timeout) const;

 private:
  std::string dir_, config_path_, log_path_;
  pid_t pid_ = -1;
  int exit_code_ = -1;  // set when start() saw the process exit
  uint16_t port_ = 0;
};

// Case-insensitive header map.
struct CaseLess {
  bool operator()(const std::string& a, const std::string& b) const;
};

struct Reply {
  unsigned status = 0;
  std::map<std::string, std::string, CaseLess> headers;
  std::string body;
  bool keep_alive = true;

  bool has(const std::string& h) const { return headers.count(h) != 0; }
  std::string header(const std::string& h) const {
    auto it = headers.find(h);
    return it == headers.end() ? std::string("<absent>") : it->second;
  }
  // The body parsed as JSON (null if it is not JSON).
  boost::json::value json() const;
};

// One kept-alive connection. Every operation is bounded by a 10 s deadline; a failure is
// reported as status 0.
class Client {
 public:
  explicit Client(uint16_t port);
  bool connected() const { return connected_; }
  Reply request(std::string_view method, std::string_view target, std::string_view body = {},
                const std::vector<std::pair<std::string, std::string>>& headers = {});
  Reply post(std::string_view target, std::string_view body) { return request("POST", target, body); }
  Reply get(std::string_view target) { return request("GET", target); }
  // Raw bytes, for malformed or partial requests.
  bool send_raw(std::string_view bytes);
  Reply read_reply(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // True once the server has closed the connection (EOF or reset) within `timeout`.
  bool wait_closed(std::chrono::milliseconds timeout);
  // True once the server has read every byte sent on this connection (its socket's receive
  // queue in /proc/net/tcp is empty), polled within `timeout`: the event "the server has read
  // this partial request", which no answer shows, instead of a guessed wait.
  bool wait_read_by_server(std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  boost::asio::io_context ioc_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  bool connected_ = false;
};

// True once the server on 127.0.0.1:server_port has read every byte sent on the loopback
// connection from client_port (Client::wait_read_by_server; RawConn::local_port() for raw ones).
bool read_by_server(uint16_t client_port, uint16_t server_port, std::chrono::milliseconds timeout);

// One request on a fresh connection.
Reply http_post(uint16_t port, std::string_view target, std::string_view body);
Reply http_get(uint16_t port, std::string_view target);

// The value of an unlabelled sample (`name value`) in a Prometheus page; -1 when absent.
int64_t metric_in(const std::string& page, const std::string& name);
// The same on a fresh GET /metrics of the daemon on `port`.
int64_t metric_value(uint16_t port, const std::string& name);
// Polls (bounded, testing::eventually) until metric `name` at `port` is at least `want`.
bool wait_metric(uint16_t port, const std::string& name, int64_t want,
                 std::chrono::milliseconds timeout = std::chrono::milliseconds(10'000));
// The "lease_id" of a lease API answer, "" when it has none.
std::string lease_id(const Reply& r);
// Holds the lease of `granted` (a 200 from POST /v1/leases), counted in `holders` meanwhile
// (raised after the grant, lowered before the release, so it never exceeds what the store
// holds; the first `limit` holders wait there until the key is saturated), for `hold`, then
// releases it through `c`. True when the release freed it.
bool hold_and_release(Client& c, const Reply& granted, std::chrono::milliseconds hold, testing::HolderCount& holders);

struct StatusCounts {
  int ok = 0;      // 200
  int denied = 0;  // 429
  int other = 0;   // anything else, or no answer
};

// `clients` threads, released together by a barrier, each sending `per_client` POST
// /v1/acquire with `body` on its own keep-alive connection to ports[i % ports.size()].
StatusCounts concurrent_acquires(const std::vector<uint16_t>& ports, const std::string& body,
                                 int clients, int per_client);

struct PairCounts {
  int pair_ok = 0;    // [a10, b15] admitted together
  int single_ok = 0;  // [b15] alone admitted
  int errors = 0;     // neither 200 nor 429
};

// The all-or-nothing workload: 60 clients released together on key "atom", the even ones
// asking for policies [a10, b15], the odd ones for b15 alone; client i talks to
// ports_for(i). If the pair were not atomic, a10 could be spent by a pair that b15 denies.
PairCounts concurrent_pairs_and_singles(const std::function<uint16_t(int)>& ports_for);

}  // namespace ratelimit::e2e
