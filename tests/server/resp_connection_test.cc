// resp_connection_test.cc — the Redis-protocol connection (resp_connection.h) in process, on the
// transport rig with two worker threads and a handler whose replies come later from a thread
// of its own, as a store's do: pipelines from many connections answered in order while replies
// resume from that thread, a pending command whose client goes away is cancelled (on the
// connection's thread) and its late reply dropped uncounted, and commands pipelined behind a
// pending one are read while it waits and answered after it.
//
// Why in process: these are the connection's cross-thread paths (resume() from any thread, the
// read kept out while a reply is pending, cancel), and scripts/test runs this binary under
// ThreadSanitizer; the end-to-end tests (e2e_resp_test.cc) run the real binary, which TSan does
// not see. Every wait is bounded (eventually, RawConn's deadlines); nothing depends on speed.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "eventually.h"
#include "raw_conn.h"
#include "resp_connection.h"
#include "transport_rig.h"

namespace ratelimit::server {
namespace {

using namespace std::chrono_literals;
using test_support::RawConn;
using testing::RigOptions;
using testing::TransportRig;

constexpr auto kNow = static_cast<Endpoint>(1);
constexpr auto kLater = static_cast<Endpoint>(2);
constexpr auto kHeld = static_cast<Endpoint>(3);

// What a command left pending writes in complete(): set on the handler's thread before resume().
struct Pending final : RespCallState {
  explicit Pending(RespCall& /*call*/) {}
  std::string value;
};

// NOW v: +v at once. LATER v: +v from the handler's thread. HOLD: +held once release() is called,
// or -cancelled when the client goes away first (then counted in cancelled()).
class ThreadedHandler final : public RespHandler {
 public:
  ThreadedHandler() : thread_([this] { run(); }) {}
  ~ThreadedHandler() override {
    post({});
    thread_.join();
  }

  bool handle(RespCall& call) override {
    const std::string_view name = call.args[0];
    const std::string value(call.args.size() > 1 ? call.args[1] : "");
    if (name == "NOW") {
      call.endpoint = kNow;
      call.reply().simple(value);
      return true;
    }
    Pending& p = call.state<Pending>();
    if (name == "LATER") {
      call.endpoint = kLater;
      post([&call, &p, value] {
        p.value = value;
        call.resume();
      });
      return false;
    }
    call.endpoint = kHeld;
    std::lock_guard lock(mu_);
    held_.push_back(&call);
    return false;
  }
  void complete(RespCall& call) override { call.reply().simple(call.state<Pending>().value); }
  void cancel(RespCall& call) override {
    cancelled_.fetch_add(1);
    answer(call, "cancelled");
  }

  // Answers every held command (from the handler's thread).
  void release() {
    std::deque<RespCall*> calls;
    {
      std::lock_guard lock(mu_);
      calls.swap(held_);
    }
    for (RespCall* c : calls) answer(*c, "held");
  }
  size_t held() {
    std::lock_guard lock(mu_);
    return held_.size();
  }
  int cancelled() const { return cancelled_.load(); }

