#include "collect/run_process_finder.h"

#include <dirent.h>

#include <cstdlib>

#include "collect/proc_file.h"
#include "collect/process_stat.h"

namespace grademl::collect {

std::string RunProcessFinder::ValueInEnvironment(std::string_view block, std::string_view name) {
  size_t i = 0;
  while (i < block.size()) {
    size_t end = block.find('\0', i);
    if (end == std::string_view::npos) end = block.size();
    std::string_view var = block.substr(i, end - i);
    if (var.size() > name.size() && var.starts_with(name) && var[name.size()] == '=') {
      return std::string(var.substr(name.size() + 1));
    }
    i = end + 1;
  }
  return "";
}

std::map<std::string, std::vector<RunProcessFinder::Found>> RunProcessFinder::Scan() {
  for (auto& [pid, k] : known_) k.seen = false;
  // A known pid's stat is read again only every kRecheckEvery scans (a pid reused by a new
  // process, a parent that changed): the listing alone finds the new and the gone.
  constexpr int kRecheckEvery = 20;
  const bool recheck = scans_++ % kRecheckEvery == 0;
  DIR* dir = opendir(proc_root_.c_str());
  if (dir != nullptr) {
    while (dirent* e = readdir(dir)) {
      char* end = nullptr;
      long pid = std::strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0' || pid <= 0) continue;
      if (!recheck) {
        auto known = known_.find(static_cast<pid_t>(pid));
        if (known != known_.end() && known->second.env_read) {
          known->second.seen = true;
          continue;
        }
      }
      const std::string base = proc_root_ + "/" + e->d_name;
      StatusOr<std::string> stat_text = ReadFileOnce(base + "/stat");
      if (!stat_text.ok()) continue;  // gone
      ProcessStat st;
      if (!ParseProcessStat(*stat_text, &st)) continue;
      Known& k = known_[static_cast<pid_t>(pid)];
      if (!k.env_read || k.starttime != st.starttime) {
        k.starttime = st.starttime;
        k.env_read = true;
        StatusOr<std::string> env = ReadFileOnce(base + "/environ");
        k.run = env.ok() ? RunOfEnvironment(*env) : "";
        if (!k.run.empty() && !skip_recorder_.empty() && ValueInEnvironment(*env, "GRADEML_RECORDER") == skip_recorder_) {
          k.run.clear();  // recorded by `grademl run` on this host
        }
      }
      k.ppid = st.ppid;
      k.seen = true;
    }
    closedir(dir);
  }
  std::map<std::string, std::vector<Found>> out;
  for (auto it = known_.begin(); it != known_.end();) {
    if (!it->second.seen) {
      it = known_.erase(it);
      continue;
    }
    const Known& k = it->second;
    if (!k.run.empty()) {
      auto parent = known_.find(k.ppid);
      bool parent_same = parent != known_.end() && parent->second.seen && parent->second.run == k.run;
      if (!parent_same) out[k.run].push_back({.pid = it->first, .starttime = k.starttime});
    }
    ++it;
  }
  return out;
}

}  // namespace grademl::collect
