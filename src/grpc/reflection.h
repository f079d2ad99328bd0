// reflection.h — gRPC server reflection (grpc.reflection.v1alpha.ServerReflection) over the
// descriptors compiled into ratelimitd (protobuf's generated pool), so grpcurl lists and calls
// our services without the .proto files. One request message in, one response message out;
// the streaming around it is grpc_handler.cc's.
// Answers: list_services → the services we serve (RLS, health, reflection, and RLQS when
// `with_rlqs`); file_by_filename and
// file_containing_symbol → that file and every file it imports (serialized
// FileDescriptorProtos); an unknown name, or an extension query (we define none), → an
// ErrorResponse NOT_FOUND in the stream (the protocol's way), not a failed call.
// Thread-safety: stateless; the generated pool is immutable.
#pragma once

#include <string>
#include <string_view>

#include "ratelimit/status.h"

namespace ratelimit::grpc_api {

inline constexpr std::string_view kReflectionPath =
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

// Answers one ServerReflectionRequest (`request`, serialized) into `reply` (a serialized
// ServerReflectionResponse). Not ok only when `request` is not such a message.
Status reflect(std::string_view request, std::string& reply, bool with_rlqs = false);

}  // namespace ratelimit::grpc_api
