// background_thread.h — a thread that waits on a condition variable between rounds of work and
// is stopped by its owner: DistributedStore's ticker, RegionStore's exchange, RedisStore's INFO
// poller. Each owner writes its own loop (when it wakes, what a round does), since those differ
// and change apart; what they share is how the thread is stopped, written here once.
//
// Why: a stop set without the mutex could fall between the thread's check of `stopping` and its
// wait, and the thread would sleep a whole round before it saw it. stop() sets the flag under
// `mu`, then wakes the thread and joins it.
//
// The loop's contract: check `stopping` and wait on `wake` holding `mu` (MutexLock's wait_for /
// wait_until), and return once `stopping` is true. An owner may guard its own reasons to wake
// with `mu` too (RL_GUARDED_BY(thread.mu)).
//
// Thread-safety: start() and stop() are the owner's, from one thread; `stopping` only under
// `mu`. The owner calls stop() before it tears down what the loop uses; the destructor's stop()
// is only a backstop (a joinable std::thread destroyed would end the process). Header-only,
// internal (src/common).
#pragma once

#include <condition_variable>
#include <thread>
#include <utility>

#include "mutex.h"

namespace ratelimit {

class BackgroundThread {
 public:
  BackgroundThread() = default;
  BackgroundThread(const BackgroundThread&) = delete;
  BackgroundThread& operator=(const BackgroundThread&) = delete;
  ~BackgroundThread() { stop(); }

  // Runs `loop` on a new thread. Once per object.
  template <typename F>
  void start(F&& loop) {
    thread_ = std::thread(std::forward<F>(loop));
  }

  // Sets `stopping`, wakes the thread and waits until its loop has returned. Nothing when it was
  // never started or is already stopped.
  void stop() RL_EXCLUDES(mu) {
    if (!thread_.joinable()) return;
    {
      MutexLock lock(mu);
      stopping = true;
    }
    wake.notify_all();
    thread_.join();
  }

  Mutex mu;  // the thread holds it except while it works a round
  std::condition_variable wake;
  bool stopping RL_GUARDED_BY(mu) = false;

 private:
  std::thread thread_;
};

}  // namespace ratelimit
