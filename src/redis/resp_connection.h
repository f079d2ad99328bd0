// resp_connection.h — the Redis store's transport: one pipelined RESP connection on Boost.Asio
// over a ByteStream (TCP or unix today; TLS slots in as another stream). It knows commands and
// replies, nothing of scripts, slots or nodes: those are the script invoker's and the router's.
//
// Why Asio + hiredis' reply reader rather than hiredis' async API with an adapter: hiredis
// 0.14 (Debian 12) ships adapters for libevent/libev/libuv/glib/qt but none for Asio, and
// its async context is not thread-safe, so every caller thread would have to hop onto the
// event loop just to append a command. Here callers append already-encoded commands to a
// mutex-protected output buffer from any thread; the connection's I/O thread writes whatever
// has accumulated in one write (natural pipelining: the more requests in flight, the bigger
// the batches) and feeds what it reads to a redisReader, whose reply objects live in a
// per-connection arena (reply_arena.h). hiredis parses the replies; the socket, timers and
// threads are Asio's. A command submitted from the connection's own thread while Redis has
// nothing of ours on it is written at once, not at the end of the current handler.
//
// Invariants:
//   - Redis answers in order, so `pending_` (FIFO) pairs each reply with its command;
//   - every submitted callback is called exactly once: with a reply, or with an error status
//     when the connection fails, times out or closes (then `reply` is null);
//   - a command not answered within its deadline fails the whole connection (later replies
//     are queued behind it), which reconnects with exponential backoff. The deadline runs from
//     when the command is handed to the socket, and a command is declared unanswered only when
//     no reply is waiting in the socket or in the I/O thread's queue: a starved I/O thread
//     never times out a reply that already arrived;
//   - a connection is "ready" only after AUTH, SELECT and every handshake step of its config
//     (the invoker's SCRIPT LOADs, for instance) have succeeded; submit() refuses otherwise, so
//     callers fail fast or go elsewhere;
//   - a prelude and its command are appended together under one lock: nothing else can come
//     between them on the wire (ASKING, SCRIPT LOAD before a resend depend on it).
// Thread-safety: submit(), ready(), failed_attempts(), last_error() from any thread; start()
// and close() from any thread but the connection's own io_context; everything else runs on it.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "mutex.h"
#include "byte_stream.h"
#include "reply_arena.h"
#include "ratelimit/status.h"

struct redisReply;
struct redisReader;

namespace ratelimit::redis_detail {

using SteadyTime = std::chrono::steady_clock::time_point;

// A command's completion: an OK status and the reply (valid only during the call), or an error
// status and a null reply. Called exactly once, on the connection's I/O thread (or inline on
// the caller's when a router has nowhere to send the command).
using ReplyCallback = std::function<void(const Status& error, const redisReply* reply)>;

// One command the connection sends after AUTH/SELECT and before it is ready; `check` turns an
// unacceptable reply into the error that fails the connection (OK: accepted).
struct HandshakeStep {
  std::string command;  // RESP bytes
  std::function<Status(const redisReply* reply)> check;
};

// Connection events shared by the connections of one store (RedisStoreCounters).
struct TransportCounters {
  std::atomic<uint64_t> connects{0}, disconnects{0};
};

struct ConnectionConfig {
  Endpoint endpoint;
  std::string display;  // for messages: the server without credentials
  std::chrono::milliseconds connect_timeout{1000};  // stream open + whole handshake
  std::chrono::milliseconds command_timeout{250};
  std::chrono::milliseconds backoff_min{20};
  std::chrono::milliseconds backoff_max{2000};
  std::vector<HandshakeStep> handshake;
  StreamFactory make_stream;  // empty: make_plain_stream
  // A subscriber connection (release_feed.h) sets both: `resolve` picks the node for each
  // attempt to connect (its argument counts the attempts), in place of `endpoint`; `on_push`
  // takes every reply no command asked for (a pub/sub message), which otherwise fails the
  // connection as a protocol error. The reply is valid during the call only.
  std::function<Endpoint(uint64_t attempt)> resolve;
  std::function<void(const redisReply* reply)> on_push;
};

class RespConnection : public std::enable_shared_from_this<RespConnection> {
 public:
  // `on_change` is called (on the I/O thread) whenever the connection becomes ready, fails an
  // attempt to connect, or loses its connection.
  RespConnection(boost::asio::io_context& io, std::shared_ptr<const ConnectionConfig> config,
                 TransportCounters& counters, std::function<void()> on_change);
  ~RespConnection();
  RespConnection(const RespConnection&) = delete;
  RespConnection& operator=(const RespConnection&) = delete;