 private:
  void answer(RespCall& call, std::string value) {
    {
      std::lock_guard lock(mu_);
      std::erase(held_, &call);
    }
    post([&call, value = std::move(value)] {
      call.state<Pending>().value = value;
      call.resume();
    });
  }
  void post(std::function<void()> f) {
    std::lock_guard lock(mu_);
    jobs_.push_back(std::move(f));
    cv_.notify_one();
  }
  void run() {
    while (true) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      if (!job) return;
      job();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;  // under mu_; an empty job stops the thread
  std::deque<RespCall*> held_;              // under mu_
  std::atomic<int> cancelled_{0};
  std::thread thread_;
};

struct Fixture {
  Fixture() {
    served.info.name = "RESP";
    served.resp = &handler;
    rig = std::make_unique<TransportRig>(served, RigOptions{2, {}});
  }
  uint16_t port() const { return static_cast<uint16_t>(rig->port()); }
  ThreadedHandler handler;
  Served served;
  std::unique_ptr<TransportRig> rig;  // stopped before the handler goes
};

std::string command(std::initializer_list<std::string_view> args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (std::string_view a : args) out += "$" + std::to_string(a.size()) + "\r\n" + std::string(a) + "\r\n";
  return out;
}

// 16 connections at once, each a pipeline of 60 commands alternating NOW and LATER: every reply
// in order on its connection, while LATER's replies resume from the handler's thread.
TEST(RespConnection, PipelinesResumedFromAnotherThreadAnswerInOrder) {
  Fixture f;
  constexpr int kConnections = 16, kCommands = 60;
  std::vector<std::thread> clients;
  std::atomic<int> in_order{0};
  for (int c = 0; c < kConnections; ++c) {
    clients.emplace_back([&, c] {
      RawConn conn(f.port());
      std::string pipeline, want;
      for (int i = 0; i < kCommands; ++i) {
        const std::string v = std::to_string(c) + "." + std::to_string(i);
        pipeline += command({i % 2 == 0 ? "NOW" : "LATER", v});
        want += "+" + v + "\r\n";
      }
      if (!conn.send(pipeline)) return;
      if (conn.read_until(want, 10s) == want) in_order.fetch_add(1);
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(in_order.load(), kConnections);
  EXPECT_EQ(f.rig->counters().requests(kNow, 200), uint64_t{kConnections * kCommands / 2});
  EXPECT_EQ(f.rig->counters().requests(kLater, 200), uint64_t{kConnections * kCommands / 2});
}

// A held command whose client goes away — with commands pipelined behind it, read while it
// waits — is cancelled at once; its reply, when it comes, is dropped and not counted.
TEST(RespConnection, AClientGoneWhileItsCommandIsPendingCancelsIt) {
  Fixture f;
  {
    RawConn c(f.port());
    ASSERT_TRUE(c.send(command({"HOLD"})));
    ASSERT_TRUE(::ratelimit::testing::eventually([&] { return f.handler.held() == 1; }, 10s));
    ASSERT_TRUE(c.send(command({"NOW", "behind"}) + command({"LATER", "behind"})));
  }
  ASSERT_TRUE(::ratelimit::testing::eventually([&] { return f.handler.cancelled() == 1; }, 10s));
  EXPECT_EQ(f.handler.held(), 0u);
  ASSERT_TRUE(::ratelimit::testing::eventually([&] { return f.rig->counters().open_connections() == 0; }, 10s));
  EXPECT_EQ(f.rig->counters().requests(kHeld, 200), 0u);
  EXPECT_EQ(f.rig->counters().requests(kNow, 200), 0u) << "nothing behind a gone client is answered";
}

// Commands pipelined behind a held one (sent after it was handed to the handler) are read while
// it waits, then answered after its reply, in order; the connection goes on serving.
TEST(RespConnection, ThePipelineBehindAPendingCommandIsAnsweredAfterIt) {
  Fixture f;
  RawConn c(f.port());
  ASSERT_TRUE(c.send(command({"HOLD"})));
  ASSERT_TRUE(::ratelimit::testing::eventually([&] { return f.handler.held() == 1; }, 10s));
  std::string behind;
  for (int i = 0; i < 100; ++i) behind += command({i % 2 == 0 ? "NOW" : "LATER", std::to_string(i)});
  ASSERT_TRUE(c.send(behind));
  f.handler.release();
  std::string want = "+held\r\n";
  for (int i = 0; i < 100; ++i) want += "+" + std::to_string(i) + "\r\n";
  EXPECT_EQ(c.read_until(want, 10s), want);
  const std::string again = command({"LATER", "again"});
  ASSERT_TRUE(c.send(again));
  EXPECT_EQ(c.read_until("+again\r\n", 10s), "+again\r\n");
  EXPECT_EQ(f.handler.cancelled(), 0);
  EXPECT_EQ(f.rig->counters().requests(kHeld, 200), 1u);
}

}  // namespace
}  // namespace ratelimit::server
