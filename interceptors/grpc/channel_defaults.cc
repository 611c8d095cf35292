// Copyright hopbudget authors.
#include "channel_defaults.h"

#include <cstring>

namespace hopbudget::internal {

grpc::ChannelArguments WithChannelDefaults(const grpc::ChannelArguments& user) {
  grpc::ChannelArguments merged = user;
  // Read from `user`: SetInt below may move `merged`'s argument array.
  const grpc_channel_args set = user.c_channel_args();
  for (const ChannelDefault& d : kChannelDefaults) {
    bool present = false;
    for (size_t i = 0; i < set.num_args && !present; ++i) {
      present = std::strcmp(set.args[i].key, d.key) == 0;
    }
    if (!present) merged.SetInt(d.key, d.value);
  }
  return merged;
}

}  // namespace hopbudget::internal
