// Copyright hopbudget authors.
//
// struct_fields.h (internal): the fields of a google.protobuf.Struct (a JSON
// object read by protobuf's JSON parser), found and removed by key.
//
// Through protobuf's reflection, which runs inside libprotobuf, never
// through Map's inline template code: compiled into hopbudget under
// ThreadSanitizer, that code crashed on a map Debian's uninstrumented
// libprotobuf had built (SEGV in InnerMap::FindHelper: a service config
// handed to a channel, and every service config a Hop read).
//
// Thread safety: as the Struct's own.
#ifndef HOPBUDGET_INTERNAL_STRUCT_FIELDS_H_
#define HOPBUDGET_INTERNAL_STRUCT_FIELDS_H_

#include <google/protobuf/struct.pb.h>

#include <initializer_list>

#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace hopbudget::internal {

// The value of `key` in `s` (owned by `s`), nullptr when absent.
google::protobuf::Value* MutableStructField(google::protobuf::Struct& s, absl::string_view key);

// Removes `key` from `s` and returns its value; nullopt when absent.
absl::optional<google::protobuf::Value> TakeStructField(google::protobuf::Struct& s,
                                                        absl::string_view key);

// Removes every key of `keys` from `s`.
void RemoveStructFields(google::protobuf::Struct& s, std::initializer_list<absl::string_view> keys);

}  // namespace hopbudget::internal

#endif  // HOPBUDGET_INTERNAL_STRUCT_FIELDS_H_
