// app_run.cc — the running daemon's control loop (App::run, see app.h): signals (SIGHUP
// reloads; SIGTERM/SIGINT drain; a second one stops at once), the store-outage log, and the
// end once every worker has drained.
//
// Shutdown: stop accepting; /readyz and /healthcheck turn unready; idle connections are closed;
// each connection with a request in flight finishes it, answers with "Connection: close" and
// closes; gRPC health turns NOT_SERVING; when every worker is done the process exits 0. A grace
// period (request_timeout + 2 s) bounds it.
// The outage log (outage.h) is a poll every 500 ms, so an outage is two lines whatever the
// traffic. The same poll sets gRPC health (Check and Watch, on the gRPC listener and on h2c):
// SERVING while the store can decide and the server is not draining — what /readyz says.
#include <csignal>
#include <functional>
#include <thread>

#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "app.h"
#include "log.h"
#include "outage.h"
#include "systemd_notify.h"

namespace ratelimit::server {

namespace asio = boost::asio;
using boost::system::error_code;

void App::drain() {
  for (auto& l : listeners_) l->close();
  if (grpc_listener_) grpc_listener_->close();
  state_.draining.store(true, std::memory_order_relaxed);
  // Waiters are answered now (429 with the denial they waited on), so the busy connections
  // they hold finish at once rather than at their max_wait.
  if (waiting_) waiting_->shutdown();
  set_grpc_serving(false);
  for (auto& w : workers_) w->drain();
}

void App::set_grpc_serving(bool serving) {
  if (grpc_) grpc_->set_serving(serving);
}

int App::run() {
  const std::string where = listeners_.front()->where();
  // Caught since open(): a signal that came before now is delivered by the first async_wait.
  asio::signal_set& signals = *signals_;
  asio::steady_timer grace(control_);
  bool stopping = false;
  std::function<void()> wait_signal = [&] {
    signals.async_wait([&](error_code ec, int sig) {
      if (ec) return;
      if (sig == SIGHUP) {
        systemd::notify_reloading();
        reload("SIGHUP", false);
        systemd::notify_ready("listening on " + where);  // the old or the new configuration
        wait_signal();
        return;
      }
      if (stopping) {  // a second signal: stop now
        log_line("warn", "second signal: stopping without waiting for requests in flight");
        for (auto& w : workers_) w->stop();
        return;
      }
      stopping = true;
      systemd::notify_stopping();
      // Logged once draining: a client that reads the line (the tests do) then finds /readyz
      // and /healthcheck unready; logged first, a request answered in between saw them ready.
      drain();
      log_line("info", std::string(sig == SIGTERM ? "SIGTERM" : "SIGINT") + ": draining connections");
      const auto limit = std::chrono::duration_cast<std::chrono::milliseconds>(plan_.config->limits.request_timeout) +
                         std::chrono::seconds(2);
      grace.expires_after(limit);
      grace.async_wait([&](error_code tec) {
        if (tec) return;
        log_line("warn", "grace period over: stopping the remaining connections");
        for (auto& w : workers_) w->stop();
      });
      wait_signal();
    });
  };
  wait_signal();

  asio::steady_timer outage_timer(control_);
  OutageWatch outage;
  // Set on the control thread once every worker has finished. cancel() cannot stop a poll whose
  // timer already expired (its handler is queued with success), and that handler would arm the
  // next poll, keeping control_.run() from ever returning: a daemon that never exits on SIGTERM.
  bool workers_done = false;
  std::function<void()> watch_store = [&] {
    outage_timer.expires_after(std::chrono::milliseconds(500));
    outage_timer.async_wait([&](error_code ec) {
      if (ec || workers_done) return;
      const Status ready = state_.store_ready ? state_.store_ready() : Status();
      set_grpc_serving(ready.is_ok() && !state_.draining.load(std::memory_order_relaxed));
      const auto now = std::chrono::steady_clock::now();
      if (auto line = outage.observe(ready, metrics_.totals(), now)) log_line("warn", *line);
      if (store_->tick) {
        if (auto line = store_->tick(now)) log_line("warn", *line);
      }
      watch_store();
    });
  };
  watch_store();

  for (auto& w : workers_) w->start();
  for (auto& l : listeners_) l->start();
  if (grpc_listener_) grpc_listener_->start();
  Started started;
  for (const auto& l : listeners_) started.listeners.emplace_back(l->served().info.name, l->where());
  started.grpc = grpc_where_;
  started.threads = static_cast<unsigned>(workers_.size());
  started.store = store_description(plan_.config->store);
  if (const auto& r = plan_.config->regions) {
    started.store += ", region " + r->self + " of";
    for (const RegionConfig& s : r->stores) started.store += " " + s.name;
  }
  source_.log_started(started);
  systemd::notify_ready("listening on " + where);

  // The control loop ends once every worker has finished draining.
  std::thread joiner([&] {
    for (auto& w : workers_) w->join();
    asio::post(control_, [&] {
      error_code ec;
      workers_done = true;
      grace.cancel();
      outage_timer.cancel();
      signals.cancel(ec);
      for (auto& l : listeners_) l->close();
      if (grpc_listener_) grpc_listener_->close();
    });
  });
  control_.run();
  joiner.join();
  if (store_->stop) store_->stop();  // every worker has finished: no request reaches the store
  log_line("info", "ratelimitd stopped");
  return kExitOk;
}

}  // namespace ratelimit::server
