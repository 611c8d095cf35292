# Runs hopbudget-lint once and checks its exit status and output.
#   cmake -DLINT=<binary> -DARGS="<arg>|<arg>..." [-DSTDIN=<file>] -DEXIT=<status>
#         -DSTDOUT=<regex> [-DSTDERR=<regex>] -P run_lint.cmake
# (ARGS is split at '|': a ';' would not survive add_test.)
string(REPLACE "|" ";" ARGS "${ARGS}")
if(DEFINED STDIN)
  execute_process(COMMAND ${LINT} ${ARGS} INPUT_FILE ${STDIN}
    RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
else()
  execute_process(COMMAND ${LINT} ${ARGS}
    RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
endif()
set(problems "")
if(NOT status STREQUAL EXIT)
  string(APPEND problems "exit status ${status}, expected ${EXIT}\n")
endif()
if(DEFINED STDOUT AND NOT out MATCHES "${STDOUT}")
  string(APPEND problems "stdout does not match: ${STDOUT}\n")
endif()
if(DEFINED STDERR AND NOT err MATCHES "${STDERR}")
  string(APPEND problems "stderr does not match: ${STDERR}\n")
endif()
if(problems)
  message(FATAL_ERROR "${problems}--- stdout:\n${out}--- stderr:\n${err}")
endif()