  // Starts connecting (asynchronously).
  void start();
  // If ready: queues `command` (RESP bytes, copied), preceded by `prelude` when non-empty
  // (whose reply is discarded: a failed prelude shows in the command's own reply), takes
  // `done` and returns true. Otherwise leaves `done` untouched and returns false.
  bool submit(std::string_view command, ReplyCallback& done, std::string_view prelude = {});
  // Closes for good: pending commands fail with kUnavailable, no reconnection. Blocks until
  // done on the I/O thread (must not be called from it). Idempotent.
  void close();

  bool ready() const { return ready_.load(std::memory_order_acquire); }
  // Ready, with nothing queued or awaiting a reply: a command submitted now goes straight to
  // an idle Redis connection. A hint (it may change at once), for picking a connection.
  bool idle() const { return ready() && outstanding_.load(std::memory_order_relaxed) == 0; }
  // Attempts to connect that have failed since construction (a first attempt counts).
  uint64_t failed_attempts() const { return failed_attempts_.load(std::memory_order_acquire); }
  // The most recent failure, as a Status (OK if none since the connection was last ready).
  Status last_error() const;
  const ConnectionConfig& config() const { return *config_; }

 private:
  enum class State { kIdle, kConnecting, kReady, kBackoff, kClosed };
  struct Pending {
    ReplyCallback done;
    SteadyTime deadline;
  };

  void do_connect();
  void handshake();
  // Queues handshake steps [from, to); the last one's reply sends [to, end), or makes the
  // connection ready when there is none.
  void send_handshake(std::shared_ptr<const std::vector<HandshakeStep>> steps, size_t from,
                      size_t to);
  void become_ready();
  void enqueue_locked(std::string_view command, ReplyCallback done, SteadyTime deadline)
      RL_REQUIRES(mu_);
  void schedule_write_locked() RL_REQUIRES(mu_);
  void do_write();
  void on_written(uint64_t gen, const boost::system::error_code& ec);
  void do_read();
  void on_read(uint64_t gen, const boost::system::error_code& ec, size_t n);
  void fail(Status why);
  void arm_tick();
  void on_tick();
  // A command is past its deadline: fail the connection unless its reply is in fact waiting
  // (queued for the read handler, or unread in the socket). Re-arms the tick.
  void confirm_late(uint64_t gen);

  boost::asio::io_context& io_;
  const std::shared_ptr<const ConnectionConfig> config_;
  TransportCounters& counters_;
  std::function<void()> on_change_;

  // I/O-thread state.
  Endpoint endpoint_;  // this attempt's node: config_->endpoint, or config_->resolve's choice
  uint64_t attempts_ = 0;
  std::shared_ptr<ByteStream> stream_;
  boost::asio::steady_timer tick_timer_;
  boost::asio::steady_timer backoff_timer_;
  ReplyArena arena_;  // the replies reader_ builds; reset after each reply's callback
  redisReader* reader_ = nullptr;
  std::vector<char> read_buf_;
  std::string write_buf_;  // bytes being written
  uint64_t gen_ = 0;       // bumped on every (re)connect and failure; stale handlers see it
  SteadyTime connect_deadline_{};
  std::chrono::milliseconds backoff_;

  // Shared with submitting threads.
  mutable Mutex mu_;
  State state_ RL_GUARDED_BY(mu_) = State::kIdle;
  std::string out_ RL_GUARDED_BY(mu_);              // encoded commands waiting for the next write
  std::deque<Pending> pending_ RL_GUARDED_BY(mu_);  // sent or queued, awaiting replies, in order
  bool write_scheduled_ RL_GUARDED_BY(mu_) = false;
  bool writing_ RL_GUARDED_BY(mu_) = false;
  size_t unsent_ RL_GUARDED_BY(mu_) = 0;  // commands in out_ (not yet handed to the stream)
  size_t unanswered_ RL_GUARDED_BY(mu_) = 0;  // written (or being written), reply not yet come
  Status last_error_ RL_GUARDED_BY(mu_);
  std::atomic<bool> ready_{false};
  std::atomic<size_t> outstanding_{0};  // pending_.size(), readable without the lock
  std::atomic<uint64_t> failed_attempts_{0};
};

}  // namespace ratelimit::redis_detail
