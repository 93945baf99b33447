// Bounded YAML reading: the file read and the event-stream check described in yaml_bounds.h.
#include "workflow/yaml_bounds.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <cerrno>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "core/text.h"

namespace grademl::workflow {
namespace {

// Thrown out of the event handler (through yaml-cpp's parser) to stop at the first excess.
struct LimitExceeded {
  int line = 0;  // 1-based, 0 when unknown
  std::string reason;
};

int MarkLine(const YAML::Mark& mark) { return mark.is_null() || mark.line < 0 ? 0 : mark.line + 1; }

// Follows the parse events with a stack of open collections and, per anchor, the size of
// the node it names with every alias inside expanded. No node is built and nothing recurses.
class BoundsChecker : public YAML::EventHandler {
 public:
  explicit BoundsChecker(const YamlLimits& limits) : limits_(limits) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnAnchor(const YAML::Mark&, const std::string& name) override { pending_name_ = name; }

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { Leaf(mark, anchor, 0); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string& value) override {
    if (value.find('\0') != std::string::npos) {
      throw LimitExceeded{MarkLine(mark), "a NUL byte (\\0) in a string; GradeML refuses NUL in every value"};
    }
    Leaf(mark, anchor, value.size());
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto it = anchors_.find(anchor);
    if (it == anchors_.end()) return;  // yaml-cpp reports unknown anchors itself
    const Anchor& a = it->second;
    if (a.open) {
      throw LimitExceeded{MarkLine(mark), fmt::format("alias '*{}' is used inside its own anchor '&{}' (line {}): the "
                                                    "node would contain itself",
                                                    a.name, a.name, a.line)};
    }
    if (stack_.size() + a.height > limits_.max_depth) TooDeep(mark);
    Add(mark, a.nodes, a.bytes);
    Complete(a.nodes, a.bytes, a.height);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Anchor {
    std::string name;
    int line = 0;
    bool open = false;
    size_t nodes = 0, bytes = 0, height = 0;  // of the node it names, aliases expanded
  };
  struct Frame {
    YAML::anchor_t anchor = 0;
    size_t nodes = 1, bytes = 0, height = 1;  // so far, this collection included
  };

  void TooDeep(const YAML::Mark& mark) const {
    throw LimitExceeded{MarkLine(mark), fmt::format("nested more than {} levels deep (aliases expanded)", limits_.max_depth)};
  }

  // Counts nodes and text into the document's expanded size.
  void Add(const YAML::Mark& mark, size_t nodes, size_t bytes) {
    total_nodes_ += nodes;
    total_bytes_ += bytes;
    if (total_nodes_ > limits_.max_nodes) {
      throw LimitExceeded{MarkLine(mark), fmt::format("the document has more than {} nodes (each alias counted as the "
                                                    "nodes it stands for: an alias or merge-key bomb?)",
                                                    limits_.max_nodes)};
    }
    if (total_bytes_ > limits_.max_expanded_bytes) {
      throw LimitExceeded{MarkLine(mark), fmt::format("the document has more than {} MiB of text (each alias counted as "
                                                    "the text it stands for: an alias bomb?)",
                                                    limits_.max_expanded_bytes >> 20)};
    }
  }

  void Name(YAML::anchor_t anchor, const YAML::Mark& mark, bool open) {
    if (anchor == 0) return;
    Anchor& a = anchors_[anchor];
    a.name = std::move(pending_name_);
    a.line = MarkLine(mark);
    a.open = open;
  }

  // A node ended: it adds to the collection that holds it, or is the document.
  void Complete(size_t nodes, size_t bytes, size_t height) {
    if (stack_.empty()) return;
    Frame& parent = stack_.back();
    parent.nodes += nodes;
    parent.bytes += bytes;
    parent.height = std::max(parent.height, height + 1);
  }

  void Leaf(const YAML::Mark& mark, YAML::anchor_t anchor, size_t bytes) {
    if (stack_.size() + 1 > limits_.max_depth) TooDeep(mark);
    Add(mark, 1, bytes);
    if (anchor != 0) {
      Name(anchor, mark, false);
      Anchor& a = anchors_[anchor];
      a.nodes = 1;
      a.bytes = bytes;
      a.height = 1;
    }
    Complete(1, bytes, 1);
  }

  void Open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (stack_.size() + 1 > limits_.max_depth) TooDeep(mark);
    Add(mark, 1, 0);
    Name(anchor, mark, true);
    stack_.push_back(Frame{anchor});
  }

