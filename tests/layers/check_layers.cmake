# Fails when a part of the tree reaches past the walls docs/layout.md draws:
#   the library (interceptors/):
#     core/, http/ and prometheus/ include no gRPC header (they must build
#     without gRPC; the service config's generated protobuf header is not
#     one);
#     core/ includes no header of http/ or grpc/;
#     no layer includes anything of the demo, the tools, the benchmarks, the
#     examples or the tests (server/, client/, bench/, examples/, tests/,
#     nor the demo's and the examples' wire: demo/, echo/);
#   the services (server/) and the tools (client/) meet only in the command
#   line every binary reads, client/cli/ (target hopbudget_cli): a service
#   includes nothing else of client/, a tool nothing of server/;
#   the benchmarks and the examples include nothing of the services, the
#   tests, each other, or of the tools but client/cli/.
# (The build already refuses an adapter or http header in core/: it is not
# on the core's include path. gRPC's headers and the project's root are on
# many include paths, so this scan is what keeps them out.)
# tests/layers/check_layers_self_test.cmake runs it on trees with one
# crossing each.
# Run as: cmake -DROOT=<source dir> -P check_layers.cmake
file(GLOB_RECURSE core_files ${ROOT}/interceptors/core/*.h ${ROOT}/interceptors/core/*.cc)
file(GLOB_RECURSE http_files ${ROOT}/interceptors/http/*.h ${ROOT}/interceptors/http/*.cc
     ${ROOT}/interceptors/prometheus/*.h ${ROOT}/interceptors/prometheus/*.cc)
set(bad "")
foreach(f IN LISTS core_files http_files)
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"](grpc/|grpcpp/|grpc_glue|attributed_status|attempt_result)")
  foreach(l IN LISTS lines)
    # The service config is a protobuf message (grpc-proto), not gRPC's
    # library: the core reads it with protobuf alone.
    if(NOT l MATCHES "[<\"]grpc/service_config/service_config\\.pb\\.h[>\"]")
      list(APPEND bad "${f}: ${l}")
    endif()
  endforeach()
endforeach()
foreach(f IN LISTS core_files)
  file(STRINGS ${f} lines REGEX "hopbudget/(advanced/)?(client|server|retry|retry_loop|shield_grpc|hedge_grpc|race_grpc|slots_grpc|remaining_grpc|http_exporter|prometheus_collectable)\\.h")
  foreach(l IN LISTS lines)
    list(APPEND bad "${f}: ${l}")
  endforeach()
endforeach()

# check_wall(DIR PATTERN WHY): every #include "..." in DIR's sources whose
# path matches PATTERN is a crossing, reported with WHY.
set(include_re "^[ \t]*#[ \t]*include[ \t]*\"")
function(check_wall dir pattern why)
  file(GLOB_RECURSE files ${ROOT}/${dir}/*.h ${ROOT}/${dir}/*.cc ${ROOT}/${dir}/*.inc)
  set(found "")
  foreach(f IN LISTS files)
    file(STRINGS ${f} lines REGEX "${include_re}(${pattern})")
    foreach(l IN LISTS lines)
      list(APPEND found "${f}: ${l} (${why})")
    endforeach()
  endforeach()
  set(bad ${bad} ${found} PARENT_SCOPE)
endfunction()

check_wall(interceptors "server/|client/|bench/|examples/|tests/|demo/|echo/"
  "the library reaching up into what is built on it")
check_wall(server "client/[^c]|client/c[^l]|client/cl[^i]|client/cli[^/]|bench/|examples/|tests/"
  "a service reaching into a tool, a benchmark, an example or a test: only client/cli/ is shared")
check_wall(client "server/|bench/|examples/|tests/"
  "a tool reaching into the services' sources, a benchmark, an example or a test")
check_wall(bench "server/|client/[^c]|client/c[^l]|client/cl[^i]|client/cli[^/]|examples/|tests/"
  "a benchmark reaching into the services, a tool, an example or a test: only client/cli/ is shared")
check_wall(examples "server/|client/[^c]|client/c[^l]|client/cl[^i]|client/cli[^/]|bench/|tests/"
  "an example reaching into the services, a tool, a benchmark or a test: only client/cli/ is shared")

list(LENGTH core_files n_core)
if(n_core EQUAL 0)
  message(FATAL_ERROR "no core sources found under ${ROOT}/interceptors/core")
endif()
if(bad)
  list(JOIN bad "\n  " text)
  message(FATAL_ERROR "layering: an include crosses a wall:\n  ${text}")
endif()
message(STATUS "layers ok: ${n_core} core files, no gRPC or adapter include below the adapters, "
  "no include across the walls between the library, the services, the tools, the benchmarks "
  "and the examples")
