// Samples ingested per CPU-second into the PostgreSQL store, against two peers measured in the
// same run: a raw binary COPY of the same rows into a plain table (no partitions, no index, no
// grademl code: what the server charges for the rows themselves) and the SQLite backend.
// Writes N samples of 100 series in deltas of 100,000 (or DELTA) through Database::WriteDelta and counts
// the wall and CPU time of those writes: this process's (encoding, libpq) plus, for
// PostgreSQL, the server backend's (read from /proc, so run it as root or as the server's
// user). The raw peer sends the same rows in the same transactions, one per delta. With ROUNDS >
// 1 the three alternate, ROUNDS times, and each line's median is printed last.
//   pg_ingest_bench POSTGRES_URL SQLITE_PATH [SAMPLES [ROUNDS [DELTA]]]
// DELTA: samples per delta (default 100,000; the agent's deltas hold about a second's samples).
// SQLITE_PATH `-` leaves the SQLite peer out (it takes most of the time; the raw COPY stays).
// With PG_INGEST_BENCH_LOAD set, the first round's run is then loaded back (LoadRun) and timed.
// The URL must be a postgresql:// or postgres:// URI (the benchmark adds application_name to
// find its own server backend; `key=value` strings are not supported here).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "store/postgres/libpq.h"

#include "model/run_builder.h"
#include "store/database.h"

namespace {

constexpr int kSeries = 100;
int kDeltaSamples = 100'000;  // a multiple of kSeries
constexpr int64_t kStartNs = 1'700'000'000'000'000'000;

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

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "pg_ingest_bench: %s\n", what.c_str());
  std::exit(1);
}

// The URL with an application_name of this process's own, so that the server backend the
// store opens is found exactly (other sessions may be connected as 'grademl').
std::string Tagged(const std::string& url, std::string* name) {
  if (url.rfind("postgresql://", 0) != 0 && url.rfind("postgres://", 0) != 0) {
    Die("the PostgreSQL location must be a postgresql:// URI");
  }
  *name = "grademl_bench_" + std::to_string(getpid());
  return url + (url.find('?') == std::string::npos ? "?" : "&") + "application_name=" + *name;
}

PGconn* Connect(const std::string& url) {
  PGconn* c = PQconnectdb(url.c_str());
  if (c == nullptr || PQstatus(c) != CONNECTION_OK) Die(std::string("connect: ") + PQerrorMessage(c));
  return c;
}

std::string Exec(PGconn* c, const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  ExecStatusType st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) Die(sql + ": " + PQresultErrorMessage(r));
  std::string v = st == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
  PQclear(r);
  return v;
}

// The server process of the newest connection named `app` (a previous round's, closed
// before this one opened, may not have left pg_stat_activity yet).
long BackendPid(const std::string& url, const std::string& app) {
  PGconn* c = Connect(url);
  std::string pid = Exec(c, "SELECT pid FROM pg_stat_activity WHERE application_name = '" + app +
                                "' AND pid <> pg_backend_pid() ORDER BY backend_start DESC LIMIT 1");
  PQfinish(c);
  if (pid.empty()) Die("cannot find the store's server backend");
  return std::atol(pid.c_str());
}

struct Figures {
  int64_t run = 0;
  int64_t samples = 0;
  double wall = 0, client = 0, server = 0;
  double per_cpu() const { return samples / (client + server); }
};

void Print(const char* name, const Figures& f) {
  std::printf("%-10s %9lld samples  wall %6.2f s  %8.0f samples/s  client CPU %5.2f s  server CPU %5.2f s  "
              "%9.0f samples per CPU-second\n",
              name, static_cast<long long>(f.samples), f.wall, f.samples / f.wall, f.client, f.server, f.per_cpu());
}

