// Copyright hopbudget authors.
#include "hijacked_call.h"

#include <google/protobuf/message.h>
#include <grpcpp/support/proto_buffer_reader.h>

namespace hopbudget {
namespace internal {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::InterceptorBatchMethods;

bool IsReceiveBatch(InterceptorBatchMethods* batch) {
  return batch->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_INITIAL_METADATA) ||
         batch->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_MESSAGE) ||
         batch->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_STATUS);
}

void AnswerHijackedBatch(InterceptorBatchMethods* batch, const HijackedAnswer& answer) {
  if (batch->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
    batch->FailHijackedSendMessage();
  }
  if (batch->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_INITIAL_METADATA) &&
      answer.initial_metadata != nullptr) {
    auto* map = batch->GetRecvInitialMetadata();
    for (const auto& [k, v] : *answer.initial_metadata) map->emplace(k, v);
  }
  if (batch->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_MESSAGE)) {
    bool parsed = false;
    if (answer.message != nullptr) {
      // A generated protobuf message (single inheritance from Message, so
      // the cast is exact): the caller checked the method's descriptor.
      auto* msg = static_cast<google::protobuf::Message*>(batch->GetRecvMessage());
      grpc::ProtoBufferReader reader(answer.message);
      parsed = msg->ParseFromZeroCopyStream(&reader);
    }
    if (!parsed) batch->FailHijackedRecvMessage();
  }
  if (batch->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_STATUS)) {
    *batch->GetRecvStatus() = *answer.status;
    if (answer.trailing_metadata != nullptr) {
      auto* map = batch->GetRecvTrailingMetadata();
      for (const auto& [k, v] : *answer.trailing_metadata) map->emplace(k, v);
    }
  }
  batch->Proceed();
}

}  // namespace internal
}  // namespace hopbudget
