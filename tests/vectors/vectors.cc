// vectors.cc — parsing and replaying the shared test vectors (see vectors.h).
//
// nlohmann-json throws on type mismatches; every throw is caught here and turned into a
// Status naming the file, case and step, so callers only ever see error values.
#include "vectors.h"

#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

namespace ratelimit::vectors {
namespace {

using nlohmann::json;

// A parse error with the position it happened at; converted to a Status at the top.
struct ParseError {
  std::string message;
};

[[noreturn]] void fail(const std::string& message) { throw ParseError{message}; }

const json& field(const json& obj, const char* name) {
  if (!obj.is_object()) fail("expected an object");
  auto it = obj.find(name);
  if (it == obj.end()) fail(std::string("missing field '") + name + "'");
  return *it;
}

int64_t int_field(const json& obj, const char* name) {
  const json& v = field(obj, name);
  if (!v.is_number_integer()) fail(std::string("field '") + name + "' must be an integer");
  return v.get<int64_t>();
}

int64_t int_field_or(const json& obj, const char* name, int64_t fallback) {
  return obj.contains(name) ? int_field(obj, name) : fallback;
}

DecisionReason parse_reason(const std::string& s) {
  for (auto r : {DecisionReason::kWithinLimit, DecisionReason::kOverLimit,
                 DecisionReason::kExceedsCapacity, DecisionReason::kStoreFailedOpen,
                 DecisionReason::kStoreFailedClosed, DecisionReason::kLeaseNotHeld}) {
    if (s == decision_reason_name(r)) return r;
  }
  fail("unknown reason '" + s + "'");
}

StepOp parse_op(const std::string& s) {
  for (auto op : {StepOp::kAcquire, StepOp::kPeek, StepOp::kReset, StepOp::kRelease,
                  StepOp::kRenew, StepOp::kReport}) {
    if (s == step_op_name(op)) return op;
  }
  fail("unknown op '" + s + "' (expected acquire, peek, reset, release, renew or report)");
}

Policy parse_policy(Algorithm algorithm, const json& p, bool count_denied, bool every_hit) {
  Result<Policy> r = Status::internal("unreachable");
  if (algorithm == Algorithm::kConcurrency) {
    r = Policy::concurrency(int_field(p, "limit"), Micros{int_field(p, "lease_ttl_us")});
  } else if (every_hit) {
    if (algorithm != Algorithm::kFixedWindow) fail("'every_hit' applies to fixed_window only");
    r = Policy::fixed_window_every_hit(int_field(p, "limit"), Micros{int_field(p, "window_us")});
  } else if (algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kLeakyBucket) {
    const json& rate = field(p, "rate");
    if (!rate.is_number()) fail("field 'rate' must be a number");
    const int64_t burst = int_field(p, "burst");
    if (algorithm == Algorithm::kTokenBucket) {
      if (p.contains("mode")) fail("'mode' applies to leaky_bucket only");
      r = Policy::token_bucket(rate.get<double>(), burst);
    } else {
      LeakyMode mode = LeakyMode::kPolice;
      if (p.contains("mode")) {
        const std::string m = field(p, "mode").get<std::string>();
        if (m == "shape") mode = LeakyMode::kShape;
        else if (m != "police") fail("mode must be police or shape, got '" + m + "'");
      }
      r = Policy::leaky_bucket(rate.get<double>(), burst, mode);
    }
  } else {
    const int64_t limit = int_field(p, "limit");
    const Micros window{int_field(p, "window_us")};
    switch (algorithm) {
      case Algorithm::kFixedWindow: r = Policy::fixed_window(limit, window); break;
      case Algorithm::kSlidingWindowLog: r = Policy::sliding_window_log(limit, window); break;
      default: r = Policy::sliding_window_counter(limit, window); break;
    }
  }
  if (!r.ok()) fail("invalid policy: " + r.status().message());
  return r->with_count_denied(count_denied);
}

Expect parse_expect(const json& e) {
  Expect x;
  const json& allowed = field(e, "allowed");
  if (!allowed.is_boolean()) fail("field 'allowed' must be true or false");
  x.allowed = allowed.get<bool>();
  x.reason = parse_reason(field(e, "reason").get<std::string>());
  x.remaining = int_field(e, "remaining");
  x.reset_after_us = int_field(e, "reset_after_us");
  x.retry_after_us = int_field(e, "retry_after_us");
  x.delay_us = int_field(e, "delay_us");
  return x;
}

Step parse_step(const json& j, Algorithm algorithm, const Policy& case_policy, bool count_denied, bool every_hit) {
  Step s;
  // A step's own policy: the case's redefined (a reload) for this step only — under the case
  // policy's name, so that the stores find the key's state (a factory names a policy after its
  // parameters).
  if (j.contains("policy")) {
    auto named = parse_policy(algorithm, field(j, "policy"), count_denied, every_hit).with_name(case_policy.name());
    if (!named.ok()) fail(named.status().message());
    s.policy = std::move(*named);
  }
  s.t_us = int_field(j, "t_us");
  if (s.t_us < 0) fail("t_us must be >= 0");
  s.cost = int_field_or(j, "cost", 1);
  if (j.contains("op")) s.op = parse_op(field(j, "op").get<std::string>());
  if (j.contains("key")) s.key = field(j, "key").get<std::string>();
  if (j.contains("lease")) s.lease = field(j, "lease").get<std::string>();
  const bool lease_op = s.op == StepOp::kRelease || s.op == StepOp::kRenew;
  if ((lease_op || !s.lease.empty()) && algorithm != Algorithm::kConcurrency) {
    fail("release, renew and 'lease' apply to concurrency only");
  }
  if (lease_op && s.lease.empty()) fail("a release or renew step names its 'lease'");
  if (s.op == StepOp::kReport && algorithm == Algorithm::kConcurrency) {
    fail("report applies to the rate algorithms only");
  }
  if (s.op == StepOp::kReset) {
    if (j.contains("expect")) fail("a reset step has no 'expect'");
  } else {
    s.expect = parse_expect(field(j, "expect"));
  }
  return s;
}

}  // namespace

const char* step_op_name(StepOp op) {
  switch (op) {
    case StepOp::kAcquire: return "acquire";
    case StepOp::kPeek: return "peek";
    case StepOp::kReset: return "reset";
    case StepOp::kRelease: return "release";
    case StepOp::kRenew: return "renew";
    case StepOp::kReport: return "report";
  }
  return "unknown";
}

algo::Op algo_op(StepOp op) {
  switch (op) {
    case StepOp::kPeek: return algo::Op::kPeek;
    case StepOp::kRelease: return algo::Op::kRelease;
    case StepOp::kRenew: return algo::Op::kRenew;
    case StepOp::kReport: return algo::Op::kReport;
    default: return algo::Op::kAcquire;
  }
}

Result<Decision> store_step(Store& store, const Policy& policy, const std::string& key,
                            const Step& step) {
  switch (step.op) {
    case StepOp::kPeek: return store.peek(policy, key, step.cost);
    case StepOp::kRelease: return store.release(policy, key, step.lease_id);
    case StepOp::kRenew: return store.renew(policy, key, step.lease_id);
    case StepOp::kReport:
      return store.decide_one({&policy, key, step.cost, StoreOp::Kind::kReport});
    default: return store.acquire(policy, key, step.cost);
  }
}

Result<VectorFile> load_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::not_found("cannot open test vector file " + path);
  std::stringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::invalid_argument(path + ": malformed JSON");

