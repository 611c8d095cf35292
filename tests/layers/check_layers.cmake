# Fails when a layer of the library reaches past the one below it:
#   core/, http/ and prometheus/ include no gRPC header (they must build
#   without gRPC; the service config's generated protobuf header is not
#   one);
#   core/ includes no header of http/ or grpc/;
#   the tools (client/) include nothing from the services (server/).
# (The build already refuses an adapter or http header in core/: it is not
# on the core's include path. gRPC's headers are on every include path, so
# this scan is what keeps them out.)
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
# The tools (client/) talk to the demo's services over their wire (proto/)
# only: none includes the services' sources.
file(GLOB_RECURSE tool_files ${ROOT}/client/*.h ${ROOT}/client/*.cc)
foreach(f IN LISTS tool_files)
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"server/")
  foreach(l IN LISTS lines)
    list(APPEND bad "${f}: ${l} (a tool reaching into the services' sources)")
  endforeach()
endforeach()
list(LENGTH core_files n_core)
if(n_core EQUAL 0)
  message(FATAL_ERROR "no core sources found under ${ROOT}/interceptors/core")
endif()
if(bad)
  list(JOIN bad "\n  " text)
  message(FATAL_ERROR "layering: a lower layer includes a higher one:\n  ${text}")
endif()
message(STATUS "layers ok: ${n_core} core files, no gRPC or adapter include below the adapters")
