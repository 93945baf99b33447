#include "store/postgres/libpq.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace grademl::store::pq {
namespace {

struct Loaded {
  Api api{};
  Status status = Status::Ok();
};

// Resolves one symbol into `slot`; false (and the error) when missing.
template <typename F>
bool LibpqSymbol(void* handle, const char* name, F* slot, Status* error) {
  void* p = dlsym(handle, name);
  if (p == nullptr) {
    *error = Status(StatusCode::kUnavailable, std::string("libpq.so.5 has no ") + name);
    return false;
  }
  *slot = reinterpret_cast<F>(p);
  return true;
}

const Loaded& LibpqLoaded() {
  static const Loaded loaded = [] {
    Loaded l;
    // GRADEML_TEST_LIBPQ: another file, for the test of a machine without libpq.
    const char* test_name = std::getenv("GRADEML_TEST_LIBPQ");
    void* handle = dlopen(test_name && *test_name ? test_name : "libpq.so.5", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      l.status = Status(StatusCode::kUnavailable,
                        std::string("the PostgreSQL client library cannot be loaded (") + (why ? why : "libpq.so.5") +
                            "): install Debian's libpq5");
      return l;
    }
    Status error = Status::Ok();
    Api& a = l.api;
    bool ok = LibpqSymbol(handle, "PQcancel", &a.cancel, &error) &&
              LibpqSymbol(handle, "PQclear", &a.clear, &error) &&
              LibpqSymbol(handle, "PQcmdTuples", &a.cmd_tuples, &error) &&
              LibpqSymbol(handle, "PQconnectdb", &a.connectdb, &error) &&
              LibpqSymbol(handle, "PQconnectdbParams", &a.connectdb_params, &error) &&
              LibpqSymbol(handle, "PQerrorMessage", &a.error_message, &error) &&
              LibpqSymbol(handle, "PQexec", &a.exec, &error) &&
              LibpqSymbol(handle, "PQexecParams", &a.exec_params, &error) &&
              LibpqSymbol(handle, "PQfinish", &a.finish, &error) &&
              LibpqSymbol(handle, "PQfreeCancel", &a.free_cancel, &error) &&
              LibpqSymbol(handle, "PQgetCancel", &a.get_cancel, &error) &&
              LibpqSymbol(handle, "PQgetResult", &a.get_result, &error) &&
              LibpqSymbol(handle, "PQgetisnull", &a.getisnull, &error) &&
              LibpqSymbol(handle, "PQgetlength", &a.getlength, &error) &&
              LibpqSymbol(handle, "PQgetvalue", &a.getvalue, &error) &&
              LibpqSymbol(handle, "PQntuples", &a.ntuples, &error) &&
              LibpqSymbol(handle, "PQparameterStatus", &a.parameter_status, &error) &&
              LibpqSymbol(handle, "PQpass", &a.pass, &error) &&
              LibpqSymbol(handle, "PQputCopyData", &a.put_copy_data, &error) &&
              LibpqSymbol(handle, "PQputCopyEnd", &a.put_copy_end, &error) &&
              LibpqSymbol(handle, "PQresultErrorField", &a.result_error_field, &error) &&
              LibpqSymbol(handle, "PQresultErrorMessage", &a.result_error_message, &error) &&
              LibpqSymbol(handle, "PQresultStatus", &a.result_status, &error) &&
              LibpqSymbol(handle, "PQsetNoticeProcessor", &a.set_notice_processor, &error) &&
              LibpqSymbol(handle, "PQstatus", &a.status, &error) &&
              LibpqSymbol(handle, "PQtransactionStatus", &a.transaction_status, &error);
    if (!ok) l.status = error;  // the handle stays open: nothing of it is used
    return l;
  }();
  return loaded;
}

}  // namespace

Status Load() { return LibpqLoaded().status; }

const Api& api() {
  const Loaded& l = LibpqLoaded();
  if (!l.status.ok()) {
    std::fprintf(stderr, "grademl: %s\n", l.status.message().c_str());
    std::abort();
  }
  return l.api;
}

}  // namespace grademl::store::pq
