// connection.cc — one pipelined Redis connection on Boost.Asio (see connection.h for the
// design and its invariants).
#include "connection.h"

#include <hiredis/hiredis.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <future>

#include "script_codec.h"

namespace ratelimit::redis_detail {
namespace asio = boost::asio;
using std::chrono::steady_clock;

namespace {

constexpr size_t kReadBufferSize = 64 * 1024;

std::string reply_text(const redisReply* r) {
  if (r == nullptr) return "no reply";
  if (r->str != nullptr) return std::string(r->str, r->len);
  return "reply of type " + std::to_string(r->type);
}

bool is_error(const redisReply* r) { return r != nullptr && r->type == REDIS_REPLY_ERROR; }

// A refused handshake step: a credential problem is the configuration's fault.
Status handshake_error(const char* step, const redisReply* r) {
  std::string text = reply_text(r);
  if (text.starts_with("NOAUTH")) {
    return Status::invalid_argument(
        "Redis requires authentication (NOAUTH): put user:password@ (or :password@) in the URL");
  }
  if (text.starts_with("WRONGPASS") || text.starts_with("ERR invalid password") ||
      text.starts_with("ERR AUTH")) {
    return Status::invalid_argument(std::string("Redis refused ") + step + ": " + text);
  }
  return Status::unavailable(std::string("Redis refused ") + step + ": " + text);
}

}  // namespace

Connection::Connection(asio::io_context& io, const ConnectionConfig& config,
                       AtomicCounters& counters, std::function<void()> on_change)
    : io_(io),
      config_(config),
      counters_(counters),
      on_change_(std::move(on_change)),
      socket_(io),
      resolver_(io),
      tick_timer_(io),
      backoff_timer_(io),
      read_buf_(kReadBufferSize),
      backoff_(config.backoff_min) {}

Connection::~Connection() {
  if (reader_ != nullptr) redisReaderFree(reader_);
}

Status Connection::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

void Connection::start() {
  asio::post(io_, [self = shared_from_this()] {
    self->arm_tick();
    self->do_connect();
  });
}

void Connection::close() {
  std::promise<void> done;
  asio::post(io_, [self = shared_from_this(), &done] {
    {
      std::lock_guard lock(self->mu_);
      self->state_ = State::kClosed;
    }
    self->fail(Status::unavailable("the Redis store is shutting down"));
    self->tick_timer_.cancel();
    self->backoff_timer_.cancel();
    done.set_value();
  });
  done.get_future().wait();
}

void Connection::do_connect() {
  {
    std::lock_guard lock(mu_);
    if (state_ == State::kClosed) return;
    state_ = State::kConnecting;
  }
  const uint64_t gen = ++gen_;
  connect_deadline_ = steady_clock::now() + config_.connect_timeout;
  boost::system::error_code ignored;
  socket_.close(ignored);
  if (reader_ != nullptr) redisReaderFree(reader_);
  reader_ = redisReaderCreate();
  for (auto& s : reload_seq_) s = 0;
  auto self = shared_from_this();
  auto connected = [self, gen](const boost::system::error_code& ec) {
    if (gen != self->gen_) return;
    if (ec) {
      self->fail(Status::unavailable("cannot connect to " + self->config_.display_url + ": " +
                                     ec.message()));
      return;
    }
    self->on_connected(gen);
  };
  if (config_.url.is_unix) {
    socket_.async_connect(asio::local::stream_protocol::endpoint(config_.url.path), connected);
    return;
  }
  resolver_.async_resolve(
      config_.url.host, std::to_string(config_.url.port),
      [self, gen, connected](const boost::system::error_code& ec,
                             const asio::ip::tcp::resolver::results_type& results) {
        if (gen != self->gen_) return;
        if (ec) {
          self->fail(Status::unavailable("cannot resolve " + self->config_.url.host + ": " +
                                         ec.message()));
          return;
        }
        std::vector<asio::generic::stream_protocol::endpoint> endpoints;
        for (const auto& r : results) endpoints.emplace_back(r.endpoint());
        asio::async_connect(self->socket_, endpoints,
                            [connected](const boost::system::error_code& e, const auto&) {
                              connected(e);
                            });
      });
}

void Connection::on_connected(uint64_t gen) {
  if (!config_.url.is_unix) {
    boost::system::error_code ignored;
    socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  }
  do_read();
  if (gen == gen_) handshake();
}

void Connection::handshake() {
  auto self = shared_from_this();
  const uint64_t gen = gen_;
  // Each step: a refused reply fails the connection (and so every later step).
  auto step = [self, gen](const char* what) {
    return [self, gen, what](const Status& error, const redisReply* reply) {
      if (!error.is_ok() || gen != self->gen_) return;
      if (is_error(reply)) self->fail(handshake_error(what, reply));
    };
  };
  std::lock_guard lock(mu_);
  if (config_.url.has_password) {
    std::vector<std::string> auth = {"AUTH"};
    if (!config_.url.user.empty()) auth.push_back(config_.url.user);
    auth.push_back(config_.url.password);
    auto r = std::make_unique<Request>();
    r->command = encode_command(auth);
    r->on_reply = step("AUTH");
    enqueue_locked(std::move(r), connect_deadline_);
  }
  if (config_.url.db != 0) {
    std::vector<std::string> select = {"SELECT", std::to_string(config_.url.db)};
    auto r = std::make_unique<Request>();
    r->command = encode_command(select);
    r->on_reply = step("SELECT");
    enqueue_locked(std::move(r), connect_deadline_);
  }
  for (size_t i = 0; i < kScriptCount; ++i) {
    auto r = std::make_unique<Request>();
    r->command = config_.script_loads[i];
    r->on_reply = [self, gen, i](const Status& error, const redisReply* reply) {
      if (!error.is_ok() || gen != self->gen_) return;
      if (reply == nullptr || reply->type != REDIS_REPLY_STRING ||
          reply_text(reply) != kLuaScripts[i].sha1) {
        self->fail(is_error(reply) ? handshake_error("SCRIPT LOAD", reply)
                                   : Status::internal(std::string("SCRIPT LOAD of ") +
                                                      kLuaScripts[i].name +
                                                      " answered an unexpected SHA1: " +
                                                      reply_text(reply)));
        return;
      }
      if (i + 1 < kScriptCount) return;
      {
        std::lock_guard l(self->mu_);
        if (self->state_ != State::kConnecting) return;
        self->state_ = State::kReady;
        self->last_error_ = Status();
      }
      self->ready_.store(true, std::memory_order_release);
      self->backoff_ = self->config_.backoff_min;
      self->counters_.connects.fetch_add(1, std::memory_order_relaxed);
      self->on_change_();
    };
    enqueue_locked(std::move(r), connect_deadline_);
  }
  schedule_write_locked();
}

bool Connection::submit(RequestPtr& r) {
  std::lock_guard lock(mu_);
  if (state_ != State::kReady) return false;
  enqueue_locked(std::move(r), steady_clock::now() + config_.command_timeout);
  schedule_write_locked();
  return true;
}

void Connection::enqueue_locked(RequestPtr r, SteadyTime deadline) {
  r->seq = next_seq_++;
  r->deadline = deadline;
  out_ += r->command;
  pending_.push_back(std::move(r));
}

void Connection::schedule_write_locked() {
  if (write_scheduled_ || writing_) return;
  write_scheduled_ = true;
  asio::post(io_, [self = shared_from_this()] { self->do_write(); });
}

void Connection::do_write() {
  {
    std::lock_guard lock(mu_);
    write_scheduled_ = false;
    if (writing_ || out_.empty()) return;
    if (state_ != State::kReady && state_ != State::kConnecting) return;
    write_buf_.clear();
    write_buf_.swap(out_);
    writing_ = true;
  }
  asio::async_write(socket_, asio::buffer(write_buf_),
                    [self = shared_from_this(), gen = gen_](const boost::system::error_code& ec,
                                                            size_t) {
                      self->on_written(gen, ec);
                    });
}

void Connection::on_written(uint64_t gen, const boost::system::error_code& ec) {
  if (gen != gen_) return;
  if (ec) {
    fail(Status::unavailable("write to " + config_.display_url + " failed: " + ec.message()));
    return;
  }
  {
    std::lock_guard lock(mu_);
    writing_ = false;
    if (out_.empty()) return;
  }
  do_write();  // more was queued while writing: send it now, in one write
}

void Connection::do_read() {
  socket_.async_read_some(asio::buffer(read_buf_),
                          [self = shared_from_this(), gen = gen_](
                              const boost::system::error_code& ec, size_t n) {
                            self->on_read(gen, ec, n);
                          });
}

void Connection::on_read(uint64_t gen, const boost::system::error_code& ec, size_t n) {
  if (gen != gen_) return;
  if (ec) {
    fail(Status::unavailable(ec == asio::error::eof
                                 ? "Redis at " + config_.display_url + " closed the connection"
                                 : "read from " + config_.display_url + " failed: " +
                                       ec.message()));
    return;
  }
  if (redisReaderFeed(reader_, read_buf_.data(), n) != REDIS_OK) {
    fail(Status::internal("Redis reply reader: out of memory"));
    return;
  }
  for (;;) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
      fail(Status::internal(std::string("Redis protocol error: ") + reader_->errstr));
      return;
    }
    if (raw == nullptr) break;
    std::unique_ptr<redisReply, void (*)(void*)> reply(static_cast<redisReply*>(raw),
                                                        freeReplyObject);
    RequestPtr r;
    {
      std::lock_guard lock(mu_);
      if (!pending_.empty()) {
        r = std::move(pending_.front());
        pending_.pop_front();
      }
    }
    if (r == nullptr) {
      fail(Status::internal("Redis sent a reply nobody asked for"));
      return;
    }
    handle_reply(std::move(r), reply.get());
    if (gen != gen_) return;  // a handler failed the connection
  }
  do_read();
}

