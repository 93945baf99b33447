// JsonStream: writes JSON as it is produced, byte for byte what nlohmann::json's dump(indent)
// writes for the same value (keys in the order given: a caller writes an object's keys sorted,
// as nlohmann's std::map orders them), so that a large report never exists as a DOM. Small
// parts can still be built as nlohmann::json values and written in place with Value(json).
// Strings must be valid UTF-8 (as ValidUtf8 makes them); doubles are written with nlohmann's
// own shortest round-trip formatting. Output goes through a buffer handed to a sink in
// chunks of about 1 MiB.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace grademl::report {

class JsonStream {
 public:
  // `sink` receives the output in order; it is called with a chunk whenever the buffer fills
  // and once more by Flush(). `indent`: spaces per level (nlohmann's dump(indent)).
  explicit JsonStream(std::function<void(std::string_view)> sink, int indent = 2);
  JsonStream(const JsonStream&) = delete;
  JsonStream& operator=(const JsonStream&) = delete;
  ~JsonStream();

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  // The next member's key, inside an object.
  void Key(std::string_view key);

  void Null();
  void Bool(bool v);
  void Int(int64_t v);
  void UInt(uint64_t v);
  // NaN and infinities are written as null, as nlohmann does.
  void Double(double v);
  void String(std::string_view utf8);
  // Untrusted text: as valid UTF-8 (ValidUtf8's replacement of invalid bytes).
  void Text(std::string_view text);
  // A whole value, written as nlohmann's dump would at this depth.
  void Value(const nlohmann::json& v);

  // Shorthands for an object member.
  void Member(std::string_view key, const nlohmann::json& v) {
    Key(key);
    Value(v);
  }
  void MemberInt(std::string_view key, int64_t v) {
    Key(key);
    Int(v);
  }
  void MemberDouble(std::string_view key, double v) {
    Key(key);
    Double(v);
  }
  void MemberString(std::string_view key, std::string_view v) {
    Key(key);
    String(v);
  }

  // Hands what is buffered to the sink.
  void Flush();

 private:
  struct Level {
    bool empty = true;  // no member or element written yet
  };
  // Before a value: the separator and indentation its position needs (none after a key).
  void BeforeValue();
  // The comma (unless first) and the new line and indentation of a member or element.
  void Separator();
  void NewlineIndent(size_t depth);
  // `s` quoted and escaped as nlohmann does (ensure_ascii off).
  void Escaped(std::string_view s);
  // Where `n` more bytes can be written (flushing first when they do not fit).
  char* Room(size_t n) { return static_cast<size_t>(end_ - pos_) >= n ? pos_ : MakeRoom(n); }
  char* MakeRoom(size_t n);
  void Put(const char* p, size_t n) {
    char* out = Room(n);
    std::memcpy(out, p, n);
    pos_ = out + n;
  }
  void MaybeFlush();

  std::function<void(std::string_view)> sink_;
  int indent_;
  size_t capacity_;
  std::unique_ptr<char[]> data_;
  char* pos_;
  char* end_;
  std::string scratch_;  // a DOM value's text
  std::vector<Level> levels_;
  bool after_key_ = false;
};

}  // namespace grademl::report
