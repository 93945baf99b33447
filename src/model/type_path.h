// TypePath: a phase's type path ("run/process/op"), interned. Phases with the same path share
// one immutable node (the path, its leaf's offset, a reference count); a handle is 8 bytes and
// copying one costs an atomic increment, where a std::string cost 32 bytes and, past 15
// characters, an allocation and a copy per phase. A deeply nested trace thus costs each phase
// a handle, not its whole path (issue 28: N nested events cost N^2 before).
//
// TypePool makes the sharing: the builder, the store's loaders and the delta decoder each
// intern through one, so that every phase of a run with the same path holds the same node.
// A handle made from text without a pool (TypePath("run")) owns a node of its own; it is
// equal to a pooled one with the same text. Nodes live as long as a handle or their pool
// holds them (reference counted): Runs may be copied, moved and outlive the pool that made
// them; a long-lived writer (the agent) keeps a pool of the distinct paths it saw.
//
// A TypePath reads like a const std::string (it converts to const std::string& and to
// std::string_view, and has the few members the readers use), so that code that reads
// Phase::type as text is unchanged.
#pragma once

#include <string.h>

#include <atomic>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

namespace grademl::model {

class TypePath {
 public:
  TypePath() noexcept = default;  // ""
  TypePath(std::string_view path);  // NOLINT: implicit, a node of its own
  TypePath(const std::string& path) : TypePath(std::string_view(path)) {}  // NOLINT
  TypePath(const char* path) : TypePath(std::string_view(path)) {}  // NOLINT
  TypePath(const TypePath& other) noexcept : node_(other.node_) { Ref(); }
  TypePath(TypePath&& other) noexcept : node_(std::exchange(other.node_, nullptr)) {}
  TypePath& operator=(const TypePath& other) noexcept {
    if (node_ != other.node_) {
      other.Ref();
      Unref();
      node_ = other.node_;
    }
    return *this;
  }
  TypePath& operator=(TypePath&& other) noexcept {
    if (this != &other) {
      Unref();
      node_ = std::exchange(other.node_, nullptr);
    }
    return *this;
  }
  ~TypePath() { Unref(); }

  const std::string& str() const { return node_ != nullptr ? node_->path : Empty(); }
  operator const std::string&() const { return str(); }  // NOLINT
  operator std::string_view() const { return str(); }    // NOLINT
  std::string_view view() const { return str(); }

  // The last path element ("op" of "run/process/op").
  std::string_view leaf() const {
    if (node_ == nullptr) return {};
    return std::string_view(node_->path).substr(node_->leaf_at);
  }
  // Whether two handles share a node (the same pooled path): one comparison.
  bool same_node(const TypePath& other) const { return node_ == other.node_; }
  // The node's identity while a handle holds it (0 for ""), e.g. as a key in a map.
  uintptr_t node_id() const { return reinterpret_cast<uintptr_t>(node_); }

  // The std::string members readers use.
  size_t size() const { return str().size(); }
  size_t length() const { return str().size(); }
  bool empty() const { return str().empty(); }
  const char* data() const { return str().data(); }
  const char* c_str() const { return str().c_str(); }
  char operator[](size_t i) const { return str()[i]; }
  std::string::const_iterator begin() const { return str().begin(); }
  std::string::const_iterator end() const { return str().end(); }
  size_t find(std::string_view s, size_t pos = 0) const { return view().find(s, pos); }
  size_t find(char c, size_t pos = 0) const { return view().find(c, pos); }
  size_t rfind(std::string_view s, size_t pos = std::string_view::npos) const { return view().rfind(s, pos); }
  size_t rfind(char c, size_t pos = std::string_view::npos) const { return view().rfind(c, pos); }
  std::string substr(size_t pos = 0, size_t n = std::string::npos) const { return str().substr(pos, n); }
  bool starts_with(std::string_view s) const { return view().starts_with(s); }
  bool ends_with(std::string_view s) const { return view().ends_with(s); }
  int compare(std::string_view s) const { return view().compare(s); }

