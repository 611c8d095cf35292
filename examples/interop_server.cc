// Copyright hopbudget authors.
//
// interop_server: grpc.testing.TestService as the gRPC interop spec
// (doc/interop-test-descriptions.md, "Server" section) describes it, with
// hopbudget's server interceptor installed, so that any language's interop
// client can check that the interceptor changes nothing it should not.
//
//   hopbudget_interop_server --port=0      # prints "listening on PORT"
//
// Plaintext only (--use_tls=true is refused). Left out, as in most
// interop servers: the auth echoes (fill_username, fill_oauth_scope), the xDS
// and ORCA fields; UnimplementedCall is left to the generated base class,
// which answers UNIMPLEMENTED.
#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/cli/cli_flags.h"
#include "grpc/testing/empty.pb.h"
#include "grpc/testing/messages.pb.h"
#include "grpc/testing/test.grpc.pb.h"
#include "hopbudget/server.h"

#ifdef HOPBUDGET_HAVE_GRPC_TEST_ONLY_MESSAGE_FLAGS
// Exported by libgrpc but declared only in a core header that is not
// installed (src/core/lib/surface/call_test_only.h); grpc's own interop
// server uses it for the same check. The flag values are core-internal too.
uint32_t grpc_call_test_only_get_message_flags(grpc_call* call);
#endif

ABSL_FLAG(int, port, 0, "port, 0..65535 (0 = any free port)");
ABSL_FLAG(bool, use_tls, false, "must be false: plaintext only (the interop harness passes it)");

namespace {

using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;
using grpc::testing::EchoStatus;
using grpc::testing::Empty;
using grpc::testing::Payload;
using grpc::testing::PayloadType;
using grpc::testing::ResponseParameters;
using grpc::testing::SimpleRequest;
using grpc::testing::SimpleResponse;
using grpc::testing::StreamingInputCallRequest;
using grpc::testing::StreamingInputCallResponse;
using grpc::testing::StreamingOutputCallRequest;
using grpc::testing::StreamingOutputCallResponse;

constexpr char kEchoInitialKey[] = "x-grpc-test-echo-initial";
constexpr char kEchoTrailingKey[] = "x-grpc-test-echo-trailing-bin";
// Largest payload we agree to build; protects the server from a silly request.
constexpr int kMaxPayloadBytes = 64 << 20;

// Echo Metadata: must run before anything is written.
void EchoMetadata(ServerContext* ctx) {
  const auto& md = ctx->client_metadata();
  if (auto it = md.find(kEchoInitialKey); it != md.end()) {
    ctx->AddInitialMetadata(kEchoInitialKey, std::string(it->second.data(), it->second.size()));
  }
  if (auto it = md.find(kEchoTrailingKey); it != md.end()) {
    ctx->AddTrailingMetadata(kEchoTrailingKey, std::string(it->second.data(), it->second.size()));
  }
}

Status MakePayload(PayloadType type, int size, Payload* payload) {
  if (type != grpc::testing::COMPRESSABLE) {
    return Status(StatusCode::INVALID_ARGUMENT, absl::StrCat("unsupported response_type ", type));
  }
  if (size < 0 || size > kMaxPayloadBytes) {
    return Status(StatusCode::INVALID_ARGUMENT, absl::StrCat("bad response size ", size));
  }
  payload->set_type(type);
  payload->set_body(std::string(static_cast<size_t>(size), '\0'));
  return Status::OK;
}

Status EchoedStatus(const EchoStatus& s) {
  return Status(static_cast<StatusCode>(s.code()), s.message());
}

// CompressedRequest: fails the call when the client promised a compressed
// message and the last one received was not.
Status CheckCompressed([[maybe_unused]] ServerContext* ctx, bool expect_compressed) {
  if (!expect_compressed) return Status::OK;
#ifdef HOPBUDGET_HAVE_GRPC_TEST_ONLY_MESSAGE_FLAGS
  constexpr uint32_t kInternalCompress = 0x80000000u;  // GRPC_WRITE_INTERNAL_COMPRESS
  constexpr uint32_t kWasCompressed = 0x40000000u;     // ..._TEST_ONLY_WAS_COMPRESSED
  const uint32_t flags = grpc_call_test_only_get_message_flags(ctx->c_call());
  if ((flags & (kInternalCompress | kWasCompressed)) == 0) {
    return Status(StatusCode::INVALID_ARGUMENT, "expected a compressed request message");
  }
#endif
  return Status::OK;
}

// Waits `us` microseconds before a response; false if the call ended first.
bool Pause(const ServerContext& ctx, int us) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point end = Clock::now() + std::chrono::microseconds(us);
  while (!ctx.IsCancelled()) {
    const Clock::time_point now = Clock::now();
    if (now >= end) return true;
    std::this_thread::sleep_for(std::min<Clock::duration>(end - now, std::chrono::milliseconds(5)));
  }
  return false;
}

