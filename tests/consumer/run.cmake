# cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DEXTRA_FLAGS=...
#       [-DCOMPONENTS=http] [-DHIDE_HTTPLIB=ON] [-DPKG_CONFIG_BUILD=ON] -P run.cmake
# Installs the built library into a scratch prefix, then builds and runs the
# consumer project against it, as a user would:
#   - with find_package(hopbudget CONFIG COMPONENTS ${COMPONENTS});
#     HIDE_HTTPLIB points pkg-config at a copy of its search path without
#     cpp-httplib.pc, so cpp-httplib cannot be found: the core must not
#     need it (gRPC's own package config still needs pkg-config for RE2);
#   - or, with PKG_CONFIG_BUILD, with the compiler alone and the flags of
#     `pkg-config --cflags --libs hopbudget`.
file(REMOVE_RECURSE "${WORK_DIR}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")

if(PKG_CONFIG_BUILD)
  find_program(PKG_CONFIG pkg-config REQUIRED)
  file(GLOB pc_dirs "${WORK_DIR}/prefix/lib*/pkgconfig" "${WORK_DIR}/prefix/lib/*/pkgconfig")
  list(JOIN pc_dirs ":" pc_path)
  set(ENV{PKG_CONFIG_PATH} "${pc_path}")
  execute_process(COMMAND ${PKG_CONFIG} --cflags --libs hopbudget
    OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config --cflags --libs hopbudget failed (${rc}) with ${pc_path}")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  separate_arguments(extra UNIX_COMMAND "${EXTRA_FLAGS}")
  file(MAKE_DIRECTORY "${WORK_DIR}/build")
  run(c++ -std=c++17 ${extra} "${SOURCE_DIR}/main.cc" -o "${WORK_DIR}/build/consumer" ${flags})
  run("${WORK_DIR}/build/consumer")
  return()
endif()

if(HIDE_HTTPLIB)
  find_program(PKG_CONFIG pkg-config REQUIRED)
  execute_process(COMMAND ${PKG_CONFIG} --variable pc_path pkg-config
    OUTPUT_VARIABLE pc_path OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REPLACE ":" ";" pc_dirs "${pc_path}")
  set(no_httplib "${WORK_DIR}/pkg-config-without-httplib")
  file(MAKE_DIRECTORY "${no_httplib}")
  foreach(dir IN LISTS pc_dirs)
    file(GLOB pcs "${dir}/*.pc")
    foreach(pc IN LISTS pcs)
      get_filename_component(name "${pc}" NAME)
      if(NOT name STREQUAL "cpp-httplib.pc" AND NOT EXISTS "${no_httplib}/${name}")
        file(CREATE_LINK "${pc}" "${no_httplib}/${name}" SYMBOLIC)
      endif()
    endforeach()
  endforeach()
  set(ENV{PKG_CONFIG_LIBDIR} "${no_httplib}")
  set(ENV{PKG_CONFIG_PATH} "")
  execute_process(COMMAND ${PKG_CONFIG} --exists cpp-httplib RESULT_VARIABLE found)
  if(found EQUAL 0)
    message(FATAL_ERROR "cpp-httplib is still visible to pkg-config")
  endif()
endif()
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/build"
    "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" "-DCMAKE_CXX_FLAGS=${EXTRA_FLAGS}"
    "-DCMAKE_EXE_LINKER_FLAGS=${EXTRA_FLAGS}" "-DHOPBUDGET_COMPONENTS=${COMPONENTS}")
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/consumer")
run("${WORK_DIR}/build/drop_in")
