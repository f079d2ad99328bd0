// bounded_yaml.h — the one check every YAML configuration reader runs before it lets yaml-cpp
// build a document: ratelimitd's own file (src/server/config.cc), envoyproxy/ratelimit rule
// files and `domains:` (src/rls/rule_set_load.cc, and through it the watched directory and
// `--envoy-env --check`).
//
// Why: yaml-cpp keeps an alias as a second reference to its anchor's node, so a document is
// small in memory however its aliases nest — but anything that walks it (checking keys,
// rendering `metadata` as JSON) expands every alias, and nine levels of nine aliases (a
// 666-byte file) are 9^9 nodes: issue 23 measured 490 MB in 25 s, and a running server that
// kept re-reading such a file in its watched directory grew 14 MB/s. yaml-cpp also recurses
// once per nesting level with no bound of its own (a million '[' overflowed the stack).
// What: check_yaml_bounds() runs yaml-cpp's own event parser over the text (linear time, memory
// bounded by the anchors' sizes) and counts, for the first document (the one YAML::Load
// builds): nesting depth, nodes as written, aliases, and the nodes and scalar bytes the
// document expands to with every alias replaced by its anchor's content. Exceeding any bound
// stops the scan at once (nothing is expanded) and names the line. A document within the
// bounds can be walked fully at a cost proportional to YamlBounds::max_expanded_nodes.
// Syntax errors are left to YAML::Load (the caller's message for them stays as it was).
// Thread-safety: a pure function.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ratelimit::yaml {

struct YamlBounds {
  size_t max_depth = 64;                    // nested collections
  size_t max_nodes = 1'000'000;             // scalars, collections and aliases as written
  size_t max_aliases = 10'000;              // `*name` references
  size_t max_expanded_nodes = 1'000'000;    // nodes with every alias expanded
  size_t max_expanded_bytes = 16u << 20;    // scalar bytes with every alias expanded
};

struct YamlRefusal {
  int line = 1;        // 1-based line where the bound was crossed
  std::string reason;  // e.g. "YAML aliases expand to more than 1000000 nodes"
};

// nullopt when `text` is within `bounds` (or is not valid YAML: YAML::Load will say why);
// otherwise where and why it is refused. The caller prefixes its file name.
std::optional<YamlRefusal> check_yaml_bounds(std::string_view text, const YamlBounds& bounds = {});

}  // namespace ratelimit::yaml
