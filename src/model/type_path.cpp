#include "model/type_path.h"

namespace grademl::model {

TypePath::TypePath(std::string_view path) : node_(path.empty() ? nullptr : new Node(path)) {}

const std::string& TypePath::Empty() {
  static const std::string empty;
  return empty;
}

TypePath TypePool::Intern(std::string_view path) {
  if (path.empty()) return TypePath();
  if (auto it = index_.find(path); it != index_.end()) return it->second;
  TypePath made(path);
  bytes_ += made.node_bytes() + sizeof(std::pair<std::string_view, TypePath>) + 2 * sizeof(void*);
  index_.emplace(made.view(), made);
  return made;
}

TypePath TypePool::Share(const TypePath& path) {
  if (path.empty()) return TypePath();
  if (auto it = index_.find(path.view()); it != index_.end()) return it->second;
  bytes_ += path.node_bytes() + sizeof(std::pair<std::string_view, TypePath>) + 2 * sizeof(void*);
  index_.emplace(path.view(), path);
  return path;
}

}  // namespace grademl::model
