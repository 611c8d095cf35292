# hopbudget_add_protos(<target> PROTOS <files...> [GRPC])
#
# Compiles .proto files of this repository into <target> with
# protobuf_generate (and grpc_cpp_plugin when GRPC is given). Must be called
# from proto/CMakeLists.txt: FindProtobuf (CMake 3.25) names the generated
# files after the .proto's path relative to the current source directory,
# which is then also the import root. Output goes to the build tree only.
function(hopbudget_add_protos target)
  cmake_parse_arguments(ARG "GRPC" "" "PROTOS" ${ARGN})
  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/gen")
  file(MAKE_DIRECTORY "${out_dir}")
  target_sources(${target} PRIVATE ${ARG_PROTOS})
  protobuf_generate(TARGET ${target} LANGUAGE cpp PROTOC_OUT_DIR "${out_dir}")
  if(ARG_GRPC)
    protobuf_generate(TARGET ${target} LANGUAGE grpc
      GENERATE_EXTENSIONS .grpc.pb.h .grpc.pb.cc
      PLUGIN "protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>"
      PROTOC_OUT_DIR "${out_dir}")
  endif()
  target_include_directories(${target} PUBLIC "$<BUILD_INTERFACE:${out_dir}>")
endfunction()

# hopbudget_add_system_protos(<target> ROOT <dir> PROTOS <paths relative to ROOT...>)
#
# For protos installed by Debian (grpc-proto under /usr/share/grpc-proto):
# protobuf_generate cannot name their outputs (they live outside the source
# tree), so protoc runs directly with ROOT as the import root. Always
# generates gRPC stubs too.
function(hopbudget_add_system_protos target)
  cmake_parse_arguments(ARG "" "ROOT" "PROTOS" ${ARGN})
  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/gen")
  file(MAKE_DIRECTORY "${out_dir}")
  set(outputs)
  foreach(rel ${ARG_PROTOS})
    string(REGEX REPLACE "\\.proto$" "" stem "${rel}")
    set(files "${out_dir}/${stem}.pb.cc" "${out_dir}/${stem}.pb.h"
              "${out_dir}/${stem}.grpc.pb.cc" "${out_dir}/${stem}.grpc.pb.h")
    add_custom_command(OUTPUT ${files}
      COMMAND protobuf::protoc
      ARGS --cpp_out=${out_dir} --grpc_out=${out_dir}
           --plugin=protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>
           -I ${ARG_ROOT} ${ARG_ROOT}/${rel}
      DEPENDS ${ARG_ROOT}/${rel} protobuf::protoc gRPC::grpc_cpp_plugin
      COMMENT "protoc ${rel}" VERBATIM)
    list(APPEND outputs ${files})
  endforeach()
  target_sources(${target} PRIVATE ${outputs})
  target_include_directories(${target} PUBLIC "$<BUILD_INTERFACE:${out_dir}>")
endfunction()
