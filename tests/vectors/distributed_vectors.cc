// distributed_vectors.cc — parsing and replaying tests/vectors/distributed.json (see
// distributed_vectors.h). nlohmann-json throws on type mismatches; every throw becomes a Status.
#include "distributed_vectors.h"

#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace ratelimit::vectors {
namespace {

using nlohmann::json;

int64_t get_int(const json& obj, const char* name, std::optional<int64_t> fallback = {}) {
  if (!obj.contains(name)) {
    if (fallback) return *fallback;
    throw std::runtime_error(std::string("missing field '") + name + "'");
  }
  const json& v = obj.at(name);
  if (!v.is_number_integer()) throw std::runtime_error(std::string("'") + name + "' must be an integer");
  return v.get<int64_t>();
}

std::string describe(const algo::SharedView& v) {
  std::ostringstream out;
  out << "{now_us " << v.now_us << ", window_start_us " << v.window_start_us << ", prev " << v.prev
      << ", curr " << v.curr << ", granted " << v.granted << ", dropped " << v.dropped << "}";
  return out.str();
}

bool same(const algo::SharedView& a, const algo::SharedView& b) {
  return a.now_us == b.now_us && a.window_start_us == b.window_start_us && a.prev == b.prev &&
         a.curr == b.curr && a.granted == b.granted && a.dropped == b.dropped;
}

}  // namespace

Result<std::vector<DistributedCase>> load_distributed(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::not_found("cannot read " + path);
  json doc;
  try {
    doc = json::parse(in);
  } catch (const std::exception& e) {
    return Status::invalid_argument(path + ": malformed JSON: " + e.what());
  }
  std::vector<DistributedCase> cases;
  std::string where = path;
  try {
    for (const json& c : doc.at("cases")) {
      where = path + ": case '" + c.value("name", std::string("?")) + "'";
      const std::string algorithm = c.at("algorithm").get<std::string>();
      const json& p = c.at("policy");
      Result<Policy> policy = Status::invalid_argument("algorithm must be fixed_window or sliding_window_counter");
      const Micros window{get_int(p, "window_us")};
      if (algorithm == "fixed_window") policy = Policy::fixed_window(get_int(p, "limit"), window);
      else if (algorithm == "sliding_window_counter") policy = Policy::sliding_window_counter(get_int(p, "limit"), window);
      if (!policy.ok()) return Status::invalid_argument(where + ": " + policy.status().message());
      ConsistencyOptions lease;
      lease.mode = Consistency::kLease;
      auto leased = policy->with_consistency(lease);
      if (!leased.ok()) return Status::invalid_argument(where + ": " + leased.status().message());
      DistributedCase out{c.at("name").get<std::string>(), *leased, {}};
      size_t i = 0;
      for (const json& s : c.at("steps")) {
        where = path + ": case '" + out.name + "' step " + std::to_string(i++);
        DistributedStep step;
        step.t_us = get_int(s, "t_us");
        if (step.t_us < 0) return Status::invalid_argument(where + ": t_us must be >= 0");
        const std::string op = s.at("op").get<std::string>();
        if (op == "reserve") {
          step.op = DistributedStep::Op::kReserve;
          step.want = get_int(s, "want");
          step.give_back_window_us = get_int(s, "give_back_window_us", 0);
          step.give_back = get_int(s, "give_back", 0);
        } else if (op == "add_hits") {
          step.op = DistributedStep::Op::kAddHits;
          step.window_us = get_int(s, "window_us");
          step.hits = get_int(s, "hits");
        } else {
          return Status::invalid_argument(where + ": unknown op '" + op + "' (reserve or add_hits)");
        }
        const json& e = s.at("expect");
        step.expect = {get_int(e, "now_us"), get_int(e, "window_start_us"), get_int(e, "prev"),
                       get_int(e, "curr"), get_int(e, "granted"), get_int(e, "dropped", 0)};
        out.steps.push_back(step);
      }
      if (out.steps.empty()) return Status::invalid_argument(where + ": no steps");
      cases.push_back(std::move(out));
    }
  } catch (const std::exception& e) {
    return Status::invalid_argument(where + ": " + e.what());
  }
  if (cases.empty()) return Status::invalid_argument(path + ": 'cases' must be non-empty");
  return cases;
}

std::vector<Failure> run_distributed(const std::vector<DistributedCase>& cases,
                                     const std::string& key_prefix, const DistributedFn& fn) {
  std::vector<Failure> failures;
  for (size_t c = 0; c < cases.size(); ++c) {
    const std::string key = key_prefix + std::to_string(c);
    for (size_t i = 0; i < cases[c].steps.size(); ++i) {
      const DistributedStep& step = cases[c].steps[i];
      auto got = fn(cases[c].policy, key, step);
      if (!got.ok()) {
        failures.push_back({"distributed.json", cases[c].name, i, got.status().to_string()});
      } else if (!same(*got, step.expect)) {
        failures.push_back({"distributed.json", cases[c].name, i,
                            "got " + describe(*got) + ", want " + describe(step.expect)});
      }
    }
  }
  return failures;
}

std::vector<Failure> run_distributed_pure(const std::vector<DistributedCase>& cases) {
  std::map<std::string, algo::AlgorithmState> states;
  return run_distributed(cases, "pure-", [&](const Policy& policy, const std::string& key,
                                             const DistributedStep& step) -> Result<algo::SharedView> {
    auto [it, fresh] = states.try_emplace(key, algo::fresh_state(policy));
    if (step.op == DistributedStep::Op::kReserve) {
      return algo::reserve(policy, it->second, step.t_us, step.give_back_window_us, step.give_back,
                           step.want);
    }
    return algo::add_hits(policy, it->second, step.t_us, step.window_us, step.hits);
  });
}

}  // namespace ratelimit::vectors
