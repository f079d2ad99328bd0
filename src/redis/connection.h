// connection.h — one pipelined connection to Redis, driven by Boost.Asio: the Redis store's
// transport half (the pure half is script_codec.h).
//
// Why Asio + hiredis' reply reader rather than hiredis' async API with an adapter: hiredis
// 0.14 (Debian 12) ships adapters for libevent/libev/libuv/glib/qt but none for Asio, and
// its async context is not thread-safe, so every caller thread would have to hop onto the
// event loop just to append a command. Here callers append already-encoded commands to a
// mutex-protected output buffer from any thread; the connection's I/O thread writes whatever
// has accumulated in one write (natural pipelining: the more requests in flight, the bigger
// the batches) and feeds what it reads to a redisReader. hiredis still does all the RESP work
// (redisFormatCommandArgv, redisReader); the socket, timers and threads are Asio's.
//
// Invariants:
//   - Redis answers in order, so `pending_` (FIFO) pairs each reply with its request;
//   - every Request's on_reply is called exactly once: with a reply, or with an error status
//     when the connection fails, times out or closes (then `reply` is null);
//   - a command not answered within its deadline fails the whole connection (later replies
//     are queued behind it), which reconnects with exponential backoff;
//   - a connection is "ready" only after AUTH, SELECT and SCRIPT LOAD of every script have
//     succeeded; submit() refuses requests otherwise, so callers fail fast;
//   - NOSCRIPT on an EVALSHA (the command did not run, so sending it again is safe): one
//     SCRIPT LOAD is queued (unless one is already queued since that command was sent) and
//     the command is sent again, after it. Normally once; up to kMaxNoscriptRetries times so
//     that a second flush landing between the reload and the retry stays invisible too.
// Thread-safety: submit(), ready(), last_error() from any thread; everything else runs on the
// io_context the connection was given (one thread).
#pragma once

#include <atomic>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lua_scripts.h"
#include "ratelimit/redis_store.h"
#include "ratelimit/status.h"

struct redisReply;
struct redisReader;

namespace ratelimit::redis_detail {

using SteadyTime = std::chrono::steady_clock::time_point;

inline constexpr int kMaxNoscriptRetries = 3;

// One command in flight. `reply` is valid only during the call.
struct Request {
  std::string command;  // RESP bytes
  int script = -1;      // ScriptId for an EVALSHA (NOSCRIPT handling), else -1
  int noscript_retries = 0;  // times re-sent after NOSCRIPT (at most kMaxNoscriptRetries)
  uint64_t seq = 0;     // set by the connection: order of sending
  SteadyTime deadline;  // set by the connection from the command timeout
  std::function<void(const Status& error, const redisReply* reply)> on_reply;
};
using RequestPtr = std::unique_ptr<Request>;

// Counters shared by the connections of one store (see RedisStoreCounters).
struct AtomicCounters {
  std::atomic<uint64_t> commands{0}, errors{0}, timeouts{0}, failed_open{0}, failed_closed{0},
      connects{0}, disconnects{0}, script_reloads{0};
};

struct ConnectionConfig {
  RedisUrl url;
  std::string display_url;  // for messages: the URL without credentials
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds command_timeout{250};
  std::chrono::milliseconds backoff_min{20};
  std::chrono::milliseconds backoff_max{2000};
  std::vector<std::string> script_loads;  // RESP of SCRIPT LOAD <text>, indexed by ScriptId
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `on_change` is called (on the I/O thread) whenever the connection becomes ready or an
  // attempt to connect fails; the store uses it to wait for the first connection.
  Connection(boost::asio::io_context& io, const ConnectionConfig& config,
             AtomicCounters& counters, std::function<void()> on_change);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts connecting (asynchronously).
  void start();
  // Queues `r` for sending if the connection is ready; otherwise leaves `r` untouched and
  // returns false. Any thread.
  bool submit(RequestPtr& r);
  // Closes for good: pending requests fail with kUnavailable, no reconnection. Blocks until
  // done on the I/O thread (must not be called from it).
  void close();

  bool ready() const { return ready_.load(std::memory_order_acquire); }
  // Attempts to connect that have failed since construction (a first attempt counts).
  uint64_t failed_attempts() const { return failed_attempts_.load(std::memory_order_acquire); }
  // The most recent failure, as a Status (OK if none yet).
  Status last_error() const;

 private:
  enum class State { kIdle, kConnecting, kReady, kBackoff, kClosed };

  void do_connect();
  void on_connected(uint64_t gen);
  void handshake();
  void enqueue_locked(RequestPtr r, SteadyTime deadline);
  void schedule_write_locked();
  void do_write();
  void on_written(uint64_t gen, const boost::system::error_code& ec);
  void do_read();
  void on_read(uint64_t gen, const boost::system::error_code& ec, size_t n);
  void handle_reply(RequestPtr r, const redisReply* reply);
  void fail(Status why);
  void arm_tick();
  void on_tick();

  boost::asio::io_context& io_;
  const ConnectionConfig config_;
  AtomicCounters& counters_;
  std::function<void()> on_change_;

  // I/O-thread state.
  boost::asio::generic::stream_protocol::socket socket_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::steady_timer tick_timer_;
  boost::asio::steady_timer backoff_timer_;
  redisReader* reader_ = nullptr;
  std::vector<char> read_buf_;
  std::string write_buf_;  // bytes being written
  uint64_t gen_ = 0;       // bumped on every (re)connect and failure; stale handlers see it
  SteadyTime connect_deadline_{};
  std::chrono::milliseconds backoff_;
  uint64_t reload_seq_[kScriptCount] = {};  // seq of the last SCRIPT LOAD queued per script

  // Shared with submitting threads.
  mutable std::mutex mu_;
  State state_ = State::kIdle;
  std::string out_;                 // encoded commands waiting for the next write
  std::deque<RequestPtr> pending_;  // sent or queued, awaiting replies, in order
  bool write_scheduled_ = false;
  bool writing_ = false;
  uint64_t next_seq_ = 1;
  Status last_error_;
  std::atomic<bool> ready_{false};
  std::atomic<uint64_t> failed_attempts_{0};
};

}  // namespace ratelimit::redis_detail
