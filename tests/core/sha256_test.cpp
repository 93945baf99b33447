// SHA-256 (core/sha256.h) against FIPS 180-2's vectors and against coreutils' sha256sum, an
// implementation of its own; and what a machine without libcrypto gets (in a child process:
// the library is loaded once per process).
#include "core/sha256.h"
#include "sha256sum.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>
#include "skip_or_fail.h"

namespace grademl {
namespace {

constexpr const char* kSha256TestChildVar = "GRADEML_SHA256_TEST_CHILD";

// Runs this test binary again with `env` ("NAME=value") added and only `filter`'s tests;
// returns its exit status and (in *output) what it printed.
int Sha256TestRunSelf(const std::vector<std::string>& env, const std::string& filter, std::string* output) {
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string cmd = "/usr/bin/env";
  for (const std::string& e : env) cmd += " '" + e + "'";
  cmd += " '" + self + "' '--gtest_filter=" + filter + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) output->append(buf, n);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

class Sha256Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv(kSha256TestChildVar) != nullptr) GTEST_SKIP() << "a child run of the libcrypto test";
    Status available = Sha256Available();
    ASSERT_TRUE(available.ok()) << available.message();
  }
};

TEST_F(Sha256Test, Fips180Vectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1'000'000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // A digest of nothing fed at all, and of empty updates only.
  Sha256 none;
  EXPECT_EQ(none.HexDigest(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 empties;
  empties.Update("", 0);
  empties.Update(std::string_view());
  EXPECT_EQ(empties.HexDigest(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_F(Sha256Test, MillionAInOddChunks) {
  // The million 'a' fed 7, 13, 1, 64, 65, 127, ... bytes at a time (block boundaries crossed
  // every way).
  const std::string a(1'000'000, 'a');
  const size_t chunks[] = {7, 13, 1, 64, 65, 127, 0, 55, 56, 57, 4093};
  Sha256 h;
  size_t pos = 0;
  for (size_t i = 0; pos < a.size(); ++i) {
    size_t n = std::min(chunks[i % std::size(chunks)], a.size() - pos);
    h.Update(a.data() + pos, n);
    pos += n;
  }
  EXPECT_EQ(h.HexDigest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_F(Sha256Test, IncrementalEqualsOneShot) {
  std::mt19937 rng(1234);
  std::string data(200'003, '\0');
  for (char& c : data) c = static_cast<char>(rng() & 0xff);
  const std::string one_shot = Sha256Hex(data);
  for (size_t step : {size_t{1}, size_t{3}, size_t{63}, size_t{64}, size_t{65}, size_t{1000}, size_t{99'999}}) {
    Sha256 h;
    for (size_t pos = 0; pos < data.size(); pos += step) {
      h.Update(std::string_view(data).substr(pos, step));
    }
    EXPECT_EQ(h.HexDigest(), one_shot) << "chunks of " << step;
  }
}

TEST_F(Sha256Test, RandomFileEqualsSha256sum) {
  if (access("/usr/bin/sha256sum", X_OK) != 0) SKIP_OR_FAIL_IN_CI("no /usr/bin/sha256sum (coreutils)");
  std::string dir = (std::filesystem::temp_directory_path() / "grademl_sha256_XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string file = dir + "/random.bin";
  std::mt19937_64 rng(20240611);
  std::string data(3 * 1024 * 1024 + 17, '\0');
  for (size_t i = 0; i + 8 <= data.size(); i += 8) {
    uint64_t v = rng();
    std::memcpy(&data[i], &v, 8);
  }
  {
    std::ofstream out(file, std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
  }
  const std::string expected = grademl::testing::Sha256sumOf(file);
  ASSERT_TRUE(IsSha256Hex(expected)) << "sha256sum printed '" << expected << "'";
  // Read back from the file in odd-sized pieces.
  std::ifstream in(file, std::ios::binary);
  Sha256 h;
  std::vector<char> buf(777'777);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.Update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  EXPECT_EQ(h.HexDigest(), expected);
  EXPECT_EQ(Sha256Hex(data), expected);
  std::filesystem::remove_all(dir);
}

TEST(Sha256HexFormTest, IsSha256Hex) {
  EXPECT_TRUE(IsSha256Hex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
  EXPECT_TRUE(IsSha256Hex(std::string(64, '0')));
  EXPECT_TRUE(IsSha256Hex(std::string(64, 'f')));
  EXPECT_FALSE(IsSha256Hex(""));
  EXPECT_FALSE(IsSha256Hex(std::string(63, 'a')));
  EXPECT_FALSE(IsSha256Hex(std::string(65, 'a')));
  EXPECT_FALSE(IsSha256Hex("E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"));  // uppercase
  EXPECT_FALSE(IsSha256Hex(std::string(63, 'a') + "g"));
  EXPECT_FALSE(IsSha256Hex(std::string(63, 'a') + " "));
  EXPECT_FALSE(IsSha256Hex(std::string(63, 'a') + '\0'));
}

// The child's half: run only with GRADEML_TEST_LIBCRYPTO set, by the test below.
TEST(Sha256LibcryptoChildTest, NamedLibraryIsLoadedOrReported) {
  const char* child = std::getenv(kSha256TestChildVar);
  if (child == nullptr) GTEST_SKIP() << "run by Sha256LibcryptoTest in a child process";
  const char* lib = std::getenv("GRADEML_TEST_LIBCRYPTO");
  ASSERT_NE(lib, nullptr);
  Status st = Sha256Available();
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  if (std::string(child) == "missing") {
    // dlerror names the file that is not there.
    EXPECT_NE(st.message().find(lib), std::string::npos) << st.message();
  } else {
    // A library that loads but is not libcrypto: a function is missing.
    EXPECT_NE(st.message().find("EVP_"), std::string::npos) << st.message();
  }
  // Asked again: the same answer (loaded once).
  EXPECT_EQ(Sha256Available().message(), st.message());
  // Checking the form of a digest needs no library.
  EXPECT_TRUE(IsSha256Hex(std::string(64, 'a')));
}

TEST(Sha256LibcryptoTest, MissingLibraryMakesItUnavailableInAChild) {
  if (std::getenv(kSha256TestChildVar) != nullptr) GTEST_SKIP();
  std::string output;
  int rc = Sha256TestRunSelf({std::string(kSha256TestChildVar) + "=missing",
                              "GRADEML_TEST_LIBCRYPTO=/nonexistent/grademl-test/libcrypto.so.3"},
                             "Sha256LibcryptoChildTest.*", &output);
  EXPECT_EQ(rc, 0) << output;
  EXPECT_NE(output.find("[  PASSED  ] 1 test"), std::string::npos) << output;
  EXPECT_EQ(output.find("SKIPPED"), std::string::npos) << output;
}

TEST(Sha256LibcryptoTest, LibraryWithoutTheFunctionsIsUnavailableInAChild) {
  if (std::getenv(kSha256TestChildVar) != nullptr) GTEST_SKIP();
  std::string output;
  // libc loads everywhere and has no EVP_* functions.
  int rc = Sha256TestRunSelf({std::string(kSha256TestChildVar) + "=notcrypto", "GRADEML_TEST_LIBCRYPTO=libc.so.6"},
                             "Sha256LibcryptoChildTest.*", &output);
  EXPECT_EQ(rc, 0) << output;
  EXPECT_NE(output.find("[  PASSED  ] 1 test"), std::string::npos) << output;
  EXPECT_EQ(output.find("SKIPPED"), std::string::npos) << output;
}

}  // namespace
}  // namespace grademl
