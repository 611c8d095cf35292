# Runs one real binary with one command line and checks how it ends: its
# exit status, and a substring of what it printed (stdout for status 0,
# stderr otherwise). Used by the ctests cli.<binary>.<case>
# (hopbudget_cli_check in CMakeLists.txt).
#   cmake -DBIN=path -DARGS="a|b|c" -DSTATUS=2 -DEXPECT="--port=x" -P cli_check.cmake
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND "${BIN}" ${args}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT "${rc}" STREQUAL "${STATUS}")
  message(FATAL_ERROR "${BIN} ${args}: exit status ${rc}, want ${STATUS}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if("${STATUS}" STREQUAL "0")
  set(text "${out}")
else()
  set(text "${err}")
endif()
string(FIND "${text}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${BIN} ${args}: exit ${rc} as wanted, but \"${EXPECT}\" not in its "
                      "output\nstdout:\n${out}\nstderr:\n${err}")
endif()
