// config_fuzz.cc — libFuzzer target for the YAML configuration loader (parse_config): any
// text must give a Config or a "file:line: reason" error, never a crash or an exception. A
// Config serves something: policies, or Envoy's descriptor rules (domains) or RLQS rules on the
// gRPC port (a config with only rlqs: has no policies).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto c = ratelimit::server::parse_config(in, "fuzz.yaml");
  if (c.ok()) {
    if (c->policies.empty() && !c->domains && !c->rlqs) std::abort();
  } else if (c.status().message().rfind("fuzz.yaml:", 0) != 0) {
    std::abort();
  }
  return 0;
}