  std::string where = path;
  try {
    auto algorithm = parse_algorithm(field(doc, "algorithm").get<std::string>());
    if (!algorithm.ok()) fail(algorithm.status().message());
    VectorFile file;
    file.path = path;
    file.algorithm = *algorithm;
    const json& cases = field(doc, "cases");
    if (!cases.is_array() || cases.empty()) fail("'cases' must be a non-empty array");
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const json& c = cases[ci];
      where = path + ": case " + std::to_string(ci);
      std::string name = field(c, "name").get<std::string>();
      where = path + ": case '" + name + "'";
      bool count_denied = false;
      if (c.contains("count_denied")) count_denied = field(c, "count_denied").get<bool>();
      bool every_hit = false;
      if (c.contains("every_hit")) every_hit = field(c, "every_hit").get<bool>();
      Policy policy = parse_policy(file.algorithm, field(c, "policy"), count_denied, every_hit);
      const json& steps = field(c, "steps");
      if (!steps.is_array() || steps.empty()) fail("'steps' must be a non-empty array");
      std::vector<Step> parsed;
      for (size_t si = 0; si < steps.size(); ++si) {
        where = path + ": case '" + name + "' step " + std::to_string(si);
        parsed.push_back(parse_step(steps[si], file.algorithm, policy, count_denied, every_hit));
      }
      file.cases.push_back(Case{std::move(name), std::move(policy), std::move(parsed)});
    }
    return file;
  } catch (const ParseError& e) {
    return Status::invalid_argument(where + ": " + e.message);
  } catch (const json::exception& e) {
    return Status::invalid_argument(where + ": " + e.what());
  }
}

Result<std::vector<VectorFile>> load_all(const std::string& dir) {
  std::vector<VectorFile> files;
  for (Algorithm a : kAllAlgorithms) {
    auto f = load_file(dir + "/" + algorithm_name(a) + ".json");
    if (!f.ok()) return f.status();
    if (f->algorithm != a) {
      return Status::invalid_argument(f->path + ": declares algorithm " +
                                      algorithm_name(f->algorithm));
    }
    files.push_back(std::move(*f));
  }
  return files;
}

