// Copyright hopbudget authors.
#include "channel_defaults.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <grpc/impl/codegen/grpc_types.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace hopbudget::internal {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// The fields of a service config that make gRPC core retry answers.
constexpr const char* kCoreRetryMethodFields[] = {"retryPolicy", "hedgingPolicy"};
constexpr const char* kCoreRetryTopFields[] = {"retryThrottling"};

// A google.protobuf.Struct's map is read and edited through reflection,
// which runs inside libprotobuf. Map's inline template code, compiled into
// this library under ThreadSanitizer, crashed on a map that Debian's
// uninstrumented libprotobuf had built (SEGV in InnerMap::FindHelper, every
// channel given a service config).
const FieldDescriptor* StructFields() {
  return google::protobuf::Struct::descriptor()->FindFieldByName("fields");
}

template <size_t N>
void RemoveKeys(google::protobuf::Struct& s, const char* const (&keys)[N]) {
  const FieldDescriptor* fields = StructFields();
  const google::protobuf::Reflection* r = s.GetReflection();
  for (int i = r->FieldSize(s, fields) - 1; i >= 0; --i) {
    const Message& entry = r->GetRepeatedMessage(s, fields, i);
    const FieldDescriptor* key_fd = entry.GetDescriptor()->map_key();
    const std::string key = entry.GetReflection()->GetString(entry, key_fd);
    bool drop = false;
    for (const char* k : keys) drop = drop || key == k;
    if (!drop) continue;
    const int last = r->FieldSize(s, fields) - 1;
    if (i != last) r->SwapElements(&s, fields, i, last);
    r->RemoveLast(&s, fields);
  }
}

// The value of `key` in `s`, nullptr when absent.
google::protobuf::Value* MutableField(google::protobuf::Struct& s, const char* key) {
  const FieldDescriptor* fields = StructFields();
  const google::protobuf::Reflection* r = s.GetReflection();
  for (int i = 0; i < r->FieldSize(s, fields); ++i) {
    Message* entry = r->MutableRepeatedMessage(&s, fields, i);
    const google::protobuf::Reflection* er = entry->GetReflection();
    const google::protobuf::Descriptor* ed = entry->GetDescriptor();
    if (er->GetString(*entry, ed->map_key()) != key) continue;
    return static_cast<google::protobuf::Value*>(er->MutableMessage(entry, ed->map_value()));
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::string> WithoutCoreRetries(const std::string& service_config_json) {
  google::protobuf::Struct config;
  const auto parsed = google::protobuf::util::JsonStringToMessage(service_config_json, &config);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("service config (GRPC_ARG_SERVICE_CONFIG) is not a JSON object: ",
                     std::string(parsed.message())));
  }
  RemoveKeys(config, kCoreRetryTopFields);
  if (google::protobuf::Value* methods = MutableField(config, "methodConfig");
      methods != nullptr && methods->has_list_value()) {
    for (google::protobuf::Value& method : *methods->mutable_list_value()->mutable_values()) {
      if (!method.has_struct_value()) continue;  // gRPC rejects it, as it would have
      RemoveKeys(*method.mutable_struct_value(), kCoreRetryMethodFields);
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

}  // namespace hopbudget::internal
