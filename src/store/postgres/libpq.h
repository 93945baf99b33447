// libpq, loaded when a PostgreSQL store is first used (dlopen "libpq.so.5"), not linked:
// linked, its 20-odd libraries (TLS, Kerberos, LDAP, ...) cost every grademl process about
// 5 ms of start-up, a PostgreSQL store or not (docs/PERFORMANCE.md, "Fixed cost per run").
//
// Include this instead of <libpq-fe.h>: the libpq functions grademl uses are then macros
// that call through the loaded library. pq::Load() says why it cannot be loaded; calling a
// function before a successful Load() loads it, and aborts when it cannot (a programming
// error: PgDatabase::Open loads it first).
#pragma once

#include <libpq-fe.h>

#include "core/status.h"

namespace grademl::store::pq {

struct Api {
  decltype(&::PQcancel) cancel;
  decltype(&::PQclear) clear;
  decltype(&::PQcmdTuples) cmd_tuples;
  decltype(&::PQconnectdb) connectdb;
  decltype(&::PQconnectdbParams) connectdb_params;
  decltype(&::PQerrorMessage) error_message;
  decltype(&::PQexec) exec;
  decltype(&::PQexecParams) exec_params;
  decltype(&::PQfinish) finish;
  decltype(&::PQfreeCancel) free_cancel;
  decltype(&::PQgetCancel) get_cancel;
  decltype(&::PQgetResult) get_result;
  decltype(&::PQgetisnull) getisnull;
  decltype(&::PQgetlength) getlength;
  decltype(&::PQgetvalue) getvalue;
  decltype(&::PQntuples) ntuples;
  decltype(&::PQparameterStatus) parameter_status;
  decltype(&::PQpass) pass;
  decltype(&::PQputCopyData) put_copy_data;
  decltype(&::PQputCopyEnd) put_copy_end;
  decltype(&::PQresultErrorField) result_error_field;
  decltype(&::PQresultErrorMessage) result_error_message;
  decltype(&::PQresultStatus) result_status;
  decltype(&::PQsetNoticeProcessor) set_notice_processor;
  decltype(&::PQstatus) status;
  decltype(&::PQtransactionStatus) transaction_status;
};

// Loads libpq once (thread-safe); an error says which library or symbol is missing.
Status Load();
const Api& api();

}  // namespace grademl::store::pq

#define PQcancel (::grademl::store::pq::api().cancel)
#define PQclear (::grademl::store::pq::api().clear)
#define PQcmdTuples (::grademl::store::pq::api().cmd_tuples)
#define PQconnectdb (::grademl::store::pq::api().connectdb)
#define PQconnectdbParams (::grademl::store::pq::api().connectdb_params)
#define PQerrorMessage (::grademl::store::pq::api().error_message)
#define PQexec (::grademl::store::pq::api().exec)
#define PQexecParams (::grademl::store::pq::api().exec_params)
#define PQfinish (::grademl::store::pq::api().finish)
#define PQfreeCancel (::grademl::store::pq::api().free_cancel)
#define PQgetCancel (::grademl::store::pq::api().get_cancel)
#define PQgetResult (::grademl::store::pq::api().get_result)
#define PQgetisnull (::grademl::store::pq::api().getisnull)
#define PQgetlength (::grademl::store::pq::api().getlength)
#define PQgetvalue (::grademl::store::pq::api().getvalue)
#define PQntuples (::grademl::store::pq::api().ntuples)
#define PQparameterStatus (::grademl::store::pq::api().parameter_status)
#define PQpass (::grademl::store::pq::api().pass)
#define PQputCopyData (::grademl::store::pq::api().put_copy_data)
#define PQputCopyEnd (::grademl::store::pq::api().put_copy_end)
#define PQresultErrorField (::grademl::store::pq::api().result_error_field)
#define PQresultErrorMessage (::grademl::store::pq::api().result_error_message)
#define PQresultStatus (::grademl::store::pq::api().result_status)
#define PQsetNoticeProcessor (::grademl::store::pq::api().set_notice_processor)
#define PQstatus (::grademl::store::pq::api().status)
#define PQtransactionStatus (::grademl::store::pq::api().transaction_status)