std::string compare(const Expect& e, int64_t limit, const Decision& d) {
  std::string out;
  auto check = [&](const char* what, auto got, auto want) {
    if (got != want) {
      if (!out.empty()) out += "; ";
      std::ostringstream s;
      s << what << ": got " << got << ", want " << want;
      out += s.str();
    }
  };
  check("allowed", d.allowed, e.allowed);
  if (d.reason != e.reason) {
    if (!out.empty()) out += "; ";
    out += std::string("reason: got ") + decision_reason_name(d.reason) + ", want " +
           decision_reason_name(e.reason);
  }
  check("limit", d.limit, limit);
  check("remaining", d.remaining, e.remaining);
  check("reset_after_us", d.reset_after.count(), e.reset_after_us);
  check("retry_after_us", d.retry_after.count(), e.retry_after_us);
  check("delay_us", d.delay.count(), e.delay_us);
  return out;
}

std::string format_failures(const std::vector<Failure>& failures) {
  std::string out;
  for (const Failure& f : failures) {
    out += f.file + ": case '" + f.case_name + "' step " + std::to_string(f.step) + ": " +
           f.message + "\n";
  }
  return out;
}

std::string unique_run_prefix() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                      static_cast<uint64_t>(
                          std::chrono::steady_clock::now().time_since_epoch().count()));
  std::ostringstream s;
  s << "vec-" << std::hex << gen() << gen() << "-";
  return s.str();
}

std::vector<Failure> run_file(const VectorFile& file, const std::string& key_prefix,
                              const DecideFn& decide, const ResetFn& reset) {
  std::vector<Failure> failures;
  for (size_t ci = 0; ci < file.cases.size(); ++ci) {
    const Case& c = file.cases[ci];
    std::map<std::string, LeaseId> leases;  // case-local names -> ids the store returned
    for (size_t si = 0; si < c.steps.size(); ++si) {
      Step step = c.steps[si];
      const Policy& policy = step.policy ? *step.policy : c.policy;
      if (step.op == StepOp::kRelease || step.op == StepOp::kRenew) {
        auto it = leases.find(step.lease);
        step.lease_id = it != leases.end() ? it->second : new_lease_id();  // unbound: foreign
      } else if (step.op == StepOp::kAcquire && policy.is_concurrency()) {
        step.lease_id = new_lease_id();
      }
      const std::string key = key_prefix + std::to_string(ci) + ":" + step.key;
      auto report = [&](std::string message) {
        failures.push_back({file.path, c.name, si,
                            std::string(step_op_name(step.op)) + " t_us=" +
                                std::to_string(step.t_us) + " cost=" + std::to_string(step.cost) +
                                " key=" + step.key + ": " + std::move(message)});
      };
      if (step.op == StepOp::kReset) {
        Status s = reset(policy, key);
        if (!s.is_ok()) report("reset failed: " + s.to_string());
        continue;
      }
      Result<Decision> d = decide(policy, key, step);
      if (!d.ok()) {
        report("error: " + d.status().to_string());
        continue;
      }
      std::string diff = compare(*step.expect, policy.limit(), *d);
      // The lease a decision carries: an admitted concurrency acquire's new id, the id a release
      // or renew asked about; nothing otherwise.
      const bool lease_op = step.op == StepOp::kRelease || step.op == StepOp::kRenew;
      const bool acquired = step.op == StepOp::kAcquire && policy.is_concurrency() && d->allowed;
      auto add = [&](const char* what) { diff += (diff.empty() ? "" : "; ") + std::string(what); };
      if (lease_op && d->lease != step.lease_id) add("lease: not the id asked about");
      if (acquired && d->lease.empty()) add("lease: an admitted acquire carries none");
      if (!lease_op && !acquired && !d->lease.empty()) add("lease: unexpected");
      if (acquired && !step.lease.empty()) leases[step.lease] = d->lease;
      if (!diff.empty()) report(diff);
    }
  }
  return failures;
}

std::vector<Failure> run_vectors(Store& store, ManualClock& clock, const VectorFile& file,
                                 std::optional<std::string> key_prefix) {
  const std::string prefix = key_prefix ? *key_prefix : unique_run_prefix();
  return run_file(
      file, prefix,
      [&](const Policy& policy, const std::string& key, const Step& step) {
        clock.set(Micros{step.t_us});
        return store_step(store, policy, key, step);
      },
      [&](const Policy& policy, const std::string& key) { return store.reset(policy, key); });
}

std::vector<Failure> run_vectors_pure(const VectorFile& file) {
  std::map<std::string, algo::AlgorithmState> states;
  return run_file(
      file, "pure:",
      [&](const Policy& policy, const std::string& key, const Step& step) -> Result<Decision> {
        const Status valid = step.op == StepOp::kReport ? validate_report_cost(policy, step.cost)
                                                        : validate_cost(policy, step.cost);
        if (!valid.is_ok()) return valid;
        auto it = states.try_emplace(key, algo::fresh_state(policy)).first;
        return algo::decide(policy, it->second, step.t_us, step.cost, algo_op(step.op),
                            step.lease_id);
      },
      [&](const Policy&, const std::string& key) {
        states.erase(key);
        return Status::ok();
      });
}

}  // namespace ratelimit::vectors
