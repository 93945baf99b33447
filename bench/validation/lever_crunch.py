"""A parallel-friendly workload for the lever validation (levers.py): a fixed amount of
pure-Python CPU work (WORK units) split among T processes (multiprocessing, fork), T given
as the first argument. T=1 runs the work in the main process, one thread, as a program
written without parallelism would. Prints the kernel's view (getrusage) at the end."""
import multiprocessing
import resource
import sys
import time


def crunch(units):
    acc = 0
    for u in range(units):
        for i in range(100_000):
            acc = (acc * 31 + i) % 1_000_003
    return acc


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    work = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    start = time.monotonic()
    if threads == 1:
        crunch(work)
    else:
        shares = [work // threads + (1 if i < work % threads else 0) for i in range(threads)]
        with multiprocessing.get_context("fork").Pool(threads) as pool:
            pool.map(crunch, shares)
    wall = time.monotonic() - start
    ru_self = resource.getrusage(resource.RUSAGE_SELF)
    ru_kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ru_self.ru_utime + ru_self.ru_stime + ru_kids.ru_utime + ru_kids.ru_stime
    print(f"crunch threads={threads} work={work} wall_s={wall:.3f} cpu_s={cpu:.3f}", flush=True)


if __name__ == "__main__":
    main()