// One round through the store: a new run, `total` samples.
Figures MeasureStore(const std::string& name, const std::string& location, int64_t total, long backend_of_app,
                     const std::string& url_for_pid, const std::string& app) {
  using namespace grademl;
  auto db = store::Database::Open(location, store::Database::Mode::kReadWrite);
  if (!db.ok()) Die(name + ": " + db.status().message());
  model::RunBuilder b(model::RunInfo{.uuid = "bench", .command = {"bench"}, .host = "h", .start_ns = kStartNs});
  model::RunId id = (*db)->CreateRun(b.run_info()).value();
  Figures f;  // inside WriteDelta only (building the deltas is the bench's work)
  f.run = id;
  auto host = b.AddResource({.kind = model::ResourceKind::kHost, .name = "h", .host = "h"});
  std::vector<model::SeriesId> series;
  for (int i = 0; i < kSeries; ++i) {
    series.push_back(b.AddSeries({.resource = host, .name = "s" + std::to_string(i), .unit = "x"}));
  }
  (void)(*db)->WriteDelta(id, b.TakeDelta(true));
  long backend = backend_of_app ? BackendPid(url_for_pid, app) : -1;
  double server0 = backend > 0 ? ProcCpu(backend) : 0;
  TimeNs t = kStartNs;
  while (f.samples < total) {
    model::RunDelta d;
    d.samples.reserve(kDeltaSamples);
    for (int k = 0; k < kDeltaSamples / kSeries; ++k) {
      t += 10'000'000;
      for (model::SeriesId s : series) d.samples.push_back({.series = s, .sample = {.t = t, .v = static_cast<double>(k)}});
    }
    double c0 = SelfCpu();
    auto w0 = std::chrono::steady_clock::now();
    Status st = (*db)->WriteDelta(id, d);
    f.wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    f.client += SelfCpu() - c0;
    if (!st.ok()) Die(name + ": " + st.message());
    f.samples += static_cast<int64_t>(d.samples.size());
  }
  if (backend > 0) f.server = ProcCpu(backend) - server0;
  return f;
}

// The same rows by plain libpq: binary COPY into an unindexed, unpartitioned table, one
// transaction per delta's rows, encoded here (not by grademl's encoder).
Figures MeasureRawCopy(const std::string& url, int64_t total, int round) {
  PGconn* c = Connect(url);
  Exec(c, "SET client_min_messages = warning; SET synchronous_commit = off");
  const std::string table = "gml_bench_raw_copy";
  Exec(c, "DROP TABLE IF EXISTS " + table);
  Exec(c, "CREATE TABLE " + table +
              " (run_id BIGINT NOT NULL, series_id BIGINT NOT NULL, t_ns BIGINT NOT NULL, value DOUBLE PRECISION)");
  long backend = std::atol(Exec(c, "SELECT pg_backend_pid()").c_str());
  double server0 = ProcCpu(backend);
  auto be16 = [](std::string& s, uint16_t v) {
    char b[2] = {static_cast<char>(v >> 8), static_cast<char>(v)};
    s.append(b, 2);
  };
  auto be32 = [](std::string& s, uint32_t v) {
    for (int i = 3; i >= 0; --i) s.push_back(static_cast<char>(v >> (8 * i)));
  };
  auto be64 = [](std::string& s, uint64_t v) {
    for (int i = 7; i >= 0; --i) s.push_back(static_cast<char>(v >> (8 * i)));
  };
  Figures f;
  int64_t t = kStartNs;
  std::string buf;
  while (f.samples < total) {
    double c0 = SelfCpu();
    auto w0 = std::chrono::steady_clock::now();
    buf.assign("PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0", 19);
    for (int k = 0; k < kDeltaSamples / kSeries; ++k) {
      t += 10'000'000;
      for (int s = 1; s <= kSeries; ++s) {
        double v = k;
        uint64_t bits;
        std::memcpy(&bits, &v, 8);
        be16(buf, 4);
        for (uint64_t x : {static_cast<uint64_t>(round + 1), static_cast<uint64_t>(s), static_cast<uint64_t>(t), bits}) {
          be32(buf, 8);
          be64(buf, x);
        }
      }
    }
    be16(buf, 0xffff);
    Exec(c, "BEGIN");
    PGresult* r = PQexec(c, ("COPY " + table + " FROM STDIN (FORMAT binary)").c_str());
    if (PQresultStatus(r) != PGRES_COPY_IN) Die(std::string("COPY: ") + PQresultErrorMessage(r));
    PQclear(r);
    for (size_t off = 0; off < buf.size(); off += size_t{1} << 20) {
      size_t n = std::min(size_t{1} << 20, buf.size() - off);
      if (PQputCopyData(c, buf.data() + off, static_cast<int>(n)) != 1) Die("PQputCopyData failed");
    }
    if (PQputCopyEnd(c, nullptr) != 1) Die("PQputCopyEnd failed");
    while ((r = PQgetResult(c)) != nullptr) {
      if (PQresultStatus(r) != PGRES_COMMAND_OK) Die(std::string("COPY: ") + PQresultErrorMessage(r));
      PQclear(r);
    }
    Exec(c, "COMMIT");
    f.wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    f.client += SelfCpu() - c0;
    f.samples += kDeltaSamples;
  }
  f.server = ProcCpu(backend) - server0;
  Exec(c, "DROP TABLE " + table);
  PQfinish(c);
  return f;
}

