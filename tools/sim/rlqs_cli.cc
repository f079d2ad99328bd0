// rlqs_cli.cc — `ratelimit-sim rlqs`: a fleet of Envoys against ratelimitd's Rate Limit Quota
// Service (src/sim/rlqs.h) from the command line — issue 29's three-client scenario, once per
// report interval, as a table of convergence, utilisation, fairness and over-admission
// (docs/simulator.md). Thin shell like usage_cli.cc: flags -> sim::RlqsOptions -> sim::run_rlqs;
// a bad flag is one line on stderr and exit code 2.
#include "rlqs_cli.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "rlqs.h"
#include "run.h"

namespace ratelimit::sim {

int rlqs_main(int argc, char** argv) {
  CLI::App app{
      "ratelimit-sim rlqs: Envoys sharing one global limit through the Rate Limit Quota Service:\n"
      "each reports its usage every interval and enforces its assignment locally; the server\n"
      "divides the limit by max-min fairness of the demand (docs/envoy.md, docs/simulator.md).\n"
      "Scenario: 300 rps; clients wanting 10, 100, 1000; at 60 s 10, 1000, 20; at 120 s the\n"
      "third leaves; 180 s."};
  app.set_help_flag("-h,--help", "Show this help and exit");
  RlqsOptions o;
  RlqsScenario s = rlqs_three_clients();
  std::string unassigned = "allow";
  app.add_option("--intervals", o.intervals_s, "Report intervals to compare, seconds")->delimiter(',')
      ->capture_default_str();
  app.add_option("--capacity", s.capacity_rps, "The bucket's global limit, rps")->capture_default_str();
  app.add_option("--no-assignment", unassigned, "What Envoy does without an assignment: allow or deny")
      ->capture_default_str();
  std::string server_interval = "1";
  app.add_option("--reporting-interval", server_interval,
                 "The server's rlqs.reporting_interval in seconds, or 'match' (each run's interval)")
      ->capture_default_str();
  app.add_option("--tolerance", o.tolerance, "Converged: every assignment within this share of its target")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "ratelimit-sim rlqs: " << e.what() << " (see --help)\n";
    return kExitUsage;
  }
  if (unassigned != "allow" && unassigned != "deny") {
    std::cerr << "ratelimit-sim rlqs: --no-assignment: expected allow or deny, got '" << unassigned << "'\n";
    return kExitUsage;
  }
  o.no_assignment_allows = unassigned == "allow";
  if (server_interval == "match") {
    o.server_interval_s = 0;
  } else {
    try {
      size_t used = 0;
      o.server_interval_s = std::stoll(server_interval, &used);
      if (used != server_interval.size() || o.server_interval_s < 1) throw std::invalid_argument("");
    } catch (const std::exception&) {
      std::cerr << "ratelimit-sim rlqs: --reporting-interval: expected whole seconds >= 1 or match, got '"
                << server_interval << "'\n";
      return kExitUsage;
    }
  }
  auto runs = run_rlqs(s, o);
  if (!runs) {
    std::cerr << "ratelimit-sim rlqs: " << runs.status().message() << "\n";
    return kExitUsage;
  }
  std::cout << render_rlqs(s, *runs);
  return 0;
}

}  // namespace ratelimit::sim
