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

# hopbudget_add_system_protos(<target> ROOT <dir> PROTOS <paths relative to ROOT...>
#                             [IMPORTS <more import roots...>] [NO_GRPC])
#
# For protos installed by Debian (grpc-proto under /usr/share/grpc-proto):
# protobuf_generate cannot name their outputs (they live outside the source
# tree), so protoc runs directly with ROOT (then IMPORTS) as the import
# roots. Generates gRPC stubs too unless NO_GRPC is given.
function(hopbudget_add_system_protos target)
  cmake_parse_arguments(ARG "NO_GRPC" "ROOT" "PROTOS;IMPORTS" ${ARGN})
  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/gen")
  file(MAKE_DIRECTORY "${out_dir}")
  set(includes -I ${ARG_ROOT})
  foreach(dir ${ARG_IMPORTS})
    list(APPEND includes -I ${dir})
  endforeach()
  set(outputs)
  foreach(rel ${ARG_PROTOS})
    string(REGEX REPLACE "\\.proto$" "" stem "${rel}")
    set(files "${out_dir}/${stem}.pb.cc" "${out_dir}/${stem}.pb.h")
    set(grpc_args)
    set(grpc_deps)
    if(NOT ARG_NO_GRPC)
      list(APPEND files "${out_dir}/${stem}.grpc.pb.cc" "${out_dir}/${stem}.grpc.pb.h")
      set(grpc_args --grpc_out=${out_dir}
          --plugin=protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>)
      set(grpc_deps gRPC::grpc_cpp_plugin)
    endif()
    add_custom_command(OUTPUT ${files}
      COMMAND protobuf::protoc
      ARGS --cpp_out=${out_dir} ${grpc_args} ${includes} ${ARG_ROOT}/${rel}
      DEPENDS ${ARG_ROOT}/${rel} protobuf::protoc ${grpc_deps}
      COMMENT "protoc ${rel}" VERBATIM)
    list(APPEND outputs ${files})
  endforeach()
  target_sources(${target} PRIVATE ${outputs})
  target_include_directories(${target} PUBLIC "$<BUILD_INTERFACE:${out_dir}>")
endfunction()
