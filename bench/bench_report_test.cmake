# bench_report judges the targets of docs/benchmarks.md: feeds it RESULT lines for
# cases where a target is met, missed, or cannot be judged, and checks the
# VERDICT lines it prints. Run by ctest (bench_report_verdicts):
#   cmake -DBENCH_REPORT=path/to/bench_report -DWORK_DIR=dir -P bench_report_test.cmake
file(MAKE_DIRECTORY "${WORK_DIR}")
set(failures 0)

# report_matches(STREAM NAME SECTION INPUT REGEX): what bench_report
# --section=SECTION prints on STREAM (stdout: its tables; stderr: its
# VERDICT lines) for INPUT must match REGEX.
function(report_matches stream name section input regex)
  file(WRITE "${WORK_DIR}/${name}.in" "${input}")
  execute_process(COMMAND "${BENCH_REPORT}" --section=${section}
    INPUT_FILE "${WORK_DIR}/${name}.in" RESULT_VARIABLE rc
    OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(stream STREQUAL "stdout")
    set(text "${out}")
  else()
    set(text "${err}")
  endif()
  if(NOT rc EQUAL 0)
    message(SEND_ERROR "${name}: bench_report exited ${rc}: ${err}")
  elseif(NOT text MATCHES "${regex}")
    message(SEND_ERROR "${name}: expected /${regex}/ on ${stream}:\n${text}")
  else()
    message(STATUS "${name}: ok")
  endif()
endfunction()
# verdict(NAME SECTION INPUT REGEX): the VERDICT lines of SECTION for INPUT
# must match REGEX.
function(verdict name section input regex)
  report_matches(stderr "${name}" "${section}" "${input}" "${regex}")
endfunction()
# rendered(NAME SECTION INPUT REGEX): the tables bench_report prints for
# INPUT must match REGEX.
function(rendered name section input regex)
  report_matches(stdout "${name}" "${section}" "${input}" "${regex}")
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
# Hedge: met; p99 ratio and load missed; a race that lost cancels; nothing.
verdict(hedge_met hedge
  "RESULT bench=hedge run=hedged calls=4000 p50_ms=1 p99_ms=3 p999_ms=9 max_ms=20 failed=0 extra_load=0.03${nl}RESULT bench=hedge_target hedged_p99_ms=3 healthy_p99_ms=2 ratio=1.5 extra_load=0.03 p99_met=1 load_met=1${nl}RESULT bench=race_cancel races=200 p50_ms=0.4 p90_ms=0.6 p99_ms=0.9 max_ms=1.2 lost=0 not_reached=0 p99_all_ms=0.9 target_met=1${nl}"
  "ratio 1.50 \\| met.*extra load <= 5 % \\| 3.00 % \\| met.*p99 0.900 ms \\| met")
verdict(hedge_missed hedge
  "RESULT bench=hedge_target hedged_p99_ms=9 healthy_p99_ms=2 ratio=4.5 extra_load=0.08 p99_met=0 load_met=0${nl}RESULT bench=race_cancel races=190 p50_ms=0.4 p90_ms=0.6 p99_ms=0.9 max_ms=1.2 lost=10 not_reached=0 p99_all_ms=inf target_met=0${nl}"
  "ratio 4.50 \\| \\*\\*missed\\*\\*.*8.00 % \\| \\*\\*missed\\*\\*.*10 cancels lost\\) \\| \\*\\*missed\\*\\*")
verdict(hedge_rounds hedge
  "RESULT bench=hedge run=healthy round=1 calls=4000 p50_ms=1 p99_ms=2 p999_ms=3 max_ms=4 failed=0 extra_load=0${nl}RESULT bench=hedge_round round=1 hedged_p99_ms=5 healthy_p99_ms=2 ratio=2.5${nl}RESULT bench=hedge_target rounds=3 hedged_p99_ms=3 healthy_p99_ms=2 ratio=1.8 ratio_min=1.2 ratio_max=2.5 extra_load=0.04 extra_load_all=0.041 p99_met=1 load_met=1${nl}"
  "median of 3 rounds: hedged 3.00 ms, healthy 2.00 ms, ratio 1.80 \\(1.20..2.50\\) \\| met")
verdict(hedge_none hedge "" "extra load <= 5 % \\| - \\| not measured")
# Replicas that do work are judged; those that answer at once are not.
verdict(hedge_judged_with_service_time hedge
  "RESULT bench=hedge_target rounds=3 hedged_p99_ms=8 healthy_p99_ms=5 ratio=1.6 ratio_min=1.5 ratio_max=1.7 extra_load=0.045 p99_met=1 load_met=1 service_ms=2.000${nl}RESULT bench=hedge_target rounds=3 hedged_p99_ms=2.4 healthy_p99_ms=1 ratio=2.4 ratio_min=2.1 ratio_max=2.8 extra_load=0.04 p99_met=0 load_met=1 service_ms=0.000${nl}"
  "service time 2.0 ms, median of 3 rounds: hedged 8.00 ms, healthy 5.00 ms, ratio 1.60 \\(1.50..1.70\\) \\| met.*4.50 % \\| met")
# Admission: met; a queue that costs a thread per call and too much memory;
# a queue that never filled; a run that lost calls; nothing at all.
set(adm_parked "RESULT bench=admission mode=parked api=callback calls=10000 waiting=10000 reached=1 drained=1 failed=0 rss_bytes_per_call=9000 heap_bytes_per_call=7000 threads_before=12 threads_waiting=13 threads_after=13${nl}")
verdict(admission_met admission
  "${adm_parked}RESULT bench=admission mode=queued api=callback calls=10000 waiting=10000 reached=1 drained=1 failed=0 rss_bytes_per_call=9500 heap_bytes_per_call=7400 threads_before=12 threads_waiting=14 threads_after=14${nl}RESULT bench=admission mode=queued api=sync calls=10000 waiting=10000 reached=1 drained=1 failed=0 rss_bytes_per_call=9800 heap_bytes_per_call=7500 threads_before=12 threads_waiting=15 threads_after=15${nl}"
  "callback API, calls queued[^|]*\\| RSS 500 B/call beyond gRPC's own \\(heap 400\\), threads \\+2 for 10000 queued \\| met.*sync API[^|]*\\| RSS 800 B/call[^|]*\\| met")
verdict(admission_missed admission
  "${adm_parked}RESULT bench=admission mode=queued api=sync calls=10000 waiting=10000 reached=1 drained=1 failed=0 rss_bytes_per_call=40000 heap_bytes_per_call=9000 threads_before=12 threads_waiting=10014 threads_after=15${nl}"
  "callback API[^|]*\\| - \\| not measured.*sync API[^|]*\\| RSS 31000 B/call[^|]*threads \\+10002 for 10000 queued \\| \\*\\*missed\\*\\*")
verdict(admission_heap_missed admission
  "${adm_parked}RESULT bench=admission mode=queued api=callback calls=10000 waiting=10000 reached=1 drained=1 failed=0 rss_bytes_per_call=9100 heap_bytes_per_call=9000 threads_before=12 threads_waiting=12 threads_after=12${nl}"
  "callback API[^|]*\\| RSS 100 B/call beyond gRPC's own \\(heap 2000\\)[^|]*\\| \\*\\*missed\\*\\*")
verdict(admission_not_queued admission
  "${adm_parked}RESULT bench=admission mode=queued api=callback calls=10000 waiting=9000 reached=0 drained=1 failed=0 rss_bytes_per_call=9000 heap_bytes_per_call=7000 threads_before=12 threads_waiting=12 threads_after=12${nl}"
  "callback API[^|]*\\|[^|]*\\| not measured \\(not every call was queued")
verdict(admission_failed_calls admission
  "${adm_parked}RESULT bench=admission mode=queued api=callback calls=10000 waiting=10000 reached=1 drained=0 failed=7 rss_bytes_per_call=9000 heap_bytes_per_call=7000 threads_before=12 threads_waiting=12 threads_after=12${nl}"
  "callback API[^|]*\\|[^|]*\\| \\*\\*missed\\*\\* \\(7 calls failed, drained 0\\)")
verdict(admission_none admission "" "callback API[^|]*\\| - \\| not measured.*sync API[^|]*\\| - \\| not measured")
# Slots: met; a thread per waiting call; waits that expire late; a call
# that reached the server; callers never answered; a run where the callers
# did not all wait at once; too few callers; nothing at all.
set(slots_ok "RESULT bench=slots calls=10000 slots=100 rounds=3 waiting=10000 all_waited=1 threads_before=15 threads_waiting=16 threads_after=16 own_threads_before=2 own_threads_waiting=2 own_threads_after=2 heap_bytes_per_call=600 rss_bytes_per_call=700 expired=30000 wrong=0 lost=0 late_p50_ms=0.300 late_p99_ms=1.200 late_max_ms=3.000 late_min_ms=0.010 p99_all_ms=1.200 server_calls=0${nl}")
verdict(slots_met slots "${slots_ok}"
  "100 slots: no thread growth[^|]*\\| outside gRPC's pools \\+0 \\(2 -> 2\\), all \\+1 \\(15 -> 16\\) while 10000 waited \\| met.*waits expire on time[^|]*\\| p99 1.200 ms[^|]*\\| met.*reaches the server[^|]*\\| 0 calls reached the server, 0 answered otherwise, 0 never answered \\| met")
# slots_case(NAME REGEX FROM TO [FROM TO ...]): the met run with each FROM
# replaced by its TO must give verdicts matching REGEX.
function(slots_case name regex)
  set(input "${slots_ok}")
  set(pairs ${ARGN})
  while(pairs)
    list(POP_FRONT pairs from to)
    string(REPLACE "${from}" "${to}" input "${input}")
  endwhile()
  verdict(${name} slots "${input}" "${regex}")
endfunction()
slots_case(slots_thread_per_call
  "no thread growth[^|]*\\| outside gRPC's pools \\+10000 [^|]*\\| \\*\\*missed\\*\\*"
  "own_threads_waiting=2" "own_threads_waiting=10002")
slots_case(slots_one_more_thread
  "no thread growth[^|]*\\| outside gRPC's pools \\+1 [^|]*\\| \\*\\*missed\\*\\*"
  "own_threads_waiting=2" "own_threads_waiting=3")
slots_case(slots_grpc_pool_grew
  "no thread growth[^|]*\\| [^|]*all \\+25 \\(15 -> 40\\)[^|]*\\| \\*\\*missed\\*\\*"
  "threads_waiting=16 threads_after" "threads_waiting=40 threads_after")
slots_case(slots_late "waits expire on time[^|]*\\| p99 21.000 ms[^|]*\\| \\*\\*missed\\*\\*"
  "p99_all_ms=1.200" "p99_all_ms=21.000")
slots_case(slots_reached_server
  "reaches the server[^|]*\\| 3 calls reached the server[^|]*\\| \\*\\*missed\\*\\*"
  "server_calls=0" "server_calls=3")
slots_case(slots_lost
  "waits expire on time[^|]*\\| p99 inf \\(lost calls\\)[^|]*\\| \\*\\*missed\\*\\* \\(0 answered otherwise, 200 never answered, counted as late\\).*reaches the server[^|]*\\| [^|]*200 never answered \\| \\*\\*missed\\*\\*"
  "lost=0 late_p50_ms" "lost=200 late_p50_ms" "p99_all_ms=1.200" "p99_all_ms=inf")
slots_case(slots_not_all_waiting
  "no thread growth[^|]*\\|[^|]*\\| not measured \\(not every caller was waiting at once\\)"
  "all_waited=1" "all_waited=0")
slots_case(slots_too_few
  "no thread growth[^|]*\\| - \\| not measured \\(fewer than 10000 callers\\)"
  "calls=10000" "calls=100")
verdict(slots_none slots ""
  "no thread growth[^|]*\\| - \\| not measured.*on time[^|]*\\| - \\| not measured.*server[^|]*\\| - \\| not measured")
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
foreach(mode_qps_p99_cpu "plain;1000;100;5" "noop;1000;100;6" "budget-only;990;105;6.1"
        "retry-loop;985;106;6.2" "retrying-channel;700;150;9")
  list(GET mode_qps_p99_cpu 0 mode)
  list(GET mode_qps_p99_cpu 1 qps)
  list(GET mode_qps_p99_cpu 2 p99)
  list(GET mode_qps_p99_cpu 3 cpu)
  string(APPEND overhead_rounds
    "RESULT bench=overhead api=callback mode=${mode} inflight=32 round=1 qps=${qps} p50_us=50 p99_us=${p99} calls=1 errors=0 cpu_us_per_call=10 client_cpu_us=${cpu} server_cpu_us=${cpu}${nl}")
endforeach()
verdict(overhead_met overhead "${overhead_rounds}"
  "callback API, 32 in flight, budget-only: [^|]*\\| QPS 0.990x plain, 0.990x no-op; p99 1.050x plain; CPU 1.017x \\(client\\), 1.017x \\(server\\) no-op \\| met.*callback API, 32 in flight, retry-loop: [^|]*\\| [^|]*\\| met.*sync API, 32 in flight, budget-only: [^|]*\\| - \\| not measured")
string(REPLACE "mode=retry-loop inflight=32 round=1 qps=985" "mode=retry-loop inflight=32 round=1 qps=600"
  overhead_slow "${overhead_rounds}")
verdict(overhead_missed overhead "${overhead_slow}"
  "retry-loop: [^|]*\\| [^|]*\\| \\*\\*missed\\*\\*: QPS vs plain, QPS vs no-op")
string(REPLACE "client_cpu_us=6.2 server_cpu_us=6.2" "client_cpu_us=6.2 server_cpu_us=9"
  overhead_cpu "${overhead_rounds}")
verdict(overhead_cpu overhead "${overhead_cpu}"
  "retry-loop: [^|]*\\| [^|]*\\| \\*\\*missed\\*\\*: server CPU")
string(REPLACE "mode=budget-only inflight=32 round=1 qps=990 p50_us=50 p99_us=105 calls=1 errors=0"
  "mode=budget-only inflight=32 round=1 qps=990 p50_us=50 p99_us=105 calls=1 errors=7"
  overhead_errors "${overhead_rounds}")
verdict(overhead_errors overhead "${overhead_errors}" "budget-only: [^|]*\\| - \\| not measured \\(7 calls failed\\)")
# The policy table beside one policy: within budget-only's own spread over
# rounds, a table far slower than it, and one round (no spread to judge by).
set(table_rounds "")
foreach(round_base_table "1;1000;995" "2;1030;1020" "3;980;990")
  list(GET round_base_table 0 round)
  list(GET round_base_table 1 base)
  list(GET round_base_table 2 table)
  string(APPEND table_rounds
    "RESULT bench=overhead api=callback mode=budget-only inflight=32 round=${round} qps=${base} p50_us=50 p99_us=100 calls=1 errors=0 cpu_us_per_call=10 client_cpu_us=6 server_cpu_us=6${nl}"
    "RESULT bench=overhead api=callback mode=hop-table inflight=32 round=${round} qps=${table} p50_us=50 p99_us=100 calls=1 errors=0 cpu_us_per_call=10 client_cpu_us=6 server_cpu_us=6${nl}")
endforeach()
verdict(table_met overhead "${table_rounds}"
  "policy table, callback API, 32 in flight[^|]*\\| QPS 0.995x[^|]*its spread QPS 5.0 %[^|]*\\| met.*policy table, sync API[^|]*\\| - \\| not measured")
string(REPLACE "mode=hop-table inflight=32 round=2 qps=1020" "mode=hop-table inflight=32 round=2 qps=800"
  table_slow "${table_rounds}")
string(REPLACE "mode=hop-table inflight=32 round=3 qps=990" "mode=hop-table inflight=32 round=3 qps=800"
  table_slow "${table_slow}")
verdict(table_missed overhead "${table_slow}"
  "policy table, callback API[^|]*\\| [^|]*\\| \\*\\*missed\\*\\*: QPS")
string(REGEX REPLACE "RESULT[^\n]*round=[23][^\n]*\n" "" table_one "${table_rounds}")
verdict(table_one_round overhead "${table_one}"
  "policy table, callback API[^|]*\\| - \\| not measured \\(fewer than 3 rounds")

# Reload: met; a failed call; a mixed budget; a p99 beyond the steady
# rounds' spread; too few rounds.
set(reload_rounds "")
foreach(round_p99s "1;1000;1010" "2;1050;1040" "3;980;1001")
  list(GET round_p99s 0 round)
  list(GET round_p99s 1 steady)
  list(GET round_p99s 2 reloaded)
  string(APPEND reload_rounds
    "RESULT bench=reload mode=steady round=${round} rps=2000 calls=6000 failed=0 mixed=0 reloads=0 p50_us=300 p99_us=${steady} lag_max_ms=2${nl}"
    "RESULT bench=reload mode=reload round=${round} rps=2000 calls=6000 failed=0 mixed=0 reloads=59 p50_us=300 p99_us=${reloaded} lag_max_ms=2${nl}")
endforeach()
verdict(reload_met reload "${reload_rounds}"
  "reload under 2 000 calls/s[^|]*\\| 0 failed, 0 mixed; p99 1.010x the steady rounds', their spread 7.0 % \\| met")
string(REPLACE "mode=reload round=2 rps=2000 calls=6000 failed=0" "mode=reload round=2 rps=2000 calls=6000 failed=3"
  reload_failed "${reload_rounds}")
verdict(reload_failed reload "${reload_failed}" "reload under[^|]*\\| 3 failed[^|]*\\| \\*\\*missed\\*\\*: failed calls")
string(REPLACE "mode=reload round=3 rps=2000 calls=6000 failed=0 mixed=0" "mode=reload round=3 rps=2000 calls=6000 failed=0 mixed=1"
  reload_mixed "${reload_rounds}")
verdict(reload_mixed reload "${reload_mixed}" "reload under[^|]*\\| 0 failed, 1 mixed[^|]*\\| \\*\\*missed\\*\\*: mixed budgets")
string(REPLACE "p99_us=1040" "p99_us=2000" reload_slow "${reload_rounds}")
string(REPLACE "p99_us=1001" "p99_us=2000" reload_slow "${reload_slow}")
verdict(reload_slow reload "${reload_slow}" "reload under[^|]*\\| [^|]*\\| \\*\\*missed\\*\\*: p99")
string(REGEX REPLACE "RESULT[^\n]*round=[23][^\n]*\n" "" reload_one "${reload_rounds}")
verdict(reload_one_round reload "${reload_one}" "reload under[^|]*\\| - \\| not measured \\(fewer than 3 rounds")
verdict(reload_none reload "" "reload under[^|]*\\| - \\| not measured")

# Overload: judged on every round (one bad round misses); the CPU fit needs
# both kinds of call; no run at all.
set(ov_setup "RESULT bench=overload kind=setup capacity=1000 duration_s=2 budget_ms=500 rounds=2 placement=pinned${nl}")
set(ov_hops "gateway_calls=1000 gateway_refused=1000 gateway_cpu_ms=300 orders_calls=1000 orders_refused=0 orders_cpu_ms=200 ledger_calls=1000 ledger_refused=0 ledger_cpu_ms=200")
set(ov_hops2 "gateway_calls=2000 gateway_refused=6000 gateway_cpu_ms=800 orders_calls=2000 orders_refused=0 orders_cpu_ms=400 ledger_calls=2000 ledger_refused=0 ledger_cpu_ms=400")
set(ov_good "${ov_setup}RESULT bench=overload kind=round client=unthrottled factor=2 round=1 rate=2000 sent=4000 ok=1900 client_throttled=0 ok_p99_ms=120 work_after_deadline_ms=0 calls_started_after_deadline=0 ${ov_hops}${nl}RESULT bench=overload kind=round client=throttled factor=2 round=1 rate=2000 sent=2500 ok=1950 client_throttled=1500 ok_p99_ms=110 work_after_deadline_ms=0 calls_started_after_deadline=0 ${ov_hops2}${nl}")
verdict(overload_met overload "${ov_good}"
  "does not back off: [^|]*\\| worst round 95 % \\(2x, round 1\\) \\| met.*throttles itself: [^|]*\\| worst round 98 % \\(2x, round 1\\) \\| met.*at every level \\| 0 ms of work after the deadline, 0 calls started after it \\(all judged rounds\\) \\| met.*inside the budget at every level \\| highest p99 120.0 ms, budget 500 ms \\| met")
# The unbounded gateway's rounds are listed beside the bounded chain's, and
# a collapse there misses nothing.
set(ov_unbounded "${ov_good}RESULT bench=overload kind=round client=unthrottled gateway=unbounded factor=2 round=1 rate=2000 sent=4000 ok=20 client_throttled=0 ok_p99_ms=700 work_after_deadline_ms=90000 calls_started_after_deadline=40 ${ov_hops}${nl}")
# The unbounded chain's cold first load is reported beside the capacity.
rendered(overload_cold_start overload
  "${ov_good}RESULT bench=overload kind=cold rate=1000 duration_s=3 sent=3000 ok=2994${nl}"
  "Cold start \\(a chain that had seen no call, at 1000 calls/s for 3 s\\): 2994 of 3000 calls OK \\(99.8 %\\)")
verdict(overload_unbounded_not_judged overload "${ov_unbounded}"
  "does not back off: [^|]*\\| worst round 95 % \\(2x, round 1\\) \\| met.*0 ms of work after the deadline, 0 calls started after it \\(all judged rounds\\) \\| met.*highest p99 120.0 ms, budget 500 ms \\| met")
rendered(overload_unbounded_listed overload "${ov_unbounded}"
  "\\| 2x \\| unthrottled, unbounded gateway \\| 1 \\| 1 % / 1 % \\| 90000 \\|")
string(REPLACE "ok=1900 client_throttled=0 ok_p99_ms=120 work_after_deadline_ms=0"
  "ok=300 client_throttled=0 ok_p99_ms=520 work_after_deadline_ms=4500" ov_bad "${ov_good}")
verdict(overload_missed overload "${ov_bad}"
  "does not back off: [^|]*\\| worst round 15 % \\(2x, round 1\\) \\| \\*\\*missed\\*\\*.*4500 ms of work after the deadline, 0 calls started after it \\(all judged rounds\\) \\| \\*\\*missed\\*\\*.*highest p99 520.0 ms, budget 500 ms \\| \\*\\*missed\\*\\*")
verdict(overload_none overload "" "does not back off: [^|]*\\| - \\| not measured")
# A round whose load generator used 90 % of its core, or started fewer than
# 95 % of its calls, measured the load generator: listed, not judged.
string(REPLACE "ok_p99_ms=520 work_after_deadline_ms=4500"
  "ok_p99_ms=520 total_s=2.1 client_cpu_s=2.05 work_after_deadline_ms=4500" ov_busy_client "${ov_bad}")
verdict(overload_client_bound overload "${ov_busy_client}"
  "does not back off: [^|]*\\| -; 1 round\\(s\\) the load generator could not drive, not judged \\| not measured.*0 ms of work after the deadline")
# So did one that made its calls 50 ms or more behind schedule (h2_load's
# send_lag_p99_ms), however little CPU it used.
string(REPLACE "ok_p99_ms=520 work_after_deadline_ms=4500"
  "ok_p99_ms=520 send_lag_p99_ms=4218 work_after_deadline_ms=4500" ov_late_client "${ov_bad}")
verdict(overload_client_late overload "${ov_late_client}"
  "does not back off: [^|]*\\| -; 1 round\\(s\\) the load generator could not drive, not judged \\| not measured")
# A round below its target lists what each hop's admission shed in it.
string(REPLACE "ledger_cpu_ms=200${nl}RESULT"
  "ledger_cpu_ms=200 gateway_shed=none gateway_limit=40 orders_shed=none orders_limit=32 ledger_shed=queue_full:700,cannot_finish:3 ledger_limit=8${nl}RESULT"
  ov_shed "${ov_bad}")
rendered(overload_short_round_sheds overload "${ov_shed}"
  "\\| 2x \\| unthrottled \\| 1 \\| 15 % \\| none \\(limit 40\\) \\| none \\(limit 32\\) \\| queue_full:700,cannot_finish:3 \\(limit 8\\) \\|${nl}")
# Refusal: no target, so its table is checked.
# Two rounds of the four arms (the second in reverse, as bench.sh runs
# them), callback API, 32 in flight: refused / served 12/20 and 14/25,
# refused / gRPC's error 12/16 and 14/20.
set(refusal_txt "")
foreach(arm_cpu_cs "1;plain;echo;20;1.00" "1;plain;error;16;0.90" "1;budget-only;echo;22;1.10"
        "1;budget-only;refuse;12;0.40" "2;budget-only;refuse;14;0.60" "2;budget-only;echo;27.5;1.30"
        "2;plain;error;20;1.00" "2;plain;echo;25;1.20")
  list(GET arm_cpu_cs 0 round)
  list(GET arm_cpu_cs 1 mode)
  list(GET arm_cpu_cs 2 answer)
  list(GET arm_cpu_cs 3 cpu)
  list(GET arm_cpu_cs 4 cs)
  string(APPEND refusal_txt
    "RESULT bench=refusal api=callback mode=${mode} inflight=32 round=${round} qps=0.0 p50_us=0.0 p99_us=0.0 calls=0 errors=5000 cpu_us_per_call=40.00 client_cpu_us=20.00 server_cpu_us=${cpu} budget_header=1 server_cs_per_call=${cs} answer=${answer}${nl}")
endforeach()
rendered(refusal_table refusal "${refusal_txt}"
  "\\| callback \\| 32 \\| plain/echo \\(served\\) \\| 2 \\| 22.50 \\(20.00..25.00\\) \\| 1.10 \\| reference \\|.*\\| callback \\| 32 \\| plain/error \\(gRPC's error answer\\) \\| 2 \\| 18.00 \\(16.00..20.00\\) \\| 0.95 \\| 0.800 \\(0.800..0.800\\) \\|.*\\| callback \\| 32 \\| budget-only/echo \\(served, hopbudget\\) \\| 2 \\| 24.75 \\(22.00..27.50\\) \\| 1.20 \\| 1.100 \\(1.100..1.100\\) \\|.*\\| callback \\| 32 \\| budget-only/refuse \\(hopbudget's refusal\\) \\| 2 \\| 13.00 \\(12.00..14.00\\) \\| 0.50 \\| 0.580 \\(0.560..0.600\\) \\|.*- callback API, 32 in flight: hopbudget's refusal costs 13.00 us of server CPU, 0.580x \\(0.560..0.600\\) of a served call and 0.725x \\(0.700..0.750\\) of gRPC's own error answer.")
# Without gRPC's error arm the second figure is not measured; the overhead
# section never takes the refusal runs for its own.
string(REGEX REPLACE "RESULT [^\n]*answer=error\n" "" refusal_no_error "${refusal_txt}")
rendered(refusal_no_error refusal "${refusal_no_error}"
  "refusal costs 13.00 us of server CPU, 0.580x \\(0.560..0.600\\) of a served call and - \\(not measured\\) of gRPC's own error answer.")
# With the expired arm (cancelled on arrival): 18/20 and 21/25 of served,
# 18/12 and 21/14 of hopbudget's refusal.
set(refusal_expired_txt "${refusal_txt}")
foreach(round_cpu "1;18" "2;21")
  list(GET round_cpu 0 round)
  list(GET round_cpu 1 cpu)
  string(APPEND refusal_expired_txt
    "RESULT bench=refusal api=callback mode=budget-only inflight=32 round=${round} qps=0.0 p50_us=0.0 p99_us=0.0 calls=0 errors=5000 cpu_us_per_call=40.00 client_cpu_us=20.00 server_cpu_us=${cpu} budget_header=1 server_cs_per_call=0.50 answer=expired${nl}")
endforeach()
rendered(refusal_expired refusal "${refusal_expired_txt}"
  "\\| callback \\| 32 \\| budget-only/expired \\(ended on arrival, budget spent\\) \\| 2 \\| 19.50 \\(18.00..21.00\\) \\| 0.50 \\| 0.870 \\(0.840..0.900\\) \\|.*- callback API, 32 in flight: a call that arrives with its budget spent costs 19.50 us, 0.870x \\(0.840..0.900\\) of a served call and 1.500x \\(1.500..1.500\\) of hopbudget's refusal.")
# With the shed arm (admission's RESOURCE_EXHAUSTED): 30/20 and 35/25 of
# served, 30/16 and 35/20 of gRPC's error answer.
set(refusal_shed_txt "${refusal_txt}")
foreach(round_cpu "1;30" "2;35")
  list(GET round_cpu 0 round)
  list(GET round_cpu 1 cpu)
  string(APPEND refusal_shed_txt
    "RESULT bench=refusal api=callback mode=budget-only inflight=32 round=${round} qps=0.0 p50_us=0.0 p99_us=0.0 calls=0 errors=5000 cpu_us_per_call=40.00 client_cpu_us=20.00 server_cpu_us=${cpu} budget_header=1 server_cs_per_call=0.50 answer=shed${nl}")
endforeach()
rendered(refusal_shed refusal "${refusal_shed_txt}"
  "\\| callback \\| 32 \\| budget-only/shed \\(shed by admission, RESOURCE_EXHAUSTED\\) \\| 2 \\| 32.50 \\(30.00..35.00\\) \\| 0.50 \\| 1.450 \\(1.400..1.500\\) \\|.*- callback API, 32 in flight: a call shed by admission costs 32.50 us, 1.450x \\(1.400..1.500\\) of a served call and 1.812x \\(1.750..1.875\\) of gRPC's own error answer.")
rendered(refusal_not_overhead overhead "${refusal_txt}" "^_No results for this section")
rendered(refusal_none refusal "" "^_No results for this section")

# Chain: baseline and hopbudget side by side (bench.sh run_chain). Each
# level is judged on its median goodput over its rounds, the sum of its late
# calls and work after the deadline, its highest p99 of OK calls. In the
# met run the baseline did 1000 ms of work after the deadline at 2x and 4x,
# hopbudget none; capacities 1000/s (baseline) and 1500/s (hopbudget).
set(chain_setup "RESULT bench=chain kind=setup capacity=1000 hopbudget_capacity=1500 budget_ms=500 duration_s=2 rounds=3${nl}")
set(chain_runs "")
set(chain_zero "gateway:0,orders:0,ledger:0")
foreach(run "baseline;1;1000;1;1000;150;0;${chain_zero}" "hopbudget;1;1000;1;1000;100;0;${chain_zero}"
        "baseline;2;2000;1;800;300;100;${chain_zero}" "hopbudget;2;2000;1;1400;120;0;${chain_zero}"
        "hopbudget-client-unthrottled;2;2000;1;1200;125;0;${chain_zero}"
        "hopbudget;2;2000;2;1300;130;0;${chain_zero}" "baseline;2;2000;2;700;310;200;${chain_zero}"
        "hopbudget-client-unthrottled;2;2000;2;1100;126;0;${chain_zero}"
        "baseline;2;2000;3;900;320;300;${chain_zero}" "hopbudget;2;2000;3;1500;140;0;${chain_zero}"
        "hopbudget-client-unthrottled;2;2000;3;1000;127;0;${chain_zero}"
        "hopbudget;4;4000;1;950;200;0;${chain_zero}"
        "baseline;4;4000;1;500;450;400;gateway:250.4,orders:149.6,ledger:0"
        "hopbudget-client-unthrottled;4;4000;1;920;210;0;${chain_zero}")
  list(GET run 0 mode)
  list(GET run 1 factor)
  list(GET run 2 rate)
  list(GET run 3 round)
  list(GET run 4 goodput)
  list(GET run 5 p99)
  list(GET run 6 work)
  list(GET run 7 hops)
  math(EXPR ok "${goodput} * 2")
  math(EXPR sent "${rate} * 2")
  string(APPEND chain_runs
    "RESULT bench=chain kind=run mode=${mode} factor=${factor} rate=${rate} round=${round} goodput=${goodput} ok_p99_ms=${p99} calls_started_after_deadline=0 work_after_deadline_ms=${work} sent=${sent} ok=${ok} not_sent=0 client_throttled=0 deadline_exceeded=0 retries=0 p50_ms=40.46 p99_ms=250 work_by_hop_ms=${hops}${nl}")
endforeach()
set(chain_ok "${chain_setup}${chain_runs}")
verdict(chain_met chain "${chain_ok}"
  "VERDICT work after the client deadline at 2x and 4x, hopbudget / baseline: <= 1 % \\| hopbudget 0 ms vs baseline 1000 ms = \\*\\*0.0 %\\*\\* \\| met${nl}VERDICT calls started after the client deadline at 2x and 4x \\(hopbudget\\): 0 \\| 2x: 0, 4x: 0 \\| met${nl}VERDICT goodput at 2x and 4x >= 90 % of the capacity \\(hopbudget; capacity 1000/s\\) \\| 2x: 1400/s = 140 % \\(median of 3; 130..150 %\\), 4x: 950/s = 95 % \\| met${nl}VERDICT p99 latency of successful calls inside the 500ms budget at every level \\(hopbudget\\) \\| 1x: 100 ms, 2x: 140 ms, 4x: 200 ms \\| met${nl}VERDICT goodput at 2x and 4x >= 90 % of the capacity \\(hopbudget chain, a client that does not back off\\) \\| 2x: 1100/s = 110 % \\(median of 3; 100..120 %\\), 4x: 920/s = 92 % \\| met${nl}VERDICT calls started after the client deadline at 2x and 4x \\(hopbudget chain, a client that does not back off\\): 0 \\| 2x: 0, 4x: 0 \\| met${nl}VERDICT work after the client deadline at 2x and 4x, hopbudget chain with a client that does not back off / baseline: <= 1 % \\| 0 ms vs 1000 ms = \\*\\*0.0 %\\*\\* \\| met${nl}VERDICT demo chain capacity, hopbudget >= baseline \\| hopbudget 1500/s, baseline 1000/s \\| met${nl}")
# The runs' table, in the order they ran (the p99 of OK calls "-" when
# chainctl did not report it), then the verdicts' table.
string(REPLACE "mode=hopbudget factor=1 rate=1000 round=1 goodput=1000 ok_p99_ms=100"
  "mode=hopbudget factor=1 rate=1000 round=1 goodput=1000 ok_p99_ms=-" chain_no_p99 "${chain_ok}")
rendered(chain_table chain "${chain_no_p99}"
  "^\\| load \\| offered/s \\| mode \\| round \\| sent \\| not sent \\| throttled by the client \\| OK \\| goodput/s \\| DEADLINE_EXCEEDED \\| retries \\| p50 \\(ms\\) \\| p99 \\(ms\\) \\| p99 of OK \\(ms\\) \\| calls started after deadline \\| work after deadline \\(ms\\) \\| by hop \\(ms\\) \\|${nl}[-| ]+${nl}\\| 1x \\| 1000 \\| baseline \\| 1 \\| 2000 \\| 0 \\| 0 \\| 2000 \\| 1000.0 \\| 0 \\| 0 \\| 40.5 \\| 250.0 \\| 150.0 \\| 0 \\| 0 \\| gateway 0, orders 0, ledger 0 \\|${nl}\\| 1x \\| 1000 \\| hopbudget \\| 1 \\| 2000 \\| 0 \\| 0 \\| 2000 \\| 1000.0 \\| 0 \\| 0 \\| 40.5 \\| 250.0 \\| - \\| 0 \\| 0 \\| gateway 0, orders 0, ledger 0 \\|${nl}.*\\| 4x \\| 4000 \\| baseline \\| 1 \\| 8000 \\| 0 \\| 0 \\| 1000 \\| 500.0 \\| 0 \\| 0 \\| 40.5 \\| 250.0 \\| 450.0 \\| 0 \\| 400 \\| gateway 250, orders 150, ledger 0 \\|${nl}\\| 4x \\| 4000 \\| hopbudget-client-unthrottled \\| 1 \\| 8000 \\|[^${nl}]*${nl}${nl}\\| target \\| result \\| verdict \\|${nl}\\| --- \\| --- \\| --- \\|${nl}\\| work after the client deadline at 2x and 4x, hopbudget / baseline: <= 1 % \\| hopbudget 0 ms vs baseline 1000 ms = \\*\\*0.0 %\\*\\* \\| met \\|${nl}.*\\| demo chain capacity, hopbudget >= baseline \\| hopbudget 1500/s, baseline 1000/s \\| met \\|${nl}$")
verdict(chain_p99_not_reported chain "${chain_no_p99}"
  "inside the 500ms budget at every level \\(hopbudget\\) \\| chainctl did not report it \\| not measured")
# The chart's data: a line per level both chains ran, the median goodput
# of each and the work after the deadline per second of a run.
report_matches(stderr chain_chart chain "${chain_ok}"
  "CHART chain 1 1000.000 1000.000 0.000000 0.000000${nl}CHART chain 2 800.000 1400.000 0.100000 0.000000${nl}CHART chain 4 500.000 950.000 0.200000 0.000000${nl}$")
# chain_case(NAME REGEX FROM TO [FROM TO ...]): the met run with each FROM
# replaced by its TO must give verdicts matching REGEX.
function(chain_case name regex)
  set(input "${chain_ok}")
  set(pairs ${ARGN})
  while(pairs)
    list(POP_FRONT pairs from to)
    string(REPLACE "${from}" "${to}" input "${input}")
  endwhile()
  verdict(${name} chain "${input}" "${regex}")
endfunction()
set(chain_hb4 "mode=hopbudget factor=4 rate=4000 round=1 goodput=950 ok_p99_ms=200 calls_started_after_deadline=0 work_after_deadline_ms=0")
set(chain_un4 "mode=hopbudget-client-unthrottled factor=4 rate=4000 round=1 goodput=920 ok_p99_ms=210 calls_started_after_deadline=0 work_after_deadline_ms=0")
# Missed, each target: 11 ms of work after the deadline is 1.1 % of the
# baseline's; a late call; a level's median goodput under 90 %; a p99 over
# the budget; the unthrottled client's goodput, late calls and work; a
# hopbudget chain of less capacity than the baseline's.
chain_case(chain_work_missed
  "hopbudget / baseline: <= 1 % \\| hopbudget 11 ms vs baseline 1000 ms = \\*\\*1.1 %\\*\\* \\| \\*\\*missed\\*\\*"
  "${chain_hb4}" "mode=hopbudget factor=4 rate=4000 round=1 goodput=950 ok_p99_ms=200 calls_started_after_deadline=0 work_after_deadline_ms=11")
chain_case(chain_work_one_percent
  "hopbudget / baseline: <= 1 % \\| hopbudget 10 ms vs baseline 1000 ms = \\*\\*1.0 %\\*\\* \\| met"
  "${chain_hb4}" "mode=hopbudget factor=4 rate=4000 round=1 goodput=950 ok_p99_ms=200 calls_started_after_deadline=0 work_after_deadline_ms=10")
chain_case(chain_late_missed
  "deadline at 2x and 4x \\(hopbudget\\): 0 \\| 2x: 0, 4x: 3 \\| \\*\\*missed\\*\\*"
  "${chain_hb4}" "mode=hopbudget factor=4 rate=4000 round=1 goodput=950 ok_p99_ms=200 calls_started_after_deadline=3 work_after_deadline_ms=0")
chain_case(chain_goodput_missed
  "capacity \\(hopbudget; capacity 1000/s\\) \\| 2x: 1400/s = 140 % \\(median of 3; 130..150 %\\), 4x: 850/s = 85 % \\| \\*\\*missed\\*\\*"
  "mode=hopbudget factor=4 rate=4000 round=1 goodput=950" "mode=hopbudget factor=4 rate=4000 round=1 goodput=850")
# The median, not the worst round, is judged: one round at 60 % of 3 passes.
chain_case(chain_goodput_median
  "capacity \\(hopbudget; capacity 1000/s\\) \\| 2x: 1400/s = 140 % \\(median of 3; 60..150 %\\), 4x: 950/s = 95 % \\| met"
  "mode=hopbudget factor=2 rate=2000 round=2 goodput=1300" "mode=hopbudget factor=2 rate=2000 round=2 goodput=600")
chain_case(chain_p99_missed
  "inside the 500ms budget at every level \\(hopbudget\\) \\| 1x: 100 ms, 2x: 140 ms, 4x: 501 ms \\| \\*\\*missed\\*\\*"
  "${chain_hb4}" "mode=hopbudget factor=4 rate=4000 round=1 goodput=950 ok_p99_ms=501 calls_started_after_deadline=0 work_after_deadline_ms=0")
chain_case(chain_unthrottled_goodput_missed
  "does not back off\\) \\| 2x: 1100/s = 110 % \\(median of 3; 100..120 %\\), 4x: 850/s = 85 % \\| \\*\\*missed\\*\\*"
  "mode=hopbudget-client-unthrottled factor=4 rate=4000 round=1 goodput=920" "mode=hopbudget-client-unthrottled factor=4 rate=4000 round=1 goodput=850")
chain_case(chain_unthrottled_late_missed
  "does not back off\\): 0 \\| 2x: 0, 4x: 2 \\| \\*\\*missed\\*\\*"
  "${chain_un4}" "mode=hopbudget-client-unthrottled factor=4 rate=4000 round=1 goodput=920 ok_p99_ms=210 calls_started_after_deadline=2 work_after_deadline_ms=0")
chain_case(chain_unthrottled_work_missed
  "does not back off / baseline: <= 1 % \\| 50 ms vs 1000 ms = \\*\\*5.0 %\\*\\* \\| \\*\\*missed\\*\\*"
  "${chain_un4}" "mode=hopbudget-client-unthrottled factor=4 rate=4000 round=1 goodput=920 ok_p99_ms=210 calls_started_after_deadline=0 work_after_deadline_ms=50")
chain_case(chain_capacity_missed
  "demo chain capacity, hopbudget >= baseline \\| hopbudget 900/s, baseline 1000/s \\| \\*\\*missed\\*\\*"
  "hopbudget_capacity=1500" "hopbudget_capacity=900")
# Not measured: a baseline that did no work after the deadline gives no
# ratio (hopbudget's work is still shown).
chain_case(chain_no_baseline_work
  "hopbudget / baseline: <= 1 % \\| the baseline did no work after the deadline \\(hopbudget 7 ms\\) \\| not measured.*does not back off / baseline: <= 1 % \\| the baseline did no work after the deadline \\(hopbudget 0 ms\\) \\| not measured"
  "work_after_deadline_ms=100 " "work_after_deadline_ms=0 " "work_after_deadline_ms=200 " "work_after_deadline_ms=0 "
  "work_after_deadline_ms=300 " "work_after_deadline_ms=0 " "work_after_deadline_ms=400 " "work_after_deadline_ms=0 "
  "${chain_hb4}" "mode=hopbudget factor=4 rate=4000 round=1 goodput=950 ok_p99_ms=200 calls_started_after_deadline=0 work_after_deadline_ms=7")
# A level one chain did not run: hopbudget's client is not judged against
# the baseline, nor on its own.
string(REGEX REPLACE "RESULT[^\n]*mode=baseline factor=1 [^\n]*\n" "" chain_missing_level "${chain_ok}")
verdict(chain_missing_level chain "${chain_missing_level}"
  "hopbudget / baseline: <= 1 % \\| 2 baseline and 3 hopbudget load levels \\| not measured${nl}VERDICT calls started after[^|]*\\(hopbudget\\): 0 \\| 2 baseline and 3 hopbudget load levels \\| not measured${nl}VERDICT goodput at 2x and 4x >= 90 % of the capacity \\(hopbudget; capacity 1000/s\\) \\| 2 baseline and 3 hopbudget load levels \\| not measured${nl}VERDICT p99 latency[^|]*\\| 2 baseline and 3 hopbudget load levels \\| not measured${nl}")
# No run past capacity: nothing at 2x and 4x to judge.
string(REGEX REPLACE "RESULT[^\n]*factor=[24] [^\n]*\n" "" chain_below "${chain_ok}")
verdict(chain_below_capacity chain "${chain_below}"
  "deadline at 2x and 4x \\(hopbudget\\): 0 \\| no hopbudget runs at 2x or 4x \\| not measured${nl}VERDICT goodput at 2x and 4x >= 90 % of the capacity \\(hopbudget; capacity 1000/s\\) \\| no hopbudget runs at 2x or 4x \\| not measured")
# No run of the client that does not back off.
string(REGEX REPLACE "RESULT[^\n]*mode=hopbudget-client-unthrottled [^\n]*\n" "" chain_no_unthrottled "${chain_ok}")
verdict(chain_no_unthrottled chain "${chain_no_unthrottled}"
  "VERDICT goodput at 2x and 4x >= 90 % of the capacity \\(hopbudget chain, a client that does not back off\\) \\| no hopbudget-client-unthrottled runs \\| not measured${nl}VERDICT calls started[^|]*does not back off\\): 0 \\| no hopbudget-client-unthrottled runs \\| not measured${nl}VERDICT work after[^|]*does not back off / baseline: <= 1 % \\| no hopbudget-client-unthrottled runs \\| not measured${nl}")
# Without the setup line (the capacities, the budget) nothing is judged.
verdict(chain_no_setup chain "${chain_runs}"
  "hopbudget / baseline: <= 1 % \\| no setup line \\| not measured.*demo chain capacity, hopbudget >= baseline \\| no setup line \\| not measured")
rendered(chain_no_setup_table chain "${chain_runs}" "^_No complete chain run: not measured._")
verdict(chain_none chain ""
  "hopbudget / baseline: <= 1 % \\| - \\| not measured.*inside the budget at every level \\(hopbudget\\) \\| - \\| not measured.*demo chain capacity, hopbudget >= baseline \\| - \\| not measured")

# --write-report: the whole report from a raw directory (written here) and
# the run's settings, as bench.sh invokes it.
set(wr "${WORK_DIR}/write_report")
file(REMOVE_RECURSE "${wr}")
file(MAKE_DIRECTORY "${wr}/raw")
file(WRITE "${wr}/raw/cancel.txt"
  "cancel_bench's own table, not a RESULT line${nl}RESULT bench=cancel hops=3 calls=500 p50_ms=0.3 p90_ms=0.4 p99_ms=0.6 max_ms=0.9 lost=0 p99_all_ms=0.6${nl}")
file(WRITE "${wr}/raw/refusal-instructions.txt"
  "RESULT bench=refusal-instructions arm=plain/echo calls=100 instructions=2000000 per_call=20000${nl}RESULT bench=refusal-instructions arm=budget-only/refuse calls=100 instructions=500000 per_call=5000${nl}")
file(WRITE "${wr}/raw/micro.json"
  "{\"context\": {\"num_cpus\": 2}, \"benchmarks\": [{\"name\": \"BM_Budget\", \"real_time\": 12.345, \"cpu_time\": 12.25, \"iterations\": 1000000, \"time_unit\": \"ns\"}]}")
set(wr_settings "")
foreach(kv "quick=0" "sections=cancel,micro,refusal" "started_at=2026-12-07 12:00:00 UTC"
    "git_rev=abc1234" "nproc=2" "cpu_model=Test CPU" "mem_total=4.0 GiB" "kernel=6.1.0"
    "grpc_version=1.51.1" "load_before=0.10 0.20 0.30" "load_after=0.40 0.50 0.60" "elapsed=42"
    "deadlock=default" "overhead_placement=Not pinned." "rounds=5" "duration=3s" "warmup=1s"
    "scale_levels=1 100" "micro_min_time=0.2" "hedge_rounds=5" "hedge_calls=4000"
    "hedge_warmup=400" "hedge_service=2ms" "hedge_service_sigma=0.3" "slots_rounds=3"
    "overload_gateway_streams=1024" "overload_edge_limit=128" "overload_levels=1 2" "overload_rounds=3"
    "overload_duration=6s" "chain_client_throttle=2" "chain_budget=500ms" "chain_duration=8s"
    "chain_rounds=3" "chain_ramp_step=3s" "chain_latency_gateway=uniform:1ms-5ms"
    "chain_latency_orders=uniform:5ms-15ms" "chain_latency_ledger=exp:20ms" "refusal_duration=3s"
    "refusal_warmup=1s" "reload_rounds=5" "reload_duration=3s")
  string(APPEND wr_settings "${kv}${nl}")
endforeach()
file(WRITE "${wr}/settings.txt"
  "${wr_settings}failure=cancel_bench: exit status 1 (output in raw/cancel.txt)${nl}")
# write_report(NAME RC REGEX ARGS...): bench_report ARGS must exit RC; with
# RC 0 the report it wrote must match REGEX, otherwise its standard error.
function(write_report name want_rc regex)
  file(REMOVE "${wr}/report.md")
  execute_process(COMMAND "${BENCH_REPORT}" ${ARGN} RESULT_VARIABLE rc
    OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(text "${err}")
  if(want_rc EQUAL 0 AND EXISTS "${wr}/report.md")
    file(READ "${wr}/report.md" text)
  endif()
  if(NOT rc EQUAL want_rc)
    message(SEND_ERROR "${name}: bench_report exited ${rc}, not ${want_rc}: ${err}")
  elseif(NOT text MATCHES "${regex}")
    message(SEND_ERROR "${name}: expected /${regex}/ in:\n${text}")
  else()
    message(STATUS "${name}: ok")
  endif()
endfunction()
set(wr_args --write-report --raw=${wr}/raw --out=${wr}/report.md)
write_report(write_report_header 0
  "^# hopbudget benchmarks${nl}${nl}Generated by `scripts/bench.sh` on 2026-12-07 12:00:00 UTC${nl}\\(commit abc1234, sections cancel,micro,refusal only\\).${nl}${nl}\\| machine \\| \\|${nl}.*\\| CPU model \\| Test CPU \\|.*\\| benchmark time \\| 42 s \\(build excluded\\) \\|${nl}"
  ${wr_args} --settings=${wr}/settings.txt)
write_report(write_report_failures_and_verdicts 0
  "## Failed runs${nl}.*${nl}- cancel_bench: exit status 1 \\(output in raw/cancel.txt\\)${nl}${nl}## Targets${nl}.*\\| target \\| result \\| verdict \\|${nl}\\| --- \\| --- \\| --- \\|${nl}\\| overhead callback API[^${nl}]*\\| - \\| not measured \\|${nl}.*\\| a client cancel reaching the third hop: p99 <= 2 ms \\| p99 0.600 ms \\| met \\|${nl}"
  ${wr_args} --settings=${wr}/settings.txt)
# A section's prose, its settings filled in, then its table.
write_report(write_report_sections 0
  "## 1. Overhead per call${nl}.*Not pinned. CPU per call =.*_No results for this section.*## 3. Cancellation across three hops${nl}${nl}client -> A -> B -> C[^#]*${nl}${nl}\\| hops \\|[^#]*\\| 3 \\| 500 \\| 0.300 \\|.*\\*\\*Not run \\(--only left it out\\).\\*\\*.*## 5. Scale: 1 100 concurrent calls.*\\| BM_Budget \\| 12.3 \\| 12.3 \\| 1000000 \\|.*\\| budget-only/refuse \\| 100 \\| 5000 \\| 0.25 \\| - \\|${nl}.*machine-readable form\\).${nl}$"
  ${wr_args} --settings=${wr}/settings.txt)
# The chain section's introduction: the settings and the capacities of its
# setup line filled in (a run without that line says the section did not run).
file(MAKE_DIRECTORY "${wr}/raw_chain")
file(COPY "${wr}/raw/micro.json" DESTINATION "${wr}/raw_chain")
file(WRITE "${wr}/raw_chain/chain.txt"
  "RESULT bench=chain kind=setup capacity=3200 hopbudget_capacity=2800 budget_ms=500 duration_s=8 rounds=3${nl}")
write_report(write_report_chain_intro 0
  "## 4. Saved work under overload \\(demo chain\\)${nl}${nl}Two demo chains side by side[^#]*gateway${nl}uniform:1ms-5ms, orders uniform:5ms-15ms, ledger exp:20ms.${nl}Client budget 500ms[^#]*8s per run[^#]*baseline${nl}\\*\\*3200/s\\*\\*, hopbudget \\*\\*2800/s\\*\\*[^#]*each mode runs 3 rounds"
  --write-report --raw=${wr}/raw_chain --out=${wr}/report.md --settings=${wr}/settings.txt)
if(NOT EXISTS "${wr}/raw/cancel.md" OR NOT EXISTS "${wr}/raw/verdicts.log"
   OR NOT EXISTS "${wr}/raw/chain.dat")
  message(SEND_ERROR "write_report_raw: raw/cancel.md, verdicts.log or chain.dat not written")
endif()
# Bad inputs: each named, exit 2, no report.
write_report(write_report_no_raw 2 "--raw=[^ ]*/nonexistent: not a directory"
  --write-report --raw=${wr}/nonexistent --out=${wr}/report.md --settings=${wr}/settings.txt)
write_report(write_report_no_settings 2 "--settings=[^ ]*/nonexistent.txt: cannot read it"
  ${wr_args} --settings=${wr}/nonexistent.txt)
write_report(write_report_settings_dir 2 "--settings=[^ ]*/raw: cannot read it"
  ${wr_args} --settings=${wr}/raw)
file(WRITE "${wr}/unknown.txt" "${wr_settings}rundos=5${nl}")
write_report(write_report_unknown_key 2 "unknown.txt, line 43: unknown key \"rundos\""
  ${wr_args} --settings=${wr}/unknown.txt)
string(REPLACE "hedge_calls=4000${nl}" "" wr_missing "${wr_settings}")
file(WRITE "${wr}/missing.txt" "${wr_missing}")
write_report(write_report_missing_key 2 "no \"hedge_calls\" \\(every key but failure is required\\)"
  ${wr_args} --settings=${wr}/missing.txt)
file(WRITE "${wr}/garbled.txt" "${wr_settings}just words${nl}")
write_report(write_report_not_key_value 2 "line 43: not key=value: \"just words\""
  ${wr_args} --settings=${wr}/garbled.txt)
string(REPLACE "quick=0" "quick=yes" wr_quick "${wr_settings}")
file(WRITE "${wr}/quick.txt" "${wr_quick}")
write_report(write_report_bad_quick 2 "quick=yes: must be 0 or 1"
  ${wr_args} --settings=${wr}/quick.txt)
write_report(write_report_needs_raw 2 "--raw is required"
  --write-report --out=${wr}/report.md --settings=${wr}/settings.txt)
write_report(write_report_not_with_section 2 "--section and --write-report exclude each other"
  ${wr_args} --settings=${wr}/settings.txt --section=cancel)
write_report(write_report_raw_needs_it 2 "--raw needs --write-report" --raw=${wr}/raw)
file(WRITE "${wr}/raw/micro.json" "{\"benchmarks\": [{\"name\": \"BM_Budget\", \"real_time\": 1}]}")
write_report(write_report_bad_micro 2 "micro.json: benchmark 0 has no cpu_time"
  ${wr_args} --settings=${wr}/settings.txt)
file(WRITE "${wr}/raw/micro.json" "{\"benchmarks\": [")
write_report(write_report_micro_not_json 2 "micro.json: "
  ${wr_args} --settings=${wr}/settings.txt)
