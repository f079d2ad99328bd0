// rls_proto.cc — RateLimitRequest/Response proto <-> rls types (see rls_proto.h).
#include "rls_proto.h"

namespace ratelimit::grpc_api {

void translate(const PbRequest& in, rls::RateLimitRequest& out) {
  out.domain.assign(in.domain());
  out.hits_addend = in.hits_addend();
  out.descriptors.resize(static_cast<size_t>(in.descriptors_size()));
  for (int i = 0; i < in.descriptors_size(); ++i) {
    const auto& d = in.descriptors(i);
    rls::RequestDescriptor& rd = out.descriptors[static_cast<size_t>(i)];
    rd.entries.resize(static_cast<size_t>(d.entries_size()));
    for (int j = 0; j < d.entries_size(); ++j) {
      const auto& e = d.entries(j);
      rls::RequestEntry& re = rd.entries[static_cast<size_t>(j)];
      re.key.assign(e.key());
      re.value.assign(e.value());
    }
    rd.limit.reset();
    if (d.has_limit()) {
      rd.limit = rls::LimitOverride{d.limit().requests_per_unit(), static_cast<int64_t>(d.limit().unit())};
    }
    rd.hits_addend.reset();
    if (d.has_hits_addend()) rd.hits_addend = d.hits_addend().value();
  }
}

void render(const rls::RateLimitResponse& in, PbResponse& out) {
  out.Clear();
  out.set_overall_code(static_cast<PbResponse::Code>(in.overall_code));
  for (const rls::DescriptorStatus& s : in.statuses) {
    auto* st = out.add_statuses();
    st->set_code(static_cast<PbResponse::Code>(s.code));
    if (s.current_limit) {
      auto* l = st->mutable_current_limit();
      l->set_name(s.current_limit->name);
      l->set_requests_per_unit(s.current_limit->requests_per_unit);
      l->set_unit(static_cast<PbResponse::RateLimit::Unit>(s.current_limit->unit));
    }
    st->set_limit_remaining(s.limit_remaining);
    if (s.duration_until_reset_seconds) {
      st->mutable_duration_until_reset()->set_seconds(*s.duration_until_reset_seconds);
    }
  }
  for (const rls::HeaderValue& h : in.response_headers_to_add) {
    auto* hv = out.add_response_headers_to_add();
    hv->set_key(h.key);
    hv->set_value(h.value);
  }
}

}  // namespace ratelimit::grpc_api