// The responses of one StreamingOutputCallRequest, in order, each after its
// interval. Compressed only where `compressed` asks for it. The call's
// compression level only counts before the first write (it is decided with
// the headers), so a full-duplex call can start compressing only if its first
// request asks for it; callers that know more set it up front.
template <typename Writer>
Status WriteResponses(ServerContext* ctx, const StreamingOutputCallRequest& request, Writer* writer,
                      bool* compression_set) {
  for (const ResponseParameters& p : request.response_parameters()) {
    StreamingOutputCallResponse response;
    if (Status s = MakePayload(request.response_type(), p.size(), response.mutable_payload());
        !s.ok()) {
      return s;
    }
    const bool compress = p.compressed().value();
    if (compress && !*compression_set) {
      ctx->set_compression_level(GRPC_COMPRESS_LEVEL_HIGH);
      *compression_set = true;
    }
    grpc::WriteOptions options;
    if (!compress) options.set_no_compression();
    if (p.interval_us() > 0 && !Pause(*ctx, p.interval_us())) {
      return Status(StatusCode::CANCELLED, "call ended while waiting for interval_us");
    }
    if (!writer->Write(response, options)) {
      return Status(StatusCode::INTERNAL, "writing a response failed");
    }
  }
  return Status::OK;
}

bool AnyCompressed(const StreamingOutputCallRequest& request) {
  for (const ResponseParameters& p : request.response_parameters()) {
    if (p.compressed().value()) return true;
  }
  return false;
}

class TestServiceImpl final : public grpc::testing::TestService::Service {
 public:
  Status EmptyCall(ServerContext* ctx, const Empty*, Empty*) override {
    if (Refused(*ctx)) return Status::CANCELLED;
    EchoMetadata(ctx);
    return Status::OK;
  }

  Status UnaryCall(ServerContext* ctx, const SimpleRequest* request,
                   SimpleResponse* response) override {
    if (Refused(*ctx)) return Status::CANCELLED;
    EchoMetadata(ctx);
    if (request->has_response_compressed()) {
      ctx->set_compression_level(request->response_compressed().value() ? GRPC_COMPRESS_LEVEL_HIGH
                                                                        : GRPC_COMPRESS_LEVEL_NONE);
    }
    if (Status s = CheckCompressed(ctx, request->expect_compressed().value()); !s.ok()) return s;
    if (Status s = MakePayload(request->response_type(), request->response_size(),
                               response->mutable_payload());
        !s.ok()) {
      return s;
    }
    if (request->has_response_status()) return EchoedStatus(request->response_status());
    return Status::OK;
  }

