// End-to-end: a password in a PostgreSQL connection string (or $PGPASSWORD) never reaches
// grademl's output, whatever the command and however malformed the string: libpq's own
// messages quote parts of a malformed URI or keyword string, and the store's location is
// shown in every message and in the agent's start line. No server is needed: libpq refuses
// these strings before connecting, and the last ones point at ports nobody listens on.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

struct PasswordCase {
  std::string location;
  std::vector<std::string> secret_parts;  // none may appear in the output
};

const std::vector<PasswordCase>& PasswordCases() {
  static const std::vector<PasswordCase> cases = {
      {"postgresql://u:s3cret@host:notaport/db", {"s3cret"}},
      {"postgresql://u:s3cret:host/db", {"s3cret"}},              // '@' forgotten: read as a port
      {"postgresql://u:s3%cret@host/db", {"s3%cret", "s3"}},      // a bad percent escape
      {"postgresql://u:s3%00cret@host/db", {"s3%00cret", "s3"}},  // a forbidden one
      {"postgresql://u:s3cret@[::1/db", {"s3cret"}},              // the whole URI quoted
      {"postgresql://u:pa/ss@host/db", {"pa/ss", "\"pa\""}},      // an unencoded '/'
      {"postgresql://u@host/db?password=s3cret&foo=bar", {"s3cret"}},
      {"postgresql://u@host/db?password=s3cret&port=s3cretport", {"s3cret"}},
      {"service=nosuch password=s3 cret", {"s3", "cret"}},    // a password with a space
      {"service=nosuch password='s3 cret", {"s3", "cret"}},   // an unterminated quote
      {"service=nosuch password = s3cret", {"s3cret"}},
      {"postgresql:/u:s3cret@host/db", {"s3cret"}},           // a misspelt scheme
      {"host=db password=s3cret dbname=g", {"s3cret"}},       // words grademl does not take
      {"postgresql://u:s3cret@127.0.0.1:1/db?connect_timeout=2", {"s3cret"}},
  };
  return cases;
}

void ExpectNoSecret(const CommandResult& r, const PasswordCase& c, const std::string& what) {
  for (const std::string& part : c.secret_parts) {
    EXPECT_EQ(r.err.find(part), std::string::npos) << what << ": " << c.location << " -> " << r.err;
    EXPECT_EQ(r.out.find(part), std::string::npos) << what << ": " << c.location << " -> " << r.out;
  }
}

TEST(PgPasswordE2E, MalformedConnectionStringsNeverShowThePassword) {
  // In a directory of its own: a grademl that took a string for an SQLite path (as before
  // these checks) would create a store there, named after it. The store is given by
  // GRADEML_DB, which `make test-postgres` (GRADEML_TEST_BACKEND) leaves as it is.
  const std::string cwd = FreshDir("pg_password_cwd");
  for (const PasswordCase& c : PasswordCases()) {
    SCOPED_TRACE(c.location);
    for (const std::vector<std::string>& verb : std::vector<std::vector<std::string>>{
             {"ls"}, {"query", "SELECT 1"}, {"report"}, {"run", "--no-report", "--", "true"}}) {
      CommandResult r = RunCommand([&] {
        std::vector<std::string> argv = {"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", cwd, "/usr/bin/env",
                                         "GRADEML_DB=" + c.location, "/usr/bin/timeout", "60", GrademlBinary()};
        argv.insert(argv.end(), verb.begin(), verb.end());
        return argv;
      }());
      EXPECT_EQ(r.exit_code, 1) << verb[0] << ": " << r.err;
      EXPECT_EQ(r.err.rfind("grademl: ", 0), 0u) << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      ExpectNoSecret(r, c, verb[0]);
    }
  }
}

// The agent names its store when it starts: without the password.
TEST(PgPasswordE2E, TheAgentsStartLineHasNoPassword) {
  PasswordCase c{"postgresql://u:s3cret@127.0.0.1:1/db?connect_timeout=1", {"s3cret"}};
  CommandResult r = RunCommand({"/usr/bin/timeout", "60", GrademlBinary(), "--db", c.location, "agent", "--duration",
                                "1s", "--spool", FreshDir("pg_password_agent")});
  EXPECT_NE(r.err.find("store postgresql://u@127.0.0.1:1/db?connect_timeout=1"), std::string::npos) << r.err;
  ExpectNoSecret(r, c, "agent");
}

// $PGPASSWORD is libpq's: grademl never prints it, in a message about the connection either.
TEST(PgPasswordE2E, PgpasswordIsNeverShown) {
  CommandResult r = RunCommand({"/usr/bin/env", "PGPASSWORD=envs3cret", GrademlBinary(), "--db",
                                "postgresql://u@127.0.0.1:1/db?connect_timeout=2", "ls"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.find("envs3cret"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace grademl::testing
