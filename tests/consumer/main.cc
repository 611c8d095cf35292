// Uses only installed headers: proves they stand alone.
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <string>

#include "hopbudget/advanced/attribution.h"
#include "hopbudget/advanced/budget.h"
#include "hopbudget/advanced/classify.h"
#include "hopbudget/advanced/clock.h"
#include "hopbudget/advanced/deadline_source.h"
#include "hopbudget/advanced/exposition.h"
#include "hopbudget/advanced/metrics.h"
#include "hopbudget/advanced/retry.h"
#include "hopbudget/advanced/retry_loop.h"
#include "hopbudget/advanced/retry_policy.h"
#include "hopbudget/advanced/shield.h"
#include "hopbudget/advanced/shield_grpc.h"
#include "hopbudget/advanced/trace.h"
#include "hopbudget/advanced/wire.h"
#include "hopbudget/client.h"
#include "hopbudget/server.h"
#ifdef CONSUMER_WITH_HTTP
#include "hopbudget/advanced/http_exporter.h"
#endif

int main() {
  hopbudget::ServerOptions server;
  server.hop = "consumer";
  server.policy.request_cap = absl::Seconds(2);
  server.policy.attempt_cap = absl::Milliseconds(500);
  auto factory = hopbudget::MakeServerInterceptorFactory(server);
  hopbudget::ClientOptions client;
  client.hop = "consumer";
  auto channel =
      hopbudget::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials(), client);
  hopbudget::RetryOptions retry;
  retry.client.hop = "consumer";
  auto retrying =
      hopbudget::CreateRetryingChannel("127.0.0.1:1", grpc::InsecureChannelCredentials(), retry);
  hopbudget::Shield shield;
  auto op = shield.Run("consumer", absl::Milliseconds(100),
                       [](hopbudget::ShieldContext&) { return absl::OkStatus(); });
#ifdef CONSUMER_WITH_HTTP
  hopbudget::HttpExporterOptions http;
  http.hop = "consumer";
  auto exporter = hopbudget::HttpExporter::Start(http);
  const absl::Status http_status = exporter.status();
#else
  const absl::Status http_status = absl::OkStatus();
#endif
  const std::string text =
      hopbudget::FormatPrometheusText(hopbudget::Metrics::Default().Snapshot(), "consumer");
  if (!factory.ok() || !channel.ok() || !retrying.ok() || !op.ok() || !http_status.ok() ||
      text.find("hopbudget_info{hop=\"consumer\"} 1") == std::string::npos ||
      op->Wait()->outcome != hopbudget::ShieldOutcome::kCompleted) {
    std::cerr << "consumer: " << factory.status() << " " << channel.status() << " " << http_status
              << "\n";
    return 1;
  }
  std::cout << "consumer: hopbudget package works\n";
  return 0;
}
