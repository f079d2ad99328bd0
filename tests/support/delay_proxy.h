// delay_proxy.h — test support: a TCP proxy on 127.0.0.1 in front of one loopback port that
// adds latency in both directions, and can cut the link the two ways a network partition
// shows: a blackhole (every byte held, nothing forwarded, nothing closed — as packets lost
// until TCP gives up) or a refusal (every connection reset, new ones reset at once); then heal
// (held bytes flow on after their delay, new connections are accepted).
//
// Why in process: the test switches latency and partitions at exact moments and asserts right
// after, with no control channel to go wrong; it serves the multi-region tests, one proxy in
// front of each region's Redis as the other region reaches it.
// Invariants: listens on 127.0.0.1 only, connects to 127.0.0.1:<target> only; at most 4 MiB held
// per direction per connection (reading pauses beyond it); every wait is bounded (poll with a
// 5 ms tick), and the destructor closes every socket and joins every thread.
// Thread-safety: every method from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ratelimit/status.h"

namespace ratelimit::testing {

class DelayProxy {
 public:
  enum class Mode : uint8_t {
    kForward,    // bytes flow, each delayed by the one-way delay
    kBlackhole,  // bytes are read and held; nothing is forwarded or closed
    kRefuse,     // every connection is reset, new ones are reset when accepted
  };

  DelayProxy() = default;
  ~DelayProxy();
  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;

  // Listens on a free port of 127.0.0.1, forwarding to 127.0.0.1:`target_port`.
  Status start(uint16_t target_port);
  uint16_t port() const { return port_; }

  // Added to every chunk in each direction from now on (a round trip gains twice this).
  void set_delay(std::chrono::microseconds one_way) { delay_us_.store(one_way.count()); }
  void set_mode(Mode mode) { mode_.store(mode); }
  Mode mode() const { return mode_.load(); }
  // Connections accepted so far.
  uint64_t accepted() const { return accepted_.load(); }

 private:
  void accept_loop();
  void pump(int client, int server);

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  uint16_t target_ = 0;
  std::atomic<int64_t> delay_us_{0};
  std::atomic<Mode> mode_{Mode::kForward};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> accepted_{0};
  std::mutex mu_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

}  // namespace ratelimit::testing
