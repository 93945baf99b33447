#!/usr/bin/python3
"""Writes the Spark importer's and analysis's test fixtures (run once; the outputs are committed).

fixture_app.log: a small Spark 3.x-style event log written by hand, with one stage per
bottleneck, so that the expected analysis can be derived by hand (tests/analysis/spark_stages_test.cpp):

  job 0 (in SQL execution 0):
    stage 0 "gc":            4 tasks of 1000 ms, each run 950 ms of which GC 500 ms
                             -> GC share 2000/4000 = 0.50 (fetch wait 0, sched delay 4*30/4000 = 0.03)
    stage 1 "shuffle" (parent 0): 4 tasks of 2000 ms, run 1950, fetch wait 1200, GC 50
                             -> fetch wait share 4800/8000 = 0.60
  job 1 (plans stages 0, 2, 3; stage 0 is skipped: its output exists):
    stage 2 "skew" (parent 0): tasks of 100, 100, 100 and 1000 ms; the stage spans 1010 ms; the
                             slow one reads 1,000,000 shuffle bytes, the others 1000 each
                             -> max/median = 1000/100 = 10x, skew share (1000-100)/1010 = 0.891,
                                data skew (1,000,000 >= 1.5 x 1000, and 64 KiB more or beyond)
    stage 3 "delay" (parent 2): 4 attempts: index 0 fails (200 ms) and is retried (200 ms), index 1
                             succeeds (200 ms) and a speculative copy of it is killed (110 ms);
                             each ran 40 ms (the killed one 20) after 10 ms deserialising
                             -> scheduler delay (3*150 + 80)/710 = 0.746
The application's name is the XSS probe the HTML report must show as text.

Also written from it: fixture_app.log.zstd (by the zstd command line tool, standard zstd
frames as Spark's zstd codec writes them), and two files in the JVM codecs' own framings
that the importer refuses: fixture_app.lz4 (lz4-java's LZ4Block framing, a RAW block),
fixture_app.snappy (snappy-java's SnappyOutputStream header) and fixture_app.lzf
(compress-lzf's stored chunks).
"""
import json
import os
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
T0 = 1700000000000
events = []


def ev(name, **fields):
    e = {"Event": name}
    e.update(fields)
    events.append(e)


def stage_info(sid, name, ntasks, parents, submit=None, complete=None, failure=None):
    info = {"Stage ID": sid, "Stage Attempt ID": 0, "Stage Name": name, "Number of Tasks": ntasks,
            "RDD Info": [], "Parent IDs": parents, "Details": "", "Accumulables": [], "Resource Profile Id": 0}
    if submit is not None:
        info["Submission Time"] = submit
    if complete is not None:
        info["Completion Time"] = complete
    if failure is not None:
        info["Failure Reason"] = failure
    return info


def task_info(tid, index, attempt, launch, executor, host, finish=0, failed=False, killed=False, speculative=False):
    return {"Task ID": tid, "Index": index, "Attempt": attempt, "Partition ID": index, "Launch Time": launch,
            "Executor ID": executor, "Host": host, "Locality": "PROCESS_LOCAL", "Speculative": speculative,
            "Getting Result Time": 0, "Finish Time": finish, "Failed": failed, "Killed": killed, "Accumulables": []}


def metrics(run, deser, gc=0, cpu_ms=0, fetch_wait=0, remote=0, local=0, write_bytes=0, write_ns=0, input_bytes=0):
    return {"Executor Deserialize Time": deser, "Executor Deserialize CPU Time": deser * 1000000,
            "Executor Run Time": run, "Executor CPU Time": cpu_ms * 1000000, "Peak Execution Memory": 0,
            "Result Size": 1500, "JVM GC Time": gc, "Result Serialization Time": 0, "Memory Bytes Spilled": 0,
            "Disk Bytes Spilled": 0,
            "Shuffle Read Metrics": {"Remote Blocks Fetched": 1 if remote else 0, "Local Blocks Fetched": 1 if local else 0,
                                     "Fetch Wait Time": fetch_wait, "Remote Bytes Read": remote,
                                     "Remote Bytes Read To Disk": 0, "Local Bytes Read": local,
                                     "Total Records Read": 10 if remote or local else 0},
            "Shuffle Write Metrics": {"Shuffle Bytes Written": write_bytes, "Shuffle Write Time": write_ns,
                                      "Shuffle Records Written": 10 if write_bytes else 0},
            "Input Metrics": {"Bytes Read": input_bytes, "Records Read": 100 if input_bytes else 0},
            "Output Metrics": {"Bytes Written": 0, "Records Written": 0}, "Updated Blocks": []}


