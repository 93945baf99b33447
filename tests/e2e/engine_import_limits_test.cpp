// End-to-end: the real `grademl import` on an engine log past one of its importer's bounds
// (issue 28, docs/import.md "Limits"): a Dask task log naming more workers than
// DaskLogImporter::kMaxWorkersPerFile ends with one line naming the file and the line, exit 1,
// and what came before is stored as a partial import. The log is generated here (7 MB, 100 KB
// as gzip); the expected line is counted from how it was made.
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "e2e/command.h"

namespace grademl::testing {
namespace engine_import_limits_e2e {

TEST(EngineImportLimitsE2E, ADaskLogWithMoreWorkersThanTheBoundEndsWithOneLine) {
  const int bound = 100'000;  // DaskLogImporter::kMaxWorkersPerFile, as docs/import.md says
  const std::string dir = FreshDir("engine_import_limits_workers");
  const std::string log = dir + "/dask-workers.jsonl";
  {
    std::ofstream f(log);
    f << "{\"format\":\"grademl-dask\",\"version\":2,\"scheduler\":\"tcp://127.0.0.1:8786\",\"hostname\":\"node1\"}\n";
    for (int i = 0; i <= bound; ++i) {  // bound + 1 distinct workers, lines 2 .. bound + 2
      const std::string ip = "10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256);
      f << "[\"w\",\"tcp://" << ip << ":9000\",\"" << ip << "\"," << 1000 + i << ",\"w\",1,0.0,1000.0]\n";
    }
    f << "[\"e\",1100.0]\n";
  }
  CommandResult pack = RunCommand({"/usr/bin/gzip", "-9", "-f", log});
  ASSERT_EQ(pack.exit_code, 0) << pack.err;
  const std::string packed = log + ".gz";
  const std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "import", packed});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(r.err, "grademl: " + packed + ": line " + std::to_string(bound + 2) + ": more than " +
                       std::to_string(bound) +
                       " workers in one Dask task log (GradeML's bound); the rest is not imported\n");
  // The header and the workers within the bound were read; the run is stored, partial.
  EXPECT_NE(r.out.find(std::to_string(bound + 1) + " events"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PARTIAL"), std::string::npos) << r.out;
  CommandResult ls = RunCommand({GrademlBinary(), "--db", db, "ls"});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find("partial import"), std::string::npos) << ls.out;
}

}  // namespace engine_import_limits_e2e
}  // namespace grademl::testing
