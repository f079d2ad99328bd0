// quota_service.h — the state of ratelimitd's Rate Limit Quota Service (RLQS): every bucket
// reported by any stream, its clients (one per stream) and their demands, and the assignment
// each report earns. Transport-neutral: src/grpc translates Envoy's messages into BucketReports
// and BucketAnswers into BucketActions; the math is fair_share.h's (BucketShares), the rule of
// each bucket quota_rules.h's.
//
//   stream (gRPC) --report()--> QuotaService --find rule--> QuotaRules
//                                   |  one BucketShares per bucket (domain + bucket_id)
//                                   v
//                               fair_share::BucketShares::report -> Assignment
//
// Bounds (what a peer can make it hold): buckets at most QuotaOptions::max_buckets — beyond it
// the bucket reported least recently is forgotten (its clients come back as new ones, with the
// initial share, at their next report); a bucket whose every assignment's TTL has passed is
// forgotten as soon as it is the least recently reported; a bucket_id of 0 pairs, an empty key
// or value, more than kMaxBucketPairs pairs or kMaxBucketBytes bytes, or counts fair_share
// refuses is ignored (no answer for it, counted in QuotaStats::ignored), the other buckets of
// the same message are answered.
// A client's share is recomputed at each of its reports; the others' at theirs (no push): for
// at most one report interval after a change the assignments in force may sum to more than the
// capacity (fair_share.h says by how much). Several instances behind one store: each bucket's
// division also counts the other instances' clients, as QuotaSync last set them (set_remote).
// Thread-safety: every method may be called from any thread (one Mutex over the table).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "mutex.h"
#include "quota_rules.h"
#include "ratelimit/clock.h"
#include "ratelimit/fair_share.h"

namespace ratelimit::rlqs {

struct QuotaOptions {
  size_t max_buckets = 100'000;
  const Clock* clock = nullptr;  // null: MonotonicClock (only intervals are measured)
};

// One bucket of a report message.
struct BucketReport {
  BucketKey id;  // sorted by key
  uint64_t allowed = 0;
  uint64_t denied = 0;
  int64_t elapsed_us = 0;
};

// The assignment for reports[index].
struct BucketAnswer {
  size_t index = 0;
  fair_share::Assignment assignment;
};

struct QuotaStats {
  size_t buckets = 0;      // tracked now
  uint64_t reports = 0;    // bucket reports answered
  uint64_t ignored = 0;    // bucket reports ignored (bad bucket_id or counts)
  uint64_t forgotten = 0;  // buckets dropped: idle, or beyond max_buckets
};

// One bucket as metrics show it.
struct BucketView {
  std::string domain;
  BucketKey id;
  size_t clients = 0;
  int64_t demand_mrps = 0;    // Σ known demands
  int64_t assigned_mrps = 0;  // Σ of the assignments in force
  int64_t capacity_mrps = 0;  // the rule's, at the last report
  size_t remote_clients = 0;  // other instances' clients counted in the division (quota_sync.h)
};

// A bucket's local clients as the other instances behind the same store must see them
// (quota_sync.h): `key` names the bucket (its domain and bucket_id) the same in every instance.
struct BucketClients {
  std::string key;
  std::vector<fair_share::RemoteClient> clients;
};

class QuotaService {
 public:
  explicit QuotaService(std::shared_ptr<const QuotaRules> rules, QuotaOptions options = {});

  // Publishes new rules (a reload): later reports use them; buckets keep their clients.
  void set_rules(std::shared_ptr<const QuotaRules> rules);
  std::shared_ptr<const QuotaRules> rules() const;
  // A fresh client id (one per stream).
  uint64_t new_client();
  // Answers every valid bucket of one report message of `client` in `domain` into `out`
  // (cleared first), in the order of `reports`.
  void report(uint64_t client, std::string_view domain, std::span<const BucketReport> reports,
              std::vector<BucketAnswer>& out);
  QuotaStats stats() const;
  // Several instances (quota_sync.h): every tracked bucket that has local clients now, with
  // them (after dropping expired ones); and the other instances' clients of the bucket `key`
  // (ignored when it is no longer tracked). Times are this service's clock's (now_us()).
  std::vector<BucketClients> local_clients();
  void set_remote(const std::string& key, std::vector<fair_share::RemoteClient> remote);
  int64_t now_us() const { return clock_.now().count(); }
  // Up to `max` buckets, most recently reported first.
  std::vector<BucketView> buckets(size_t max) const;
  // The totals and the `max_buckets` most recently reported buckets as Prometheus text
  // (metric_families.h: ratelimitd_rlqs_*).
  void render_metrics(std::string& out, size_t max_buckets = 100) const;

  // Whether a bucket_id is within the bounds above (sorted or not).
  static bool valid_bucket(const BucketKey& id);

 private:
  struct Entry {
    fair_share::BucketShares shares;
    std::list<std::string>::iterator recency;  // position in recency_
    int64_t capacity_mrps = 0;
    std::string domain;
    BucketKey id;
  };
  Entry& touch(const std::string& key, std::string_view domain, const BucketKey& id) RL_REQUIRES(mu_);
  void forget_idle(int64_t now_us) RL_REQUIRES(mu_);

  const QuotaOptions options_;
  const Clock& clock_;
  mutable Mutex mu_;
  std::shared_ptr<const QuotaRules> rules_ RL_GUARDED_BY(mu_);
  std::unordered_map<std::string, Entry> buckets_ RL_GUARDED_BY(mu_);
  std::list<std::string> recency_ RL_GUARDED_BY(mu_);  // keys, most recently reported first
  uint64_t next_client_ RL_GUARDED_BY(mu_) = 1;
  QuotaStats stats_ RL_GUARDED_BY(mu_);
};

}  // namespace ratelimit::rlqs
