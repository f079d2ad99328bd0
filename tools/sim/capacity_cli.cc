// capacity_cli.cc — `ratelimit-sim capacity`: a backend with a capacity behind concurrency
// limits (src/sim/capacity.h) from the command line — load steps, or 3x capacity with the
// capacity halved halfway — once per limit, as a table of goodput, refusals and latency
// (docs/simulator.md). Thin shell like usage_cli.cc: flags -> sim::CapacityScenario ->
// sim::run_capacity; a bad flag is one line on stderr and exit code 2.
#include "capacity_cli.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "capacity.h"
#include "run.h"

namespace ratelimit::sim {
namespace {

int capacity_fail(const std::string& message) {
  std::cerr << "ratelimit-sim capacity: " << message << "\n";
  return kExitUsage;
}

}  // namespace

int capacity_main(int argc, char** argv) {
  CLI::App app{
      "ratelimit-sim capacity: a backend of N workers behind a limit on the requests in flight;\n"
      "what each limit costs in goodput, refusals and latency as load and capacity move."};
  app.set_help_flag("-h,--help", "Show this help and exit");
  std::string scenario = "steps", service = "20ms", timeout = "1s";
  std::vector<int64_t> limits = {20, 100};
  std::vector<std::string> estimators = {"gradient2", "aimd", "vegas"};
  adaptive::AdaptiveConfig ac;
  int64_t workers = 20;
  double jitter = 0.1;
  uint64_t seed = 42;
  app.add_option("--scenario", scenario,
                 "steps: 50, 90, 200, 100 % of capacity, 10 s each; halved: 3x capacity, workers 20 -> 10 at 10 s; "
                 "classes: critical and sheddable (headroom 0.5) at 50 % each, 2x capacity, critical waits up to 1 s "
                 "(fixed limits only: each run without and with the classes)")
      ->capture_default_str();
  app.add_option("--limits", limits, "Fixed limits on the requests in flight to compare")->delimiter(',')
      ->capture_default_str();
  app.add_option("--estimators", estimators, "Adaptive limits to compare (gradient2, aimd, vegas; none: no adaptive)")
      ->delimiter(',')->capture_default_str();
  app.add_option("--min-limit", ac.min_limit, "The adaptive limits' floor")->capture_default_str();
  app.add_option("--initial-limit", ac.initial_limit, "The adaptive limits' start")->capture_default_str();
  app.add_option("--max-limit", ac.max_limit, "The adaptive limits' ceiling")->capture_default_str();
  app.add_option("--workers", workers, "The backend's workers at the start")->capture_default_str();
  app.add_option("--service", service, "Each request's service time")->capture_default_str();
  app.add_option("--jitter", jitter, "Service times vary uniformly by this share")->capture_default_str();
  app.add_option("--timeout", timeout, "How long a client waits for an answer")->capture_default_str();
  app.add_option("--seed", seed, "Python random.Random seed of arrivals and service times")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return capacity_fail(std::string(e.what()) + " (see --help)");
  }
  CapacityScenario s;
  if (scenario == "steps") s = capacity_load_steps();
  else if (scenario == "halved") s = capacity_halved_at_3x();
  else if (scenario == "classes") s = capacity_classes_at_2x();
  else return capacity_fail("--scenario: expected steps, halved or classes, got '" + scenario + "'");
  auto sv = parse_duration(service);
  if (!sv) return capacity_fail("--service: " + sv.status().message());
  auto to = parse_duration(timeout);
  if (!to) return capacity_fail("--timeout: " + to.status().message());
  s.workers = workers;
  s.service = *sv;
  s.jitter = jitter;
  s.timeout = *to;
  s.seed = seed;
  if (scenario == "halved") s.phases.back().workers = std::max<int64_t>(1, workers / 2);
  std::vector<CapacityRun> runs;
  for (int64_t n : limits) {
    if (!s.classes.empty()) {  // the same arrivals without classes: everyone refused alike at the limit
      CapacityScenario plain = s;
      plain.classes.clear();
      plain.shares.clear();
      auto source = fixed_limit(n);
      auto r = run_capacity(plain, *source);
      if (!r) return capacity_fail(r.status().message());
      runs.push_back(std::move(*r));
    }
    auto source = fixed_limit(n);
    auto r = run_capacity(s, *source);
    if (!r) return capacity_fail(r.status().message());
    if (!s.classes.empty()) r->limiter += " cls";
    runs.push_back(std::move(*r));
  }
  if (!s.classes.empty() && estimators != std::vector<std::string>{"none"} && app.count("--estimators") > 0) {
    return capacity_fail("--scenario classes: priority classes need a fixed limit (--estimators none)");
  }
  for (const std::string& e : estimators) {
    if (e == "none" || !s.classes.empty()) continue;
    auto est = adaptive::estimator_from_name(e);
    if (!est) return capacity_fail("--estimators: expected gradient2, aimd, vegas or none, got '" + e + "'");
    ac.estimator = *est;
    auto source = adaptive_limit(ac);
    if (!source) return capacity_fail(source.status().message());
    auto r = run_capacity(s, **source);
    if (!r) return capacity_fail(r.status().message());
    runs.push_back(std::move(*r));
  }
  std::cout << render_capacity(s, runs);
  return 0;
}

}  // namespace ratelimit::sim