def task(sid, tid, index, attempt, launch, finish, executor, m, reason=None, speculative=False):
    host = {"1": "node-a", "2": "node-b"}[executor]
    ev("SparkListenerTaskStart", **{"Stage ID": sid, "Stage Attempt ID": 0,
                                     "Task Info": task_info(tid, index, attempt, launch, executor, host,
                                                            speculative=speculative)})
    failed = reason is not None and reason["Reason"] == "ExceptionFailure"
    killed = reason is not None and reason["Reason"] == "TaskKilled"
    ev("SparkListenerTaskEnd", **{"Stage ID": sid, "Stage Attempt ID": 0,
                                   "Task Type": "ShuffleMapTask" if sid in (0, 2) else "ResultTask",
                                   "Task End Reason": reason or {"Reason": "Success"},
                                   "Task Info": task_info(tid, index, attempt, launch, executor, host, finish, failed,
                                                          killed, speculative),
                                   "Task Metrics": m})


APP = "<script>alert('XSS')</script>"
ev("SparkListenerLogStart", **{"Spark Version": "3.5.0"})
ev("SparkListenerExecutorAdded", **{"Timestamp": T0 + 100, "Executor ID": "driver",
                                    "Executor Info": {"Host": "driver-host", "Total Cores": 2, "Log Urls": {}}})
ev("SparkListenerEnvironmentUpdate", **{"JVM Information": {}, "Spark Properties": {
    "spark.app.name": APP, "spark.driver.host": "driver-host", "spark.master": "spark://driver-host:7077"},
    "System Properties": {}, "Classpath Entries": {}})
ev("SparkListenerApplicationStart", **{"App Name": APP, "App ID": "app-fixture-0001", "Timestamp": T0,
                                       "User": "tester"})
for ex, host in (("1", "node-a"), ("2", "node-b")):
    ev("SparkListenerExecutorAdded", **{"Timestamp": T0 + 300, "Executor ID": ex,
                                        "Executor Info": {"Host": host, "Total Cores": 4, "Log Urls": {}}})
    ev("SparkListenerBlockManagerAdded", **{"Block Manager ID": {"Executor ID": ex, "Host": host, "Port": 40000},
                                            "Maximum Memory": 1 << 30, "Timestamp": T0 + 310})

ev("org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart",
   executionId=0, description="count at fixture.py:12", details="", physicalPlanDescription="", sparkPlanInfo={},
   time=T0 + 900)
ev("SparkListenerJobStart", **{"Job ID": 0, "Submission Time": T0 + 1000,
                               "Stage Infos": [stage_info(0, "map at fixture.py:10", 4, []),
                                               stage_info(1, "count at fixture.py:12", 4, [0])],
                               "Stage IDs": [0, 1], "Properties": {"spark.sql.execution.id": "0"}})
# Stage 0: GC-bound.
ev("SparkListenerStageSubmitted", **{"Stage Info": stage_info(0, "map at fixture.py:10", 4, [], T0 + 1000)})
for i in range(4):
    task(0, i, i, 0, T0 + 1010, T0 + 2010, "1" if i % 2 == 0 else "2",
         metrics(950, 20, gc=500, cpu_ms=400, write_bytes=1000, write_ns=1000000, input_bytes=1 << 20))
ev("SparkListenerStageCompleted", **{"Stage Info": stage_info(0, "map at fixture.py:10", 4, [], T0 + 1000, T0 + 2050)})
# Stage 1: waiting for shuffle blocks.
ev("SparkListenerStageSubmitted", **{"Stage Info": stage_info(1, "count at fixture.py:12", 4, [0], T0 + 2060)})
for i in range(4):
    task(1, 4 + i, i, 0, T0 + 2070, T0 + 4070, "1" if i % 2 == 0 else "2",
         metrics(1950, 10, gc=50, cpu_ms=500, fetch_wait=1200, remote=2000, local=2000))
ev("SparkListenerStageCompleted",
   **{"Stage Info": stage_info(1, "count at fixture.py:12", 4, [0], T0 + 2060, T0 + 4090)})
ev("SparkListenerJobEnd", **{"Job ID": 0, "Completion Time": T0 + 4100, "Job Result": {"Result": "JobSucceeded"}})
ev("org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd", executionId=0, time=T0 + 4150)

