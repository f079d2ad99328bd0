// waiting_loop.h — the waiting thread's side of WaitingService (waiting.h): the Waiter a
// front-end's Pending carries, the timed events, and Loop, which owns every queue. Private to
// src/service: waiting.cc (the front: fast path, entry points) and waiting_loop.cc (the loop).
// Invariants: Loop's state (queues_, events_, the timer) is touched only on its one thread;
// other threads reach it through post(). A Waiter's fields other than `generation` are written
// by the request's thread before it is handed to the loop, and by the loop after (see waiting.cc
// for the lost-wake-up argument between a denial and its enqueue).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "ratelimit/priority.h"
#include "ratelimit/waiting_rule.h"
#include "waiting.h"

namespace ratelimit::service {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct Event;
using Events = std::multimap<Clock::time_point, Event>;

struct Event {
  enum class Kind : uint8_t { kDeadline, kRetry, kHold };
  Kind kind;
  Waiter* waiter;    // kDeadline, kHold
  std::string qkey;  // kRetry
};

// The waiting service's side of one front-end Pending (Pending::waiter_), reused by the next
// request of the same front-end. Fields other than `generation` are written by the request's
// thread before the waiter is handed to the waiting thread, and by the waiting thread after.
struct Waiter final : Pending {
  enum class Phase : uint8_t { kFirst, kQueued, kDeciding, kHeld, kDone };

  WaitingService* svc = nullptr;
  Pending* outer = nullptr;
  std::atomic<uint64_t> generation{0};
  const Snapshot* snapshot = nullptr;
  Item item;
  std::string qkey;  // policy name, NUL, key
  size_t shard = 0;
  uint64_t epoch0 = 0;
  bool may_wait = false;
  Clock::time_point deadline{};
  Phase phase = Phase::kDone;
  bool cancel_requested = false;
  bool expired = false;  // its deadline passed while its decision was in flight
  Decision last{};       // the latest denial it waited on
  Clock::time_point last_at{};
  bool has_last = false;
  Events::iterator event{};  // its deadline or hold event
  bool has_event = false;

  Waiter() { defer_counting_ = true; }
  void resume() override;
};

// A steady instant in integer microseconds, the time base of the waiting rules
// (include/ratelimit/waiting_rule.h) here.
inline int64_t micros(Clock::time_point t) {
  return std::chrono::duration_cast<Micros>(t.time_since_epoch()).count();
}

class WaitingService::Loop {
 public:
  struct Queue {
    std::deque<Waiter*> waiters;
    bool deciding = false;
    bool woken = false;
    Events::iterator retry{};
    bool has_retry = false;
    Decision last{};  // the latest denial on this key, for requests that never saw one
    Clock::time_point last_at{};
    bool has_last = false;
    // Priority classes (include/ratelimit/priority.h): each class's credits of grants.
    std::array<int64_t, algo::kMaxClasses> credits{};
  };

  explicit Loop(WaitingService& svc) : svc_(svc), timer_(io_) {
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Loop() {
    work_.reset();
    asio::post(io_, [this] {
      stopping_ = true;
      timer_.cancel();
    });
    thread_.join();
  }

  template <typename F>
  void post(F f) {
    asio::post(io_, std::move(f));
  }

  // --- entry points, on the waiting thread ---------------------------------------------------

  // A request to queue: denied by the store (`decided`), or arriving while its key's shard had
  // waiters (not decided yet).
  void enqueue(Waiter* w, bool decided);

  // A release freed a lease of `qkey`: try its head. `lease` (when the release may arrive twice,
  // from this process and from the release feed): the second arrival of one id wakes nobody.
  void wake(const std::string& qkey, const LeaseId* lease);
  // The release feed subscribed again: try every queue's head once.
  void wake_all();

  void cancel(Waiter* w, uint64_t generation);

  void shutdown();

  // A decision of `w` returned (inline, or posted by Waiter::resume).
  void on_decided(Waiter* w);

  // An admitted waiter's answer, held for its shaping delay when its rule says so.
  void admitted(Waiter* w, Clock::time_point now);

  WaitStats stats() const;

 private:
  // WaitStats as counters any thread may read.
  struct Counters {
    std::atomic<uint64_t> waited{0}, admitted{0}, timed_out{0}, queue_full{0}, cancelled{0}, shutdown{0}, held{0},
        wakeups{0};
    std::atomic<int64_t> waiting{0};
  };
  using Why = std::atomic<uint64_t> Counters::*;

  // The async result of a request's first decision (the fast path).
  void first_decided(Waiter* w, Clock::time_point now);

  void kick(Queue& q);
  // Priority classes: moves the first waiter of the class to serve next (algo::pick_class) to
  // the head; charge() spends its class's credit when it is admitted.
  static void order_head(Queue& q);
  static void charge(Queue& q, const Waiter* w);
  static std::array<bool, algo::kMaxClasses> waiting_classes(const Queue& q, size_t n);
  // Decides the head of `qkey` later on this thread (no recursion through inline stores).
  void post_kick(const std::string& qkey);

  // After a waiter left `q`: try the next head now (`now_too`), or at a release or retry time
  // already armed; forget the queue when empty.
  void after_change(Queue& q, const std::string& qkey, bool now_too);

  void drop_if_idle(const std::string& qkey);

  void remove(Queue& q, Waiter* w);
  // A waiter that never saw a denial of its own answers with its key's latest one.
  static void adopt_last(const Queue& q, Waiter* w);

  void drop_event(Waiter* w);

  void arm_retry(Queue& q, const std::string& qkey, Clock::time_point at);

  void rearm();

  void fire();

  // Completes the front-end's Pending with the waiter's answer, counting its outcome once.
  void answer(Waiter* w);

  // A 429 for a waiter not admitted: the denial it (or its key) last saw, aged to now.
  void answer_denied(Waiter* w, Clock::time_point now, Why why);

  // The client went away: nothing is counted; the answer is never sent.
  void answer_gone(Waiter* w);

  void compensate(Waiter* w, const Decision& d);

  WaitingService& svc_;
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  asio::steady_timer timer_;
  bool armed_ = false;
  Clock::time_point armed_at_{};
  std::unordered_map<std::string, Queue> queues_;
  // Releases seen once (see wake), oldest first; bounded: one whose second arrival never comes
  // (a release through another process, or one made while no queue waited) ages out.
  static constexpr size_t kSeenReleases = 4096;
  std::set<LeaseId> seen_;
  std::deque<LeaseId> seen_order_;
  Events events_;
  Counters st_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ratelimit::service
