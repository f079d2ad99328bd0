// run.h — one ratelimit-sim invocation, from parsed options to printed output and exit code.
//
// Why a library function: tools/sim/main.cc only turns flags into RunOptions; everything that
// can go wrong (bad parameters, unreadable or malformed traces, time going backwards, an SVG
// that cannot be written) is handled here as an error value, reported on `err` with a clear
// message, and mapped to exit code 2 — and the tests can drive it without a process.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "patterns.h"
#include "render.h"
#include "replay.h"
#include "trace.h"

namespace ratelimit::sim {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 2;  // bad parameters or input: fix them and run again

// What the token bucket holds when the run starts.
struct TokenFill {
  enum class Mode : uint8_t {
    kPatternDefault,  // pattern C starts empty, A, B and traces full
    kFull,
    kTokens,
  };
  Mode mode = Mode::kPatternDefault;
  double tokens = 0;  // for kTokens
};
// "full", "empty" or a number of tokens ("5", "2.5").
Result<TokenFill> parse_token_fill(std::string_view text);

// How to treat a trace whose timestamps go backwards.
enum class Unsorted : uint8_t {
  kReject,  // stop with the line number (default)
  kSort,    // read the whole trace into memory (about 16 bytes per line plus each distinct
            // key once; up to twice that while the buffer grows), sort it by time (stable:
            // equal times keep file order), then replay
};
Result<Unsorted> parse_unsorted(std::string_view text);

// What to do with a trace line that does not parse. Every skipped line is counted in the
// report and the first few are shown, with their line numbers, on stderr.
enum class BadLines : uint8_t {
  kSkipFew,  // default: skip, but fail if the first request line is bad (the format is
             // wrong) or if more than kMaxBadFraction of the lines are (the result would not
             // describe the traffic)
  kSkipAll,  // --skip-bad: skip any number
  kFail,     // --strict: stop at the first
};
inline constexpr double kMaxBadFraction = 0.01;

struct RunOptions {
  std::vector<char> patterns = {'A', 'B', 'C'};  // ignored when trace_path is set
  std::optional<std::string> trace_path;         // "-" reads standard input
  TraceSpec trace;                               // format, --log-format, --key, ...
  BadLines bad_lines = BadLines::kSkipFew;
  Unsorted unsorted = Unsorted::kReject;
  // --spread: requests sharing one timestamp are spaced evenly over this span (capped at the
  // next distinct timestamp, so order is kept) — an approximation for logs with coarse
  // stamps, not a recovery of the real times.
  std::optional<Micros> spread;
  PolicyParams policy;
  PatternParams pattern;
  TokenFill token_fill;
  ThrottleOptions throttle;  // --concurrency, --hold, --lease-ttl, --max-wait, --max-queue
  DistributedOptions distributed;  // --instances, --regions, --rtt, --cross-rtt, --sync-interval,
                                   // --lease-max, --slice-ttl
  std::optional<Micros> peak_window;  // nullopt: each policy's window()
  size_t top_keys = 10;               // rows of the top-keys table (--top)
  OutputFormat format = OutputFormat::kTable;
  std::optional<std::string> svg_path;
  std::optional<std::string> html_path;  // --html: every run's summary, tables and chart
  Micros bar_width{0};  // --bar-width: the charts' interval, at least this; 0 = from the run's length
  bool show_progress = false;     // main sets it when stderr is a terminal
};

// Progress of a trace run: lines read so far, bytes read, file size (0 if unknown).
using ProgressFn = std::function<void(int64_t lines, uint64_t bytes, uint64_t total_bytes)>;

// The progress line shown on a terminal: lines read, percent of the file, rate and the time
// left (the last two once time has passed; the time left only when the size is known).
std::string progress_line(int64_t lines, uint64_t bytes, uint64_t total_bytes, double elapsed_s);

// Runs every requested pattern (or the trace) and returns one Report each. `progress`, if
// set, is called every few thousand trace lines.
Result<std::vector<Report>> simulate(const RunOptions& options, const ProgressFn& progress = {});

// simulate(), then writes the chosen format to `out` and the SVG file; messages to `err`.
// Returns kExitOk or kExitUsage.
int run(const RunOptions& options, std::ostream& out, std::ostream& err);

}  // namespace ratelimit::sim
