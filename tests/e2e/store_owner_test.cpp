// End-to-end: a run records its owner (the OS user on SQLite, the PostgreSQL role on
// PostgreSQL), shown by `ls` and `report --json`; a PostgreSQL store made shared by
// `grademl store init --shared` lets the server enforce who may change what (issue 28,
// item 3): writers alice and bob each record a real run, bob can neither change nor delete
// alice's rows (checked as the administrator: they are unchanged) but can delete his own,
// reader carol reads both and writes nothing, and an agent writing as alice still works.
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "e2e/command.h"
#include "pg_test_server.h"
#include "store/postgres/libpq.h"

namespace grademl::testing {
namespace {

// The OS user this test runs as, from the password database (not from grademl).
std::string OwnerTestOsUser() {
  struct passwd* pw = getpwuid(geteuid());
  return pw != nullptr ? pw->pw_name : "";
}

// `url` with its user=... replaced by `user`.
std::string OwnerTestUrlAs(const std::string& url, const std::string& user) {
  size_t at = url.find("user=");
  return url.substr(0, at) + "user=" + user;
}

// One statement on `url`: its affected or returned row count, or -1 and the error in `error`.
struct OwnerSql {
  int64_t rows = -1;
  std::string value;  // the first row's first column, when it returned rows
  std::string error;
};
OwnerSql OwnerExec(const std::string& url, const std::string& sql) {
  OwnerSql out;
  PGconn* c = PQconnectdb(url.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    out.error = PQerrorMessage(c);
    PQfinish(c);
    return out;
  }
  PGresult* r = PQexec(c, sql.c_str());
  ExecStatusType st = PQresultStatus(r);
  if (st == PGRES_TUPLES_OK) {
    out.rows = PQntuples(r);
    if (out.rows > 0) out.value = PQgetvalue(r, 0, 0);
  } else if (st == PGRES_COMMAND_OK) {
    const char* n = PQcmdTuples(r);
    out.rows = n != nullptr && n[0] != '\0' ? std::atoll(n) : 0;
  } else {
    out.error = PQresultErrorMessage(r);
  }
  PQclear(r);
  PQfinish(c);
  return out;
}

int64_t OwnerCount(const std::string& url, const std::string& sql) {
  OwnerSql r = OwnerExec(url, sql);
  EXPECT_EQ(r.error, "") << sql;
  return r.rows == 1 ? std::atoll(r.value.c_str()) : -1;
}

// Login roles of this test, dropped when it ends, however it ends.
struct OwnerTestRoles {
  std::string admin_url;
  std::vector<std::string> names;
  ~OwnerTestRoles() {
    for (const std::string& n : names) {
      OwnerExec(admin_url, "DROP OWNED BY " + n);
      OwnerExec(admin_url, "DROP ROLE IF EXISTS " + n);
    }
  }
};

// The owners of `ls --json`'s runs, by run id.
std::map<int64_t, nlohmann::json> OwnersOfLs(const std::string& out) {
  std::map<int64_t, nlohmann::json> owners;
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  if (!j.is_object() || !j.contains("runs")) return owners;
  for (const nlohmann::json& r : j["runs"]) owners[r["id"].get<int64_t>()] = r["owner"];
  return owners;
}

TEST(StoreOwnerE2E, AnSqliteRunRecordsTheOsUser) {
  const std::string user = OwnerTestOsUser();
  ASSERT_FALSE(user.empty());
  const std::string dir = FreshDir("store_owner_sqlite");
  const std::string db = dir + "/g.db";
  // GRADEML_DB, not --db: the store stays SQLite under GRADEML_TEST_BACKEND=postgresql.
  const std::vector<std::string> env = {"/usr/bin/env", "GRADEML_DB=" + db, GrademlBinary()};
  auto with = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = env;
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  };
  CommandResult r = RunCommand(with({"run", "--no-report", "--", "/bin/sh", "-c", "exit 4"}));
  ASSERT_EQ(r.exit_code, 4) << r.err;
  r = RunCommand(with({"ls", "--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(OwnersOfLs(r.out), (std::map<int64_t, nlohmann::json>{{1, user}})) << r.out;
  r = RunCommand(with({"ls"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("OWNER"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  " + user + "  "), std::string::npos) << r.out;
  r = RunCommand(with({"report", "--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["run"]["owner"], user);
  r = RunCommand(with({"query", "SELECT owner FROM runs"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(user), std::string::npos) << r.out;
  // An SQLite store has no roles: --shared says what protects it instead, and fails.
  r = RunCommand(with({"store", "init", "--shared"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("permissions"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(StoreOwnerE2E, ASharedPostgresStoreLetsEachWriterChangeOnlyItsOwnRuns) {
  GRADEML_PG_DATABASE_OR_SKIP(admin);
  const std::string tag = "gm_pgowner_" + std::to_string(getpid());
  OwnerTestRoles roles{admin, {tag + "_alice", tag + "_bob", tag + "_carol"}};
  const std::string alice = roles.names[0], bob = roles.names[1], carol = roles.names[2];
  for (const std::string& n : roles.names) ASSERT_EQ(OwnerExec(admin, "CREATE ROLE " + n + " LOGIN").error, "");
  const std::string g = GrademlBinary();
  // Twice: idempotent.
  for (int i = 0; i < 2; ++i) {
    CommandResult init = RunCommand({g, "--db", admin, "store", "init", "--shared"});
    ASSERT_EQ(init.exit_code, 0) << init.err;
    EXPECT_NE(init.out.find("grademl_writer"), std::string::npos) << init.out;
  }
  ASSERT_EQ(OwnerExec(admin, "GRANT grademl_writer TO " + alice + ", " + bob).error, "");
  ASSERT_EQ(OwnerExec(admin, "GRANT grademl_reader TO " + carol).error, "");
  const std::string as_alice = OwnerTestUrlAs(admin, alice), as_bob = OwnerTestUrlAs(admin, bob),
                    as_carol = OwnerTestUrlAs(admin, carol);

  // Real runs, each as its writer: phases, resources, series and samples through the policies.
  const std::string dir = FreshDir("store_owner_pg_" + std::to_string(getpid()));
  CommandResult ra = RunCommand({g, "--db", as_alice, "run", "--no-report", "--", "/bin/sh", "-c",
                                 "echo \"$GRADEML_RUN\" > " + dir + "/uuid_a; /bin/sleep 0.5"});
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(ra.err.find("grademl:"), std::string::npos) << ra.err;
  CommandResult rb = RunCommand({g, "--db", as_bob, "run", "--no-report", "--", "/bin/sh", "-c", "/bin/sleep 0.5"});
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_EQ(rb.err.find("grademl:"), std::string::npos) << rb.err;
  const std::string a_id = std::to_string(OwnerCount(admin, "SELECT id FROM runs WHERE owner = '" + alice + "'"));
  const std::string b_id = std::to_string(OwnerCount(admin, "SELECT id FROM runs WHERE owner = '" + bob + "'"));
  ASSERT_NE(a_id, "-1");
  ASSERT_NE(b_id, "-1");
  EXPECT_EQ(OwnerCount(admin, "SELECT count(*) FROM runs"), 2);

  // What each table holds of alice's run, as the administrator sees it.
  const std::vector<std::string> tables = {"phases", "phase_types", "resources", "series", "samples", "hosts"};
  auto counts_of = [&](const std::string& id) {
    std::map<std::string, int64_t> c;
    for (const std::string& t : tables) c[t] = OwnerCount(admin, "SELECT count(*) FROM " + t + " WHERE run_id = " + id);
    c["runs"] = OwnerCount(admin, "SELECT count(*) FROM runs WHERE id = " + id + " AND command = (SELECT command FROM "
                                  "runs WHERE id = " + id + ")");
    return c;
  };
  const std::map<std::string, int64_t> alice_rows = counts_of(a_id);
  EXPECT_GT(alice_rows.at("phases"), 0);
  EXPECT_GT(alice_rows.at("samples"), 0);
  EXPECT_GT(alice_rows.at("series"), 0);
  const std::string alice_command = OwnerExec(admin, "SELECT command FROM runs WHERE id = " + a_id).value;

  // Everyone reads both runs and their owners.
  for (const std::string& who : std::vector<std::string>{as_alice, as_bob, as_carol}) {
    CommandResult ls = RunCommand({g, "--db", who, "ls", "--json"});
    ASSERT_EQ(ls.exit_code, 0) << ls.err;
    std::map<int64_t, nlohmann::json> owners = OwnersOfLs(ls.out);
    EXPECT_EQ(owners, (std::map<int64_t, nlohmann::json>{{std::stoll(a_id), alice}, {std::stoll(b_id), bob}}))
        << ls.out;
  }
  CommandResult ls = RunCommand({g, "--db", as_carol, "ls"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find(alice), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find(bob), std::string::npos) << ls.out;
  CommandResult rep = RunCommand({g, "--db", as_carol, "report", "--json", a_id});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_EQ(nlohmann::json::parse(rep.out)["run"]["owner"], alice);
  // query reads a private SQLite copy of the run: the copy keeps the run's owner.
  CommandResult q = RunCommand({g, "--db", as_carol, "query", a_id, "SELECT owner FROM runs", "--format", "csv"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_NE(q.out.find(alice), std::string::npos) << q.out;

  // Bob cannot change or delete alice's run or its rows: the server filters them out of his
  // UPDATEs and DELETEs, refuses his INSERTs into her run, and refuses a change of owner.
  for (const std::string& sql : std::vector<std::string>{
           "UPDATE runs SET command = '[\"forged\"]' WHERE id = " + a_id,
           "UPDATE runs SET writers = writers + 1 WHERE id = " + a_id,
           "DELETE FROM runs WHERE id = " + a_id,
           "UPDATE phases SET name = 'forged' WHERE run_id = " + a_id,
           "DELETE FROM phases WHERE run_id = " + a_id,
           "DELETE FROM samples WHERE run_id = " + a_id,
           "UPDATE samples SET value = -1 WHERE run_id = " + a_id,
           "DELETE FROM series WHERE run_id = " + a_id,
           "DELETE FROM resources WHERE run_id = " + a_id,
           "DELETE FROM hosts WHERE run_id = " + a_id,
           "DELETE FROM phase_types WHERE run_id = " + a_id,
           "UPDATE phase_types SET path = 'forged' WHERE run_id = " + a_id,
       }) {
    OwnerSql r = OwnerExec(as_bob, sql);
    EXPECT_TRUE(r.rows == 0 || !r.error.empty()) << sql << ": " << r.rows;
  }
  for (const std::string& sql : std::vector<std::string>{
           "INSERT INTO phases (run_id, id, name, type, tags, start_ns, host) VALUES (" + a_id +
               ", 99999, 'forged', 'x', '[]', 1, 'h')",
           "INSERT INTO samples (run_id, series_id, t_ns, value) SELECT " + a_id +
               ", series_id, t_ns, 0 FROM samples WHERE run_id = " + b_id + " LIMIT 1",
           "INSERT INTO uploads (run_id, writer, seq) VALUES (" + a_id + ", 'forged', 1)",
           "INSERT INTO phase_types (run_id, id, path) VALUES (" + a_id + ", 12345, 'forged')",
           "UPDATE runs SET owner = '" + alice + "' WHERE id = " + b_id,
           "UPDATE runs SET id = 424242 WHERE id = " + b_id,
           "INSERT INTO runs (uuid, command, cwd, host, start_ns, complete, error, grademl_version, interval_ns, owner) "
           "VALUES ('u', '[]', '/', 'h', 1, false, '', '', 1, '" + alice + "')",
           "CREATE TABLE samples_d1 PARTITION OF samples FOR VALUES FROM (86400000000000) TO (172800000000000)",
           "ALTER TABLE runs DISABLE ROW LEVEL SECURITY",
       }) {
    OwnerSql r = OwnerExec(as_bob, sql);
    EXPECT_NE(r.error, "") << sql << ": allowed, " << r.rows << " rows";
  }
  // Samples partitions are reached through `samples` only.
  const std::string partition =
      OwnerExec(admin, "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'samples'::regclass LIMIT 1")
          .value;
  ASSERT_FALSE(partition.empty());
  EXPECT_NE(OwnerExec(as_bob, "DELETE FROM " + partition).error, "");
  EXPECT_NE(OwnerExec(as_bob, "TRUNCATE " + partition).error, "");
  EXPECT_EQ(counts_of(a_id), alice_rows);
  EXPECT_EQ(OwnerExec(admin, "SELECT command FROM runs WHERE id = " + a_id).value, alice_command);
  EXPECT_EQ(OwnerExec(admin, "SELECT owner FROM runs WHERE id = " + b_id).value, bob);
  EXPECT_EQ(OwnerCount(admin, "SELECT count(*) FROM runs"), 2);

  // Bob's grademl cannot add to alice's run either (a second writer reopens it first): refused
  // at the start, as a store that cannot be written is, with one line naming the owner.
  CommandResult join = RunCommand({g, "--db", as_bob, "run", "--no-report", "--join",
                                   ReadFile(dir + "/uuid_a").substr(0, 36), "--", "/bin/sh", "-c",
                                   "touch " + dir + "/joined"});
  EXPECT_EQ(join.exit_code, 1) << join.err;
  EXPECT_NE(join.err.find("run " + a_id + " belongs to '" + alice + "': only its owner may add to it"),
            std::string::npos)
      << join.err;
  EXPECT_EQ(std::count(join.err.begin(), join.err.end(), '\n'), 1) << join.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/joined"));
  EXPECT_EQ(counts_of(a_id), alice_rows);

  // Carol reads and writes nothing: her grademl run is refused at the start, in one line.
  for (const std::string& sql : std::vector<std::string>{"DELETE FROM runs WHERE id = " + a_id, "UPDATE runs SET error = 'x'",
                                 "DELETE FROM samples", "INSERT INTO uploads (run_id, writer, seq) VALUES (" + b_id +
                                                            ", 'c', 1)"}) {
    EXPECT_NE(OwnerExec(as_carol, sql).error, "") << sql;
  }
  CommandResult rc = RunCommand({g, "--db", as_carol, "run", "--no-report", "--", "/bin/sh", "-c", "exit 3"});
  EXPECT_EQ(rc.exit_code, 1) << rc.err;
  EXPECT_NE(rc.err.find("permission denied for table runs"), std::string::npos) << rc.err;
  EXPECT_EQ(std::count(rc.err.begin(), rc.err.end(), '\n'), 1) << rc.err;
  EXPECT_EQ(OwnerCount(admin, "SELECT count(*) FROM runs"), 2);
  EXPECT_EQ(counts_of(a_id), alice_rows);

  // An agent writing as alice adds its host's part to her run (uploads, phases, samples).
  CommandResult rj = RunCommand(
      {"/bin/sh", "-c",
       "'" + g + "' --db '" + as_alice + "' run --no-report -- /bin/sh -c 'echo \"$GRADEML_RUN\" > " + dir +
           "/uuid_j; /bin/sleep 4' & R=$!; "
           "'" + g + "' --db '" + as_alice + "' agent --own-runs --host gm-owner-agent --spool " + dir +
           "/spool --duration 6s; A=$?; wait $R; exit $A"});
  EXPECT_EQ(rj.exit_code, 0) << rj.err;
  const std::string j_id = std::to_string(OwnerCount(
      admin, "SELECT id FROM runs WHERE uuid = '" + ReadFile(dir + "/uuid_j").substr(0, 36) + "'"));
  EXPECT_EQ(OwnerExec(admin, "SELECT owner FROM runs WHERE id = " + j_id).value, alice);
  EXPECT_GT(OwnerCount(admin, "SELECT count(*) FROM uploads WHERE run_id = " + j_id +
                                  " AND writer LIKE 'gm-owner-agent/%'"),
            0)
      << rj.err;
  EXPECT_GT(OwnerCount(admin, "SELECT count(*) FROM phases WHERE run_id = " + j_id + " AND host = 'gm-owner-agent'"), 0)
      << rj.err;
  EXPECT_GT(OwnerCount(admin, "SELECT count(*) FROM samples s JOIN series e ON e.run_id = s.run_id AND e.id = "
                              "s.series_id JOIN resources r ON r.run_id = e.run_id AND r.id = e.resource_id WHERE "
                              "s.run_id = " + j_id + " AND r.host = 'gm-owner-agent'"),
            0)
      << rj.err;
  EXPECT_GT(OwnerCount(admin, "SELECT count(*) FROM clock_estimates WHERE run_id = " + j_id), 0) << rj.err;

  // Bob deletes his own run and its rows.
  for (const char* t : {"samples", "series", "resources", "phases", "edges", "logs", "hosts", "tracks"}) {
    OwnerSql r = OwnerExec(as_bob, "DELETE FROM " + std::string(t) + " WHERE run_id = " + b_id);
    EXPECT_EQ(r.error, "") << t;
  }
  OwnerSql gone = OwnerExec(as_bob, "DELETE FROM runs WHERE id = " + b_id);
  EXPECT_EQ(gone.error, "");
  EXPECT_EQ(gone.rows, 1);
  for (const char* t : {"samples", "series", "resources", "phases"}) {
    EXPECT_EQ(OwnerCount(admin, "SELECT count(*) FROM " + std::string(t) + " WHERE run_id = " + b_id), 0) << t;
  }
  EXPECT_EQ(OwnerCount(admin, "SELECT count(*) FROM runs WHERE id = " + b_id), 0);
  EXPECT_EQ(counts_of(a_id), alice_rows);
}

}  // namespace
}  // namespace grademl::testing
