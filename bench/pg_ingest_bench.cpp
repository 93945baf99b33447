// Samples ingested per second into the store, per core: PostgreSQL (binary COPY into the
// time-partitioned, BRIN-indexed samples table) against the SQLite backend as the peer, in
// the same run. Writes N samples of 100 series in deltas of 100,000 through Database::WriteDelta
// and counts the wall and CPU time of those writes: this process's (encoding, libpq) plus, for PostgreSQL,
// the server backend's (read from /proc, so run it as root or as the server's user).
//   pg_ingest_bench POSTGRES_URL SQLITE_PATH [SAMPLES]
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "store/postgres/libpq.h"

#include "model/run_builder.h"
#include "store/database.h"

namespace {

double SelfCpu() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// utime + stime of a process, in seconds (-1 when unreadable).
double ProcCpu(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  double ut = 0, st = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) ut = std::atof(field.c_str());
    if (i == 15) st = std::atof(field.c_str());
  }
  return (ut + st) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The server process serving the newest connection of this client's application name.
long BackendPid(const std::string& url) {
  PGconn* c = PQconnectdb(url.c_str());
  long pid = -1;
  PGresult* r = PQexec(c, "SELECT pid FROM pg_stat_activity WHERE application_name = 'grademl' AND pid <> "
                          "pg_backend_pid() ORDER BY backend_start DESC LIMIT 1");
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) pid = std::atol(PQgetvalue(r, 0, 0));
  PQclear(r);
  PQfinish(c);
  return pid;
}

void Measure(const std::string& name, const std::string& location, int64_t total, bool pg) {
  using namespace grademl;
  auto db = store::Database::Open(location, store::Database::Mode::kReadWrite);
  if (!db.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), db.status().message().c_str());
    std::exit(1);
  }
  model::RunBuilder b(model::RunInfo{.uuid = "bench", .command = {"bench"}, .host = "h", .start_ns = 1'700'000'000'000'000'000});
  model::RunId id = (*db)->CreateRun(b.run_info()).value();
  auto host = b.AddResource({.kind = model::ResourceKind::kHost, .name = "h", .host = "h"});
  std::vector<model::SeriesId> series;
  for (int i = 0; i < 100; ++i) series.push_back(b.AddSeries({.resource = host, .name = "s" + std::to_string(i), .unit = "x"}));
  (void)(*db)->WriteDelta(id, b.TakeDelta(true));
  long backend = pg ? BackendPid(location) : -1;
  double server0 = backend > 0 ? ProcCpu(backend) : 0;
  double client = 0, wall = 0;  // inside WriteDelta only (building the deltas is the bench's work)
  int64_t written = 0;
  TimeNs t = 1'700'000'000'000'000'000;
  while (written < total) {
    model::RunDelta d;
    d.samples.reserve(100'000);
    for (int k = 0; k < 1000; ++k) {
      t += 10'000'000;
      for (model::SeriesId s : series) d.samples.push_back({.series = s, .sample = {.t = t, .v = static_cast<double>(k)}});
    }
    double c0 = SelfCpu();
    auto w0 = std::chrono::steady_clock::now();
    Status st = (*db)->WriteDelta(id, d);
    wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    client += SelfCpu() - c0;
    if (!st.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), st.message().c_str());
      std::exit(1);
    }
    written += static_cast<int64_t>(d.samples.size());
  }
  double server = backend > 0 ? ProcCpu(backend) - server0 : 0;
  double cpu = client + server;
  std::printf("%-10s %9lld samples  wall %6.2f s  %8.0f samples/s  client CPU %5.2f s  server CPU %5.2f s  "
              "%9.0f samples per CPU-second\n",
              name.c_str(), static_cast<long long>(written), wall, written / wall, client, server, written / cpu);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: pg_ingest_bench POSTGRES_URL SQLITE_PATH [SAMPLES]\n");
    return 2;
  }
  int64_t total = argc > 3 ? std::atoll(argv[3]) : 5'000'000;
  Measure("postgresql", argv[1], total, true);
  Measure("sqlite", argv[2], total, false);
  return 0;
}
