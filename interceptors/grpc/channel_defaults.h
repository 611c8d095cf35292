// Copyright hopbudget authors.
//
// channel_defaults.h: the channel arguments every channel hopbudget creates
// (CreateChannel, CreateRetryingChannel) gets unless the caller's
// grpc::ChannelArguments already set them. One list, so the two factories,
// their documentation (client.h) and the tests cannot drift apart.
//
// Why each value (see also docs/grpc-1.51.md, "Keepalive and reconnection"):
//   - gRPC core retries are left on (gRPC's default), for its transparent
//     retries: a call that raced a GOAWAY (a server shutting down) and never
//     reached it is sent again by core, where without them it fails
//     UNAVAILABLE "GOAWAY received" with its budget left. Core retries
//     nothing else unless a service config gives a retryPolicy or a
//     hedgingPolicy: with none, hopbudget's retries are the one layer that
//     retries answers: a service config the caller gives loses those fields
//     (WithoutCoreRetries). Core removes grpc-previous-rpc-attempts
//     while its retries are on; the budget interceptor also sends the count
//     as hopbudget-previous-attempts (wire.h).
//   - keepalive every 10 s, 3 s to answer, also without calls, and no cap on
//     pings between data frames: a peer behind a blackholed link is found
//     dead in at most ~13 s even on an idle channel, and in ~3 s once a call
//     has bytes outstanding (gRPC sets TCP_USER_TIMEOUT to the keepalive
//     timeout when keepalive is on). Without it a call sent on a dead
//     connection waits for the kernel's retransmissions (~15 min; 39 s seen
//     when the send queue filled: grpc/grpc#15889, #19921).
//   - reconnect backoff 200 ms x 1.6 up to 2 s (gRPC: 1 s up to 120 s), and a
//     2 s connect timeout (GRPC_ARG_MIN_RECONNECT_BACKOFF_MS is the *minimum
//     connect timeout* in gRPC; default 20 s): after a partition heals, the
//     next connection attempt starts within ~2.4 s (2 s + 20 % jitter) and an
//     attempt whose SYN was lost in the partition is abandoned after 2 s
//     instead of waiting on the kernel's SYN retransmissions (1, 3, 7, 15 s).
//
// The peer's server must permit these pings: gRPC servers by default answer
// pings more often than every 5 min (2 h without calls) with GOAWAY
// too_many_pings, after which gRPC doubles the channel's keepalive time.
// Permit them with GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS <=
// kKeepaliveTimeMs and GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS = 1 (the demo's
// servers do: server/common/demo_server.cc).
#ifndef HOPBUDGET_CHANNEL_DEFAULTS_H_
#define HOPBUDGET_CHANNEL_DEFAULTS_H_

#include <grpc/grpc.h>
#include <grpcpp/support/channel_arguments.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "hopbudget/client.h"
#include "hopbudget/hop.h"

namespace hopbudget::internal {

inline constexpr int kKeepaliveTimeMs = 10000;
inline constexpr int kKeepaliveTimeoutMs = 3000;
inline constexpr int kInitialReconnectBackoffMs = 200;
inline constexpr int kMaxReconnectBackoffMs = 2000;
inline constexpr int kMinConnectTimeoutMs = 2000;  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS

struct ChannelDefault {
  const char* key;
  int value;
};

inline constexpr ChannelDefault kChannelDefaults[] = {
    {GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs},
    {GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs},
    {GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1},
    {GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0},  // 0 = no limit
    {GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kInitialReconnectBackoffMs},
    {GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs},
    {GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kMinConnectTimeoutMs},
};

// `user` plus every default whose key `user` does not set (the caller's
// value always wins, whatever its type), and the service config `user` gives
// (GRPC_ARG_SERVICE_CONFIG) without what would make gRPC core retry answers
// (WithoutCoreRetries). InvalidArgument when that service config is not a
// JSON object.
absl::StatusOr<grpc::ChannelArguments> WithChannelDefaults(const grpc::ChannelArguments& user);

// `service_config_json` without `retryPolicy` and `hedgingPolicy` in any
// `methodConfig` entry and without `retryThrottling`: hopbudget retries and
// hedges, and gRPC core's retries under its attempts would stack. Read with
// protobuf's JSON parser (as a google.protobuf.Struct: the rest is gRPC's to
// judge, and it still does). InvalidArgument when it is not a JSON object.
absl::StatusOr<std::string> WithoutCoreRetries(const std::string& service_config_json);

// `args` with the service config of `hop` (Hop::core_service_config()),
// unless `args` sets one or the Hop has none. Applied after
// WithChannelDefaults: the Hop's config keeps the retryPolicy of methods in
// shadow mode, which are gRPC core's to retry.
grpc::ChannelArguments WithHopServiceConfig(const Hop& hop, const grpc::ChannelArguments& args);

// `options` with the name, clock and metrics of `hop`, whatever they said:
// every channel made from a Hop speaks as that hop.
ClientOptions WithHopIdentity(const Hop& hop, ClientOptions options);

// What one call does without a ready backend: the call's own choice
// (SetBackendWait), else its method's `waitForReady` in the channel's Hop
// (true: wait inside the budget; false: fail fast), else the channel's
// (ClientOptions::backend_wait).
BackendWait BackendWaitOfCall(BackendWait channel, absl::optional<bool> method_wait_for_ready,
                              absl::optional<BackendWait> call);
// The value SetBackendWait sent (kInternalBackendWaitKey); nullopt for none.
absl::optional<BackendWait> CallBackendWait(const absl::optional<std::string>& value);

// The budget interceptor's factory for a channel of `hop` (nullptr: a
// channel of no Hop, as MakeClientInterceptorFactory makes): each call's
// backend wait follows BackendWaitOfCall with its method's entry in the
// Hop's table in force when the call starts. `hop` outlives the channel.
absl::StatusOr<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
MakeClientInterceptorFactory(ClientOptions options, const Hop* hop);

}  // namespace hopbudget::internal

#endif  // HOPBUDGET_CHANNEL_DEFAULTS_H_
