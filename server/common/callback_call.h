// Copyright hopbudget authors.
//
// callback_call.h: a unary call of a demo service on gRPC's callback API,
// for hopbudget mode, where no thread may wait on a call's behalf.
//
// A sync handler holds its thread through everything the call waits for:
// this hop's injected latency, a hang, the call to the hop below. Under
// overload every waiting call then holds a thread, and the CPU goes to
// switching between them. A DemoUnaryCall waits without one: the latency
// on a grpc::Alarm, a hang until the call's OnCancel, the downstream call
// on the callback stub (`stub->async()->Method`). It applies the same
// faults, counts and accounting as DemoProcess::Begin(), then runs the
// method's Work(), which answers through Answer().
//
// Ownership: gRPC owns a reactor from the handler's return until OnDone();
// DemoUnaryCall deletes itself there, or when its last Ref goes, if that
// is later. The DemoProcess must outlive it (services outlive their
// server).
//
// Thread safety: Begin() on the handler's thread; Work(), Answer() and the
// cancel may run on gRPC's threads, concurrently with each other. Answer()
// finishes the call once; later calls are ignored. An Answer() that comes
// while Work() still runs (its downstream call ended at once, on another
// thread) finishes the call when Work() returns: Work() may use the call's
// members until it returns.
//
// Outside Work(), the call may be answered, and deleted, at any moment.
// What runs there is one of hopbudget's attempt functions (a slot handed
// on by another call's completion, a retry after a backoff, a hedge), whose
// primitive holds its `on_done`, and with it this call's answer, until the
// attempt function has returned; or a completion that ends with Answer().
// The handle of what a call starts goes to Track(), from either place, so
// that no member is written after the start for a cancel to find. Work that
// may end after something else answered the call (a job on a thread of its
// own, beside a CancelWork() that answers) holds a Ref: the call object
// stays alive until the last Ref goes, and the Ref's Answer() is ignored
// once the call was answered.
//
// Example (the gateway's PlaceOrder):
//   class PlaceOrderCall final : public DemoUnaryCall {
//     void Work() override {
//       out_ = process().outgoing().NewContext(*ctx());
//       stub_->async()->CreateOrder(out_.get(), request_, reply_,
//                                   [this](grpc::Status s) { Answer(std::move(s)); });
//     }
//   };
//   return (new PlaceOrderCall(...))->Begin();  // in the method handler
#ifndef HOPBUDGET_DEMO_CALLBACK_CALL_H_
#define HOPBUDGET_DEMO_CALLBACK_CALL_H_

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "server/common/demo_server.h"

namespace hopbudget::demo {

// The index of `method` among the methods of demo.proto's `service`, in
// the order gRPC's generated service registers them (for
// grpc::Service::MarkMethodCallback).
int DemoMethodIndex(absl::string_view service, absl::string_view method);

class DemoUnaryCall : public grpc::ServerUnaryReactor {
 public:
  DemoUnaryCall(DemoProcess& process, grpc::CallbackServerContext* ctx)
      : process_(process), ctx_(ctx) {}
  DemoUnaryCall(const DemoUnaryCall&) = delete;
  DemoUnaryCall& operator=(const DemoUnaryCall&) = delete;

  // Starts the call: what DemoProcess::Start() decides, the latency, then
  // AfterLatency() and Work(). Returns this, for the method handler to
  // return to gRPC.
  grpc::ServerUnaryReactor* Begin();

  // Keeps the call object (not the RPC) alive while held, for work that may
  // end after the call was answered elsewhere, or after gRPC is done with
  // it. Copyable; any thread. Through a Ref, only Answer() and the call
  // class's own members may be used, never ctx(), the request or the reply:
  // gRPC frees those with the RPC.
  class Ref {
   public:
    Ref(const Ref& other) : call_(other.call_) {
      if (call_ != nullptr) call_->refs_.fetch_add(1);
    }
    Ref(Ref&& other) noexcept : call_(std::exchange(other.call_, nullptr)) {}
    Ref& operator=(const Ref&) = delete;
    Ref& operator=(Ref&&) = delete;
    ~Ref() {
      if (call_ != nullptr) call_->Release();
    }
    // The call's Answer(): the first answer of the call wins.
    void Answer(grpc::Status status) const { call_->Answer(std::move(status)); }

   private:
    friend class DemoUnaryCall;
    explicit Ref(DemoUnaryCall* call) : call_(call) { call_->refs_.fetch_add(1); }
    DemoUnaryCall* call_;
  };

 protected:
  ~DemoUnaryCall() override = default;

