// delay_proxy_main.cc — ratelimit-delay-proxy: DelayProxy (delay_proxy.h) as a process, for test
// scripts that run real daemons (tools/sim/compare_distributed.py puts one in front of each
// region's redis-server, as the other region reaches it).
//
// usage: ratelimit-delay-proxy TARGET_PORT ONE_WAY_DELAY_US
// Prints "port N" (the 127.0.0.1 port it listens on) once listening, then forwards every byte
// both ways after the delay until its stdin closes or it gets SIGTERM/SIGINT; exit 0 then, 2 on
// bad arguments, 1 when it cannot listen.
// Why: the same proxy the in-process e2e tests use, so a script's cross-region latency means what
// theirs does. Invariants: loopback only (DelayProxy's own); the parent's end of stdin is its
// lifeline, so a script that dies takes the proxy with it.
#include <poll.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "delay_proxy.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

bool parse(const char* s, int64_t lo, int64_t hi, int64_t& out) {
  const char* end = s + std::strlen(s);
  auto [p, ec] = std::from_chars(s, end, out);
  return ec == std::errc() && p == end && out >= lo && out <= hi;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t port = 0, delay = 0;
  if (argc != 3 || !parse(argv[1], 1, 65535, port) || !parse(argv[2], 0, 60'000'000, delay)) {
    std::fprintf(stderr, "usage: ratelimit-delay-proxy TARGET_PORT ONE_WAY_DELAY_US (0 ... 60000000)\n");
    return 2;
  }
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  ratelimit::testing::DelayProxy proxy;
  if (auto s = proxy.start(static_cast<uint16_t>(port)); !s.is_ok()) {
    std::fprintf(stderr, "ratelimit-delay-proxy: %s\n", s.message().c_str());
    return 1;
  }
  proxy.set_delay(std::chrono::microseconds(delay));
  std::printf("port %u\n", static_cast<unsigned>(proxy.port()));
  std::fflush(stdout);
  while (!g_stop) {
    pollfd in{STDIN_FILENO, POLLIN, 0};
    const int n = ::poll(&in, 1, 100);
    if (n > 0) {
      char buf[256];
      if (::read(STDIN_FILENO, buf, sizeof buf) <= 0) break;  // the parent closed our stdin
    }
  }
  return 0;
}
