// Tests of the user's config file (src/workflow/user_config.h): the two settings it holds, the
// errors a typo or a wrong type gets (FILE:LINE), and the refusal of a file others can change.
#include "workflow/user_config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace grademl::workflow {
namespace {

TEST(UserConfigTest, ReadsPatternsAndTrust) {
  auto c = ParseUserConfig("redact:\n  patterns: ['(?i)internal-[0-9a-f]{8}', 'x+']\nreuse:\n  trust: [bob, carol]\n", "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->redact_patterns, (std::vector<std::string>{"(?i)internal-[0-9a-f]{8}", "x+"}));
  EXPECT_EQ(c->reuse_trust, (std::vector<std::string>{"bob", "carol"}));
  // A single string is a list of one; an empty document or empty sections are an empty config.
  auto one = ParseUserConfig("reuse:\n  trust: bob\n", "c.yaml");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->reuse_trust, std::vector<std::string>{"bob"});
  auto empty = ParseUserConfig("", "c.yaml");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->redact_patterns.empty() && empty->reuse_trust.empty());
  EXPECT_TRUE(ParseUserConfig("redact:\nreuse:\n", "c.yaml").ok());
}

TEST(UserConfigTest, TyposAndWrongTypesNameTheLine) {
  auto unknown = ParseUserConfig("redact:\n  patterns: [a]\nreuse:\n  trusted: [bob]\n", "c.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "c.yaml:4: unknown key 'reuse.trusted' (known: trust)");
  auto top = ParseUserConfig("colour: red\n", "c.yaml");
  ASSERT_FALSE(top.ok());
  EXPECT_EQ(top.status().message(), "c.yaml:1: unknown key 'colour' (known: redact, reuse)");
  auto map = ParseUserConfig("reuse:\n  trust: {bob: 1}\n", "c.yaml");
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(map.status().message(), "c.yaml:2: reuse.trust must be a list of strings, not a mapping");
  auto nested = ParseUserConfig("redact:\n  patterns:\n    - a\n    - [b]\n", "c.yaml");
  ASSERT_FALSE(nested.ok());
  EXPECT_EQ(nested.status().message(), "c.yaml:4: redact.patterns: each entry must be a string, not a list");
  EXPECT_FALSE(ParseUserConfig("- a\n", "c.yaml").ok());
  EXPECT_FALSE(ParseUserConfig("reuse: [", "c.yaml").ok());
}

class UserConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("grademl_user_config_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "config.yaml").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& text, mode_t mode) {
    std::ofstream(path_) << text;
    ASSERT_EQ(chmod(path_.c_str(), mode), 0);
  }
  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(UserConfigFileTest, AMissingFileIsEmptyUnlessRequired) {
  auto c = LoadUserConfigFile(path_, false);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->path.empty());
  auto required = LoadUserConfigFile(path_, true);
  ASSERT_FALSE(required.ok());
  EXPECT_NE(required.status().message().find("cannot read the grademl config"), std::string::npos);
}

TEST_F(UserConfigFileTest, AFileOthersCanWriteIsRefused) {
  Write("reuse:\n  trust: [mallory]\n", 0664);
  auto group = LoadUserConfigFile(path_, false);
  ASSERT_FALSE(group.ok());
  EXPECT_NE(group.status().message().find("writable by its group or others"), std::string::npos);
  Write("reuse:\n  trust: [mallory]\n", 0602);
  EXPECT_FALSE(LoadUserConfigFile(path_, false).ok());
  Write("reuse:\n  trust: [bob]\n", 0644);
  auto ok = LoadUserConfigFile(path_, false);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->reuse_trust, std::vector<std::string>{"bob"});
  EXPECT_EQ(ok->path, path_);
}

TEST_F(UserConfigFileTest, ADirectoryOrFifoIsRefusedWithoutBlocking) {
  std::filesystem::create_directories(path_);
  EXPECT_FALSE(LoadUserConfigFile(path_, false).ok());
  std::filesystem::remove(path_);
  ASSERT_EQ(mkfifo(path_.c_str(), 0600), 0);
  EXPECT_FALSE(LoadUserConfigFile(path_, false).ok());
}

TEST(UserConfigPathTest, EnvironmentDecidesWhere) {
  const char* saved_config = std::getenv("GRADEML_CONFIG");
  const char* saved_xdg = std::getenv("XDG_CONFIG_HOME");
  std::string keep_config = saved_config ? saved_config : "", keep_xdg = saved_xdg ? saved_xdg : "";
  setenv("GRADEML_CONFIG", "/x/c.yaml", 1);
  EXPECT_EQ(UserConfigPath(), "/x/c.yaml");
  unsetenv("GRADEML_CONFIG");
  setenv("XDG_CONFIG_HOME", "/xdg", 1);
  EXPECT_EQ(UserConfigPath(), "/xdg/grademl/config.yaml");
  unsetenv("XDG_CONFIG_HOME");
  setenv("HOME", std::getenv("HOME") ? std::getenv("HOME") : "/root", 1);
  EXPECT_EQ(UserConfigPath(), std::string(std::getenv("HOME")) + "/.config/grademl/config.yaml");
  if (saved_config) setenv("GRADEML_CONFIG", keep_config.c_str(), 1);
  if (saved_xdg) setenv("XDG_CONFIG_HOME", keep_xdg.c_str(), 1);
}

}  // namespace
}  // namespace grademl::workflow
