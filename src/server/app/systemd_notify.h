// systemd_notify.h — tells systemd (a unit with Type=notify, packaging/ratelimitd.service)
// what ratelimitd is doing: READY=1 once it listens, RELOADING=1 ... READY=1 around a SIGHUP
// reload, STOPPING=1 when it starts draining. Through Debian's libsystemd (sd_notify).
//
// Why: with Type=notify, `systemctl start` returns only once the socket accepts connections,
// dependants start after that, and `systemctl reload` waits for the reload to finish.
// Invariants: without $NOTIFY_SOCKET (not started by systemd) every call does nothing; a
// failure to notify is never an error of the server (it is not worth stopping for).
// Thread-safety: each call may be made from any thread.
#pragma once

#include <string_view>

namespace ratelimit::server::systemd {

// READY=1 with a STATUS= line (e.g. "listening on 127.0.0.1:8080").
void notify_ready(std::string_view status);
// RELOADING=1 with MONOTONIC_USEC= (as systemd >= 253 requires); follow with notify_ready().
void notify_reloading();
// STOPPING=1: the server drains and will exit.
void notify_stopping();

}  // namespace ratelimit::server::systemd
