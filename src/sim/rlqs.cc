// rlqs.cc — a fleet of Envoys against the RLQS fair-share server (model, rules and reasons in
// rlqs.h): every arrival and report of every client as one time-ordered event list, the
// server's BucketShares answering each report, each client's local token bucket deciding each
// request; then per phase the convergence of the assignments, utilisation and fairness.
#include "rlqs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "ratelimit/fair_share.h"

namespace ratelimit::sim {
namespace {

namespace fs = ratelimit::fair_share;

constexpr int64_t kUs = 1'000'000;
constexpr int64_t kSampleUs = 10'000;  // convergence is judged every 10 ms
constexpr double kMaxRps = 1e6;

int64_t us(double s) { return static_cast<int64_t>(std::llround(s * 1e6)); }

// Event kinds in the order they run at one instant: a periodic report before a request (it
// covers the time up to that instant), the first report after the request that triggered it.
enum Kind : int { kPeriodicReport = 0, kRequest = 1, kFirstReport = 2 };

struct Event {
  int64_t t_us;
  int kind;
  size_t client;
  bool operator<(const Event& o) const { return std::tie(t_us, kind, client) < std::tie(o.t_us, o.kind, o.client); }
};

// An assignment as the client holds it, from `from_us` until replaced or `expires_us`.
struct Held {
  int64_t from_us;
  int64_t expires_us;
  double rate_rps;  // tokens per second it admits (0: DENY_ALL; -1: ALLOW_ALL)
};

struct ClientState {
  int64_t leaves_us = INT64_MAX;
  int64_t allowed = 0, denied = 0;  // since the last report
  int64_t last_report_us = -1;
  std::optional<fs::Assignment> assignment;
  int64_t expires_us = 0;
  int64_t tokens_u = 0;  // micro-tokens in the local bucket
  int64_t refilled_us = 0;
  std::vector<Held> history;
  std::vector<int64_t> admitted_per_s;
};

double demand_at(const RlqsClient& c, double t_s) {
  double rps = 0;
  for (const auto& [from, r] : c.demand) {
    if (from <= t_s) rps = r;
  }
  return rps;
}

Status validate(const RlqsScenario& s, const RlqsOptions& o) {
  if (s.capacity_rps < 1 || s.capacity_rps > 1'000'000) return Status::invalid_argument("rlqs: capacity must be 1 ... 10^6 rps");
  if (!(s.duration_s > 0) || s.duration_s > 86'400) return Status::invalid_argument("rlqs: duration must be > 0 and at most a day");
  double last = 0;
  for (double p : s.phases_s) {
    if (!(p > last) || p >= s.duration_s) return Status::invalid_argument("rlqs: phases must ascend inside the run");
    last = p;
  }
  if (s.clients.empty()) return Status::invalid_argument("rlqs: no clients");
  for (const RlqsClient& c : s.clients) {
    if (c.demand.empty() || c.demand.front().first != 0) {
      return Status::invalid_argument("rlqs: client '" + c.name + "' needs a demand from 0 s");
    }
    double from = -1;
    for (const auto& [t, r] : c.demand) {
      if (!(t > from) || !(r >= 0) || r > kMaxRps) {
        return Status::invalid_argument("rlqs: client '" + c.name + "': demand times must ascend, rates 0 ... 10^6");
      }
      from = t;
    }
  }
  if (o.intervals_s.empty()) return Status::invalid_argument("rlqs: no report interval");
  for (int64_t i : o.intervals_s) {
    if (i < 1 || i > 3600) return Status::invalid_argument("rlqs: report intervals must be 1 ... 3600 s");
  }
  if (!(o.tolerance > 0) || o.tolerance >= 1) return Status::invalid_argument("rlqs: tolerance must be in (0, 1)");
  if (o.server_interval_s < 0 || o.server_interval_s > 86'400) {
    return Status::invalid_argument("rlqs: the server's reporting interval must be 0 (each run's) ... 86400 s");
  }
  return {};
}

// Every arrival of client `i` (evenly spaced at its demand, offset by i / n of a spacing so
// clients do not all arrive at one instant), before it leaves and the run ends.
void arrivals(const RlqsScenario& s, size_t i, int64_t end_us, std::vector<Event>& out) {
  const RlqsClient& c = s.clients[i];
  for (size_t k = 0; k < c.demand.size(); ++k) {
    const double rps = c.demand[k].second;
    if (rps <= 0) continue;
    const double spacing = 1e6 / rps;
    const int64_t from = us(c.demand[k].first);
    const int64_t to = std::min(end_us, k + 1 < c.demand.size() ? us(c.demand[k + 1].first) : end_us);
    const double offset = spacing * static_cast<double>(i) / static_cast<double>(s.clients.size());
    for (double t = static_cast<double>(from) + offset; t < static_cast<double>(to); t += spacing) {
      out.push_back({static_cast<int64_t>(t), kRequest, i});
    }
  }
}

double rate_of(const fs::Assignment& a) {
  if (a.kind == fs::Assignment::Kind::kAllowAll) return -1;
  if (a.kind == fs::Assignment::Kind::kDenyAll) return 0;
  return static_cast<double>(a.tokens_per_fill) / static_cast<double>(a.fill_interval_s);
}

bool same_strategy(const fs::Assignment& a, const fs::Assignment& b) {
  return a.kind == b.kind && a.max_tokens == b.max_tokens && a.tokens_per_fill == b.tokens_per_fill &&
         a.fill_interval_s == b.fill_interval_s;
}

class Fleet {
 public:
  Fleet(const RlqsScenario& s, const RlqsOptions& o, int64_t interval_s)
      : s_(s), o_(o), interval_us_(interval_s * kUs), end_us_(us(s.duration_s)), clients_(s.clients.size()) {
    capacity_mrps_ = fs::capacity_mrps(s.capacity_rps, 1).value();
    for (size_t i = 0; i < clients_.size(); ++i) {
      if (s.clients[i].leaves_at_s) clients_[i].leaves_us = us(*s.clients[i].leaves_at_s);
      clients_[i].admitted_per_s.assign(static_cast<size_t>((end_us_ + kUs - 1) / kUs), 0);
    }
  }

  RlqsRun run() {
    std::vector<Event> events;
    for (size_t i = 0; i < clients_.size(); ++i) arrivals(s_, i, std::min(end_us_, clients_[i].leaves_us), events);
    std::sort(events.begin(), events.end());
    // Reports follow from the first arrival: the immediate one, then one every interval.
    std::vector<Event> reports;
    std::vector<bool> started(clients_.size(), false);
    for (const Event& e : events) {
      if (started[e.client]) continue;
      started[e.client] = true;
      reports.push_back({e.t_us, kFirstReport, e.client});
      const int64_t stop = std::min(end_us_, clients_[e.client].leaves_us);
      for (int64_t t = e.t_us + interval_us_; t < stop; t += interval_us_) reports.push_back({t, kPeriodicReport, e.client});
    }
    events.insert(events.end(), reports.begin(), reports.end());
    std::sort(events.begin(), events.end());
    for (const Event& e : events) {
      if (e.kind == kRequest) request(e.client, e.t_us);
      else report(e.client, e.t_us);
    }
    return summarise();
  }

 private:
  void request(size_t i, int64_t t) {
    ClientState& c = clients_[i];
    bool allowed = o_.no_assignment_allows;
    if (c.assignment && t < c.expires_us) {
      switch (c.assignment->kind) {
        case fs::Assignment::Kind::kAllowAll: allowed = true; break;
        case fs::Assignment::Kind::kDenyAll: allowed = false; break;
        case fs::Assignment::Kind::kTokenBucket: {
          const fs::Assignment& a = *c.assignment;
          const int64_t gained = (t - c.refilled_us) * a.tokens_per_fill / a.fill_interval_s;
          c.tokens_u = std::min(a.max_tokens * kUs, c.tokens_u + gained);
          c.refilled_us = t;
          allowed = c.tokens_u >= kUs;
          if (allowed) c.tokens_u -= kUs;
          break;
        }
      }
    }
    if (allowed) {
      ++c.allowed;
      ++c.admitted_per_s[static_cast<size_t>(t / kUs)];
    } else {
      ++c.denied;
    }
  }

  void report(size_t i, int64_t t) {
    ClientState& c = clients_[i];
    const int64_t elapsed = c.last_report_us < 0 ? 0 : t - c.last_report_us;
    const int64_t assumed = o_.server_interval_s > 0 ? o_.server_interval_s : interval_us_ / kUs;
    auto a = bucket_.report(i, c.allowed, c.denied, elapsed, capacity_mrps_, t, assumed);
    ++reports_;
    c.allowed = c.denied = 0;
    c.last_report_us = t;
    if (!a.ok()) return;  // cannot happen with the model's counts; a real server ignores it too
    if (!c.assignment || t >= c.expires_us || !same_strategy(*c.assignment, *a)) {
      c.tokens_u = a->max_tokens * kUs;  // a new TokenBucketImpl starts full
      c.refilled_us = t;
    }
    c.assignment = *a;
    c.expires_us = t + a->ttl_s * kUs;
    ttl_s_ = a->ttl_s;
    c.history.push_back({t, c.expires_us, rate_of(*a)});
  }

  // The rate client i's assignment admits at t (nullopt: none in force).
  std::optional<double> held_at(size_t i, int64_t t) const {
    const auto& h = clients_[i].history;
    auto it = std::upper_bound(h.begin(), h.end(), t, [](int64_t v, const Held& x) { return v < x.from_us; });
    if (it == h.begin()) return std::nullopt;
    --it;
    if (t >= it->expires_us) return std::nullopt;
    return it->rate_rps;
  }

  // Seconds after `from` since which every active client's assignment has been within
  // slack(target) of its target until `to` (the last moment one was missing or off, plus a
  // sample); nullopt when that never held by `to`.
  template <typename Slack>
  std::optional<double> held_within(const std::vector<size_t>& active, const std::vector<int64_t>& targets,
                                    int64_t from, int64_t to, Slack slack) const {
    int64_t last_off = from - kSampleUs;
    for (int64_t t = from; t < to; t += kSampleUs) {
      for (size_t i : active) {
        const auto r = held_at(i, t);
        const double target = static_cast<double>(targets[i]);
        if (!r || *r < 0 || std::abs(*r - target) > slack(target)) {
          last_off = t;
          break;
        }
      }
    }
    if (last_off + kSampleUs >= to) return std::nullopt;
    return static_cast<double>(last_off + kSampleUs - from) / 1e6;
  }

  RlqsPhase phase(double from_s, double to_s) const {
    RlqsPhase p{from_s, to_s, {}, std::nullopt, std::nullopt, 0, 0};
    const int64_t from = us(from_s), to = us(to_s);
    std::vector<std::optional<int64_t>> demands;
    std::vector<size_t> active;
    for (size_t i = 0; i < clients_.size(); ++i) {
      if (clients_[i].leaves_us <= from) continue;
      active.push_back(i);
      demands.emplace_back(std::llround(demand_at(s_.clients[i], from_s) * fs::kMrpsPerRps));
    }
    const std::vector<int64_t> shares = fs::max_min_shares(capacity_mrps_, demands);
    p.target_rps.assign(clients_.size(), 0);
    for (size_t k = 0; k < active.size(); ++k) p.target_rps[active[k]] = shares[k] / fs::kMrpsPerRps;
    p.converged_s = held_within(active, p.target_rps, from, to, [&](double target) { return o_.tolerance * target; });
    p.settled_s = held_within(active, p.target_rps, from, to, [](double) { return 1.0; });
    // Utilisation and fairness over the phase's second half (whole seconds).
    const size_t s0 = static_cast<size_t>((from + to) / 2 / kUs), s1 = static_cast<size_t>(to / kUs);
    double admitted = 0, sum = 0, squares = 0, demand = 0;
    for (size_t i : active) {
      double mine = 0;
      for (size_t sec = s0; sec < s1; ++sec) mine += static_cast<double>(clients_[i].admitted_per_s[sec]);
      admitted += mine;
      demand += demand_at(s_.clients[i], from_s);
      const double x = mine / static_cast<double>(s1 - s0) / std::max(1.0, static_cast<double>(p.target_rps[i]));
      sum += x;
      squares += x * x;
    }
    const double usable = std::min(static_cast<double>(s_.capacity_rps), demand) * static_cast<double>(s1 - s0);
    p.utilisation = usable > 0 ? admitted / usable : 0;
    p.jain = squares > 0 ? sum * sum / (static_cast<double>(active.size()) * squares) : 0;
    return p;
  }

  RlqsRun summarise() const {
    RlqsRun r;
    r.interval_s = interval_us_ / kUs;
    r.ttl_s = ttl_s_;
    r.reports = reports_;
    std::vector<double> bounds = {0};
    bounds.insert(bounds.end(), s_.phases_s.begin(), s_.phases_s.end());
    bounds.push_back(s_.duration_s);
    for (size_t k = 0; k + 1 < bounds.size(); ++k) r.phases.push_back(phase(bounds[k], bounds[k + 1]));
    for (size_t sec = 0; sec < clients_.front().admitted_per_s.size(); ++sec) {
      int64_t total = 0;
      for (const ClientState& c : clients_) total += c.admitted_per_s[sec];
      r.worst_second_over = std::max(r.worst_second_over, total - s_.capacity_rps);
    }
    return r;
  }

  const RlqsScenario& s_;
  const RlqsOptions& o_;
  int64_t interval_us_;
  int64_t end_us_;
  int64_t capacity_mrps_ = 0;
  int64_t ttl_s_ = 0;
  int64_t reports_ = 0;
  fs::BucketShares bucket_;
  std::vector<ClientState> clients_;
};

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

RlqsScenario rlqs_three_clients() {
  RlqsScenario s;
  s.capacity_rps = 300;
  s.phases_s = {60, 120};
  s.duration_s = 180;
  s.clients = {{"a", {{0, 10}}, std::nullopt}, {"b", {{0, 100}, {60, 1000}}, std::nullopt},
               {"c", {{0, 1000}, {60, 20}}, 120.0}};
  return s;
}

Result<std::vector<RlqsRun>> run_rlqs(const RlqsScenario& scenario, const RlqsOptions& options) {
  if (Status s = validate(scenario, options); !s.is_ok()) return s;
  std::vector<RlqsRun> runs;
  for (int64_t interval : options.intervals_s) runs.push_back(Fleet(scenario, options, interval).run());
  return runs;
}

std::string render_rlqs(const RlqsScenario& s, const std::vector<RlqsRun>& runs) {
  std::string out = "global limit " + std::to_string(s.capacity_rps) + " rps; clients (rps):";
  for (const RlqsClient& c : s.clients) {
    out += " " + c.name + " ";
    for (size_t k = 0; k < c.demand.size(); ++k) {
      out += (k ? "->" : "") + fmt("%g", c.demand[k].second) + (k ? fmt("@%gs", c.demand[k].first) : "");
    }
    if (c.leaves_at_s) out += fmt(" leaves@%gs", *c.leaves_at_s);
  }
  out += "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-8s %-4s %-9s %-11s %-9s %-8s %-11s %-6s %-8s %s\n", "interval", "ttl", "phase",
                "targets", "within10%", "settled", "utilisation", "jain", "worst 1s", "reports");
  out += line;
  for (const RlqsRun& r : runs) {
    for (size_t k = 0; k < r.phases.size(); ++k) {
      const RlqsPhase& p = r.phases[k];
      std::string targets;
      for (size_t i = 0; i < p.target_rps.size(); ++i) targets += (i ? "/" : "") + std::to_string(p.target_rps[i]);
      const std::string phase = fmt("%g", p.from_s) + "-" + fmt("%gs", p.to_s);
      const std::string conv = p.converged_s ? fmt("%.1f s", *p.converged_s) : "never";
      const std::string settled = p.settled_s ? fmt("%.1f s", *p.settled_s) : "never";
      const std::string first = k == 0 ? fmt("%g s", static_cast<double>(r.interval_s)) : "";
      const std::string ttl = k == 0 ? std::to_string(r.ttl_s) + " s" : "";
      const std::string over = k == 0 ? "+" + std::to_string(r.worst_second_over) : "";
      const std::string reports = k == 0 ? std::to_string(r.reports) : "";
      std::snprintf(line, sizeof line, "%-8s %-4s %-9s %-11s %-9s %-8s %-11s %-6s %-8s %s\n", first.c_str(), ttl.c_str(),
                    phase.c_str(), targets.c_str(), conv.c_str(), settled.c_str(), fmt("%.1f %%", 100 * p.utilisation).c_str(),
                    fmt("%.3f", p.jain).c_str(), over.c_str(), reports.c_str());
      out += line;
    }
  }
  return out;
}

}  // namespace ratelimit::sim
