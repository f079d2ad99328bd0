// render.cc — the table and CSV outputs (JSON is in render_json.cc, the SVG chart in svg.cc).
// See render.h.
#include "render.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "timestamps.h"

namespace ratelimit::sim {
namespace {

constexpr size_t kLeakyBucket = 4;

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string fill_text(const Report& r) {
  if (!r.token_fill) return "full";
  return num(*r.token_fill) + (*r.token_fill == 1 ? " token" : " tokens");
}

bool has_marked(const Report& r) {
  return !r.algorithms.empty() && r.algorithms.front().marked_requests > 0;
}

std::string pad(std::string s, size_t width, bool right) {
  if (s.size() >= width) return s;
  const std::string fill(width - s.size(), ' ');
  return right ? fill + s : s + fill;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// Runs whose times are Unix epoch times (a trace) read better as dates; a pattern's times
// start at 0.
bool absolute_times(const Report& r) { return r.first_us >= kEpochTimesFromUs; }

// Lays out rows (the first is the header) in columns; columns from `first_numeric` on are
// right-aligned.
std::string columns(const std::vector<std::vector<std::string>>& rows, size_t first_numeric) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) line += "  ";
      line += pad(row[i], width[i], i >= first_numeric);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::string format_instant(const Report& r, int64_t t_us) {
  if (!absolute_times(r)) return format_seconds(t_us) + " s";
  return format_rfc3339(t_us) + " (+" + format_seconds(t_us - r.first_us) + " s)";
}

Result<OutputFormat> parse_output_format(std::string_view name) {
  if (name == "table") return OutputFormat::kTable;
  if (name == "json") return OutputFormat::kJson;
  if (name == "csv") return OutputFormat::kCsv;
  return Status::invalid_argument("unknown output format '" + std::string(name) +
                                  "' (expected table, json or csv)");
}

std::vector<std::string> summary_lines(const Report& r) {
  std::vector<std::string> lines;
  std::string first = std::to_string(r.requests) + " requests";
  if (r.requests > 0) {
    first += " from " + format_instant(r, r.first_us) + " to " + format_instant(r, r.last_us);
  }
  first += "; token bucket starts " + (r.token_fill ? "with " + fill_text(r) : std::string("full"));
  if (r.token_fill) first += " at " + format_instant(r, r.start_us);
  lines.push_back(first);
  if (r.resolution_us > 0) {
    std::string res = "time resolution " + format_duration(Micros{r.resolution_us});
    if (r.spread_us > 0) {
      res += "; --spread " + format_duration(Micros{r.spread_us}) +
             ": same-stamp requests spaced evenly (an approximation)";
    }
    lines.push_back(res);
  }
  if (r.skipped_lines > 0) {
    lines.push_back("skipped " + std::to_string(r.skipped_lines) + " malformed line" +
                    (r.skipped_lines == 1 ? "" : "s") + " (first ones on stderr)");
  }
  for (const std::string& n : r.notices) lines.push_back("warning: " + n);
  return lines;
}

std::vector<std::vector<std::string>> algorithm_rows(const Report& r) {
  const bool marked = has_marked(r);
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"algorithm",     "policy",      "offered", "admitted",
                                     "denied",        "clients limited", "peak admitted",
                                     "peak per key"};
  if (marked) header.emplace_back("attack admitted");
  rows.push_back(header);
  for (const AlgorithmResult& a : r.algorithms) {
    std::vector<std::string> row = {
        algorithm_name(a.policy.algorithm()),
        describe_policy(a.policy),
        std::to_string(a.requests),
        std::to_string(a.admitted),
        std::to_string(a.denied),
        std::to_string(a.clients_limited),
        std::to_string(a.peak_admitted) + " in " + format_duration(a.peak_window),
        std::to_string(a.peak_admitted_per_key)};
    if (marked) {
      row.push_back(std::to_string(a.marked_admitted) + " of " + std::to_string(a.marked_requests));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string departures_line(const Report& r) {
  if (r.algorithms.size() <= kLeakyBucket) return "";
  const AlgorithmResult& leaky = r.algorithms[kLeakyBucket];
  if (leaky.departures == 0) return "";
  std::string out = "leaky_bucket departures (now + level/rate): " +
                    std::to_string(leaky.departures) + " from " +
                    format_instant(r, leaky.first_departure_us) + " to " +
                    format_instant(r, leaky.last_departure_us) + " (span " +
                    format_seconds(leaky.last_departure_us - leaky.first_departure_us) + " s)";
  if (static_cast<size_t>(leaky.departures) <= kMaxListedDepartures &&
      leaky.departure_list_us.size() == static_cast<size_t>(leaky.departures)) {
    const bool absolute = absolute_times(r);
    out += absolute ? ", seconds after the first request:" : ":";
    for (int64_t d : leaky.departure_list_us) {
      out += " " + format_seconds(absolute ? d - r.first_us : d);
    }
  }
  return out;
}

std::string top_keys_heading(const Report& r) {
  std::string out = "top " + std::to_string(r.top_keys.size()) +
                    " keys by requests offered: admitted by each algorithm (in brackets: the "
                    "most admitted within one window)";
  if (r.top_keys_error > 0) {
    out += "; approximate: counts may miss up to " + std::to_string(r.top_keys_error) + " requests";
  }
  return out;
}

std::vector<std::vector<std::string>> top_key_rows(const Report& r) {
  std::vector<std::vector<std::string>> keys;
  std::vector<std::string> head = {"key", "offered"};
  for (const AlgorithmResult& a : r.algorithms) head.emplace_back(algorithm_name(a.policy.algorithm()));
  keys.push_back(head);
  for (const KeyRow& k : r.top_keys) {
    std::vector<std::string> row = {printable(k.key, 40), std::to_string(k.offered)};
    for (size_t i = 0; i < r.algorithms.size(); ++i) {
      row.push_back(std::to_string(k.admitted[i]) + " (" + std::to_string(k.peak[i]) + ")");
    }
    keys.push_back(std::move(row));
  }
  return keys;
}

std::string throttle_heading(const Report& r) {
  if (!r.throttle) return "";
  const ThrottleOptions& o = r.throttle->options;
  std::string s = "throttling: each request holds " + format_duration(o.hold);
  if (r.throttle->durations_from_trace > 0) {
    s += " unless the trace gives its duration (" + std::to_string(r.throttle->durations_from_trace) +
         " did)";
  }
  if (o.concurrency) {
    s += "; concurrency " + std::to_string(*o.concurrency) + " in flight per key (lease_ttl " +
         format_duration(o.lease_ttl) + ")";
  }
  s += o.max_wait.count() > 0 ? "; a denied request waits up to " + format_duration(o.max_wait) +
                                    ", at most " + std::to_string(o.max_queue) + " waiting per key"
                              : "; no waiting (a denied request is refused at once)";
  return s;
}

std::vector<std::vector<std::string>> throttle_rows(const Report& r) {
  std::vector<std::vector<std::string>> rows = {
      {"algorithm", "policy", "offered", "at once", "after wait", "refused", "queue full",
       "timed out", "wait p50", "wait p99", "wait max", "mean wait", "in flight", "per key",
       "queue"}};
  if (!r.throttle) return rows;
  // Waits in milliseconds to 0.1 ms: comparable down a column.
  auto ms = [](int64_t us) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1fms", static_cast<double>(us) / 1e3);
    return std::string(buf);
  };
  auto wait = [&](const ThrottleResult& t, int64_t us) {
    return t.admitted_after_wait > 0 ? ms(us) : std::string("-");
  };
  for (const ThrottleResult& t : r.throttle->results) {
    rows.push_back({t.algorithm, t.policy, std::to_string(t.offered),
                    std::to_string(t.admitted_at_once), std::to_string(t.admitted_after_wait),
                    std::to_string(t.refused), std::to_string(t.refused_queue_full),
                    std::to_string(t.refused_timed_out), wait(t, t.wait_p50_us),
                    wait(t, t.wait_p99_us), wait(t, t.wait_max_us),
                    ms(t.wait_mean_us), std::to_string(t.peak_in_flight),
                    std::to_string(t.peak_in_flight_per_key), std::to_string(t.peak_queue)});
  }
  return rows;
}

std::string distributed_heading(const Report& r) {
  if (!r.distributed) return "";
  const DistributedOptions& o = r.distributed->options;
  return "distributed: " + std::to_string(o.instances) + " instances (requests round-robin), " +
         std::to_string(o.regions) + (o.regions == 1 ? " region" : " regions") + ", rtt " +
         format_duration(o.rtt) + (o.regions > 1 ? ", cross-region rtt " + format_duration(o.cross_rtt) : "") +
         ", sync_interval " + format_duration(o.sync_interval) + ", lease_max " +
         (o.lease_max > 0 ? std::to_string(o.lease_max) : std::string("default")) + ", slice ttl " +
         format_duration(o.slice_ttl) + "; over/under: requests decided otherwise than exact";
}

std::vector<std::vector<std::string>> distributed_rows(const Report& r) {
  std::vector<std::vector<std::string>> rows = {
      {"algorithm", "mode", "admitted", "exact", "over", "under", "window over", "window under",
       "bound", "store calls/decision", "latency p50", "latency p99"}};
  if (!r.distributed) return rows;
  auto ms = [](int64_t us) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1fms", static_cast<double>(us) / 1e3);
    return std::string(buf);
  };
  for (const DistributedResult& d : r.distributed->results) {
    char calls[32];
    std::snprintf(calls, sizeof calls, "%.3f",
                  d.decisions > 0 ? static_cast<double>(d.store_calls) / static_cast<double>(d.decisions) : 0.0);
    const std::string bound = d.bound < 0 ? "-"
                              : d.mode == "lease" ? "under <= " + std::to_string(d.bound)
                                                  : "over <= " + std::to_string(d.bound);
    rows.push_back({d.algorithm, d.mode, std::to_string(d.admitted), std::to_string(d.exact_admitted),
                    std::to_string(d.over), std::to_string(d.under), std::to_string(d.worst_window_over),
                    std::to_string(d.worst_window_under), d.mode == "exact" ? "-" : bound, calls,
                    ms(d.latency_p50_us), ms(d.latency_p99_us)});
  }
  return rows;
}

std::string render_table(const std::vector<Report>& reports) {
  std::ostringstream out;
  bool first = true;
  for (const Report& r : reports) {
    if (!first) out << "\n";
    first = false;
    out << r.title << ": " << r.description << "\n";
    for (const std::string& line : summary_lines(r)) out << line << "\n";
    out << columns(algorithm_rows(r), 2);
    if (const std::string d = departures_line(r); !d.empty()) out << d << "\n";
    if (r.top_keys.size() > 1) out << top_keys_heading(r) << "\n" << columns(top_key_rows(r), 1);
    if (r.throttle) out << throttle_heading(r) << "\n" << columns(throttle_rows(r), 2);
    if (r.distributed) out << distributed_heading(r) << "\n" << columns(distributed_rows(r), 2);
  }
  return out.str();
}

std::string render_csv(const std::vector<Report>& reports) {
  std::ostringstream out;
  out << "run,algorithm,policy,requests,admitted,denied,clients_limited,peak_admitted,"
         "peak_window_us,attack_requests,attack_admitted,departures,first_departure_us,"
         "last_departure_us,peak_admitted_per_key\n";
  for (const Report& r : reports) {
    for (const AlgorithmResult& a : r.algorithms) {
      const bool leaky = a.policy.algorithm() == Algorithm::kLeakyBucket;
      out << csv_field(r.title) << "," << algorithm_name(a.policy.algorithm()) << ","
          << csv_field(describe_policy(a.policy)) << "," << a.requests << "," << a.admitted
          << "," << a.denied << "," << a.clients_limited << "," << a.peak_admitted << ","
          << a.peak_window.count() << "," << a.marked_requests << "," << a.marked_admitted
          << ",";
      if (leaky) {
        out << a.departures << "," << a.first_departure_us << "," << a.last_departure_us;
      } else {
        out << ",,";
      }
      out << "," << a.peak_admitted_per_key << "\n";
    }
  }
  return out.str();
}

std::string xml_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t') out += c;
    }
  }
  return out;
}

}  // namespace ratelimit::sim
