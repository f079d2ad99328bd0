// rls_proto.cc — RateLimitRequest/Response proto <-> rls types (see rls_proto.h).
#include "rls_proto.h"

namespace ratelimit::grpc_api {
namespace {

// Our enums to the proto's, name by name (never a cast: the proto numbers them on its own).
PbResponse::Code to_proto(rls::Code code) {
  switch (code) {
    case rls::Code::kOk: return PbResponse::OK;
    case rls::Code::kOverLimit: return PbResponse::OVER_LIMIT;
    case rls::Code::kUnknown: break;
  }
  return PbResponse::UNKNOWN;
}

PbResponse::RateLimit::Unit to_proto(rls::Unit unit) {
  using PbUnit = PbResponse::RateLimit;
  switch (unit) {
    case rls::Unit::kSecond: return PbUnit::SECOND;
    case rls::Unit::kMinute: return PbUnit::MINUTE;
    case rls::Unit::kHour: return PbUnit::HOUR;
    case rls::Unit::kDay: return PbUnit::DAY;
    case rls::Unit::kWeek: return PbUnit::WEEK;
    case rls::Unit::kMonth: return PbUnit::MONTH;
    case rls::Unit::kYear: return PbUnit::YEAR;
    case rls::Unit::kUnknown: break;
  }
  return PbUnit::UNKNOWN;
}

}  // namespace

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
      // The unit stays the wire's number here (proto3 enums are open: any int32 arrives);
      // rls::unit_from_wire checks it where the override is applied, and refuses what is not a unit.
      rd.limit = rls::LimitOverride{d.limit().requests_per_unit(), int64_t{d.limit().unit()}};
    }
    rd.hits_addend.reset();
    if (d.has_hits_addend()) rd.hits_addend = d.hits_addend().value();
  }
}

void render(const rls::RateLimitResponse& in, PbResponse& out) {
  out.Clear();
  out.set_overall_code(to_proto(in.overall_code));
  for (const rls::DescriptorStatus& s : in.statuses) {
    auto* st = out.add_statuses();
    st->set_code(to_proto(s.code));
    if (s.current_limit) {
      auto* l = st->mutable_current_limit();
      l->set_name(s.current_limit->name);
      l->set_requests_per_unit(s.current_limit->requests_per_unit);
      l->set_unit(to_proto(s.current_limit->unit));
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
