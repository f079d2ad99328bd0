// rls_json_fuzz.cc — libFuzzer target for the body of --envoy-env's POST /json (src/rls/rls_json):
// any bytes must give a RateLimitRequest within the bounds (at most kMaxDescriptors descriptors,
// kMaxEntries entries each) or a kInvalidArgument error — never a crash, an
// exception or a leak; a parsed request's echo as a response renders as valid JSON text.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "rls_json.h"

using namespace ratelimit;
using namespace ratelimit::rls;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  RateLimitRequest r;
  const Status s = parse_rate_limit_request_json(in, r);
  if (!s.is_ok()) {
    if (s.code() != StatusCode::kInvalidArgument || s.message().empty()) std::abort();
    return 0;
  }
  if (r.descriptors.size() > kMaxDescriptors) std::abort();
  RateLimitResponse resp;
  resp.overall_code = Code::kOk;
  for (const RequestDescriptor& d : r.descriptors) {
    if (d.entries.size() > kMaxEntries) std::abort();
    DescriptorStatus st;
    st.code = Code::kOk;
    if (!d.entries.empty()) {
      st.current_limit = CurrentLimit{d.limit ? d.limit->requests_per_unit : 0, Unit::kMinute, d.entries[0].value};
      resp.response_headers_to_add.push_back({d.entries[0].key, d.entries[0].value});
    }
    resp.statuses.push_back(st);
  }
  std::string out;
  append_rate_limit_response_json(resp, out);
  if (out.empty() || out.front() != '{' || out.back() != '}') std::abort();
  return 0;
}