  void Close() {
    if (stack_.empty()) return;
    const Frame done = stack_.back();
    stack_.pop_back();
    if (done.anchor != 0) {
      Anchor& a = anchors_[done.anchor];
      a.open = false;
      a.nodes = done.nodes;
      a.bytes = done.bytes;
      a.height = done.height;
    }
    Complete(done.nodes, done.bytes, done.height);
  }

  const YamlLimits& limits_;
  std::vector<Frame> stack_;
  std::unordered_map<YAML::anchor_t, Anchor> anchors_;
  std::string pending_name_;
  // Both stay below twice their limit: an anchor's size was counted once before any alias
  // to it adds it again, and the first excess throws.
  size_t total_nodes_ = 0;
  size_t total_bytes_ = 0;
};

int YamlErrorLine(const YAML::Exception& e) { return e.mark.is_null() || e.mark.line < 0 ? 0 : e.mark.line + 1; }

Status FileError(const std::string& file, int line, const std::string& reason) {
  if (line <= 0) return InvalidArgument("{}: {}", EscapeControl(file), EscapeControl(reason));
  return InvalidArgument("{}:{}: {}", EscapeControl(file), line, EscapeControl(reason));
}

}  // namespace

StatusOr<std::string> ReadBoundedFile(const std::string& path, size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO with no writer must not wait; regular files ignore it.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    return Status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError,
                  fmt::format("{}: cannot read: {}", path, strerror(err)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return IoError("{}: cannot read: {}", path, strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    if (S_ISDIR(st.st_mode)) return InvalidArgument("{}: cannot read: {}", path, strerror(EISDIR));
    return InvalidArgument("{}: cannot read: not a regular file ({})", path,
                           S_ISFIFO(st.st_mode)   ? "a FIFO"
                           : S_ISCHR(st.st_mode)  ? "a character device"
                           : S_ISBLK(st.st_mode)  ? "a block device"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                                                  : "an unknown kind of file");
  }
  const auto too_large = [&] {
    return InvalidArgument("{}: cannot read: larger than {} MiB; GradeML reads YAML files up to that size", path,
                           max_bytes >> 20);
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    close(fd);
    return too_large();
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      close(fd);
      return IoError("{}: cannot read: {}", path, strerror(err));
    }
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes) {  // it grew while we read it
      close(fd);
      return too_large();
    }
  }
  close(fd);
  return text;
}

StatusOr<YAML::Node> LoadBoundedYaml(std::string_view text, const std::string& file, const YamlLimits& limits,
                                     const std::string& syntax_prefix) {
  if (text.size() > limits.max_file_bytes) {
    return FileError(file, 0, fmt::format("larger than {} MiB; GradeML reads YAML files up to that size",
                                          limits.max_file_bytes >> 20));
  }
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<ptrdiff_t>(nul), '\n'));
    return FileError(file, line, "a NUL byte in the file; GradeML refuses NUL in every value");
  }
  const std::string owned(text);
  try {
    std::istringstream in(owned);
    YAML::Parser parser(in);
    BoundsChecker checker(limits);
    parser.HandleNextDocument(checker);
  } catch (const LimitExceeded& e) {
    return FileError(file, e.line, e.reason);
  } catch (const YAML::DeepRecursion& e) {  // yaml-cpp's own guard, should ours miss a case
    return FileError(file, YamlErrorLine(e), "nested too deeply");
  } catch (const YAML::Exception& e) {
    return FileError(file, YamlErrorLine(e), syntax_prefix + e.msg);
  }
  try {
    return YAML::Load(owned);
  } catch (const YAML::Exception& e) {
    return FileError(file, YamlErrorLine(e), syntax_prefix + e.msg);
  }
}

}  // namespace grademl::workflow
