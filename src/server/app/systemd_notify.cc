// systemd_notify.cc — sd_notify() calls for ratelimitd's Type=notify unit (see the header).
#include "systemd_notify.h"

#include <systemd/sd-daemon.h>

#include <ctime>
#include <string>

namespace ratelimit::server::systemd {

void notify_ready(std::string_view status) {
  std::string message = "READY=1\nSTATUS=";
  message += status;
  sd_notify(0, message.c_str());
}

void notify_reloading() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const long long usec = static_cast<long long>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1'000;
  const std::string message = "RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec);
  sd_notify(0, message.c_str());
}

void notify_stopping() { sd_notify(0, "STOPPING=1\nSTATUS=draining connections"); }

}  // namespace ratelimit::server::systemd