  // The method's own work, after this hop's faults. Ends with Answer(),
  // from any thread.
  virtual void Work() = 0;
  // The call was cancelled while Work() ran, after every tracked handle was
  // cancelled: stop what does not stop by itself (a downstream call made on
  // a child context of this call ends with it). Runs on a gRPC thread,
  // possibly while Work() still runs.
  virtual void CancelWork() {}
  // Cancels `handle` (a SlotCall, RetryingCall, HedgingCall, RacingCall)
  // with the call: when the call is cancelled, or at once if it already
  // was. Call it from Work() or from an attempt function, where the call
  // cannot have been deleted (see Thread safety above). A null handle is
  // ignored.
  template <typename Handle>
  void Track(std::shared_ptr<Handle> handle) {
    if (handle == nullptr) return;
    bool cancelled = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled = cancelled_;
      if (!cancelled) tracked_.emplace_back([h = std::move(handle)] { h->TryCancel(); });
    }
    if (cancelled) handle->TryCancel();
  }
  // Finishes the call with `status`, the first time only.
  void Answer(grpc::Status status);
  // A Ref to this call. Take it where the call cannot be deleted (Work(),
  // an attempt function, CancelWork()) or copy another.
  Ref Hold() { return Ref(this); }

  DemoProcess& process() { return process_; }
  grpc::CallbackServerContext* ctx() const { return ctx_; }
  // The call's accounting (DeadlineAccounting): work it hands on (a
  // shielded commit) keeps it until that work ends.
  const std::shared_ptr<DeadlineAccounting::Work>& work() const { return start_.work; }

 private:
  enum class Phase { kStarting, kWaiting, kHanging, kWorking };

  void AfterWait(bool waited);
  // After the latency: AfterLatency(), then a hang, or Work().
  void Proceed();
  void Stop() { Answer(DemoProcess::StoppedStatus(*ctx_)); }
  // Ends this call's accounting and answers; only where Work() cannot run.
  void Send(grpc::Status status);
  void OnCancel() override;
  void OnDone() override { Release(); }
  void Release() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  DemoProcess& process_;
  grpc::CallbackServerContext* const ctx_;
  CallStart start_;  // holds the call's accounting until the call answers
  // Made only for a call with latency to wait: constructing a grpc::Alarm
  // calls grpc_init(), which takes gRPC's global init lock.
  std::unique_ptr<grpc::Alarm> alarm_;  // guarded by mu_ until set
  // std::mutex, not absl::Mutex: one per call, and Debian's abseil checks
  // every absl::Mutex acquisition against a process-wide lock graph
  // (interceptors/core/call_mutex.h).
  std::mutex mu_;
  Phase phase_ = Phase::kStarting;  // guarded by mu_
  bool cancelled_ = false;          // guarded by mu_
  // While Work() runs, an answer waits for it to return (Answer()).
  bool in_work_ = false;                   // guarded by mu_
  absl::optional<grpc::Status> deferred_;  // guarded by mu_
  std::atomic<bool> answered_{false};
  std::atomic<int> refs_{1};  // gRPC's, released at OnDone(), and each Ref's
  // What Track() was given; one shared_ptr fits std::function's own storage.
  absl::InlinedVector<std::function<void()>, 2> tracked_;  // guarded by mu_
};

// A DemoUnaryCall of a method of `Service` (a demo service class whose
// nested call classes derive from this): what every such call keeps.
template <typename Service, typename Request, typename Reply>
class DemoServiceCall : public DemoUnaryCall {
 protected:
  DemoServiceCall(Service& service, DemoProcess& process, grpc::CallbackServerContext* ctx,
                  const Request* request, Reply* reply)
      : DemoUnaryCall(process, ctx), service_(service), request_(request), reply_(reply) {}

  Service& service_;
  const Request* const request_;  // owned by gRPC until the call is done
  Reply* const reply_;
};

// The handler to give grpc::Service::MarkMethodCallback for a unary method
// whose calls are `Call`s (constructed from `service`, the call's context,
// request and reply). `service` must outlive the server.
template <typename Call, typename Request, typename Reply, typename Service>
grpc::internal::MethodHandler* NewDemoCallHandler(Service& service) {
  return new grpc::internal::CallbackUnaryHandler<Request, Reply>(
      [&service](grpc::CallbackServerContext* ctx, const Request* request, Reply* reply) {
        return (new Call(service, ctx, request, reply))->Begin();
      });
}

}  // namespace hopbudget::demo

#endif  // HOPBUDGET_DEMO_CALLBACK_CALL_H_
