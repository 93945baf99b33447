// A PostgreSQL store shared by a team with owners (docs/store.md, "A shared store"): what
// `grademl store init --shared` sets up, and what the server then enforces by itself.
//
// Two roles: grademl_writer adds runs and changes or deletes only its own (runs.owner is the
// role that inserted the row, current_user, checked by the server) and their rows in every
// other table (through their run_id); grademl_reader reads everything. Row-level security
// (one set of policies per table of the description, store/tables.h) enforces it; samples'
// day partitions belong to the tables' owner and are reached only through `samples` (its
// policies), made on a writer's behalf by grademl_samples_partition(day), a SECURITY DEFINER
// function that creates nothing but the partition of that day. Everything is idempotent.
#pragma once

#include <string>

#include "core/status.h"

namespace grademl::store::pg {

// The statements that make a store at the current schema version shared, for the schema
// whose quoted name is `schema` ("public"). Run in one transaction by the tables' owner.
std::string SharedStoreSql(const std::string& schema);

// `grademl store init [--shared]` on a PostgreSQL store at `location`: creates or migrates
// the schema, then with `shared` the roles, grants and policies above (and makes the role
// running it the owner of every table, their sequences and partitions, so that nobody else
// bypasses the policies as a table's owner). Returns what it did, one line per item.
StatusOr<std::string> InitPgStore(const std::string& location, bool shared);

// The role names (fixed: an administrator grants them to users).
inline constexpr const char* kWriterRole = "grademl_writer";
inline constexpr const char* kReaderRole = "grademl_reader";
// The function a writer of a shared store makes a samples partition with.
inline constexpr const char* kPartitionFunction = "grademl_samples_partition(bigint)";

}  // namespace grademl::store::pg
