// Copyright hopbudget authors.
#include "struct_fields.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <string>

namespace hopbudget::internal {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

const FieldDescriptor* FieldsOfStruct() {
  return google::protobuf::Struct::descriptor()->FindFieldByName("fields");
}

// The key of map entry `i` of `s`.
std::string KeyAt(const google::protobuf::Struct& s, int i) {
  const Message& entry = s.GetReflection()->GetRepeatedMessage(s, FieldsOfStruct(), i);
  return entry.GetReflection()->GetString(entry, entry.GetDescriptor()->map_key());
}

// Removes map entry `i` of `s` (the last one takes its place).
void RemoveAt(google::protobuf::Struct& s, int i) {
  const Reflection* r = s.GetReflection();
  const int last = r->FieldSize(s, FieldsOfStruct()) - 1;
  if (i != last) r->SwapElements(&s, FieldsOfStruct(), i, last);
  r->RemoveLast(&s, FieldsOfStruct());
}

}  // namespace

google::protobuf::Value* MutableStructField(google::protobuf::Struct& s, absl::string_view key) {
  const Reflection* r = s.GetReflection();
  for (int i = 0; i < r->FieldSize(s, FieldsOfStruct()); ++i) {
    if (KeyAt(s, i) != key) continue;
    Message* entry = r->MutableRepeatedMessage(&s, FieldsOfStruct(), i);
    return static_cast<google::protobuf::Value*>(
        entry->GetReflection()->MutableMessage(entry, entry->GetDescriptor()->map_value()));
  }
  return nullptr;
}

absl::optional<google::protobuf::Value> TakeStructField(google::protobuf::Struct& s,
                                                        absl::string_view key) {
  const Reflection* r = s.GetReflection();
  for (int i = 0; i < r->FieldSize(s, FieldsOfStruct()); ++i) {
    if (KeyAt(s, i) != key) continue;
    Message* entry = r->MutableRepeatedMessage(&s, FieldsOfStruct(), i);
    google::protobuf::Value value;
    value.Swap(static_cast<google::protobuf::Value*>(
        entry->GetReflection()->MutableMessage(entry, entry->GetDescriptor()->map_value())));
    RemoveAt(s, i);
    return value;
  }
  return absl::nullopt;
}

void RemoveStructFields(google::protobuf::Struct& s,
                        std::initializer_list<absl::string_view> keys) {
  const Reflection* r = s.GetReflection();
  for (int i = r->FieldSize(s, FieldsOfStruct()) - 1; i >= 0; --i) {
    const std::string key = KeyAt(s, i);
    for (absl::string_view k : keys) {
      if (key == k) {
        RemoveAt(s, i);
        break;
      }
    }
  }
}

}  // namespace hopbudget::internal
