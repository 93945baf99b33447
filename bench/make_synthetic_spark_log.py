#!/usr/bin/python3
"""Writes a synthetic Spark 3.x-shaped event log of about SIZE_MB megabytes for the import
benchmark (bench/spark_import_bench.sh): one application, jobs of two stages (a map stage and
a shuffle-reading one) of 200 tasks each on 16 executors, every task with TaskStart and a
TaskEnd carrying Spark 3's full Task Info (with accumulables) and Task Metrics.
usage: make_synthetic_spark_log.py OUT SIZE_MB"""
import json
import random
import sys

out, size_mb = sys.argv[1], float(sys.argv[2])
limit = int(size_mb * 1e6)
rng = random.Random(7)
t = 1700000000000
written = 0


def emit(f, e):
    global written
    line = json.dumps(e, separators=(",", ":")) + "\n"
    f.write(line)
    written += len(line)


def accumulables(run, cpu, gc):
    names = [("internal.metrics.executorRunTime", run), ("internal.metrics.executorCpuTime", cpu),
             ("internal.metrics.jvmGCTime", gc), ("internal.metrics.resultSize", 1500),
             ("internal.metrics.executorDeserializeTime", 5), ("internal.metrics.shuffle.read.fetchWaitTime", 3)]
    return [{"ID": i, "Name": n, "Update": v, "Value": v * 3, "Internal": True, "Count Failed Values": True}
            for i, (n, v) in enumerate(names)]


with open(out, "w") as f:
    emit(f, {"Event": "SparkListenerLogStart", "Spark Version": "3.5.0"})
    emit(f, {"Event": "SparkListenerApplicationStart", "App Name": "synthetic", "App ID": "app-synthetic",
             "Timestamp": t, "User": "bench"})
    for e in range(16):
        emit(f, {"Event": "SparkListenerExecutorAdded", "Timestamp": t + 10, "Executor ID": str(e),
                 "Executor Info": {"Host": f"node-{e // 4}", "Total Cores": 4, "Log Urls": {}}})
    job, stage, task = 0, 0, 0
    while written < limit:
        infos = [{"Stage ID": stage + k, "Stage Attempt ID": 0, "Stage Name": f"stage at job.py:{stage + k}",
                  "Number of Tasks": 200, "RDD Info": [], "Parent IDs": [stage] if k else [], "Details": "",
                  "Accumulables": []} for k in range(2)]
        emit(f, {"Event": "SparkListenerJobStart", "Job ID": job, "Submission Time": t, "Stage Infos": infos,
                 "Stage IDs": [stage, stage + 1], "Properties": {"spark.job.description": f"job {job}"}})
        for k in range(2):
            info = dict(infos[k], **{"Submission Time": t})
            emit(f, {"Event": "SparkListenerStageSubmitted", "Stage Info": info, "Properties": {}})
            end = t
            for i in range(200):
                launch = t + i // 64 * 50
                run = rng.randint(20, 400)
                finish = launch + run + 15
                end = max(end, finish)
                ex = str(i % 16)
                ti = {"Task ID": task, "Index": i, "Attempt": 0, "Partition ID": i, "Launch Time": launch,
                      "Executor ID": ex, "Host": f"node-{int(ex) // 4}", "Locality": "PROCESS_LOCAL",
                      "Speculative": False, "Getting Result Time": 0, "Finish Time": 0, "Failed": False,
                      "Killed": False, "Accumulables": []}
                emit(f, {"Event": "SparkListenerTaskStart", "Stage ID": stage + k, "Stage Attempt ID": 0, "Task Info": ti})
                ti = dict(ti, **{"Finish Time": finish, "Accumulables": accumulables(run, run * 800000, run // 10)})
                metrics = {"Executor Deserialize Time": 5, "Executor Deserialize CPU Time": 4000000,
                           "Executor Run Time": run, "Executor CPU Time": run * 800000, "Peak Execution Memory": 0,
                           "Result Size": 1500, "JVM GC Time": run // 10, "Result Serialization Time": 0,
                           "Memory Bytes Spilled": 0, "Disk Bytes Spilled": 0,
                           "Shuffle Read Metrics": {"Remote Blocks Fetched": 8 * k, "Local Blocks Fetched": 2 * k,
                                                    "Fetch Wait Time": 3 * k, "Remote Bytes Read": 80000 * k,
                                                    "Remote Bytes Read To Disk": 0, "Local Bytes Read": 20000 * k,
                                                    "Total Records Read": 1000 * k},
                           "Shuffle Write Metrics": {"Shuffle Bytes Written": 100000 * (1 - k),
                                                     "Shuffle Write Time": 2000000 * (1 - k),
                                                     "Shuffle Records Written": 1000 * (1 - k)},
                           "Input Metrics": {"Bytes Read": 1000000 * (1 - k), "Records Read": 10000 * (1 - k)},
                           "Output Metrics": {"Bytes Written": 0, "Records Written": 0}, "Updated Blocks": []}
                emit(f, {"Event": "SparkListenerTaskEnd", "Stage ID": stage + k, "Stage Attempt ID": 0,
                         "Task Type": "ShuffleMapTask" if k == 0 else "ResultTask",
                         "Task End Reason": {"Reason": "Success"}, "Task Info": ti,
                         "Task Executor Metrics": {"JVMHeapMemory": 0, "JVMOffHeapMemory": 0}, "Task Metrics": metrics})
                task += 1
            emit(f, {"Event": "SparkListenerStageCompleted",
                     "Stage Info": dict(infos[k], **{"Submission Time": t, "Completion Time": end + 5})})
            t = end + 10
        emit(f, {"Event": "SparkListenerJobEnd", "Job ID": job, "Completion Time": t, "Job Result": {"Result": "JobSucceeded"}})
        job += 1
        stage += 2
        t += 20
    emit(f, {"Event": "SparkListenerApplicationEnd", "Timestamp": t + 100})
