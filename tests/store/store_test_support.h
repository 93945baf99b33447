// Shared by the store tests: scratch directories, raw file and SQLite access, and an
// in-memory mirror of what a sequence of deltas should leave in the database.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "core/status.h"
#include "model/run.h"
#include "model/run_builder.h"

namespace grademl::store::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "grademl_store_XXXXXX").string();
    GRADEML_CHECK(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A raw SQLite connection, for building foreign files and inspecting ours.
class RawDb {
 public:
  explicit RawDb(const std::string& path, int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) {
    GRADEML_CHECK(sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) == SQLITE_OK);
  }
  ~RawDb() { sqlite3_close_v2(db_); }
  sqlite3* get() const { return db_; }
  void Exec(const std::string& sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << sql << ": " << (err ? err : "");
    sqlite3_free(err);
  }
  int64_t Int(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sql;
    int64_t v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    return v;
  }
  std::string Text(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sql;
    std::string v = sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0)
                        ? reinterpret_cast<const char*>(sqlite3_column_text(s, 0))
                        : "";
    sqlite3_finalize(s);
    return v;
  }

 private:
  sqlite3* db_ = nullptr;
};

// What the database should hold after the given deltas: phases upserted by id, the rest
// appended, everything ordered as LoadRun returns it.
class ExpectedRun {
 public:
  void Apply(const model::RunDelta& d) {
    if (d.info) run_.info = *d.info;
    for (const auto& p : d.phases) phases_[p.id] = p;
    run_.edges.insert(run_.edges.end(), d.edges.begin(), d.edges.end());
    for (const auto& r : d.resources) resources_[r.id] = r;
    for (const auto& s : d.series) series_[s.id].info = s;
    for (const auto& r : d.samples) series_[r.series].samples.push_back(r.sample);
  }
  model::Run Get(model::RunId id) const {
    model::Run run = run_;
    run.info.id = id;
    for (const auto& [_, p] : phases_) run.phases.push_back(p);
    for (const auto& [_, r] : resources_) run.resources.push_back(r);
    for (const auto& [_, s] : series_) run.series.push_back(s);
    return run;
  }

 private:
  model::Run run_;
  std::map<model::PhaseId, model::Phase> phases_;
  std::map<model::ResourceId, model::Resource> resources_;
  std::map<model::SeriesId, model::Series> series_;
};

inline bool SameDouble(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

inline void ExpectSameInfo(const model::RunInfo& a, const model::RunInfo& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.uuid, b.uuid);
  EXPECT_EQ(a.command, b.command);
  EXPECT_EQ(a.cwd, b.cwd);
  EXPECT_EQ(a.host, b.host);
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.exit_code, b.exit_code);
  EXPECT_EQ(a.exit_signal, b.exit_signal);
  EXPECT_EQ(a.complete, b.complete);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.grademl_version, b.grademl_version);
  EXPECT_EQ(a.interval_ns, b.interval_ns);
  EXPECT_TRUE(SameDouble(a.monitor_cpu_seconds, b.monitor_cpu_seconds));
}

// Compares every field of two runs exactly (NaN equals NaN).
inline void ExpectSameRun(const model::Run& got, const model::Run& want) {
  ExpectSameInfo(got.info, want.info);
  ASSERT_EQ(got.phases.size(), want.phases.size());
  for (size_t i = 0; i < got.phases.size(); ++i) {
    const model::Phase& a = got.phases[i];
    const model::Phase& b = want.phases[i];
    SCOPED_TRACE("phase " + std::to_string(b.id));
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.parent, b.parent);
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.type, b.type);
    EXPECT_EQ(a.tags, b.tags);
    EXPECT_EQ(a.start_ns, b.start_ns);
    EXPECT_EQ(a.end_ns, b.end_ns);
    EXPECT_EQ(a.host, b.host);
    EXPECT_EQ(a.pid, b.pid);
  }
  ASSERT_EQ(got.edges.size(), want.edges.size());
  for (size_t i = 0; i < got.edges.size(); ++i) {
    EXPECT_EQ(got.edges[i].from, want.edges[i].from);
    EXPECT_EQ(got.edges[i].to, want.edges[i].to);
    EXPECT_EQ(got.edges[i].kind, want.edges[i].kind);
  }
  ASSERT_EQ(got.resources.size(), want.resources.size());
  for (size_t i = 0; i < got.resources.size(); ++i) {
    const model::Resource& a = got.resources[i];
    const model::Resource& b = want.resources[i];
    SCOPED_TRACE("resource " + std::to_string(b.id));
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.parent, b.parent);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.host, b.host);
    EXPECT_EQ(a.pid, b.pid);
    EXPECT_EQ(a.phase, b.phase);
  }
  ASSERT_EQ(got.series.size(), want.series.size());
  for (size_t i = 0; i < got.series.size(); ++i) {
    const model::Series& a = got.series[i];
    const model::Series& b = want.series[i];
    SCOPED_TRACE("series " + std::to_string(b.info.id));
    EXPECT_EQ(a.info.id, b.info.id);
    EXPECT_EQ(a.info.resource, b.info.resource);
    EXPECT_EQ(a.info.name, b.info.name);
    EXPECT_EQ(a.info.unit, b.info.unit);
    EXPECT_EQ(a.info.kind, b.info.kind);
    EXPECT_EQ(a.info.has_capacity(), b.info.has_capacity());
    EXPECT_TRUE(SameDouble(a.info.capacity, b.info.capacity));
    ASSERT_EQ(a.samples.size(), b.samples.size());
    for (size_t j = 0; j < a.samples.size(); ++j) {
      EXPECT_EQ(a.samples[j].t, b.samples[j].t) << "sample " << j;
      EXPECT_TRUE(SameDouble(a.samples[j].v, b.samples[j].v)) << "sample " << j << ": " << a.samples[j].v
                                                              << " vs " << b.samples[j].v;
    }
  }
}

inline model::RunInfo SampleInfo() {
  return model::RunInfo{
      .uuid = "3f2a9c4e-0000-4000-8000-000000000001",
      .command = {"python", "train.py", "--name=\"x y\"", "back\\slash", "tab\there", "ünïcødé", "bad\xff\xfe utf8",
                  std::string("nul\0byte", 8), ""},
      .cwd = "/home/me/project",
      .host = "node1",
      .start_ns = 1'700'000'000'000'000'000,
      .grademl_version = "0.1.0",
      .interval_ns = 100'000'000,
  };
}

}  // namespace grademl::store::testing
