// svg_distributed.h — the distributed model's trade-off as a chart (beside its table in the HTML
// report): per algorithm and mode, the worst window's error against exact (under to the left,
// over to the right, the documented bound marked), the store calls per decision and the p99
// decision latency, as horizontal bars on shared scales.
// Why: "exact counting and low latency are a trade-off" reads at a glance when the error and the
// cost sit side by side; the table holds the same numbers exactly.
// Invariants: a self-contained <svg> (no script, no external reference); every number drawn is
// also printed as text; scales start at 0 and are shared by every row of a panel.
#pragma once

#include <string>

#include "distributed_types.h"

namespace ratelimit::sim {

std::string render_distributed_svg(const DistributedReport& report);

}  // namespace ratelimit::sim
