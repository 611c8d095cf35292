# check_layers.cmake on small trees: the allowed includes pass, and each
# row's single crossing fails naming its file. Without this a scan whose
# pattern matched nothing would pass forever.
# Run as: cmake -DCHECK=<check_layers.cmake> -DWORK=<scratch dir> -P check_layers_self_test.cmake

# The includes every tree holds; each is allowed.
set(allowed
  "interceptors/core/budget.cc|absl/time/time.h"
  "interceptors/core/service_config.cc|grpc/service_config/service_config.pb.h"
  "interceptors/grpc/server.cc|grpcpp/grpcpp.h"
  "server/gateway/gateway_main.cc|client/cli/cli_flags.h"
  "server/common/demo_server.h|server/common/faults.h"
  "client/chainctl/chainctl_main.cc|client/cli/cli_flags.h"
  "client/chainctl/chain.cc|demo/client_deadline.h"
  "bench/bench_util.h|client/cli/cli_flags.h"
  "examples/interop_server.cc|client/cli/cli_flags.h")
# file | include | what the failure must say
set(crossings
  "interceptors/core/budget.cc|grpcpp/grpcpp.h|interceptors/core/budget.cc"
  "interceptors/http/exporter.cc|grpc/grpc.h|interceptors/http/exporter.cc"
  "interceptors/core/hop.cc|hopbudget/advanced/retry.h|interceptors/core/hop.cc"
  "interceptors/grpc/server.cc|server/common/faults.h|the library reaching up"
  "interceptors/grpc/server.cc|demo/demo.grpc.pb.h|the library reaching up"
  "interceptors/core/budget.cc|tests/test_hop.h|the library reaching up"
  "server/orders/orders_main.cc|client/chainctl/summary.h|a service reaching into a tool"
  "server/ledger/ledger_main.cc|client/clix/flags.h|a service reaching into a tool"
  "server/common/outgoing.cc|bench/bench_util.h|a service reaching into a tool"
  "client/chainctl/chain.cc|server/common/accounting.h|a tool reaching into the services"
  "client/inspect/inspect.cc|tests/eventually.h|a tool reaching into the services"
  "bench/load_gen.cc|server/common/faults.h|a benchmark reaching into the services"
  "bench/load_gen.cc|client/inspect/scrape.h|a benchmark reaching into the services"
  "examples/minimal_server.cc|tests/relay/relay.h|an example reaching into the services"
  "examples/interop_server.cc|client/lint/lint.h|an example reaching into the services")

# tree(NAME ROWS...): a tree under WORK/NAME holding the allowed includes
# and ROWS ("file|include|..."); its path in tree_root.
function(tree name)
  set(root ${WORK}/${name})
  file(REMOVE_RECURSE ${root})
  foreach(row IN LISTS allowed ARGN)
    string(REPLACE "|" ";" cells "${row}")
    list(GET cells 0 path)
    list(GET cells 1 header)
    file(APPEND ${root}/${path} "#include \"${header}\"\n")
  endforeach()
  set(tree_root ${root} PARENT_SCOPE)
endfunction()

function(run_check root)
  execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${root} -P ${CHECK}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(check_rc ${rc} PARENT_SCOPE)
  set(check_text "${out}${err}" PARENT_SCOPE)
endfunction()

set(failures "")
tree(clean)
run_check(${tree_root})
if(NOT check_rc EQUAL 0)
  list(APPEND failures "the allowed includes were refused:\n${check_text}")
endif()
set(n 0)
foreach(row IN LISTS crossings)
  math(EXPR n "${n} + 1")
  string(REPLACE "|" ";" cells "${row}")
  list(GET cells 2 says)
  tree(crossing_${n} "${row}")
  run_check(${tree_root})
  if(check_rc EQUAL 0)
    list(APPEND failures "passed with a crossing: ${row}")
  elseif(NOT check_text MATCHES "layering:")
    list(APPEND failures "${row}: failed without naming a crossing:\n${check_text}")
  else()
    string(FIND "${check_text}" "${says}" at)
    if(at EQUAL -1)
      list(APPEND failures "${row}: the failure does not say '${says}':\n${check_text}")
    endif()
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK})
if(failures)
  list(JOIN failures "\n" text)
  message(FATAL_ERROR "${text}")
endif()
message(STATUS "layers check: the allowed includes pass, each of ${n} crossings fails")
