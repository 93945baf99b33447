// Passwords in PostgreSQL connection strings never reach a message: the location as shown
// (RedactPassword), libpq's own messages about a malformed string (RedactMessage), and
// Database::Open's errors for malformed URIs and keyword strings, which libpq rejects before
// connecting (no server needed). The expected texts are written by hand from libpq's URI
// and keyword grammar (postgresql.org/docs/15/libpq-connect.html#LIBPQ-CONNSTRING).
#include <stdlib.h>

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "store/database.h"
#include "store/postgres/pg_redact.h"

namespace grademl::store {
namespace {

using pg::ConnectionSecrets;
using pg::RedactMessage;
using pg::RedactPassword;

TEST(PgRedactTest, ShownLocationsDropThePassword) {
  struct Case {
    std::string location, shown;
  };
  for (const Case& c : std::vector<Case>{
           {"postgresql://me:s3cret@db:5432/grademl", "postgresql://me@db:5432/grademl"},
           {"postgres://me@db/grademl", "postgres://me@db/grademl"},
           {"postgresql://db/grademl", "postgresql://db/grademl"},
           // A password holding '@' or '/' unencoded: up to the last '@'.
           {"postgresql://me:p@ss@db/g", "postgresql://me@db/g"},
           {"postgresql://me:a/b@db/g", "postgresql://me@db/g"},
           // Password parameters, in any case and percent-encoded keys, all of them.
           {"postgresql://db/g?password=s3cret", "postgresql://db/g"},
           {"postgresql://db/g?sslmode=require&password=s3cret&connect_timeout=2",
            "postgresql://db/g?sslmode=require&connect_timeout=2"},
           {"postgresql://db/g?PASSWORD=a&pass%77ord=b&sslpassword=c&x=1", "postgresql://db/g?x=1"},
           // No '@': a port that is not a number may be a password missing its '@'.
           {"postgresql://me:s3cret/db", "postgresql://me:***/db"},
           {"postgresql://me:s3cret:host/db", "postgresql://me:***/db"},
           {"postgresql://h1:5432,h2:5433/db", "postgresql://h1:5432,h2:5433/db"},
           // A misspelt scheme is still read as a URI.
           {"postgresql:/me:s3cret@db/g", "postgresql:/me@db/g"},
           // Keyword strings: quoted values, spaces around '=', words after an unquoted value.
           {"service=x password=s3cret host=db", "service=x host=db"},
           {"service=x password='s3 cret' host=db", "service=x host=db"},
           {"service=x password = s3cret host=db", "service=x host=db"},
           {"service=x password=s3 cret host=db", "service=x host=db"},
           {"service=x password='s3 cret", "service=x"},
           {"service=x sslpassword=k3y", "service=x"},
       }) {
    EXPECT_EQ(RedactPassword(c.location), c.shown) << c.location;
  }
}

TEST(PgRedactTest, SecretsAreWhatMayBeAPassword) {
  auto secrets = [](const std::string& location) { return ConnectionSecrets(location); };
  using V = std::vector<std::string>;
  EXPECT_EQ(secrets("postgresql://me:s3%40cret@db/g"), (V{"s3%40cret", "s3@cret"}));
  // libpq reads the password up to the first '@' ("p"), one may have meant the last ("p@ss").
  EXPECT_EQ(secrets("postgresql://me:p@ss@db/g"), (V{"p", "p@ss"}));
  EXPECT_EQ(secrets("postgresql://me:s3cret/db"), (V{"s3cret"}));
  EXPECT_EQ(secrets("postgresql://db/g?password=a%20b"), (V{"a b", "a%20b"}));
  EXPECT_EQ(secrets("service=x password='it\\'s' host=db"), (V{"'it\\'s'", "it's"}));
  EXPECT_EQ(secrets("service=x password=s3 cret host=db"), (V{"cret", "s3"}));
  EXPECT_EQ(secrets("postgresql://me@db/g"), V{});
}

TEST(PgRedactTest, QuotedPartsOfLibpqsMessagesThatHoldASecretAreHidden) {
  EXPECT_EQ(RedactMessage("invalid integer value \"s3cret:host\" for connection option \"port\"",
                          "postgresql://u:s3cret:host/db"),
            "invalid integer value \"***\" for connection option \"port\"");
  // A part of a secret is hidden too ("a" of the password "a/b", read by libpq as a port).
  EXPECT_EQ(RedactMessage("invalid integer value \"a\" for connection option \"port\"", "postgresql://u:a/b@h/db"),
            "invalid integer value \"***\" for connection option \"port\"");
  // The whole URI quoted: shown redacted.
  EXPECT_EQ(RedactMessage("end of string reached when looking for matching \"]\" in IPv6 host address in URI: "
                          "\"postgresql://u:s3cret@[::1/db\"",
                          "postgresql://u:s3cret@[::1/db"),
            "end of string reached when looking for matching \"]\" in IPv6 host address in URI: "
            "\"postgresql://u@[::1/db\"");
  // What holds no secret stays.
  EXPECT_EQ(RedactMessage("invalid integer value \"notaport\" for connection option \"port\"",
                          "postgresql://u:s3cret@h:notaport/db"),
            "invalid integer value \"notaport\" for connection option \"port\"");
  // Unquoted, a secret of 4 characters or more is still hidden; so is the connection's own
  // password given by the caller.
  EXPECT_EQ(RedactMessage("FATAL: s3cret rejected", "postgresql://u:s3cret@h/db"), "FATAL: *** rejected");
  EXPECT_EQ(RedactMessage("FATAL: hunter2 rejected", "", {"hunter2"}), "FATAL: *** rejected");
}

TEST(PgRedactTest, PgpasswordIsNeverShown) {
  const char* old = std::getenv("PGPASSWORD");
  std::string saved = old != nullptr ? old : "";
  setenv("PGPASSWORD", "env-s3cret", 1);
  EXPECT_EQ(RedactMessage("password \"env-s3cret\" and env-s3cret again", "postgresql://h/db"),
            "password \"***\" and *** again");
  if (old != nullptr) {
    setenv("PGPASSWORD", saved.c_str(), 1);
  } else {
    unsetenv("PGPASSWORD");
  }
}

// Malformed connection strings: libpq refuses them before connecting, quoting parts of them.
// The message names the store without the password, says what is wrong, on one line, and
// holds no part of the password.
TEST(PgRedactTest, OpenErrorsForMalformedStringsNeverQuoteThePassword) {
  struct Case {
    std::string location;
    std::vector<std::string> secret_parts;  // none may appear
    std::string starts;                      // the message's beginning
  };
  for (const Case& c : std::vector<Case>{
           {"postgresql://u:s3cret:host/db", {"s3cret"}, "postgresql://u:***/db: "},
           {"postgresql://u:s3cret/db?connect_timeout=1", {"s3cret"}, "postgresql://u:***/db?connect_timeout=1: "},
           {"postgresql://u:s3%cret@host/db", {"s3%cret", "s3"}, "postgresql://u@host/db: "},
           {"postgresql://u:s3%00cret@host/db", {"s3%00cret", "s3"}, "postgresql://u@host/db: "},
           {"postgresql://u:s3cret@[::1/db", {"s3cret"}, "postgresql://u@[::1/db: "},
           {"postgresql://u:a/b@host/db", {"\"a\"", "a/b"}, "postgresql://u@host/db: "},
           {"postgresql://u:s3cret@host/db?port=s3cret", {"s3cret"}, "postgresql://u@host/db?port=***: "},
           {"postgresql://u@host/db?password=s3cret&port=x", {"s3cret"}, "postgresql://u@host/db?port=x: "},
           {"postgresql://u@host/db?password=s3cret&a=b=c", {"s3cret"}, "postgresql://u@host/db?a=b=c: "},
           {"service=x password=s3 cret", {"s3", "cret"}, "service=x: "},
           {"service=x password='s3 cret", {"s3", "cret"}, "service=x: "},
           {"service=x password = s3cret port=notaport", {"s3cret"}, "service=x port=notaport: "},
           // Not PostgreSQL locations, but not SQLite paths either: refused, redacted.
           {"postgresql:/u:s3cret@h/db", {"s3cret"}, "postgresql:/u@h/db: not a store grademl can open"},
           {"host=db password=s3cret dbname=g", {"s3cret"}, "host=db dbname=g: not a store grademl can open"},
       }) {
    auto db = Database::Open(c.location, Database::Mode::kReadOnly);
    ASSERT_FALSE(db.ok()) << c.location;
    const std::string m = db.status().message();
    EXPECT_EQ(m.rfind(c.starts, 0), 0u) << c.location << " -> " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_GT(m.size(), c.starts.size() + 10) << "says what is wrong: " << m;
    for (const std::string& part : c.secret_parts) EXPECT_EQ(m.find(part), std::string::npos) << part << " in " << m;
  }
}

}  // namespace
}  // namespace grademl::store
