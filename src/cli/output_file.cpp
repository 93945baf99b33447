#include "cli/output_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "report/text_format.h"

namespace grademl::cli {

StatusOr<long> WriteOutputFile(const std::string& path, const std::function<Status(std::FILE*)>& write) {
  const std::string name = report::Sanitize(path);
  const bool to_stdout = path == "-";
  std::FILE* out = to_stdout ? stdout : std::fopen(path.c_str(), "wb");
  if (out == nullptr) return Status(StatusCode::kIoError, name + ": " + std::strerror(errno));
  Status st = write(out);
  long size = to_stdout ? 0 : std::ftell(out);
  if (to_stdout) {
    if (std::fflush(out) != 0 && st.ok()) st = ErrnoError("write");
  } else if (std::fclose(out) != 0 && st.ok()) {
    st = ErrnoError("close");
  }
  if (st.ok()) return size;
  struct stat info {};
  if (!to_stdout && stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode)) std::remove(path.c_str());
  return Status(st.code(), name + ": " + st.message());
}

}  // namespace grademl::cli
