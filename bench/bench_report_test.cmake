# bench_report judges the README's targets: feeds it RESULT lines for
# cases where a target is met, missed, or cannot be judged, and checks the
# VERDICT lines it prints. Run by ctest (bench_report_verdicts):
#   cmake -DBENCH_REPORT=path/to/bench_report -DWORK_DIR=dir -P bench_report_test.cmake
file(MAKE_DIRECTORY "${WORK_DIR}")
set(failures 0)

# verdict(NAME SECTION INPUT REGEX): the VERDICT lines of SECTION for INPUT
# must match REGEX.
function(verdict name section input regex)
  file(WRITE "${WORK_DIR}/${name}.in" "${input}")
  execute_process(COMMAND "${BENCH_REPORT}" --section=${section}
    INPUT_FILE "${WORK_DIR}/${name}.in" RESULT_VARIABLE rc
    OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(SEND_ERROR "${name}: bench_report exited ${rc}: ${err}")
  elseif(NOT err MATCHES "${regex}")
    message(SEND_ERROR "${name}: expected /${regex}/ in:\n${err}")
  else()
    message(STATUS "${name}: ok")
  endif()
endfunction()

set(nl "\n")
# Cancel: met; every call lost; a few lost; no results at all.
verdict(cancel_met cancel
  "RESULT bench=cancel hops=3 calls=500 p50_ms=0.3 p90_ms=0.4 p99_ms=0.6 max_ms=0.9 lost=0 p99_all_ms=0.6${nl}"
  "third hop: p99 <= 2 ms \\| p99 0.600 ms \\| met${nl}")
verdict(cancel_all_lost cancel
  "RESULT bench=cancel hops=3 calls=0 p50_ms=0 p90_ms=0 p99_ms=0 max_ms=0 lost=500 p99_all_ms=inf${nl}"
  "\\| \\*\\*missed\\*\\* \\(500 of 500 calls lost")
verdict(cancel_some_lost cancel
  "RESULT bench=cancel hops=3 calls=490 p50_ms=0.3 p90_ms=0.4 p99_ms=0.6 max_ms=0.9 lost=10 p99_all_ms=inf${nl}"
  "\\*\\*missed\\*\\* \\(10 of 500 calls lost")
verdict(cancel_none cancel "" "third hop: p99 <= 2 ms \\| - \\| not measured")
# Precision: a source whose calls were not attributed misses; absent sources
# are not measured.
verdict(precision_wrong precision
  "RESULT bench=precision source=client calls=0 p50_ms=0 p99_ms=0 max_ms=0 wrong=500 budget_ms=10 p99_all_ms=inf${nl}"
  "precision, client: p99 lateness <= 1 ms \\| [^|]*\\| \\*\\*missed\\*\\* \\(500 of 500 calls not attributed.*precision, attempt: p99 lateness <= 1 ms \\| - \\| not measured")
verdict(precision_met precision
  "RESULT bench=precision source=request calls=500 p50_ms=0.2 p99_ms=0.8 max_ms=3 wrong=0 budget_ms=10 p99_all_ms=0.8${nl}"
  "precision, request: p99 lateness <= 1 ms \\| p99 0.800 ms \\| met")
# Scale: a thread per call misses; calls that did not all park cannot be judged.
verdict(scale_thread_per_call scale
  "RESULT bench=scale mode=plain concurrency=10000 rounds=1 min_parked=10000 threads_before=14 threads_parked=19 threads_after=19${nl}RESULT bench=scale mode=hopbudget concurrency=10000 rounds=1 min_parked=10000 threads_before=14 threads_parked=10016 threads_after=16${nl}"
  "10000 parked calls: [^|]*\\| threads \\+10002 [^|]*\\| \\*\\*missed\\*\\*")
verdict(scale_met scale
  "RESULT bench=scale mode=plain concurrency=10000 rounds=1 min_parked=10000 threads_before=11 threads_parked=22 threads_after=22${nl}RESULT bench=scale mode=hopbudget concurrency=10000 rounds=1 min_parked=10000 threads_before=15 threads_parked=15 threads_after=15${nl}"
  "10000 parked calls: [^|]*\\| threads \\+0 [^|]*\\| met")
verdict(scale_not_parked scale
  "RESULT bench=scale mode=plain concurrency=10000 rounds=1 min_parked=10000 threads_before=11 threads_parked=22 threads_after=22${nl}RESULT bench=scale mode=hopbudget concurrency=10000 rounds=1 min_parked=9000 threads_before=15 threads_parked=15 threads_after=15${nl}"
  "10000 parked calls: [^|]*\\| - \\| not measured \\(not every call parked")
verdict(scale_none scale "" "10000 parked calls: [^|]*\\| - \\| not measured")
# Overhead: met, missed, failed calls, and the API that was not run.
set(overhead_rounds "")
foreach(mode_qps_p99 "plain;1000;100" "hopbudget;990;105")
  list(GET mode_qps_p99 0 mode)
  list(GET mode_qps_p99 1 qps)
  list(GET mode_qps_p99 2 p99)
  string(APPEND overhead_rounds
    "RESULT bench=overhead api=callback mode=${mode} inflight=32 round=1 qps=${qps} p50_us=50 p99_us=${p99} calls=1 errors=0 cpu_us_per_call=10${nl}")
endforeach()
verdict(overhead_met overhead "${overhead_rounds}"
  "callback API, 32 in flight: [^|]*\\| QPS 0.990, p99 1.050x \\| QPS met, p99 met.*sync API, 32 in flight: [^|]*\\| - \\| not measured")
string(REPLACE "qps=990" "qps=600" overhead_slow "${overhead_rounds}")
verdict(overhead_missed overhead "${overhead_slow}" "\\| QPS \\*\\*missed\\*\\*, p99 met")
string(REPLACE "errors=0 cpu_us_per_call=10${nl}RESULT bench=overhead api=callback mode=hopbudget"
  "errors=7 cpu_us_per_call=10${nl}RESULT bench=overhead api=callback mode=hopbudget"
  overhead_errors "${overhead_rounds}")
verdict(overhead_errors overhead "${overhead_errors}" "\\| not measured \\(7 calls failed\\)")
