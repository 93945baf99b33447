// The formats GradeML imports, in sniffing order: the first whose sniff accepts a file's first
// bytes reads it. A new format is a new folder under src/importers/ and one line here.
#include "importers/chrome_json/chrome_importer.h"
#include "importers/dask/dask_importer.h"
#include "importers/importer.h"
#include "importers/spark/spark_importer.h"

namespace grademl::importers {

const std::vector<TraceFormat>& TraceFormats() {
  static const std::vector<TraceFormat> formats = {
      dask::DaskTraceFormat(),  // before Chrome JSON: its header is a JSON object too
      chrome_json::ChromeTraceFormat(),
      spark::SparkFormat(),
  };
  return formats;
}

}  // namespace grademl::importers
