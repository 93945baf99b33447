// SHA-256 of byte streams, by OpenSSL's libcrypto (its SHA-NI code runs at about 1.3 GB/s a
// core here), loaded when first used (dlopen "libcrypto.so.3"), not linked: linked, it costs
// every grademl process about 1 ms of start-up (docs/PERFORMANCE.md), and only workflow runs
// hash (docs/reuse.md).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"

namespace grademl {

// One SHA-256 computation. Sha256Available() must be ok before one is made.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t n);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  // The digest as 64 lowercase hex digits; the object is done with afterwards.
  std::string HexDigest();

 private:
  void* ctx_ = nullptr;
};

// Whether libcrypto could be loaded (once; thread-safe); the error says what is missing.
// GRADEML_TEST_LIBCRYPTO names another file to load, for the test of a machine without it.
Status Sha256Available();

// The hex SHA-256 of `data` (Sha256Available() must be ok).
std::string Sha256Hex(std::string_view data);

// True for 64 lowercase hex digits: what Sha256::HexDigest gives.
bool IsSha256Hex(std::string_view s);

}  // namespace grademl
