// systemd_notify_test.cc — ratelimitd speaks systemd's notify protocol as Type=notify needs:
// started with $NOTIFY_SOCKET (what systemd sets), it sends READY=1 once it listens (with its
// address in STATUS=), RELOADING=1 then READY=1 around every SIGHUP reload (a good and a bad
// file alike: the service is ready either way), and STOPPING=1 when SIGTERM makes it drain.
// The socket is the test's own AF_UNIX datagram socket, bound where systemd would bind it;
// the messages come from the real binary through Debian's libsystemd.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

#include "daemon.h"

namespace {

constexpr const char* kConfig =
    "policies:\n  p: { algorithm: fixed_window, limit: 1, window: 1s }\n";

class NotifySocket {
 public:
  NotifySocket() {
    char tmpl[] = "/tmp/rl-notify-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/notify";
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path_.copy(addr.sun_path, sizeof addr.sun_path - 1);
    bound_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~NotifySocket() {
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  bool bound() const { return bound_; }
  const std::string& path() const { return path_; }
  // The next datagram, or "" after `timeout_ms` without one.
  std::string next(int timeout_ms = 10'000) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) return "";
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

 private:
  std::string dir_, path_;
  int fd_ = -1;
  bool bound_ = false;
};

bool has_line(const std::string& message, const std::string& line) {
  return ("\n" + message + "\n").find("\n" + line + "\n") != std::string::npos;
}

TEST(SystemdNotify, ReadyReloadingStopping) {
  NotifySocket sock;
  ASSERT_TRUE(sock.bound()) << sock.path();
  ASSERT_EQ(setenv("NOTIFY_SOCKET", sock.path().c_str(), 1), 0);
  ratelimit::e2e::Daemon d;
  const bool started = d.start(kConfig);
  unsetenv("NOTIFY_SOCKET");
  ASSERT_TRUE(started) << d.log();

  const std::string ready = sock.next();
  EXPECT_TRUE(has_line(ready, "READY=1")) << ready;
  EXPECT_TRUE(has_line(ready, "STATUS=listening on 127.0.0.1:" + std::to_string(d.port())))
      << ready;
  // READY=1 is sent after the socket accepts: a request right now is answered.
  EXPECT_EQ(ratelimit::e2e::http_get(d.port(), "/healthz").status, 200u);

  d.signal(SIGHUP);  // a good file
  std::string reloading = sock.next();
  EXPECT_TRUE(has_line(reloading, "RELOADING=1")) << reloading;
  EXPECT_NE(reloading.find("\nMONOTONIC_USEC="), std::string::npos) << reloading;
  EXPECT_TRUE(has_line(sock.next(), "READY=1"));
  ASSERT_TRUE(d.wait_log("reload ok", std::chrono::seconds(10))) << d.log();

  d.rewrite_config("policies: [not, a, map\n");  // a bad file: refused, still ready
  d.signal(SIGHUP);
  reloading = sock.next();
  EXPECT_TRUE(has_line(reloading, "RELOADING=1")) << reloading;
  EXPECT_TRUE(has_line(sock.next(), "READY=1"));
  ASSERT_TRUE(d.wait_log("reload failed", std::chrono::seconds(10))) << d.log();

  d.signal(SIGTERM);
  const std::string stopping = sock.next();
  EXPECT_TRUE(has_line(stopping, "STOPPING=1")) << stopping;
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(15)), 0) << d.log();
  EXPECT_EQ(sock.next(200), "") << "nothing after STOPPING=1";
}

TEST(SystemdNotify, WithoutNotifySocketNothingChanges) {
  ASSERT_EQ(getenv("NOTIFY_SOCKET"), nullptr);
  ratelimit::e2e::Daemon d;
  ASSERT_TRUE(d.start(kConfig)) << d.log();
  EXPECT_EQ(ratelimit::e2e::http_get(d.port(), "/healthz").status, 200u);
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(15)), 0) << d.log();
}

}  // namespace
