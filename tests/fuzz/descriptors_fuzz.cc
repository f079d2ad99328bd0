// descriptors_fuzz.cc — libFuzzer target for the envoyproxy/ratelimit descriptor loader and
// matcher (src/rls/rule_set): any bytes, split on NUL into up to four files (the first byte's
// low bit turns MERGE_DOMAIN_CONFIG on), must give a RuleSet or a "fuzzN.yaml:line: reason"
// error — never a crash, an exception or a leak — and a loaded set must resolve descriptors
// built from its own rule keys without failing.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "rule_set.h"

using namespace ratelimit::rls;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  LoadOptions options;
  if (!in.empty()) options.merge_domains = (static_cast<unsigned char>(in[0]) & 1) != 0;
  std::vector<SourceFile> files;
  while (files.size() < 4) {
    const size_t nul = in.find('\0');
    files.push_back({"fuzz" + std::to_string(files.size()) + ".yaml", std::string(in.substr(0, nul))});
    if (nul == std::string_view::npos) break;
    in.remove_prefix(nul + 1);
  }
  auto set = RuleSet::load(files, options);
  if (!set.ok()) {
    if (set.status().message().rfind("fuzz", 0) != 0) std::abort();
    return 0;
  }
  const RuleSet& rs = **set;
  (void)rs.dump();
  // Probe with each rule's own composite key: "domain.k_v.k2" -> entries (k, v), (k2, "").
  for (const auto& rule : rs.rules()) {
    const std::string& key = rule->full_key;
    const size_t dot = key.find('.');
    if (dot == std::string::npos) std::abort();
    const std::string domain = key.substr(0, dot);
    // A domain may itself contain '.', and then this split of the composite key is not the
    // rule's domain: nothing below would be a meaningful probe.
    if (!rs.has_domain(domain)) continue;
    std::vector<std::string> parts;
    for (size_t from = dot + 1;;) {
      const size_t next = key.find('.', from);
      parts.push_back(key.substr(from, next == std::string::npos ? std::string::npos : next - from));
      if (next == std::string::npos) break;
      from = next + 1;
    }
    std::vector<std::string> keys, values;
    for (const std::string& p : parts) {
      const size_t us = p.find('_');
      keys.push_back(us == std::string::npos ? p : p.substr(0, us));
      values.push_back(us == std::string::npos ? "" : p.substr(us + 1));
    }
    std::vector<Entry> entries;
    for (size_t i = 0; i < keys.size(); ++i) entries.push_back({keys[i], values[i]});
    std::vector<Descriptor> descriptors{{entries, std::nullopt},
                                        {entries, LimitOverride{3, 2}}};
    std::vector<Applied> out;
    ratelimit::Status s = rs.resolve(domain, descriptors, out);
    if (s.is_ok() && out.size() != descriptors.size()) std::abort();
    if (s.is_ok() && out[1].rule() == nullptr) std::abort();  // an override always applies
  }
  return 0;
}
