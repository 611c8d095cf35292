// Copyright hopbudget authors.
#include "channel_defaults.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <grpc/impl/codegen/grpc_types.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "struct_fields.h"

namespace hopbudget::internal {
namespace {

// The fields of a service config that make gRPC core retry answers.
constexpr std::initializer_list<absl::string_view> kCoreRetryMethodFields = {"retryPolicy",
                                                                             "hedgingPolicy"};
constexpr std::initializer_list<absl::string_view> kCoreRetryTopFields = {"retryThrottling"};

}  // namespace

absl::StatusOr<std::string> WithoutCoreRetries(const std::string& service_config_json) {
  google::protobuf::Struct config;
  const auto parsed = google::protobuf::util::JsonStringToMessage(service_config_json, &config);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("service config (GRPC_ARG_SERVICE_CONFIG) is not a JSON object: ",
                     std::string(parsed.message())));
  }
  RemoveStructFields(config, kCoreRetryTopFields);
  if (google::protobuf::Value* methods = MutableStructField(config, "methodConfig");
      methods != nullptr && methods->has_list_value()) {
    for (google::protobuf::Value& method : *methods->mutable_list_value()->mutable_values()) {
      if (!method.has_struct_value()) continue;  // gRPC rejects it, as it would have
      RemoveStructFields(*method.mutable_struct_value(), kCoreRetryMethodFields);
    }
  }
  std::string json;
  const auto printed = google::protobuf::util::MessageToJsonString(config, &json);
  if (!printed.ok()) {
    return absl::InternalError(
        absl::StrCat("service config: cannot write it back: ", std::string(printed.message())));
  }
  return json;
}

absl::StatusOr<grpc::ChannelArguments> WithChannelDefaults(const grpc::ChannelArguments& user) {
  // Read from `user`: Set* below may move `merged`'s argument array.
  const grpc_channel_args set = user.c_channel_args();
  const grpc_arg* service_config = nullptr;
  for (size_t i = 0; i < set.num_args; ++i) {
    if (std::strcmp(set.args[i].key, GRPC_ARG_SERVICE_CONFIG) == 0 &&
        set.args[i].type == GRPC_ARG_STRING) {
      service_config = &set.args[i];
    }
  }
  grpc::ChannelArguments merged;
  if (service_config == nullptr) {
    merged = user;
  } else {
    // gRPC keeps an argument's last value; ChannelArguments cannot remove
    // one, so every argument but the service config is copied.
    absl::StatusOr<std::string> json = WithoutCoreRetries(service_config->value.string);
    if (!json.ok()) return json.status();
    for (size_t i = 0; i < set.num_args; ++i) {
      const grpc_arg& a = set.args[i];
      if (std::strcmp(a.key, GRPC_ARG_SERVICE_CONFIG) == 0) continue;
      switch (a.type) {
        case GRPC_ARG_INTEGER:
          merged.SetInt(a.key, a.value.integer);
          break;
        case GRPC_ARG_STRING:
          merged.SetString(a.key, a.value.string);
          break;
        case GRPC_ARG_POINTER:
          merged.SetPointerWithVtable(a.key, a.value.pointer.p, a.value.pointer.vtable);
          break;
      }
    }
    merged.SetServiceConfigJSON(*json);
  }
  for (const ChannelDefault& d : kChannelDefaults) {
    bool present = false;
    for (size_t i = 0; i < set.num_args && !present; ++i) {
      present = std::strcmp(set.args[i].key, d.key) == 0;
    }
    if (!present) merged.SetInt(d.key, d.value);
  }
  return merged;
}

grpc::ChannelArguments WithHopServiceConfig(const Hop& hop, const grpc::ChannelArguments& args) {
  grpc::ChannelArguments out = args;
  const grpc_channel_args set = out.c_channel_args();
  for (size_t i = 0; i < set.num_args; ++i) {
    if (std::strcmp(set.args[i].key, GRPC_ARG_SERVICE_CONFIG) == 0) return out;  // the caller's
  }
  if (hop.core_service_config() != "{}") out.SetServiceConfigJSON(hop.core_service_config());
  return out;
}

ClientOptions WithHopIdentity(const Hop& hop, ClientOptions options) {
  options.hop = hop.name();
  options.clock = &hop.clock();
  options.metrics = &hop.metrics();
  return options;
}

}  // namespace hopbudget::internal
