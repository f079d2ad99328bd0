// send_batch.cc — a turn's HTTP/1.1 answers in one io_uring_enter (see send_batch.h).
#include "send_batch.h"

#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include <boost/asio/post.hpp>
#include <liburing.h>

#include "log.h"

namespace ratelimit::server {
namespace {

// Sends in one submission at most (a larger turn is submitted in several).
constexpr unsigned kRingEntries = 256;
// results_ entries that are no send's result (a send returns >= 0 or -errno).
constexpr int kNotSent = INT_MIN, kSkipped = INT_MIN + 1;

// Said once per process, not once per worker.
void log_unavailable(int err) {
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return;
  log_line(LogLevel::kWarn, std::string("io_uring is unavailable here (") + std::strerror(err) +
                                "): each HTTP/1.1 answer is sent with its own send() (set io_uring: false to "
                                "say so and silence this)");
}

}  // namespace

struct SendBatch::Ring {
  io_uring ring{};
};

SendBatch::SendBatch(boost::asio::io_context& ioc, bool wanted)
    : ioc_(ioc), state_(wanted ? State::kUnopened : State::kOff) {}

SendBatch::~SendBatch() {
  if (state_ == State::kOpen) io_uring_queue_exit(&ring_->ring);
}

bool SendBatch::enabled() {
  if (state_ == State::kUnopened) {
    ring_ = std::make_unique<Ring>();
    // SINGLE_ISSUER | DEFER_TASKRUN (Linux 6.1): completions are posted only when this thread
    // asks for them, with no interrupt of its work; older kernels refuse the flags (EINVAL),
    // and then the plain ring is the same protocol.
    io_uring_params params{};
    params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int rc = io_uring_queue_init_params(kRingEntries, &ring_->ring, &params);
    if (rc == -EINVAL) rc = io_uring_queue_init(kRingEntries, &ring_->ring, 0);
    if (rc == 0) {
      state_ = State::kOpen;
    } else {
      state_ = State::kOff;
      ring_.reset();
      log_unavailable(-rc);
    }
  }
  return state_ == State::kOpen;
}

void SendBatch::queue(std::shared_ptr<BatchedSender> s) {
  queued_.push_back(std::move(s));
  if (flush_posted_) return;
  flush_posted_ = true;
  boost::asio::post(ioc_, [this] { flush(); });
}

void SendBatch::flush() {
  flush_posted_ = false;
  // on_sent() may queue again: that goes to the next flush.
  flushing_.swap(queued_);
  results_.assign(flushing_.size(), kNotSent);
  io_uring* ring = &ring_->ring;
  size_t next = 0;  // flushing_[0, next) have been looked at
  while (next < flushing_.size() && state_ == State::kOpen) {
    unsigned submitted = 0;
    for (; next < flushing_.size() && submitted < kRingEntries; ++next) {
      BatchedSender& s = *flushing_[next];
      if (!s.sendable()) {
        results_[next] = kSkipped;
        continue;
      }
      io_uring_sqe* sqe = io_uring_get_sqe(ring);  // never null: at most kRingEntries per submission
      const std::string_view bytes = s.send_bytes();
      io_uring_prep_send(sqe, s.send_fd(), bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      io_uring_sqe_set_data64(sqe, next);
      ++submitted;
    }
    if (submitted == 0) continue;
    io_uring_submit_and_wait(ring, submitted);
    unsigned reaped = 0;
    for (;;) {
      io_uring_cqe* cqe = nullptr;
      unsigned head = 0, seen = 0;
      io_uring_for_each_cqe(ring, head, cqe) {
        ++seen;
        results_[io_uring_cqe_get_data64(cqe)] = cqe->res;
      }
      io_uring_cq_advance(ring, seen);
      reaped += seen;
      batched_.fetch_add(seen, std::memory_order_relaxed);
      if (reaped >= submitted) break;
      // Every send is MSG_DONTWAIT, so each completes during the submission; waiting here
      // means a signal cut the enter short.
      const int rc = io_uring_wait_cqe(ring, &cqe);
      if (rc < 0 && rc != -EINTR) {
        // The ring is broken: a send not reaped cannot be known to have left, so its
        // connection closes (-EIO); later answers go out with send().
        for (size_t i = 0; i < next; ++i) {
          if (results_[i] == kNotSent) results_[i] = -EIO;
        }
        state_ = State::kOff;
        log_unavailable(-rc);
        break;
      }
    }
  }
  for (size_t i = 0; i < flushing_.size(); ++i) {
    // kNotSent past `next`: the ring broke before these were built, so they send themselves.
    if (results_[i] == kSkipped) continue;
    flushing_[i]->on_sent(results_[i] == kNotSent ? -EAGAIN : results_[i]);
  }
  flushing_.clear();
}

}  // namespace ratelimit::server
