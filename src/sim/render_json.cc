// render_json.cc — ratelimit-sim's JSON output (render.h): one object per run with its
// algorithms, top keys, throttling and distributed results, in a fixed member order.
//
// Why its own file: the JSON mirrors every field of a Report, one function per section, so a
// field added to the Report is added here in one obvious place. Invariants: every time is an
// integer number of microseconds (exact, named *_us); RFC 3339 strings are added beside them
// only for epoch-time traces (kEpochTimesFromUs).
#include <nlohmann/json.hpp>

#include "render.h"
#include "timestamps.h"

namespace ratelimit::sim {
namespace {

using Json = nlohmann::ordered_json;

Json algorithm_json(const AlgorithmResult& a) {
  Json j;
  j["algorithm"] = algorithm_name(a.policy.algorithm());
  j["policy"] = describe_policy(a.policy);
  j["limit"] = a.policy.limit();
  j["window_us"] = a.policy.window().count();
  j["rate"] = a.policy.rate();
  j["requests"] = a.requests;
  j["admitted"] = a.admitted;
  j["denied"] = a.denied;
  j["clients_limited"] = a.clients_limited;
  j["peak_admitted"] = a.peak_admitted;
  j["peak_admitted_per_key"] = a.peak_admitted_per_key;
  j["peak_window_us"] = a.peak_window.count();
  j["attack_requests"] = a.marked_requests;
  j["attack_admitted"] = a.marked_admitted;
  if (a.policy.algorithm() == Algorithm::kLeakyBucket) {
    Json d;
    d["count"] = a.departures;
    d["first_us"] = a.first_departure_us;
    d["last_us"] = a.last_departure_us;
    d["span_us"] = a.last_departure_us - a.first_departure_us;
    d["times_us"] = a.departure_list_us;
    j["departures"] = std::move(d);
  }
  return j;
}

Json top_keys_json(const Report& r) {
  Json keys = Json::array();
  for (const KeyRow& k : r.top_keys) {
    Json j;
    j["key"] = k.key;
    j["offered"] = k.offered;
    Json per = Json::object();
    for (size_t i = 0; i < r.algorithms.size(); ++i) {
      per[algorithm_name(r.algorithms[i].policy.algorithm())] = {{"admitted", k.admitted[i]},
                                                                 {"peak", k.peak[i]}};
    }
    j["algorithms"] = std::move(per);
    keys.push_back(std::move(j));
  }
  return keys;
}

Json throttling_json(const ThrottleReport& th) {
  const ThrottleOptions& o = th.options;
  Json t;
  t["hold_us"] = o.hold.count();
  t["durations_from_trace"] = th.durations_from_trace;
  if (o.concurrency) t["concurrency"] = *o.concurrency;
  t["lease_ttl_us"] = o.lease_ttl.count();
  t["max_wait_us"] = o.max_wait.count();
  t["max_queue"] = o.max_queue;
  for (const ThrottleResult& x : th.results) {
    t["algorithms"].push_back({{"algorithm", x.algorithm}, {"policy", x.policy},
                               {"offered", x.offered}, {"admitted_at_once", x.admitted_at_once},
                               {"admitted_after_wait", x.admitted_after_wait},
                               {"refused", x.refused}, {"refused_queue_full", x.refused_queue_full},
                               {"refused_timed_out", x.refused_timed_out},
                               {"wait_p50_us", x.wait_p50_us}, {"wait_p99_us", x.wait_p99_us},
                               {"wait_max_us", x.wait_max_us}, {"wait_mean_us", x.wait_mean_us},
                               {"peak_in_flight", x.peak_in_flight},
                               {"peak_in_flight_per_key", x.peak_in_flight_per_key},
                               {"peak_queue", x.peak_queue}});
  }
  return t;
}

Json distributed_json(const DistributedReport& dr) {
  const DistributedOptions& o = dr.options;
  Json d;
  d["instances"] = o.instances;
  d["regions"] = o.regions;
  d["rtt_us"] = o.rtt.count();
  d["cross_rtt_us"] = o.cross_rtt.count();
  d["sync_interval_us"] = o.sync_interval.count();
  d["lease_max"] = o.lease_max;
  d["slice_ttl_us"] = o.slice_ttl.count();
  for (const DistributedResult& x : dr.results) {
    d["modes"].push_back({{"algorithm", x.algorithm}, {"mode", x.mode}, {"decisions", x.decisions},
                          {"admitted", x.admitted}, {"exact_admitted", x.exact_admitted},
                          {"over", x.over}, {"under", x.under},
                          {"worst_window_over", x.worst_window_over},
                          {"worst_window_under", x.worst_window_under}, {"bound", x.bound},
                          {"store_calls", x.store_calls}, {"sync_messages", x.sync_messages},
                          {"latency_p50_us", x.latency_p50_us}, {"latency_p99_us", x.latency_p99_us},
                          {"latency_max_us", x.latency_max_us}});
  }
  return d;
}

Json run_json(const Report& r) {
  Json run;
  run["run"] = r.title;
  run["description"] = r.description;
  run["requests"] = r.requests;
  run["first_us"] = r.first_us;
  run["last_us"] = r.last_us;
  if (r.first_us >= kEpochTimesFromUs) {
    run["first"] = format_rfc3339(r.first_us);
    run["last"] = format_rfc3339(r.last_us);
  }
  run["start_us"] = r.start_us;
  if (r.token_fill) run["token_fill"] = *r.token_fill;
  else run["token_fill"] = "full";
  run["skipped_lines"] = r.skipped_lines;
  run["resolution_us"] = r.resolution_us;
  run["spread_us"] = r.spread_us;
  run["missing_key_parts"] = r.missing_key_parts;
  run["notices"] = r.notices;
  Json algs = Json::array();
  for (const AlgorithmResult& a : r.algorithms) algs.push_back(algorithm_json(a));
  run["algorithms"] = std::move(algs);
  run["top_keys"] = top_keys_json(r);
  run["top_keys_error"] = r.top_keys_error;
  if (r.throttle) run["throttling"] = throttling_json(*r.throttle);
  if (r.distributed) run["distributed"] = distributed_json(*r.distributed);
  return run;
}

}  // namespace

std::string render_json(const std::vector<Report>& reports) {
  Json runs = Json::array();
  for (const Report& r : reports) runs.push_back(run_json(r));
  Json doc;
  doc["runs"] = std::move(runs);
  return doc.dump(2) + "\n";
}

}  // namespace ratelimit::sim