// LoadRun of one of the store's runs (read-only, as `grademl report` opens it): wall, this
// process's CPU and the server backend's, against the samples the store holds in all.
void MeasureLoad(const std::string& tagged, const std::string& url, const std::string& app, int64_t run) {
  using namespace grademl;
  auto db = store::Database::Open(tagged, store::Database::Mode::kReadOnly);
  if (!db.ok()) Die("load: " + db.status().message());
  long backend = BackendPid(url, app);
  PGconn* c = Connect(url);
  std::string stored = Exec(c, "SELECT count(*) FROM samples");
  std::string runs = Exec(c, "SELECT count(*) FROM runs");
  PQfinish(c);
  double s0 = ProcCpu(backend), c0 = SelfCpu();
  auto w0 = std::chrono::steady_clock::now();
  auto loaded = (*db)->LoadRun(run);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  double client = SelfCpu() - c0, server = ProcCpu(backend) - s0;
  if (!loaded.ok()) Die("load: " + loaded.status().message());
  size_t n = 0;
  for (const auto& series : loaded->series) n += series.samples.size();
  std::printf("LoadRun of run %lld (%zu samples) from a store of %s runs and %s samples: wall %.2f s, client CPU %.2f s, "
              "server CPU %.2f s\n",
              static_cast<long long>(run), n, runs.c_str(), stored.c_str(), wall, client, server);
}

Figures Median(std::vector<Figures> v) {
  std::sort(v.begin(), v.end(), [](const Figures& a, const Figures& b) { return a.per_cpu() < b.per_cpu(); });
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: pg_ingest_bench POSTGRES_URL SQLITE_PATH [SAMPLES [ROUNDS [DELTA]]]\n");
    return 2;
  }
  int64_t total = argc > 3 ? std::atoll(argv[3]) : 5'000'000;
  int rounds = argc > 4 ? std::max(1, std::atoi(argv[4])) : 1;
  if (argc > 5) kDeltaSamples = std::max(1, std::atoi(argv[5]) / kSeries) * kSeries;
  if (grademl::Status st = grademl::store::pq::Load(); !st.ok()) Die(st.message());
  const std::string url = argv[1];
  const bool with_sqlite = std::string(argv[2]) != "-";
  const bool load = std::getenv("PG_INGEST_BENCH_LOAD") != nullptr;
  std::string app;
  const std::string tagged = Tagged(url, &app);
  std::map<std::string, std::vector<Figures>> all;
  for (int round = 0; round < rounds; ++round) {
    Figures pg = MeasureStore("postgresql", tagged, total, 1, url, app);
    Print("postgresql", pg);
    Figures raw = MeasureRawCopy(url, total, round);
    Print("raw COPY", raw);
    all["postgresql"].push_back(pg);
    all["raw COPY"].push_back(raw);
    if (!with_sqlite) {
      std::printf("round %d: postgresql / raw COPY %.3f (samples per CPU-second)\n", round + 1,
                  pg.per_cpu() / raw.per_cpu());
      continue;
    }
    Figures lite = MeasureStore("sqlite", argv[2], total, 0, "", "");
    Print("sqlite", lite);
    std::printf("round %d: postgresql / raw COPY %.3f, postgresql / sqlite %.2f (samples per CPU-second)\n", round + 1,
                pg.per_cpu() / raw.per_cpu(), pg.per_cpu() / lite.per_cpu());
    all["sqlite"].push_back(lite);
  }
  if (load) MeasureLoad(tagged, url, app, all["postgresql"].front().run);
  if (rounds > 1) {
    std::vector<double> to_raw, to_lite;
    for (int i = 0; i < rounds; ++i) {
      to_raw.push_back(all["postgresql"][i].per_cpu() / all["raw COPY"][i].per_cpu());
      if (with_sqlite) to_lite.push_back(all["postgresql"][i].per_cpu() / all["sqlite"][i].per_cpu());
    }
    std::sort(to_raw.begin(), to_raw.end());
    std::sort(to_lite.begin(), to_lite.end());
    std::printf("median of %d rounds:\n", rounds);
    for (const char* name : {"postgresql", "raw COPY", "sqlite"}) {
      if (!all[name].empty()) Print(name, Median(all[name]));
    }
    std::printf("median ratios: postgresql / raw COPY %.3f (min %.3f, max %.3f)", to_raw[to_raw.size() / 2],
                to_raw.front(), to_raw.back());
    if (with_sqlite) std::printf(", postgresql / sqlite %.2f", to_lite[to_lite.size() / 2]);
    std::printf("\n");
  }
  return 0;
}