void Connection::handle_reply(RequestPtr r, const redisReply* reply) {
  if (r->script >= 0 && r->noscript_retries < kMaxNoscriptRetries && is_noscript(reply)) {
    // The script cache was flushed: the command did not run. Reload (once for all commands
    // sent before the reload) and send the command again, after the reload.
    const auto script = static_cast<size_t>(r->script);
    std::lock_guard lock(mu_);
    if (reload_seq_[script] < r->seq) {
      auto load = std::make_unique<Request>();
      load->command = config_.script_loads[script];
      load->on_reply = [](const Status&, const redisReply*) {
        // A failed reload shows up as a second NOSCRIPT on the retry, which is counted there.
      };
      enqueue_locked(std::move(load), steady_clock::now() + config_.command_timeout);
      reload_seq_[script] = next_seq_ - 1;
      counters_.script_reloads.fetch_add(1, std::memory_order_relaxed);
    }
    ++r->noscript_retries;
    enqueue_locked(std::move(r), steady_clock::now() + config_.command_timeout);
    schedule_write_locked();
    return;
  }
  r->on_reply(Status(), reply);
}

void Connection::fail(Status why) {
  std::deque<RequestPtr> dead;
  State before;
  {
    std::lock_guard lock(mu_);
    before = state_;
    if (state_ != State::kClosed) state_ = State::kBackoff;
    dead.swap(pending_);
    out_.clear();
    writing_ = false;
    write_scheduled_ = false;
    if (before != State::kClosed || last_error_.is_ok()) last_error_ = why;
  }
  ++gen_;
  ready_.store(false, std::memory_order_release);
  boost::system::error_code ignored;
  socket_.close(ignored);
  resolver_.cancel();
  if (before == State::kReady) counters_.disconnects.fetch_add(1, std::memory_order_relaxed);
  if (before == State::kConnecting) failed_attempts_.fetch_add(1, std::memory_order_acq_rel);
  for (auto& r : dead) r->on_reply(why, nullptr);
  on_change_();
  if (before == State::kClosed) return;
  std::lock_guard lock(mu_);
  if (state_ == State::kClosed) return;
  backoff_timer_.expires_after(backoff_);
  backoff_ = std::min(backoff_ * 2, config_.backoff_max);
  backoff_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (!ec) self->do_connect();
  });
}

void Connection::arm_tick() {
  // A quarter of the command timeout: timeouts fire at most ~25 % late.
  auto period = std::clamp(config_.command_timeout / 4, std::chrono::milliseconds(1),
                           std::chrono::milliseconds(50));
  tick_timer_.expires_after(period);
  tick_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (!ec) self->on_tick();
  });
}

void Connection::on_tick() {
  const auto now = steady_clock::now();
  State state;
  bool late = false;
  {
    std::lock_guard lock(mu_);
    state = state_;
    late = !pending_.empty() && pending_.front()->deadline <= now;
  }
  if (state == State::kClosed) return;
  if (state == State::kConnecting && (late || now >= connect_deadline_)) {
    fail(Status::deadline_exceeded("connecting to " + config_.display_url + " took longer than " +
                                   std::to_string(config_.connect_timeout.count()) + " ms"));
  } else if (late) {
    fail(Status::deadline_exceeded("Redis at " + config_.display_url + " did not answer within " +
                                   std::to_string(config_.command_timeout.count()) + " ms"));
  }
  arm_tick();
}

}  // namespace ratelimit::redis_detail
