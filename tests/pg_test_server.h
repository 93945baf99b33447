// The tests' PostgreSQL server (tests/pg/pg_test_server.sh): started on first use, shared
// by every test of a build (ctest stops it at the end: fixture `pg`), with a fresh database
// per call. Where no PostgreSQL server is installed the tests that need one skip, and fail
// instead in CI (CI=true).
#pragma once

#include <gtest/gtest.h>
#include "skip_or_fail.h"
#include "store/postgres/libpq.h"
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>

namespace grademl::testing {

// The server's directory: $GRADEML_TEST_PG_DIR, else one per build tree and user.
inline std::string PgTestServerDir() {
  const char* env = std::getenv("GRADEML_TEST_PG_DIR");
  if (env != nullptr && env[0] != '\0') return env;
#ifdef GRADEML_TEST_PG_DEFAULT_DIR
  return GRADEML_TEST_PG_DEFAULT_DIR;
#else
  return std::string(GRADEML_BINARY_DIR) + "/pg-test-server";
#endif
}

// Starts the server if it is not running; "" when it runs, else why not.
inline std::string StartPgTestServer() {
  static const std::string why = [] {
    std::string cmd = std::string("'") + GRADEML_SOURCE_DIR + "/tests/pg/pg_test_server.sh' start '" +
                      PgTestServerDir() + "' 2>&1";
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return std::string("popen failed");
    char buf[512];
    while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
    int rc = pclose(p);
    if (rc == 0) return std::string();
    return "cannot start the test PostgreSQL server: " + (out.empty() ? "exit " + std::to_string(rc) : out);
  }();
  return why;
}

inline std::string PgTestUrl(const std::string& dbname) {
  return "postgresql:///" + dbname + "?host=" + PgTestServerDir() + "&user=postgres";
}

// A new, empty database on the test server: its URL, or "" and why not in `why`.
inline std::string FreshPgDatabase(std::string& why) {
  why = StartPgTestServer();
  if (!why.empty()) return "";
  static std::atomic<int> counter{0};
  std::random_device rd;
  std::string name = "gml_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" + std::to_string(rd() % 100000);
  PGconn* conn = PQconnectdb(PgTestUrl("postgres").c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    why = PQerrorMessage(conn);
  } else {
    PGresult* r = PQexec(conn, ("CREATE DATABASE " + name).c_str());
    if (PQresultStatus(r) != PGRES_COMMAND_OK) why = PQresultErrorMessage(r);
    PQclear(r);
  }
  PQfinish(conn);
  return why.empty() ? PgTestUrl(name) : "";
}

}  // namespace grademl::testing

// Declares `var`, the URL of a fresh test database; skips the test (fails it under CI=true)
// when there is no PostgreSQL server to run it on.
#define GRADEML_PG_DATABASE_OR_SKIP(var)                                         \
  std::string var##_why;                                                         \
  std::string var = ::grademl::testing::FreshPgDatabase(var##_why);              \
  if (var.empty()) SKIP_OR_FAIL_IN_CI("no PostgreSQL server for the test: " << var##_why)