  friend bool operator==(const TypePath& a, const TypePath& b) { return a.node_ == b.node_ || a.view() == b.view(); }
  friend bool operator==(const TypePath& a, std::string_view b) { return a.view() == b; }
  friend bool operator==(const TypePath& a, const std::string& b) { return a.view() == b; }
  friend bool operator==(const TypePath& a, const char* b) { return a.view() == b; }
  friend std::strong_ordering operator<=>(const TypePath& a, const TypePath& b) { return a.view() <=> b.view(); }
  friend std::strong_ordering operator<=>(const TypePath& a, std::string_view b) { return a.view() <=> b; }
  friend std::string operator+(const TypePath& a, std::string_view b) { return std::string(a.view()).append(b); }
  friend std::string operator+(std::string_view a, const TypePath& b) { return std::string(a).append(b.view()); }
  friend std::string operator+(const TypePath& a, const char* b) { return std::string(a.view()).append(b); }
  friend std::string operator+(const char* a, const TypePath& b) { return std::string(a).append(b.view()); }
  friend std::string operator+(const TypePath& a, const std::string& b) { return std::string(a.view()).append(b); }
  friend std::string operator+(const std::string& a, const TypePath& b) { return std::string(a).append(b.view()); }

  // For streams (gtest's messages among them), without including <ostream> here.
  template <typename Stream>
  friend auto operator<<(Stream& os, const TypePath& t) -> decltype(os << std::string_view()) {
    return os << t.view();
  }

  // Bytes this path's node holds (counted once per distinct path by whoever estimates memory).
  size_t node_bytes() const { return node_ == nullptr ? 0 : sizeof(Node) + node_->path.capacity(); }

 private:
  friend class TypePool;
  struct Node {
    explicit Node(std::string_view p) : path(p) {
      const void* slash = path.empty() ? nullptr : memrchr(path.data(), '/', path.size());
      leaf_at = slash == nullptr ? 0 : static_cast<uint32_t>(static_cast<const char*>(slash) - path.data()) + 1;
    }
    std::string path;
    uint32_t leaf_at = 0;
    mutable std::atomic<uint32_t> refs{1};
  };
  explicit TypePath(const Node* node) noexcept : node_(node) { Ref(); }  // an additional reference
  void Ref() const noexcept {
    if (node_ != nullptr) node_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  void Unref() noexcept {
    if (node_ != nullptr && node_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete node_;
    node_ = nullptr;
  }
  static const std::string& Empty();
  const Node* node_ = nullptr;
};

// Interns type paths: the same text gives handles that share one node, held here as long as
// the pool lives. Not thread-safe (each user holds its own, under its own lock).
class TypePool {
 public:
  TypePool() = default;
  TypePool(const TypePool&) = delete;
  TypePool& operator=(const TypePool&) = delete;

  TypePath Intern(std::string_view path);
  // Interned by its text, sharing `path`'s node when the pool has none for it yet.
  TypePath Share(const TypePath& path);
  size_t size() const { return index_.size(); }
  // About how much memory the pool's nodes and index take.
  size_t bytes() const { return bytes_; }
  void clear() {
    index_.clear();
    bytes_ = 0;
  }

 private:
  std::unordered_map<std::string_view, TypePath> index_;  // keys view the nodes' paths
  size_t bytes_ = 0;
};

// For nlohmann::json (found by argument-dependent lookup; no include needed here).
template <typename Json>
void to_json(Json& j, const TypePath& t) {
  j = t.str();
}

}  // namespace grademl::model

template <>
struct fmt::formatter<grademl::model::TypePath> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const grademl::model::TypePath& t, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(t.view(), ctx);
  }
};

template <>
struct std::hash<grademl::model::TypePath> {
  size_t operator()(const grademl::model::TypePath& t) const noexcept { return std::hash<std::string_view>()(t.view()); }
};
