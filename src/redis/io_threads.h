// io_threads.h — the I/O threads of one Redis store: N single-threaded io_contexts, each run by
// its own thread until stop(). Connections are spread over them round robin.
//
// Why one io_context per thread (not one shared by N threads): a connection's handlers then
// never run concurrently, so its I/O-thread state needs no lock (RespConnection relies on it).
// Invariant: every connection on these contexts is closed before stop() (closing posts to them).
// Thread-safety: next() from any thread; stop() once, from a thread that is none of these.
#pragma once

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <thread>
#include <vector>

namespace ratelimit::redis_detail {

class IoThreads {
 public:
  explicit IoThreads(size_t threads) {
    for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i) {
      ios_.push_back(std::make_unique<boost::asio::io_context>(1));
      guards_.push_back(boost::asio::make_work_guard(*ios_.back()));
    }
    for (auto& io : ios_) threads_.emplace_back([io = io.get()] { io->run(); });
  }
  ~IoThreads() { stop(); }
  IoThreads(const IoThreads&) = delete;
  IoThreads& operator=(const IoThreads&) = delete;

  // The context for the next connection (round robin).
  boost::asio::io_context& next() {
    return *ios_[next_.fetch_add(1, std::memory_order_relaxed) % ios_.size()];
  }
  // The first context: for the router's own timers.
  boost::asio::io_context& first() { return *ios_.front(); }

  void stop() {
    guards_.clear();
    for (auto& io : ios_) io->stop();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  std::vector<std::unique_ptr<boost::asio::io_context>> ios_;
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guards_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> next_{0};
};

}  // namespace ratelimit::redis_detail
