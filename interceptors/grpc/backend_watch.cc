// Copyright hopbudget authors.
#include "backend_watch.h"

#include <grpc/support/time.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace hopbudget::internal {
namespace {

struct Pending {
  std::shared_ptr<grpc::Channel> channel;  // alive until the callback ran
  absl::AnyInvocable<void(bool)> on_change;
};

}  // namespace

BackendState BackendStateOf(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE:
      return BackendState::kIdle;
    case GRPC_CHANNEL_CONNECTING:
      return BackendState::kConnecting;
    case GRPC_CHANNEL_READY:
      return BackendState::kReady;
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return BackendState::kTransientFailure;
    case GRPC_CHANNEL_SHUTDOWN:
      return BackendState::kShutdown;
  }
  return BackendState::kShutdown;
}

BackendWatch& BackendWatch::Shared() {
  // Never destroyed: a watch may still be pending when the process exits.
  static BackendWatch* const watch = new BackendWatch();
  return *watch;
}

BackendWatch::BackendWatch() : thread_([this] { Run(); }) { thread_.detach(); }

void BackendWatch::Watch(std::shared_ptr<grpc::Channel> channel, grpc_connectivity_state last,
                         absl::Duration timeout, absl::AnyInvocable<void(bool)> on_change) {
  const int64_t us = std::max<int64_t>(0, absl::ToInt64Microseconds(timeout));
  auto* pending = new Pending{std::move(channel), std::move(on_change)};
  pending->channel->NotifyOnStateChange(last, gpr_time_from_micros(us, GPR_TIMESPAN), &cq_,
                                        pending);
}

void BackendWatch::Run() {
  void* tag = nullptr;
  bool ok = false;
  while (cq_.Next(&tag, &ok)) {
    std::unique_ptr<Pending> pending(static_cast<Pending*>(tag));
    pending->on_change(ok);
  }
}

}  // namespace hopbudget::internal
