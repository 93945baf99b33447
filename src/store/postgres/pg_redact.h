// What of a PostgreSQL connection string is secret, and text about one without it: the
// location as messages show it (RedactPassword) and libpq's messages, which quote parts of a
// malformed string (RedactMessage: `invalid integer value "s3cret:host" for connection option
// "port"`, `invalid percent-encoded token: "s3%cret"`, the whole URI after an unmatched '[').
//
// Secret: a URI's password, its password and sslpassword parameters, a key=value string's
// password and sslpassword values, and $PGPASSWORD; and what a malformed string may have
// meant as one: the text between a URI's first ':' and its last '@' before the query (a
// password holding '/' or '@'), the port of a URI without '@' when it is not a number
// (`postgresql://u:s3cret/db` reads as host u, port s3cret), and the words after an
// unquoted password value up to the next keyword (`password=s3 cret`).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace grademl::store::pg {

// The secret texts of `location` (a postgresql:// or postgres:// URI, or key=value words),
// each as written and percent- or backslash-decoded; none empty.
std::vector<std::string> ConnectionSecrets(std::string_view location);

// The location without its secrets, for messages: "postgresql://me@db:5432/grademl" (the
// password and its ':' dropped), password parameters and words dropped, a port that may
// be a password shown as ***.
std::string RedactPassword(std::string_view location);

// libpq's `message` about `location` without its secrets, $PGPASSWORD's or `more_secrets`:
// every "quoted" part that holds a secret or is part of one becomes "***" (the whole
// location quoted: its RedactPassword), and a secret of 4 characters or more is *** wherever
// else it appears.
std::string RedactMessage(std::string_view message, std::string_view location,
                          std::vector<std::string> more_secrets = {});

}  // namespace grademl::store::pg
