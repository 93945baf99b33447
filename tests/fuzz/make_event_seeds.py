"""Writes the seed corpus of the event-reader fuzzer (tests/fuzz/event_file_fuzz.cpp) from
real writer output: small programs run against libgrademl.so, their event memories taken
over the collector's socket and cut into the fuzzer's compact layout.
usage: python3 tests/fuzz/make_event_seeds.py build/libgrademl.so tests/fuzz/corpus/event_file"""
import os
import socket
import subprocess
import sys
import tempfile

HEADER_PART, PIECE, HEADER_BYTES, CHUNK_BYTES, MAX_PIECES = 64, 2048, 4096, 65536, 16

PROGRAMS = {
    "nested_tags": """
i = lib.grademl_intern
lib.grademl_begin(i(b"epoch")); lib.grademl_tag(i(b"epoch_no"), i(b"3"))
for k in range(5):
    lib.grademl_begin_typed(i(b"step %d" % k), i(b"step")); lib.grademl_end()
lib.grademl_end()
""",
    "counters_flows_instants": """
i = lib.grademl_intern
lib.grademl_begin(i(b"producer")); lib.grademl_flow_out(7); lib.grademl_end()
lib.grademl_begin(i(b"consumer")); lib.grademl_flow_in(7); lib.grademl_end()
for k in range(4):
    lib.grademl_counter(i(b"loss"), ctypes.c_double(1.0 / (k + 1)))
lib.grademl_instant(i(b"checkpoint"))
""",
    "threads": """
import threading
i = lib.grademl_intern
def work(n):
    lib.grademl_begin(i(b"worker")); lib.grademl_begin(i(b"inner")); lib.grademl_end(); lib.grademl_end()
ts = [threading.Thread(target=work, args=(n,)) for n in range(3)]
[t.start() for t in ts]; [t.join() for t in ts]
""",
    "given_times_process_tags": """
i = lib.grademl_intern
lib.grademl_tag_process(i(b"rank"), i(b"1"))
lib.grademl_begin(i(b"backward"))
t = lib.grademl_now()
lib.grademl_begin_at(i(b"all_reduce"), i(b"collective"), ctypes.c_uint64(t - 1000))
lib.grademl_tag(i(b"seq"), i(b"2")); lib.grademl_end_at(ctypes.c_uint64(t + 5))
lib.grademl_end()
""",
    "open_at_exit_escaped_names": """
i = lib.grademl_intern
lib.grademl_begin(i("ctl \\x1b[31m \\udcff".encode("utf-8", "surrogateescape")))
lib.grademl_begin(i(b"never ended"))
""",
}

PRELUDE = "import ctypes, os\nlib = ctypes.CDLL(os.environ['GRADEML_LIBRARY'])\nlib.grademl_counter.argtypes = [ctypes.c_uint32, ctypes.c_double]\nlib.grademl_flow_out.argtypes = [ctypes.c_uint64]\nlib.grademl_flow_in.argtypes = [ctypes.c_uint64]\nlib.grademl_now.restype = ctypes.c_uint64\n"


def compact(fd):
    mem = bytearray(os.pread(fd, HEADER_PART, 0))
    next_chunk = int.from_bytes(mem[40:48], "little")
    out = bytes(mem)
    for c in range(min(next_chunk, MAX_PIECES)):
        out += os.pread(fd, PIECE, HEADER_BYTES + c * CHUNK_BYTES)
    return out.rstrip(b"\0")


def main(lib, outdir):
    os.makedirs(outdir, exist_ok=True)
    for name, body in PROGRAMS.items():
        with tempfile.TemporaryDirectory() as d:
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            srv.bind(os.path.join(d, "events.sock"))
            srv.listen(8)
            env = dict(os.environ, GRADEML_EVENTS_DIR=d, GRADEML_LIBRARY=os.path.abspath(lib))
            subprocess.run([sys.executable, "-c", PRELUDE + body], env=env, check=True)
            c, _ = srv.accept()
            _, fds, _, _ = socket.recv_fds(c, 1, 1)
            with open(os.path.join(outdir, name), "wb") as f:
                f.write(compact(fds[0]))
            os.close(fds[0])
            c.close()
            srv.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
