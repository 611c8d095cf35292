// Copyright hopbudget authors.
//
// park_service.h: the Relay service of the benchmarks that hold calls (not
// part of the library): every call parks in a callback reactor until its
// caller's cancel or deadline ends it, counted in a Gauge while parked.
// Thread-safe; the Gauge must outlive the server.
#ifndef HOPBUDGET_BENCH_PARK_SERVICE_H_
#define HOPBUDGET_BENCH_PARK_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>

#include "bench_util.h"
#include "echo/relay.grpc.pb.h"

namespace hopbudget {
namespace bench {

class ParkReactor : public grpc::ServerUnaryReactor {
 public:
  explicit ParkReactor(Gauge* parked) : parked_(parked) { parked_->Add(1); }
  void OnCancel() override { Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")); }
  void OnDone() override {
    parked_->Add(-1);
    delete this;
  }

 private:
  Gauge* parked_;
};

class ParkService final : public echo::Relay::CallbackService {
 public:
  explicit ParkService(Gauge* parked) : parked_(parked) {}
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* /*ctx*/,
                                 const echo::RelayRequest* /*req*/,
                                 echo::RelayReply* /*reply*/) override {
    calls_.fetch_add(1, std::memory_order_relaxed);
    return new ParkReactor(parked_);
  }
  // Calls that reached the handler so far.
  uint64_t calls() const { return calls_.load(std::memory_order_relaxed); }

 private:
  Gauge* parked_;
  std::atomic<uint64_t> calls_{0};
};

}  // namespace bench
}  // namespace hopbudget

#endif  // HOPBUDGET_BENCH_PARK_SERVICE_H_
