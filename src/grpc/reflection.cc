// reflection.cc — server reflection from the generated descriptor pool (see reflection.h).
#include "reflection.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <set>
#include <vector>

#include "grpc/reflection/v1alpha/reflection.pb.h"

namespace ratelimit::grpc_api {
namespace {

namespace pb = ::google::protobuf;
using ::grpc::reflection::v1alpha::ServerReflectionRequest;
using ::grpc::reflection::v1alpha::ServerReflectionResponse;

constexpr const char* kServices[] = {"envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health",
                                     "grpc.reflection.v1alpha.ServerReflection"};
constexpr const char* kRlqsService = "envoy.service.rate_limit_quota.v3.RateLimitQuotaService";
constexpr int kNotFound = 5;

// `file` and its imports, each once, the file itself first.
void add_with_imports(const pb::FileDescriptor* file, std::set<const pb::FileDescriptor*>& seen,
                      ServerReflectionResponse& out) {
  if (!seen.insert(file).second) return;
  pb::FileDescriptorProto proto;
  file->CopyTo(&proto);
  proto.SerializeToString(out.mutable_file_descriptor_response()->add_file_descriptor_proto());
  for (int i = 0; i < file->dependency_count(); ++i) add_with_imports(file->dependency(i), seen, out);
}

void not_found(ServerReflectionResponse& out, const std::string& what) {
  auto* e = out.mutable_error_response();
  e->set_error_code(kNotFound);
  e->set_error_message(what + " not found");
}

// The file found for the request's `what` with its imports, or "<what> not found".
void add_file(const pb::FileDescriptor* file, const std::string& what, ServerReflectionResponse& out) {
  if (file == nullptr) return not_found(out, what);
  std::set<const pb::FileDescriptor*> seen;
  add_with_imports(file, seen, out);
}

}  // namespace

Status reflect(std::string_view request, std::string& reply, bool with_rlqs) {
  ServerReflectionRequest req;
  if (!req.ParseFromArray(request.data(), static_cast<int>(request.size()))) {
    return Status::internal("the request is not a ServerReflectionRequest message");
  }
  ServerReflectionResponse out;
  out.set_valid_host(req.host());
  *out.mutable_original_request() = req;
  const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
  switch (req.message_request_case()) {
    case ServerReflectionRequest::kListServices:
      for (const char* name : kServices) out.mutable_list_services_response()->add_service()->set_name(name);
      if (with_rlqs) out.mutable_list_services_response()->add_service()->set_name(kRlqsService);
      break;
    case ServerReflectionRequest::kFileByFilename:
      add_file(pool->FindFileByName(req.file_by_filename()), "file " + req.file_by_filename(), out);
      break;
    case ServerReflectionRequest::kFileContainingSymbol:
      add_file(pool->FindFileContainingSymbol(req.file_containing_symbol()), "symbol " + req.file_containing_symbol(),
               out);
      break;
    case ServerReflectionRequest::kFileContainingExtension:
      not_found(out, "extension " + std::to_string(req.file_containing_extension().extension_number()) + " of " +
                         req.file_containing_extension().containing_type());
      break;
    case ServerReflectionRequest::kAllExtensionNumbersOfType:
      if (pool->FindMessageTypeByName(req.all_extension_numbers_of_type()) != nullptr) {
        out.mutable_all_extension_numbers_response()->set_base_type_name(req.all_extension_numbers_of_type());
      } else {
        not_found(out, "type " + req.all_extension_numbers_of_type());
      }
      break;
    default:
      not_found(out, "the request");
      break;
  }
  out.SerializeToString(&reply);
  return Status::ok();
}

}  // namespace ratelimit::grpc_api
