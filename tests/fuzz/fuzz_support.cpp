// Scratch files and input splitting for the fuzz targets (see fuzz_support.h).
#include "fuzz/fuzz_support.h"

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <system_error>
#include <vector>

namespace grademl::fuzz {
namespace {

struct Scratch {
  Scratch() {
    std::string pattern = (std::filesystem::temp_directory_path() / "grademl_fuzz_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      abort();
    }
    path = pattern;
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::filesystem::path path;
};

}  // namespace

const std::filesystem::path& ScratchDir() {
  static Scratch scratch;
  return scratch.path;
}

std::string WriteScratch(const std::string& name, std::string_view text) {
  const std::filesystem::path file = ScratchDir() / name;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", file.c_str());
    abort();
  }
  return file.string();
}

void RemoveScratch(const std::string& name) {
  std::error_code ec;
  std::filesystem::remove(ScratchDir() / name, ec);
}

SplitInput SplitAtMarker(std::string_view data, std::string_view marker) {
  size_t from = 0;
  while (from <= data.size()) {
    size_t end = data.find('\n', from);
    std::string_view line = data.substr(from, end == std::string_view::npos ? std::string_view::npos : end - from);
    if (line == marker) {
      return {data.substr(0, from), end == std::string_view::npos ? std::string_view() : data.substr(end + 1), true};
    }
    if (end == std::string_view::npos) break;
    from = end + 1;
  }
  return {data, std::string_view(), false};
}

void CheckOneLineError(const Status& status) {
  // GRADEML_FUZZ_ALLOW_MULTILINE_ERRORS=1 looks past this finding to search for others.
  static const bool allow_multiline = std::getenv("GRADEML_FUZZ_ALLOW_MULTILINE_ERRORS") != nullptr;
  if (status.ok()) return;
  const std::string& m = status.message();
  if (m.empty()) {
    std::fprintf(stderr, "fuzz: an error without a message\n");
    abort();
  }
  if (allow_multiline) return;
  if (m.find('\n') != std::string::npos || m.find('\r') != std::string::npos) {
    std::fprintf(stderr, "fuzz: the error is not one line: [%s]\n", m.c_str());
    abort();
  }
}

void CheckLoadedSpec(const StatusOr<workflow::WorkflowSpec>& spec) {
  if (!spec.ok()) {
    CheckOneLineError(spec.status());
    return;
  }
  const std::vector<size_t> order = spec->TopologicalOrder();
  std::vector<bool> seen(spec->steps.size(), false);
  if (order.size() != spec->steps.size()) abort();
  for (size_t i : order) {
    if (i >= seen.size() || seen[i]) abort();
    seen[i] = true;
  }
}

}  // namespace grademl::fuzz
