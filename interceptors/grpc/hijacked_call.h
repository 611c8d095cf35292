// Copyright hopbudget authors.
//
// hijacked_call.h (internal): answering the batches of a call an
// interceptor has hijacked (InterceptorBatchMethods::Hijack()), where nothing
// below the interceptor will: the client interceptor's fail-fast path (an
// attempt with no budget left never reaches the network) and the retrying
// channel (each attempt is a call of its own; the caller's call is answered
// from the attempts).
//
// Example, a call failed without the network:
//   internal::HijackedAnswer answer;
//   answer.status = &status;
//   answer.trailing_metadata = &trailers;
//   internal::AnswerHijackedBatch(batch, answer);  // proceeds the batch
#ifndef HOPBUDGET_INTERNAL_HIJACKED_CALL_H_
#define HOPBUDGET_INTERNAL_HIJACKED_CALL_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/client_interceptor.h>
#include <grpcpp/support/status.h>

#include <string>
#include <utility>
#include <vector>

namespace hopbudget {
namespace internal {

using MetadataPairs = std::vector<std::pair<std::string, std::string>>;

// What a hijacked call answers. Not owned: each must stay valid, unchanged,
// until AnswerHijackedBatch() returns. nullptr leaves that part out.
struct HijackedAnswer {
  const MetadataPairs* initial_metadata = nullptr;
  // The response a PRE_RECV_MESSAGE batch receives, parsed into the
  // application's message, which must then be a generated protobuf message
  // (the caller checked the method's descriptor). nullptr, or bytes that do
  // not parse, fail the read (the end of the stream, or no response).
  grpc::ByteBuffer* message = nullptr;
  const grpc::Status* status = nullptr;  // for PRE_RECV_STATUS: required then
  const MetadataPairs* trailing_metadata = nullptr;
};

// Whether `batch` asks for something from the server (initial metadata, a
// message, the status): the batches a hijacking interceptor answers.
bool IsReceiveBatch(grpc::experimental::InterceptorBatchMethods* batch);

// Fills every hook point of `batch` from `answer` (a send of a message
// fails: nothing below takes it) and lets the batch proceed. Once a batch
// with the status proceeds, the application may destroy the call and its
// interceptors: that must be the caller's last action.
void AnswerHijackedBatch(grpc::experimental::InterceptorBatchMethods* batch,
                         const HijackedAnswer& answer);

}  // namespace internal
}  // namespace hopbudget

#endif  // HOPBUDGET_INTERNAL_HIJACKED_CALL_H_