  // Content ignored; a payload that differs on every call, and headers that
  // let a caching proxy keep the answer.
  Status CacheableUnaryCall(ServerContext* ctx, const SimpleRequest*,
                            SimpleResponse* response) override {
    if (Refused(*ctx)) return Status::CANCELLED;
    EchoMetadata(ctx);
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    response->mutable_payload()->set_body(
        std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()));
    ctx->AddInitialMetadata("cache-control", "max-age=60, public");
    return Status::OK;
  }

  Status StreamingOutputCall(ServerContext* ctx, const StreamingOutputCallRequest* request,
                             grpc::ServerWriter<StreamingOutputCallResponse>* writer) override {
    if (Refused(*ctx)) return Status::CANCELLED;
    EchoMetadata(ctx);
    if (request->has_response_status()) return EchoedStatus(request->response_status());
    bool compression_set = AnyCompressed(*request);
    if (compression_set) ctx->set_compression_level(GRPC_COMPRESS_LEVEL_HIGH);
    return WriteResponses(ctx, *request, writer, &compression_set);
  }

  Status StreamingInputCall(ServerContext* ctx,
                            grpc::ServerReader<StreamingInputCallRequest>* reader,
                            StreamingInputCallResponse* response) override {
    if (Refused(*ctx)) return Status::CANCELLED;
    EchoMetadata(ctx);
    StreamingInputCallRequest request;
    int64_t total = 0;
    while (reader->Read(&request)) {
      if (Status s = CheckCompressed(ctx, request.expect_compressed().value()); !s.ok()) return s;
      total += static_cast<int64_t>(request.payload().body().size());
    }
    response->set_aggregated_payload_size(static_cast<int32_t>(total));
    return Status::OK;
  }

  // Serves each request as it arrives. A request with response_status ends
  // the call with that status; nothing after it is processed.
  Status FullDuplexCall(ServerContext* ctx,
                        grpc::ServerReaderWriter<StreamingOutputCallResponse,
                                                 StreamingOutputCallRequest>* stream) override {
    if (Refused(*ctx)) return Status::CANCELLED;
    EchoMetadata(ctx);
    StreamingOutputCallRequest request;
    bool compression_set = false;
    while (stream->Read(&request)) {
      if (request.has_response_status()) return EchoedStatus(request.response_status());
      if (Status s = WriteResponses(ctx, request, stream, &compression_set); !s.ok()) return s;
    }
    return Status::OK;
  }

  // Buffers every request until half-close, then serves them in order.
  Status HalfDuplexCall(ServerContext* ctx,
                        grpc::ServerReaderWriter<StreamingOutputCallResponse,
                                                 StreamingOutputCallRequest>* stream) override {
    if (Refused(*ctx)) return Status::CANCELLED;
    EchoMetadata(ctx);
    std::vector<StreamingOutputCallRequest> requests;
    StreamingOutputCallRequest request;
    bool compression_set = false;
    while (stream->Read(&request)) {
      compression_set = compression_set || AnyCompressed(request);
      requests.push_back(request);
    }
    if (compression_set) ctx->set_compression_level(GRPC_COMPRESS_LEVEL_HIGH);
    for (const StreamingOutputCallRequest& r : requests) {
      if (r.has_response_status()) return EchoedStatus(r.response_status());
      if (Status s = WriteResponses(ctx, r, stream, &compression_set); !s.ok()) return s;
    }
    return Status::OK;
  }

 private:
  // hopbudget refused the call on arrival and has answered it already.
  static bool Refused(const ServerContext& ctx) {
    const hopbudget::InboundBudget* budget = hopbudget::InboundBudget::Of(ctx);
    return budget != nullptr && budget->refused();
  }
};

}  // namespace

int main(int argc, char** argv) {
  namespace cli = hopbudget::cli;
  cli::ParseOrExit(argc, argv, "hopbudget_interop_server",
                   "hopbudget_interop_server: grpc.testing.TestService (the gRPC interop "
                   "spec) with hopbudget's server interceptor; prints \"listening on PORT\".\n\n"
                   "  hopbudget_interop_server --port=0 [--use_tls=false]");
  const int port = absl::GetFlag(FLAGS_port);
  cli::ExitIfBad("hopbudget_interop_server", cli::InRange("port", port, 0, 65535));
  // The interop harness passes --use_tls; plaintext is all we serve.
  if (absl::GetFlag(FLAGS_use_tls)) {
    cli::ExitIfBad("hopbudget_interop_server",
                   absl::InvalidArgumentError("--use_tls=true: TLS is not supported"));
  }

  hopbudget::ServerOptions options;
  options.hop = "interop";
  auto factory = hopbudget::MakeServerInterceptorFactory(options);
  if (!factory.ok()) {
    std::cerr << factory.status() << "\n";
    return 2;
  }
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(*std::move(factory));

  TestServiceImpl service;
  grpc::ServerBuilder builder;
  // A port in use is an error, never shared (gRPC's default SO_REUSEPORT).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int selected = 0;
  builder.AddListeningPort(absl::StrCat("0.0.0.0:", port), grpc::InsecureServerCredentials(),
                           &selected);
  builder.RegisterService(&service);
  builder.experimental().SetInterceptorCreators(std::move(creators));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || selected == 0) {
    std::cerr << "cannot listen on port " << port << " (in use by another server?)\n";
    return 1;
  }
  std::cout << "listening on " << selected << std::endl;
  server->Wait();
  return 0;
}
