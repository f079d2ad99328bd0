// usage_cli.cc — `ratelimit-sim usage`: the usage-known-after-the-fact experiment (src/sim/
// usage.h) from the command line: a policy, Poisson traffic whose costs are known only when each
// request ends, and the three reservation strategies side by side (docs/simulator.md).
// Thin shell like main.cc: flags -> sim::UsageOptions -> sim::run_usage; a bad flag is one line
// on stderr and exit code 2.
#include "usage_cli.h"

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "ratelimit/policy.h"
#include "run.h"
#include "svg_usage.h"
#include "usage.h"

namespace ratelimit::sim {
namespace {

int usage_fail(const std::string& message) {
  std::cerr << "ratelimit-sim usage: " << message << "\n";
  return kExitUsage;
}

Result<Policy> usage_policy(const std::string& algorithm, int64_t limit, Micros window) {
  const double rate = static_cast<double>(limit) * 1e6 / static_cast<double>(window.count());
  if (algorithm == "fixed_window") return Policy::fixed_window(limit, window);
  if (algorithm == "sliding_window_log") return Policy::sliding_window_log(limit, window);
  if (algorithm == "sliding_window_counter") return Policy::sliding_window_counter(limit, window);
  if (algorithm == "token_bucket") return Policy::token_bucket(rate, limit);
  if (algorithm == "leaky_bucket") return Policy::leaky_bucket(rate, limit);
  return Status::invalid_argument("--algorithm: expected fixed_window, sliding_window_log, "
                                  "sliding_window_counter, token_bucket or leaky_bucket, got '" + algorithm + "'");
}

// Writes `text` to `path`; false (with the message printed) when it cannot.
bool write_out(const std::string& path, const std::string& text, const char* what) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) std::cerr << "ratelimit-sim usage: cannot write the " << what << " to '" << path << "'\n";
  return static_cast<bool>(f);
}

}  // namespace

int usage_main(int argc, char** argv) {
  CLI::App app{
      "ratelimit-sim usage: requests whose cost (an LLM answer's tokens) is known only when they end,\n"
      "limited through reports, under three strategies: reserve the largest cost and refund,\n"
      "reserve the mean and reconcile, or report only (docs/usage.md)."};
  app.set_help_flag("-h,--help", "Show this help and exit");
  std::string algorithm = "sliding_window_log";
  int64_t limit = 100'000;
  std::string window = "1m";
  std::string hold = "5s";
  std::string tick = "0";
  std::string svg, events;
  UsageOptions o;
  app.add_option("--algorithm", algorithm, "The policy's algorithm (buckets: burst = limit, rate = limit / window)")
      ->capture_default_str();
  app.add_option("--limit", limit, "Units (tokens) per window")->capture_default_str();
  app.add_option("--window", window, "The window (1m, 60s, ...)")->capture_default_str();
  app.add_option("--rate", o.rate, "Requests per second (Poisson)")->capture_default_str();
  app.add_option("--duration", o.duration_s, "Seconds of arrivals")->capture_default_str();
  app.add_option("--hold", hold, "How long a request works before its cost is known")->capture_default_str();
  app.add_option("--seed", o.seed, "Python random.Random seed of the arrivals and costs")->capture_default_str();
  app.add_option("--tick", tick, "Move each arrival up to a multiple of this (0: none)")->capture_default_str();
  app.add_option("--svg", svg, "Also write a chart of the units the policy held, per strategy");
  app.add_option("--events", events,
                 "Also write every decision, in the model's order, as CSV (tools/sim/compare_usage.py)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_fail(std::string(e.what()) + " (see --help)");
  }
  auto w = parse_duration(window);
  if (!w) return usage_fail("--window: " + w.status().message());
  auto h = hold == "0" ? Result<Micros>(Micros{0}) : parse_duration(hold);
  if (!h) return usage_fail("--hold: " + h.status().message());
  auto k = tick == "0" ? Result<Micros>(Micros{0}) : parse_duration(tick);
  if (!k) return usage_fail("--tick: " + k.status().message());
  auto p = usage_policy(algorithm, limit, *w);
  if (!p) return usage_fail(p.status().message());
  o.hold = *h;
  o.tick = *k;
  o.record_events = !events.empty();
  auto r = run_usage(*p, o);
  if (!r) return usage_fail(r.status().message());
  if (!svg.empty() && !write_out(svg, render_usage_svg(*r), "SVG")) return kExitUsage;
  if (!events.empty() && !write_out(events, render_usage_events(*r), "events")) return kExitUsage;
  std::cout << algorithm << ", " << render_usage(*r);
  return 0;
}

}  // namespace ratelimit::sim
