// render.cc — the table, JSON and CSV outputs (the SVG chart is in svg.cc). See render.h.
#include "render.h"

#include <algorithm>
#include <nlohmann/json.hpp>
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

}  // namespace

Result<OutputFormat> parse_output_format(std::string_view name) {
  if (name == "table") return OutputFormat::kTable;
  if (name == "json") return OutputFormat::kJson;
  if (name == "csv") return OutputFormat::kCsv;
  return Status::invalid_argument("unknown output format '" + std::string(name) +
                                  "' (expected table, json or csv)");
}

std::string render_table(const std::vector<Report>& reports) {
  std::ostringstream out;
  bool first = true;
  for (const Report& r : reports) {
    if (!first) out << "\n";
    first = false;
    out << r.title << ": " << r.description << "\n";
    out << r.requests << " requests";
    if (r.requests > 0) {
      out << " from " << format_seconds(r.first_us) << " s to " << format_seconds(r.last_us)
          << " s";
    }
    out << "; token bucket starts " << (r.token_fill ? "with " + fill_text(r) : "full");
    if (r.token_fill) out << " at " << format_seconds(r.start_us) << " s";
    out << "\n";
    if (r.resolution_us > 0) {
      out << "time resolution " << format_duration(Micros{r.resolution_us});
      if (r.spread_us > 0) {
        out << "; --spread " << format_duration(Micros{r.spread_us})
            << ": same-stamp requests spaced evenly (an approximation)";
      }
      out << "\n";
    }
    if (r.skipped_lines > 0) {
      out << "skipped " << r.skipped_lines << " malformed line"
          << (r.skipped_lines == 1 ? "" : "s") << " (first ones on stderr)\n";
    }
    for (const std::string& n : r.notices) out << "warning: " << n << "\n";
    const bool marked = has_marked(r);
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> header = {"algorithm", "policy",          "requests",
                                       "admitted",  "denied",          "clients limited",
                                       "peak admitted"};
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
          std::to_string(a.peak_admitted) + " in " + format_duration(a.peak_window)};
      if (marked) {
        row.push_back(std::to_string(a.marked_admitted) + " of " +
                      std::to_string(a.marked_requests));
      }
      rows.push_back(std::move(row));
    }
    std::vector<size_t> width(header.size(), 0);
    for (const auto& row : rows) {
      for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
    }
    for (const auto& row : rows) {
      std::string line;
      for (size_t i = 0; i < row.size(); ++i) {
        if (i > 0) line += "  ";
        line += pad(row[i], width[i], i >= 2);
      }
      out << line << "\n";
    }
    if (r.algorithms.size() > kLeakyBucket) {
      const AlgorithmResult& leaky = r.algorithms[kLeakyBucket];
      if (leaky.departures > 0) {
        out << "leaky_bucket departures (now + level/rate): " << leaky.departures << " from "
            << format_seconds(leaky.first_departure_us) << " s to "
            << format_seconds(leaky.last_departure_us) << " s (span "
            << format_seconds(leaky.last_departure_us - leaky.first_departure_us) << " s)";
        if (static_cast<size_t>(leaky.departures) <= kMaxListedDepartures &&
            leaky.departure_list_us.size() == static_cast<size_t>(leaky.departures)) {
          out << ":";
          for (int64_t d : leaky.departure_list_us) out << " " << format_seconds(d);
        }
        out << "\n";
      }
    }
  }
  return out.str();
}

std::string render_json(const std::vector<Report>& reports) {
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  for (const Report& r : reports) {
    nlohmann::ordered_json run;
    run["run"] = r.title;
    run["description"] = r.description;
    run["requests"] = r.requests;
    run["first_us"] = r.first_us;
    run["last_us"] = r.last_us;
    run["start_us"] = r.start_us;
    if (r.token_fill) run["token_fill"] = *r.token_fill;
    else run["token_fill"] = "full";
    run["skipped_lines"] = r.skipped_lines;
    run["resolution_us"] = r.resolution_us;
    run["spread_us"] = r.spread_us;
    run["missing_key_parts"] = r.missing_key_parts;
    run["notices"] = r.notices;
    nlohmann::ordered_json algs = nlohmann::ordered_json::array();
    for (const AlgorithmResult& a : r.algorithms) {
      nlohmann::ordered_json j;
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
      j["peak_window_us"] = a.peak_window.count();
      j["attack_requests"] = a.marked_requests;
      j["attack_admitted"] = a.marked_admitted;
      if (a.policy.algorithm() == Algorithm::kLeakyBucket) {
        nlohmann::ordered_json d;
        d["count"] = a.departures;
        d["first_us"] = a.first_departure_us;
        d["last_us"] = a.last_departure_us;
        d["span_us"] = a.last_departure_us - a.first_departure_us;
        d["times_us"] = a.departure_list_us;
        j["departures"] = std::move(d);
      }
      algs.push_back(std::move(j));
    }
    run["algorithms"] = std::move(algs);
    runs.push_back(std::move(run));
  }
  nlohmann::ordered_json doc;
  doc["runs"] = std::move(runs);
  return doc.dump(2) + "\n";
}

std::string render_csv(const std::vector<Report>& reports) {
  std::ostringstream out;
  out << "run,algorithm,policy,requests,admitted,denied,clients_limited,peak_admitted,"
         "peak_window_us,attack_requests,attack_admitted,departures,first_departure_us,"
         "last_departure_us\n";
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
      out << "\n";
    }
  }
  return out.str();
}

}  // namespace ratelimit::sim
