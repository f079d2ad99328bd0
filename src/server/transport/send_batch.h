// send_batch.h — the HTTP/1.1 answers one worker has ready in an event-loop turn, sent together
// in one io_uring_enter instead of one send() each.
//
// Why: on the machines this was measured on, a system call's entry and exit cost about as much
// as a small send's own work; bench/floor/http_floor.c shows a turn's sends in one
// io_uring_enter take ~10 % off the kernel's CPU per request (docs/BENCHMARKS.md §16).
// How: a connection whose answer is rendered queue()s itself; the first queue of a turn posts
// flush() to the worker's io_context, which runs it after the handlers already posted — the
// rest of the turn's ready connections — so their answers leave together. Each send carries
// MSG_DONTWAIT: one that cannot complete at once completes with what fit (or -EAGAIN) instead
// of waiting in the ring, so flush() never blocks and the kernel holds no buffer past it; the
// connection sends the rest itself, as it always did for what did not fit.
// Invariants: a queued sender's bytes stay valid and unchanged until its on_sent() runs;
// flush() asks sendable() right before it builds that sender's send, on the thread that closes
// connections, so a closed connection's descriptor (maybe reused) is never written; on_sent()
// runs exactly once for each queued sender except one found not sendable (on_sent(-EAGAIN),
// nothing sent, if the ring broke before its send was built).
// Fallback: `io_uring: false`, or a kernel or seccomp profile that refuses io_uring: enabled()
// is false (logged once per process) and connections send each answer themselves.
// Thread-safety: one per worker, used only on the worker's thread (the ring is SINGLE_ISSUER).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>

namespace ratelimit::server {

// A connection with an answer to send (implemented by the HTTP/1.1 connection).
class BatchedSender {
 public:
  // Still open, with the queued answer unchanged.
  virtual bool sendable() const = 0;
  virtual int send_fd() const = 0;
  virtual std::string_view send_bytes() const = 0;
  // Bytes sent (possibly fewer than all), or -errno (-EAGAIN: nothing fit).
  virtual void on_sent(int result) = 0;

 protected:
  ~BatchedSender() = default;
};

class SendBatch {
 public:
  // `wanted` false: never opens a ring (enabled() is false).
  SendBatch(boost::asio::io_context& ioc, bool wanted);
  ~SendBatch();
  SendBatch(const SendBatch&) = delete;
  SendBatch& operator=(const SendBatch&) = delete;

  // Whether queue() may be used; the first call opens the ring (on the worker's thread, which
  // must be the one that submits).
  bool enabled();
  // Sends `s`'s bytes at the end of this turn; `s` is kept alive until then. enabled() only.
  void queue(std::shared_ptr<BatchedSender> s);
  // Answers sent through the ring so far (any thread; for tests and operators).
  uint64_t batched() const { return batched_.load(std::memory_order_relaxed); }

 private:
  void flush();

  struct Ring;
  boost::asio::io_context& ioc_;
  enum class State : unsigned char { kUnopened, kOpen, kOff } state_;
  std::unique_ptr<Ring> ring_;
  bool flush_posted_ = false;
  std::vector<std::shared_ptr<BatchedSender>> queued_, flushing_;  // reused: no allocation per turn
  std::vector<int> results_;
  std::atomic<uint64_t> batched_{0};
};

}  // namespace ratelimit::server