ev("SparkListenerJobStart", **{"Job ID": 1, "Submission Time": T0 + 4200,
                               "Stage Infos": [stage_info(0, "map at fixture.py:10", 4, []),
                                               stage_info(2, "groupBy at fixture.py:20", 4, [0]),
                                               stage_info(3, "collect at fixture.py:21", 2, [2])],
                               "Stage IDs": [0, 2, 3], "Properties": {}})
# Stage 2: one skewed partition.
ev("SparkListenerStageSubmitted", **{"Stage Info": stage_info(2, "groupBy at fixture.py:20", 4, [0], T0 + 4200)})
for i in range(4):
    d = 1000 if i == 3 else 100
    task(2, 8 + i, i, 0, T0 + 4205, T0 + 4205 + d, "1" if i % 2 == 0 else "2",
         metrics(d - 10, 5, cpu_ms=(d - 10) * 9 // 10, remote=500000 if i == 3 else 500, local=500000 if i == 3 else 500))
ev("SparkListenerStageCompleted",
   **{"Stage Info": stage_info(2, "groupBy at fixture.py:20", 4, [0], T0 + 4200, T0 + 5210)})
# Stage 3: short tasks, mostly scheduler delay; a failed attempt retried, a speculative copy killed.
ev("SparkListenerStageSubmitted", **{"Stage Info": stage_info(3, "collect at fixture.py:21", 2, [2], T0 + 5300)})
task(3, 12, 0, 0, T0 + 5310, T0 + 5510, "1", metrics(40, 10, cpu_ms=30),
     reason={"Reason": "ExceptionFailure", "Class Name": "java.lang.IllegalStateException", "Description": "boom",
             "Stack Trace": [], "Full Stack Trace": "java.lang.IllegalStateException: boom\n\tat Fixture", "Accumulator Updates": []})
task(3, 14, 1, 0, T0 + 5310, T0 + 5510, "2", metrics(40, 10, cpu_ms=30))
task(3, 15, 1, 1, T0 + 5400, T0 + 5510, "1", metrics(20, 10, cpu_ms=15),
     reason={"Reason": "TaskKilled", "Kill Reason": "another attempt succeeded", "Accumulator Updates": []},
     speculative=True)
task(3, 13, 0, 1, T0 + 5520, T0 + 5720, "2", metrics(40, 10, cpu_ms=30))
ev("SparkListenerStageCompleted",
   **{"Stage Info": stage_info(3, "collect at fixture.py:21", 2, [2], T0 + 5300, T0 + 5730)})
ev("SparkListenerJobEnd", **{"Job ID": 1, "Completion Time": T0 + 5800, "Job Result": {"Result": "JobSucceeded"}})
ev("SparkListenerApplicationEnd", Timestamp=T0 + 10000)

log = os.path.join(HERE, "fixture_app.log")
with open(log, "w") as f:
    for e in events:
        f.write(json.dumps(e, separators=(",", ":")) + "\n")
subprocess.run(["zstd", "-q", "-f", "-19", log, "-o", log + ".zstd"], check=True)
data = open(log, "rb").read()
# lz4-java LZ4BlockOutputStream: "LZ4Block", token (method RAW 0x10 | level), compressed and
# original lengths, checksum (not checked here), the bytes; then an empty end block.
with open(os.path.join(HERE, "fixture_app.lz4"), "wb") as f:
    block = data[:65536]
    f.write(b"LZ4Block" + bytes([0x10 | 6]) + struct.pack("<iii", len(block), len(block), 0) + block)
    f.write(b"LZ4Block" + bytes([0x10 | 6]) + struct.pack("<iii", 0, 0, 0))
# snappy-java SnappyOutputStream: magic, version 1, compatible version 1, then chunks.
with open(os.path.join(HERE, "fixture_app.snappy"), "wb") as f:
    f.write(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", 0))
# compress-lzf (Spark's lzf codec): "ZV", 0 (a stored chunk), its length (big-endian), the bytes.
with open(os.path.join(HERE, "fixture_app.lzf"), "wb") as f:
    for at in range(0, len(data), 65535):
        chunk = data[at:at + 65535]
        f.write(b"ZV\x00" + struct.pack(">H", len(chunk)) + chunk)
print("wrote", log, "and its zstd, lz4, snappy and lzf forms")
