// Copyright hopbudget authors.
//
// backend_watch.h (internal): waits for a channel's connectivity state to
// change without a thread per wait.
//
// gRPC 1.51 reports state changes only through a completion queue
// (ChannelInterface::NotifyOnStateChange). BackendWatch is one queue and one
// thread for the whole process: Watch() registers a one-shot wait and the
// thread runs its callback when the state leaves `last` or `timeout` has
// passed, whichever comes first. The thread blocks in the queue's Next();
// it never polls. A callback must not block: it runs on that one thread.
//
// Lifetime: the channel is kept alive (shared_ptr) until its callback has
// run. The watch and its thread live until the process exits.
// Thread safety: Watch() may be called from any thread.
#ifndef HOPBUDGET_BACKEND_WATCH_H_
#define HOPBUDGET_BACKEND_WATCH_H_

#include <grpc/grpc.h>
#include <grpcpp/channel.h>
#include <grpcpp/completion_queue.h>

#include <memory>
#include <thread>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "hopbudget/advanced/budget.h"

namespace hopbudget::internal {

// The core's view of a gRPC connectivity state.
BackendState BackendStateOf(grpc_connectivity_state state);

class BackendWatch {
 public:
  static BackendWatch& Shared();

  // Runs `on_change(changed)` on the watch thread once the state of
  // `channel` is no longer `last` (changed = true) or `timeout` has passed
  // (changed = false). `timeout` is relative so that no clock is read here:
  // gRPC measures it from the call. A non-positive timeout fires at once.
  void Watch(std::shared_ptr<grpc::Channel> channel, grpc_connectivity_state last,
             absl::Duration timeout, absl::AnyInvocable<void(bool changed)> on_change);

 private:
  BackendWatch();
  void Run();

  grpc::CompletionQueue cq_;
  std::thread thread_;
};

}  // namespace hopbudget::internal

#endif  // HOPBUDGET_BACKEND_WATCH_H_
