// quota_sync.cc — the RLQS demand exchange between instances behind one store (see quota_sync.h).
// Invariants: in_flight_ counts the exchanges sent and not yet completed; the destructor returns
// only once it is 0 (no completion touches a destroyed object); a round is sent only when it is 0.
#include "quota_sync.h"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdio>
#include <random>

#include "metric_families.h"
#include "ratelimit/store.h"

namespace ratelimit::rlqs {
namespace {

constexpr size_t kKeyHead = 400;

std::string random_instance() {
  std::random_device rd;
  const uint64_t v = (uint64_t{rd()} << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool parse_int(std::string_view s, int64_t& out) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::string encode_clients(std::span<const fair_share::RemoteClient> clients, int64_t now_us) {
  std::string out;
  for (const fair_share::RemoteClient& c : clients) {
    if (!out.empty()) out += ' ';
    out += c.demand ? std::to_string(*c.demand) : std::string("?");
    out += ':';
    out += std::to_string(std::max<int64_t>(1, (c.expires_at_us - now_us) / 1000));
  }
  return out;
}

std::vector<fair_share::RemoteClient> decode_clients(std::string_view value, int64_t at_us, int64_t age_ms) {
  std::vector<fair_share::RemoteClient> out;
  while (!value.empty() && out.size() < kMaxRemoteClients) {
    const size_t end = std::min(value.find(' '), value.size());
    const std::string_view entry = value.substr(0, end);
    value.remove_prefix(std::min(end + 1, value.size()));
    const size_t colon = entry.find(':');
    if (colon == std::string_view::npos) continue;
    int64_t remaining_ms = 0;
    int64_t demand = 0;
    const std::string_view d = entry.substr(0, colon);
    if (!parse_int(entry.substr(colon + 1), remaining_ms) || remaining_ms < 1 || remaining_ms > fair_share::kMaxElapsedUs / 1000 * 2) {
      continue;
    }
    const bool unknown = d == "?";
    if (!unknown && (!parse_int(d, demand) || demand < 0 || demand > fair_share::kMaxCapacityMrps)) continue;
    const int64_t left_ms = remaining_ms - age_ms;
    if (left_ms <= 0) continue;  // expired since it was written
    out.push_back({unknown ? std::nullopt : std::optional<int64_t>(demand), at_us + left_ms * 1000});
  }
  return out;
}

std::string sync_key(std::string_view bucket_key) {
  std::string k = "rlqs:";
  if (k.size() + bucket_key.size() <= kMaxKeyLength) return k.append(bucket_key);
  uint64_t h = 14695981039346656037ULL;  // FNV-1a 64
  for (const unsigned char c : bucket_key) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[18];
  std::snprintf(buf, sizeof buf, "#%016llx", static_cast<unsigned long long>(h));
  return k.append(bucket_key.substr(0, kKeyHead)).append(buf);
}

QuotaSync::QuotaSync(QuotaService& service, std::shared_ptr<SharedFields> store, QuotaSyncOptions options)
    : service_(service),
      store_(std::move(store)),
      options_(std::move(options)),
      instance_(options_.instance.empty() ? random_instance() : options_.instance) {
  thread_.start([this] {
    MutexLock lock(thread_.mu);
    for (;;) {
      lock.unlock();
      round();
      lock.lock();
      const auto next = std::chrono::steady_clock::now() + options_.interval;
      while (!thread_.stopping && lock.wait_until(thread_.wake, next) != std::cv_status::timeout) {
      }
      if (thread_.stopping) return;
    }
  });
}

QuotaSync::~QuotaSync() {
  thread_.stop();
  MutexLock lock(mu_);
  while (in_flight_ > 0) lock.wait(idle_);
}

void QuotaSync::round() {
  std::vector<BucketClients> buckets = service_.local_clients();
  const int64_t now = service_.now_us();
  {
    MutexLock lock(mu_);
    if (in_flight_ > 0) {
      ++stats_.skipped;
      return;
    }
    ++stats_.rounds;
    in_flight_ = buckets.size();
  }
  for (BucketClients& b : buckets) {
    int64_t ttl_ms = 1;
    for (const fair_share::RemoteClient& c : b.clients) ttl_ms = std::max(ttl_ms, (c.expires_at_us - now) / 1000);
    const std::string key = sync_key(b.key);
    store_->exchange_field_async(key, instance_, encode_clients(b.clients, now), ttl_ms,
                                 [this, bucket = std::move(b.key)](Result<SharedFieldsView> r) {
                                   on_reply(bucket, std::move(r));
                                   MutexLock lock(mu_);
                                   if (--in_flight_ == 0) idle_.notify_all();
                                 });
  }
}

void QuotaSync::on_reply(const std::string& bucket, Result<SharedFieldsView> r) {
  if (!r.ok()) {
    // The bucket keeps its remote clients until their expiry: then local-only (quota_sync.h).
    set_up(false, r.status().message());
    return;
  }
  const int64_t at = service_.now_us();
  std::vector<fair_share::RemoteClient> remote;
  for (const SharedField& f : r->fields) {
    if (f.name == instance_) continue;
    std::vector<fair_share::RemoteClient> theirs = decode_clients(f.value, at, std::max<int64_t>(0, r->now_ms - f.written_ms));
    const size_t room = kMaxRemoteClients - std::min(kMaxRemoteClients, remote.size());
    remote.insert(remote.end(), theirs.begin(), theirs.begin() + static_cast<std::ptrdiff_t>(std::min(room, theirs.size())));
  }
  service_.set_remote(bucket, std::move(remote));
  set_up(true, "");
}

void QuotaSync::set_up(bool up, const std::string& why) {
  bool changed = false;
  {
    MutexLock lock(mu_);
    ++(up ? stats_.exchanges : stats_.failures);
    changed = stats_.up != up;
    stats_.up = up;
  }
  if (changed && options_.on_change) options_.on_change(up, why);
}

QuotaSyncStats QuotaSync::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

void QuotaSync::render_metrics(std::string& out) const {
  const QuotaSyncStats s = stats();
  metrics::append_family(out, metrics::kRlqsSyncUp, uint64_t{s.up});
  metrics::append_family(out, metrics::kRlqsSyncExchanges, s.exchanges);
  metrics::append_family(out, metrics::kRlqsSyncFailures, s.failures);
}

}  // namespace ratelimit::rlqs
