// main.cc — ratelimit-sim: replays traffic (built-in patterns A, B, C or a trace file) through
// all five rate-limit algorithms and reports what each admits (table, JSON, CSV, SVG).
//
// Thin shell: flags -> sim::RunOptions -> sim::run (src/sim/run.h). Every bad flag or input
// ends with a one-line message on stderr and exit code 2; --help exits 0.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <iostream>
#include <tuple>

#include "ratelimit/version.h"
#include "run.h"
#include "timestamps.h"
#include "capacity_cli.h"
#include "rlqs_cli.h"
#include "usage_cli.h"

namespace {

using ratelimit::Micros;
using ratelimit::Result;
using ratelimit::Status;
namespace sim = ratelimit::sim;

// "1s", "500ms" (see ratelimit::parse_duration), or a plain number of seconds ("1", "0.5").
Result<Micros> parse_duration_flag(const std::string& flag, const std::string& text) {
  double seconds = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (ec == std::errc() && ptr == text.data() + text.size()) {
    if (!sim::seconds_in_range(seconds) || seconds <= 0) {
      return Status::invalid_argument(flag + " must be a positive duration, got '" + text + "'");
    }
    return Micros{sim::seconds_to_us(seconds)};
  }
  auto d = ratelimit::parse_duration(text);
  if (!d) return Status::invalid_argument(flag + ": " + d.status().message());
  return *d;
}

int fail(const std::string& message) {
  std::cerr << "ratelimit-sim: " << message << "\n";
  return sim::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  // `ratelimit-sim usage ...`: the usage-known-after-the-fact experiment, flags of its own.
  if (argc >= 2 && std::string_view(argv[1]) == "usage") return sim::usage_main(argc - 1, argv + 1);
  // `ratelimit-sim rlqs ...`: Envoys sharing a limit through the Rate Limit Quota Service.
  if (argc >= 2 && std::string_view(argv[1]) == "rlqs") return sim::rlqs_main(argc - 1, argv + 1);
  // `ratelimit-sim capacity ...`: a backend with a capacity behind concurrency limits.
  if (argc >= 2 && std::string_view(argv[1]) == "capacity") return sim::capacity_main(argc - 1, argv + 1);
  CLI::App app{
      "ratelimit-sim: replay traffic through the five rate-limit algorithms of libratelimit\n"
      "(fixed_window, sliding_window_log, sliding_window_counter, token_bucket, leaky_bucket)\n"
      "with a manual clock and report what each admits."};
  app.set_help_flag("-h,--help", "Show this help and exit");
  app.set_version_flag("--version", ratelimit::version_line("ratelimit-sim"), "Show the version and exit");
  sim::RunOptions o;

  std::string pattern = "all";
  std::string trace;
  std::string trace_format = "auto";
  std::string unsorted = "reject";
  std::string window = "1s";
  std::string leaky_mode = "police";
  std::string token_fill = "default";
  std::string peak_window;
  std::string bar_width = "auto";
  std::string format = "table";
  std::string svg;

  auto* pattern_opt = app.add_option("-p,--pattern", pattern,
                                     "Built-in pattern: A (Poisson), B (burst), C (window-boundary "
                                     "attack) or all")
                          ->capture_default_str();
  auto* trace_opt = app.add_option("-t,--trace", trace,
                                   "Replay this file instead: CSV timestamp[,key[,cost]], an "
                                   "nginx/Apache access log or JSON lines ('-' = stdin)");
  trace_opt->excludes(pattern_opt);
  app.add_option("--trace-format", trace_format,
                 "auto (from the first line), csv, combined (nginx/Apache combined, common or "
                 "nginx main) or json (one object a line)")
      ->capture_default_str();
  std::string log_format;
  app.add_option("--log-format", log_format,
                 "An nginx log_format ('$remote_addr [$time_local] \"$request\" $msec ...') or "
                 "Apache LogFormat ('%h %l %u %t \"%r\" %>s %b %{usec}t') string, or combined, "
                 "main, common, vhost_combined");
  std::string key;
  app.add_option("--key", key,
                 "Access logs and JSON: what one client is, a field or several joined: client "
                 "(first X-Forwarded-For address, else remote_addr), path, method, "
                 "header:NAME, or any field name (remote_addr,path); default client");
  std::string cost_field;
  app.add_option("--cost-field", cost_field, "Access logs and JSON: a field holding each request's cost");
  app.add_flag("--request-start", o.trace.fields.request_start,
               "Access logs and JSON: time = logged time - $request_time (%D, %T): when the "
               "request arrived (nginx logs it when it ends); combine with --unsorted=sort");
  std::string json_fields;
  app.add_option("--json-fields", json_fields,
                 "JSON lines: NAME=MEMBER,... e.g. time=ts,remote_addr=client.ip (dots walk into "
                 "objects)");
  std::string time_unit = "s";
  app.add_option("--time-unit", time_unit, "JSON lines: unit of a numeric time: s, ms, us or ns")
      ->capture_default_str();
  std::string spread;
  auto* spread_opt =
      app.add_option("--spread", spread,
                     "Space requests that share one timestamp evenly over this span (default 1s; "
                     "never past the next timestamp): an approximation for one-second logs")
          ->expected(0, 1);
  bool skip_bad = false;
  bool strict = false;
  auto* skip_opt = app.add_flag("--skip-bad", skip_bad,
                                "Skip any number of malformed trace lines (counted); by default a "
                                "few are skipped, but a bad first line or more than 1% bad fails");
  app.add_flag("--strict", strict, "Stop at the first malformed trace line")->excludes(skip_opt);
  app.add_option("--unsorted", unsorted,
                 "Timestamps going backwards: reject (stop with the line number) or sort (read "
                 "the trace into memory, ~16 bytes a line plus each distinct key, and sort it)")
      ->capture_default_str();

  app.add_option("--limit", o.policy.window_limit,
                 "Requests per window: fixed_window, sliding_window_log, sliding_window_counter")
      ->capture_default_str();
  app.add_option("--window", window, "Their window (1s, 500ms, 1m or seconds)")->capture_default_str();
  app.add_option("--token-rate", o.policy.token_rate, "token_bucket refill rate per second")
      ->capture_default_str();
  app.add_option("--token-burst", o.policy.token_burst, "token_bucket capacity")
      ->capture_default_str();
  app.add_option("--token-fill", token_fill,
                 "Tokens in each token bucket at the start: full, empty or a number (default: "
                 "empty for pattern C, full otherwise)")
      ->capture_default_str();
  app.add_option("--leaky-rate", o.policy.leaky_rate, "leaky_bucket leak rate per second")
      ->capture_default_str();
  app.add_option("--leaky-burst", o.policy.leaky_burst, "leaky_bucket capacity")
      ->capture_default_str();
  app.add_option("--leaky-mode", leaky_mode, "leaky_bucket mode: police or shape")
      ->capture_default_str();

  std::string seed = "42";
  app.add_option("--seed", seed,
                 "Pattern A: Python random.Random seed (an integer; like Python, -n is n)")
      ->capture_default_str();
  app.add_option("--poisson-rate", o.pattern.poisson_rate, "Pattern A: requests per second")
      ->capture_default_str();
  app.add_option("--poisson-duration", o.pattern.poisson_duration_s, "Pattern A: seconds")
      ->capture_default_str();
  app.add_option("--burst-size", o.pattern.burst_size, "Pattern B: requests in the burst")
      ->capture_default_str();
  app.add_option("--burst-start", o.pattern.burst_start_s, "Pattern B: first request (seconds)")
      ->capture_default_str();
  app.add_option("--burst-span", o.pattern.burst_span_s,
                 "Pattern B: request i arrives at start + i * span / size (seconds)")
      ->capture_default_str();

  int64_t concurrency = 0;
  auto* concurrency_opt = app.add_option(
      "--concurrency", concurrency,
      "Also run a concurrency policy: at most this many requests of a key in flight (each holds "
      "for its duration: the trace's $request_time/%D/%T, else --hold)");
  std::string hold = "100ms", lease_ttl = "30s", max_wait;
  app.add_option("--hold", hold, "Throttling: how long a request lasts when the trace does not say")
      ->capture_default_str();
  app.add_option("--lease-ttl", lease_ttl,
                 "Throttling: a concurrency lease's lifetime (a holder lasting longer loses it)")
      ->capture_default_str();
  app.add_option("--max-wait", max_wait,
                 "Throttling: a request that would be denied waits up to this long in a FIFO per "
                 "key (a rate policy until its retry_after, a concurrency policy until a lease "
                 "frees), then is decided again; default: no waiting");
  app.add_option("--max-queue", o.throttle.max_queue,
                 "Throttling: requests waiting per key at most (more are refused at once)")
      ->capture_default_str();
  auto& dist = o.distributed;
  app.add_option("--instances", dist.instances,
                 "Distributed model: ratelimitd instances sharing the fixed_window and "
                 "sliding_window_counter limits (requests round-robin); compares exact, lease, "
                 "async and regions")
      ->capture_default_str();
  app.add_option("--regions", dist.regions,
                 "Distributed model: regions (instance i in region i % R); exact, lease and async "
                 "use one store in region 0, regions one store each")
      ->capture_default_str();
  std::string rtt = "1ms", cross_rtt = "50ms", sync_interval = "100ms", slice_ttl = "1s";
  app.add_option("--rtt", rtt, "Distributed model: round trip instance <-> store in its region")
      ->capture_default_str();
  app.add_option("--cross-rtt", cross_rtt, "Distributed model: round trip between regions")
      ->capture_default_str();
  app.add_option("--sync-interval", sync_interval,
                 "Distributed model: async pushes, lease give-backs, region exchanges")
      ->capture_default_str();
  app.add_option("--lease-max", dist.lease_max,
                 "Distributed model: the most units of one lease slice (0: max(1, limit / 20))")
      ->capture_default_str();
  app.add_option("--slice-ttl", slice_ttl,
                 "Distributed model: a lease slice's longest life (the policy's lease_ttl)")
      ->capture_default_str();
  app.add_option("--peak-window", peak_window,
                 "Window for 'peak admitted' for every algorithm (default: each policy's own; "
                 "for buckets burst/rate)");
  app.add_option("-f,--format", format, "Output: table, json or csv")->capture_default_str();
  app.add_option("--top", o.top_keys, "Rows of the top-keys table (keys with most requests)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{10'000}));
  app.add_option("--svg", svg, "Also write an SVG chart of the run to this file");
  std::string html;
  app.add_option("--html", html,
                 "Also write one self-contained HTML report (every run's tables and chart, "
                 "nothing fetched) to this file");
  app.add_option("--bar-width", bar_width,
                 "Charts: the interval one bar counts, at least this (auto: about 3 px)")
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(std::string(e.what()) + " (see --help)");
  }

  if (!trace.empty()) {
    o.trace_path = trace;
  } else if (pattern == "all" || pattern == "ALL") {
    o.patterns = {'A', 'B', 'C'};
  } else if (pattern.size() == 1) {
    o.patterns = {static_cast<char>(std::toupper(static_cast<unsigned char>(pattern[0])))};
    if (o.patterns[0] < 'A' || o.patterns[0] > 'C') {
      return fail("--pattern: expected A, B, C or all, got '" + pattern + "'");
    }
  } else {
    return fail("--pattern: expected A, B, C or all, got '" + pattern + "'");
  }
  {
    // Python seeds with abs(n); any magnitude below 2^64 is supported.
    const char* begin = seed.data() + (!seed.empty() && seed[0] == '-' ? 1 : 0);
    const char* end = seed.data() + seed.size();
    auto [ptr, ec] = std::from_chars(begin, end, o.pattern.seed);
    if (ec != std::errc() || ptr != end || begin == end) {
      return fail("--seed: expected an integer below 2^64 in magnitude, got '" + seed + "'");
    }
  }
  auto tf = sim::parse_trace_format(trace_format);
  if (!tf) return fail("--trace-format: " + tf.status().message());
  o.trace.format = *tf;
  if (!log_format.empty()) {
    if (o.trace.format != sim::TraceFormat::kAuto && o.trace.format != sim::TraceFormat::kLog) {
      return fail("--log-format describes the lines itself: leave out --trace-format");
    }
    o.trace.log_format = log_format;
  }
  if (!key.empty()) {
    auto k = sim::parse_key_list(key);
    if (!k) return fail(k.status().message());
    o.trace.fields.key = *k;
    o.trace.fields_given = true;
  }
  if (!cost_field.empty()) {
    o.trace.fields.cost_field = cost_field;
    o.trace.fields_given = true;
  }
  if (o.trace.fields.request_start) o.trace.fields_given = true;
  if (!json_fields.empty()) {
    auto j = sim::parse_json_fields(json_fields);
    if (!j) return fail(j.status().message());
    o.trace.fields.json_fields = *j;
  }
  auto tu = sim::parse_time_unit(time_unit);
  if (!tu) return fail(tu.status().message());
  o.trace.fields.json_time_unit = *tu;
  if (spread_opt->count() > 0) {
    auto sp = parse_duration_flag("--spread", spread.empty() ? "1s" : spread);
    if (!sp) return fail(sp.status().message());
    o.spread = *sp;
  }
  o.bad_lines = skip_bad ? sim::BadLines::kSkipAll
                : strict ? sim::BadLines::kFail
                         : sim::BadLines::kSkipFew;
  auto us = sim::parse_unsorted(unsorted);
  if (!us) return fail(us.status().message());
  o.unsorted = *us;
  auto w = parse_duration_flag("--window", window);
  if (!w) return fail(w.status().message());
  o.policy.window = *w;
  if (leaky_mode == "police") {
    o.policy.leaky_mode = ratelimit::LeakyMode::kPolice;
  } else if (leaky_mode == "shape") {
    o.policy.leaky_mode = ratelimit::LeakyMode::kShape;
  } else {
    return fail("--leaky-mode: expected police or shape, got '" + leaky_mode + "'");
  }
  if (token_fill != "default") {
    auto fill = sim::parse_token_fill(token_fill);
    if (!fill) return fail(fill.status().message());
    o.token_fill = *fill;
  }
  if (!peak_window.empty()) {
    auto p = parse_duration_flag("--peak-window", peak_window);
    if (!p) return fail(p.status().message());
    o.peak_window = *p;
  }
  if (concurrency_opt->count() > 0) o.throttle.concurrency = concurrency;
  for (auto [flag, text, out] : {std::tuple{"--hold", &hold, &o.throttle.hold},
                                 std::tuple{"--lease-ttl", &lease_ttl, &o.throttle.lease_ttl},
                                 std::tuple{"--max-wait", &max_wait, &o.throttle.max_wait},
                                 std::tuple{"--rtt", &rtt, &dist.rtt},
                                 std::tuple{"--cross-rtt", &cross_rtt, &dist.cross_rtt},
                                 std::tuple{"--sync-interval", &sync_interval, &dist.sync_interval},
                                 std::tuple{"--slice-ttl", &slice_ttl, &dist.slice_ttl}}) {
    if (text->empty()) continue;
    if (*text == "0" || *text == "0s" || *text == "0ms") {
      *out = Micros{0};
      continue;
    }
    auto d = parse_duration_flag(flag, *text);
    if (!d) return fail(d.status().message());
    *out = *d;
  }
  if (bar_width != "auto") {
    auto bw = parse_duration_flag("--bar-width", bar_width);
    if (!bw) return fail(bw.status().message());
    o.bar_width = *bw;
  }
  auto f = sim::parse_output_format(format);
  if (!f) return fail("--format: " + f.status().message());
  o.format = *f;
  if (!svg.empty()) o.svg_path = svg;
  if (!html.empty()) o.html_path = html;
  o.show_progress = isatty(STDERR_FILENO) != 0;

  return sim::run(o, std::cout, std::cerr);
}
