// Copyright hopbudget authors.
#include "outgoing.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "accounting.h"
#include "hopbudget/server.h"

namespace hopbudget::demo {

std::string InboundMetadata(const grpc::ServerContextBase& ctx, absl::string_view key) {
  auto it = ctx.client_metadata().find(grpc::string_ref(key.data(), key.size()));
  if (it == ctx.client_metadata().end()) return "";
  return std::string(it->second.data(), it->second.size());
}

std::unique_ptr<grpc::ClientContext> OutgoingContexts::NewContext(
    const grpc::ServerContextBase& inbound) const {
  if (mode_ == Mode::kBaseline) return NewBaselineContext(inbound, 0);
  std::unique_ptr<grpc::ClientContext> out = NewDownstreamContext(inbound);
  PrepareCall(inbound, *out);
  return out;
}

std::unique_ptr<grpc::ClientContext> OutgoingContexts::NewStreamContext(
    const grpc::ServerContextBase& inbound) const {
  if (mode_ == Mode::kBaseline) return NewContext(inbound);
  DownstreamOptions options;
  options.scope = DownstreamScope::kRequest;
  std::unique_ptr<grpc::ClientContext> out = NewDownstreamContext(inbound, options);
  PrepareCall(inbound, *out);
  return out;
}

void OutgoingContexts::PrepareCall(const grpc::ServerContextBase& inbound,
                                   grpc::ClientContext& out) const {
  ForwardDemoHeader(inbound, out);
  if (mode_ == Mode::kHopbudget && wait_for_backend_) out.set_wait_for_ready(true);
}

void OutgoingContexts::ForwardDemoHeader(const grpc::ServerContextBase& inbound,
                                         grpc::ClientContext& out) const {
  const std::string deadline = InboundMetadata(inbound, kClientDeadlineHeader);
  if (!deadline.empty()) out.AddMetadata(kClientDeadlineHeader, deadline);
}

std::unique_ptr<grpc::ClientContext> OutgoingContexts::NewBaselineContext(
    const grpc::ServerContextBase& inbound, int previous_attempts) const {
  auto out = std::make_unique<grpc::ClientContext>();
  out->set_deadline(absl::ToChronoTime(absl::Now() + baseline_timeout_));
  ForwardDemoHeader(inbound, *out);
  if (previous_attempts > 0) {
    out->AddMetadata(kBaselineAttemptHeader, absl::StrCat(previous_attempts));
  }
  return out;
}

grpc::ChannelArguments DownstreamChannelArguments() {
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(
      R"({"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":""}})");
  return args;
}

}  // namespace hopbudget::demo
