#include "core/sha256.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace grademl {
namespace {

// The libcrypto functions used, by their C signatures (OpenSSL 3's EVP interface); the
// opaque types are void here, so that no OpenSSL header is needed to build.
struct CryptoApi {
  void* (*md_ctx_new)() = nullptr;
  void (*md_ctx_free)(void*) = nullptr;
  const void* (*sha256)() = nullptr;
  int (*digest_init_ex)(void*, const void*, void*) = nullptr;
  int (*digest_update)(void*, const void*, size_t) = nullptr;
  int (*digest_final_ex)(void*, unsigned char*, unsigned int*) = nullptr;
};

struct CryptoLoaded {
  CryptoApi api;
  Status status = Status::Ok();
};

template <typename F>
bool CryptoSymbol(void* handle, const char* name, F* slot, Status* error) {
  void* p = dlsym(handle, name);
  if (p == nullptr) {
    *error = Status(StatusCode::kUnavailable, std::string("libcrypto.so.3 has no ") + name);
    return false;
  }
  *slot = reinterpret_cast<F>(p);
  return true;
}

const CryptoLoaded& Crypto() {
  static const CryptoLoaded loaded = [] {
    CryptoLoaded l;
    const char* test_name = std::getenv("GRADEML_TEST_LIBCRYPTO");
    const char* name = test_name && *test_name ? test_name : "libcrypto.so.3";
    void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      l.status = Status(StatusCode::kUnavailable, std::string("OpenSSL's libcrypto cannot be loaded (") +
                                                      (why ? why : name) + "): install Debian's libssl3");
      return l;
    }
    Status error = Status::Ok();
    CryptoApi& a = l.api;
    bool ok = CryptoSymbol(handle, "EVP_MD_CTX_new", &a.md_ctx_new, &error) &&
              CryptoSymbol(handle, "EVP_MD_CTX_free", &a.md_ctx_free, &error) &&
              CryptoSymbol(handle, "EVP_sha256", &a.sha256, &error) &&
              CryptoSymbol(handle, "EVP_DigestInit_ex", &a.digest_init_ex, &error) &&
              CryptoSymbol(handle, "EVP_DigestUpdate", &a.digest_update, &error) &&
              CryptoSymbol(handle, "EVP_DigestFinal_ex", &a.digest_final_ex, &error);
    if (!ok) l.status = error;
    return l;
  }();
  return loaded;
}

[[noreturn]] void CryptoFailed(const char* what) {
  std::fprintf(stderr, "grademl: SHA-256: %s failed\n", what);
  std::abort();
}

}  // namespace

Status Sha256Available() { return Crypto().status; }

Sha256::Sha256() {
  const CryptoLoaded& c = Crypto();
  if (!c.status.ok()) {
    std::fprintf(stderr, "grademl: %s\n", c.status.message().c_str());
    std::abort();  // a programming error: callers check Sha256Available() first
  }
  ctx_ = c.api.md_ctx_new();
  if (ctx_ == nullptr || c.api.digest_init_ex(ctx_, c.api.sha256(), nullptr) != 1) CryptoFailed("init");
}

Sha256::~Sha256() {
  if (ctx_ != nullptr) Crypto().api.md_ctx_free(ctx_);
}

void Sha256::Update(const void* data, size_t n) {
  if (n == 0) return;
  if (Crypto().api.digest_update(ctx_, data, n) != 1) CryptoFailed("update");
}

std::string Sha256::HexDigest() {
  unsigned char digest[32];
  unsigned int len = 0;
  if (Crypto().api.digest_final_ex(ctx_, digest, &len) != 1 || len != 32) CryptoFailed("final");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(64, '0');
  for (int i = 0; i < 32; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 15];
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  Sha256 h;
  h.Update(data);
  return h.HexDigest();
}

bool IsSha256Hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace grademl
