// sliding_window_log.cc — sliding window log: the admission times of the units in
// (now - W, now]; admitted when their number n + cost <= L. Also the log's queue
// (SlidingLogQueue, algorithms.h): a ring buffer whose capacity follows its size both ways.
//
// Exact (no boundary effect), at a memory cost that grows with L: one 16-byte entry per
// admitted request, at most L entries (Policy caps L at kMaxSlidingLogLimit; reports may add up
// to 8 L more: max_recorded, the debt's bound), in a block of
// at most 8 + 16 * (2n + 2) bytes for n live entries. An entry admitted at time a counts until
// a + W (exclusive), so retry_after is the moment enough of the oldest units have left.
// Mirrored by src/redis/lua/sliding_window_log.lua (a sorted set whose members are unique per
// request). Why a ring that shrinks: a vector used as a queue kept the capacity of its busiest
// moment plus up to 32 expired entries, ~1.3 KB per key where the figure said ~0.2 (issue 12).
#include <algorithm>
#include <cstring>
#include <new>

#include "ratelimit/algorithms.h"
#include "units.h"

namespace ratelimit::algo {

// ---- SlidingLogQueue ----

size_t SlidingLogQueue::capacity() const {
  if (data_ == nullptr) return 0;
  uint64_t cap;
  std::memcpy(&cap, reinterpret_cast<const unsigned char*>(data_) - kHeaderBytes, sizeof cap);
  return static_cast<size_t>(cap);
}

void SlidingLogQueue::reallocate(size_t cap) {
  SlidingLogEntry* fresh = nullptr;
  if (cap > 0) {
    auto* block = static_cast<unsigned char*>(::operator new(kHeaderBytes + 16 * cap));
    const uint64_t c = cap;
    std::memcpy(block, &c, sizeof c);
    fresh = reinterpret_cast<SlidingLogEntry*>(block + kHeaderBytes);
    // Oldest first from index 0: at most two runs of the old ring.
    const size_t old_cap = capacity();
    const size_t first = std::min<size_t>(size_, old_cap - head_);
    if (size_ > 0) {
      std::memcpy(fresh, data_ + head_, first * sizeof(SlidingLogEntry));
      std::memcpy(fresh + first, data_, (size_ - first) * sizeof(SlidingLogEntry));
    }
  }
  if (data_ != nullptr) {
    ::operator delete(reinterpret_cast<unsigned char*>(data_) - kHeaderBytes);
  }
  data_ = fresh;
  head_ = 0;
}

SlidingLogQueue::SlidingLogQueue(const SlidingLogQueue& other) { *this = other; }

SlidingLogQueue& SlidingLogQueue::operator=(const SlidingLogQueue& other) {
  if (this == &other) return *this;
  clear();
  if (other.size_ > 0) {
    auto* block = static_cast<unsigned char*>(::operator new(kHeaderBytes + 16 * other.size_));
    const uint64_t c = other.size_;
    std::memcpy(block, &c, sizeof c);
    data_ = reinterpret_cast<SlidingLogEntry*>(block + kHeaderBytes);
    for (size_t i = 0; i < other.size_; ++i) data_[i] = other[i];
    size_ = other.size_;
  }
  return *this;
}

SlidingLogQueue::SlidingLogQueue(SlidingLogQueue&& other) noexcept
    : data_(other.data_), head_(other.head_), size_(other.size_) {
  other.data_ = nullptr;
  other.head_ = 0;
  other.size_ = 0;
}

SlidingLogQueue& SlidingLogQueue::operator=(SlidingLogQueue&& other) noexcept {
  if (this == &other) return *this;
  clear();
  data_ = other.data_;
  head_ = other.head_;
  size_ = other.size_;
  other.data_ = nullptr;
  other.head_ = 0;
  other.size_ = 0;
  return *this;
}

SlidingLogQueue::~SlidingLogQueue() { clear(); }

void SlidingLogQueue::clear() {
  size_ = 0;
  reallocate(0);
}

void SlidingLogQueue::push_back(const SlidingLogEntry& e) {
  const size_t cap = capacity();
  if (size_ == cap) reallocate(cap + cap / 2 + 1);
  ++size_;
  (*this)[size_ - 1] = e;
}

void SlidingLogQueue::pop_front() {
  ++head_;
  if (head_ == capacity()) head_ = 0;
  --size_;
}

void SlidingLogQueue::pop_back() { --size_; }

void SlidingLogQueue::shrink_to_bound() {
  if (size_ == 0) {
    if (data_ != nullptr) reallocate(0);
    head_ = 0;
    return;
  }
  if (capacity() > 2 * size_t{size_} + 2) reallocate(size_t{size_} + size_ / 2 + 2);
}

// ---- the algorithm ----

namespace {

// Drops entries admitted at or before `t - window`, then gives back the room they took.
void expire(SlidingWindowLogState& s, int64_t t, int64_t window) {
  auto& e = s.entries;
  while (!e.empty() && e.front().at_us <= t - window) {
    s.units -= e.front().cost;
    e.pop_front();
  }
  e.shrink_to_bound();
}

// Keeps only the newest `limit` units (count-denied mode bounds the log this way).
void trim_to(SlidingWindowLogState& s, int64_t limit) {
  auto& e = s.entries;
  while (s.units > limit) {
    auto& oldest = e.front();
    const int64_t excess = s.units - limit;
    if (oldest.cost <= excess) {
      s.units -= oldest.cost;
      e.pop_front();
    } else {
      oldest.cost -= excess;
      s.units = limit;
    }
  }
  e.shrink_to_bound();
}

}  // namespace

Decision decide(const Policy& policy, SlidingWindowLogState& s, int64_t now_us, int64_t cost,
                Op op) {
  const int64_t limit = policy.limit();
  const int64_t window = policy.window().count();
  const int64_t newest = !s.entries.empty() ? s.entries.back().at_us : 0;
  const int64_t t = std::max<int64_t>({now_us, newest, 0});
  // Expiry only forgets what no decision can see any more, so peek may do it too.
  expire(s, t, window);

  Decision d;
  d.limit = limit;
  if (cost > limit) {
    d.reason = DecisionReason::kExceedsCapacity;
    d.remaining = std::max<int64_t>(0, limit - s.units);  // units above a lowered limit: none
    d.reset_after = Micros{s.units > 0 ? s.entries.back().at_us + window - t : 0};
    return d;
  }
  if (s.units + cost <= limit) {
    d.allowed = true;
    d.reason = DecisionReason::kWithinLimit;
    d.remaining = limit - (s.units + cost);
    // The unit admitted now is the last to leave (a cost-0 peek admits none).
    d.reset_after = Micros{cost > 0 ? window : s.units > 0 ? s.entries.back().at_us + window - t : 0};
    if (op == Op::kAcquire) {
      s.entries.push_back({t, cost});
      s.units += cost;
    }
    return d;
  }
  d.reason = DecisionReason::kOverLimit;
  if (op == Op::kAcquire && policy.count_denied()) {
    s.entries.push_back({t, cost});
    s.units += cost;
    trim_to(s, limit);
  }
  // The request fits once `need` of the oldest units have left the window.
  const int64_t need = s.units + cost - limit;
  int64_t freed = 0;
  for (size_t i = 0; i < s.entries.size(); ++i) {
    freed += s.entries[i].cost;
    if (freed >= need) {
      d.retry_after = Micros{s.entries[i].at_us + window - t};
      break;
    }
  }
  d.remaining = std::max<int64_t>(0, limit - s.units);
  d.reset_after = Micros{s.entries.back().at_us + window - t};
  return d;
}

// Debt: entries beyond the limit; repaid as they age out. A report is one entry at now (merged
// into the newest if it has the same time, so the log's length stays bounded by its units); a
// refund takes units from the newest entries first — the reservation a refund corrects is the
// newest use — so what stays is the oldest, which leaves soonest.
void record(const Policy& policy, SlidingWindowLogState& s, int64_t now_us, int64_t cost) {
  const int64_t window = policy.window().count();
  const int64_t newest = !s.entries.empty() ? s.entries.back().at_us : 0;
  const int64_t t = std::max<int64_t>({now_us, newest, 0});
  expire(s, t, window);
  const int64_t after = recorded(s.units, cost, max_recorded(policy));
  if (after > s.units) {
    if (!s.entries.empty() && s.entries.back().at_us == t) {
      s.entries.back_mut().cost += after - s.units;
    } else {
      s.entries.push_back({t, after - s.units});
    }
  }
  for (int64_t give = s.units - after; give > 0;) {
    SlidingLogEntry& last = s.entries.back_mut();
    const int64_t take = std::min(give, last.cost);
    last.cost -= take;
    give -= take;
    if (last.cost == 0) s.entries.pop_back();
  }
  s.units = after;
  s.entries.shrink_to_bound();
}

}  // namespace ratelimit::algo
