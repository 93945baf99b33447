// The phase_types ids a store writer already wrote for the run it writes last, by path, so
// that a delta's phases look each path up once (both backends use it; each writes its own
// rows). Bounded: at most kMax paths, then it starts again. Forget() after a rolled-back
// transaction: the rows it added are gone, and their ids must not be reused.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "model/run.h"
#include "model/type_path.h"

namespace grademl::store {

class PhaseTypeIds {
 public:
  static constexpr size_t kMax = 1 << 16;

  // The id written for `type` in `run`, when known. Asking for another run forgets the last.
  std::optional<int64_t> Find(model::RunId run, const model::TypePath& type) {
    if (run_ != run) {
      Forget();
      run_ = run;
      return std::nullopt;
    }
    if (type.same_node(last_)) return last_id_;  // most phases share their neighbour's path
    auto it = ids_.find(type.str());
    if (it == ids_.end()) return std::nullopt;
    last_ = type;
    last_id_ = it->second;
    return last_id_;
  }

  // Remembers `id` (0: the path is written inline) for `type` in the run last asked for.
  void Remember(const model::TypePath& type, int64_t id) {
    if (ids_.size() >= kMax) ids_.clear();
    ids_.emplace(type.str(), id);
    last_ = type;
    last_id_ = id;
  }

  void Forget() {
    ids_.clear();
    run_ = 0;
    last_ = model::TypePath();
    last_id_ = 0;
  }

 private:
  model::RunId run_ = 0;
  std::unordered_map<std::string, int64_t> ids_;
  model::TypePath last_;
  int64_t last_id_ = 0;
};

}  // namespace grademl::store
