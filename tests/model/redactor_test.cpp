#include "model/redactor.h"

#include <gtest/gtest.h>

#include "model/run_builder.h"

namespace grademl::model {
namespace {

std::string Red(std::string s, int* count = nullptr) {
  int n = Redactor::BuiltIn()->Redact(s);
  if (count != nullptr) *count = n;
  return s;
}

// Each built-in pattern, with the text it must leave (written by hand, not from the code).
TEST(RedactorTest, SecretFlagsKeepTheFlag) {
  EXPECT_EQ(Red("train.py --password=hunter2 --lr 0.1"), "train.py --password=[redacted] --lr 0.1");
  EXPECT_EQ(Red("train.py --password hunter2 --lr 0.1"), "train.py --password [redacted] --lr 0.1");
  EXPECT_EQ(Red("x --api-key abcdef --epochs 3"), "x --api-key [redacted] --epochs 3");
  EXPECT_EQ(Red("x --api_key=abcdef"), "x --api_key=[redacted]");
  EXPECT_EQ(Red("x --token 'a b c' -v"), "x --token '[redacted]' -v");
  EXPECT_EQ(Red("x --secret=\"s3 cret\""), "x --secret=\"[redacted]\"");
  EXPECT_EQ(Red("x --hf-token hf_abcdef"), "x --hf-token [redacted]");
  EXPECT_EQ(Red("x -auth-token abc"), "x -auth-token [redacted]");
  // A bare flag followed by another flag has no value to hide.
  EXPECT_EQ(Red("x --token --lr 0.1"), "x --token --lr 0.1");
}

TEST(RedactorTest, KeyEqualsValueWhereTheKeyNamesASecret) {
  EXPECT_EQ(Red("API_KEY=abc123"), "API_KEY=[redacted]");
  EXPECT_EQ(Red("env AWS_SECRET_ACCESS_KEY=wJalr DB_PASSWORD=pw python x.py"),
            "env AWS_SECRET_ACCESS_KEY=[redacted] DB_PASSWORD=[redacted] python x.py");
  EXPECT_EQ(Red("step 3: token=abcd1234 loss=0.5"), "step 3: token=[redacted] loss=0.5");
  EXPECT_EQ(Red("{\"client_secret\": \"xyz\", \"n\": 3}"), "{\"client_secret\": \"[redacted]\", \"n\": 3}");
  EXPECT_EQ(Red("Password: hunter2"), "Password: [redacted]");
  EXPECT_EQ(Red("GOOGLE_APPLICATION_CREDENTIALS=/home/u/key.json"), "GOOGLE_APPLICATION_CREDENTIALS=[redacted]");
  EXPECT_EQ(Red("PRIVATE_KEY=abc"), "PRIVATE_KEY=[redacted]");
  EXPECT_EQ(Red("ACCESS_KEY=abc"), "ACCESS_KEY=[redacted]");
}

TEST(RedactorTest, UrlsWithCredentials) {
  EXPECT_EQ(Red("git clone https://alice:s3cr3t@github.com/x/y.git"),
            "git clone https://alice:[redacted]@github.com/x/y.git");
  EXPECT_EQ(Red("postgresql://bob:pw@db:5432/grademl"), "postgresql://bob:[redacted]@db:5432/grademl");
  // No password: nothing to hide.
  EXPECT_EQ(Red("https://github.com/x/y.git"), "https://github.com/x/y.git");
}

TEST(RedactorTest, BearerAndAuthorization) {
  EXPECT_EQ(Red("curl -H 'Authorization: Bearer eyJhbGciOiJI.abc.def' url"),
            "curl -H 'Authorization: Bearer [redacted]' url");
  EXPECT_EQ(Red("Authorization: Basic dXNlcjpwYXNz"), "Authorization: Basic [redacted]");
  EXPECT_EQ(Red("sent bearer abcdefgh12345678"), "sent bearer [redacted]");
}

TEST(RedactorTest, CloudKeyFormats) {
  EXPECT_EQ(Red("key AKIAIOSFODNN7EXAMPLE used"), "key [redacted] used");
  EXPECT_EQ(Red("ghp_0123456789abcdefghijABCDEFGHIJ012345"), "[redacted]");
  EXPECT_EQ(Red("github_pat_11ABCDEFG0123456789_abcdefghijklmnop"), "[redacted]");
  EXPECT_EQ(Red("xoxb-123456789012-abcdefghij"), "[redacted]");
  EXPECT_EQ(Red("openai sk-proj-abcdefghijklmnopqrstuvwx"), "openai [redacted]");
  EXPECT_EQ(Red("AIzaSyA-0123456789abcdefghijklmnopqrstu"), "[redacted]");
}

TEST(RedactorTest, HighEntropyTokenAfterASecretWord) {
  EXPECT_EQ(Red("the secret is 9fT3kQ0zLmP2xR7vW1yB"), "the secret is [redacted]");
  EXPECT_EQ(Red("using token Zx81kLmQ0pR7sT2uV9wA"), "using token [redacted]");
  // A low-entropy word after it is left alone.
  EXPECT_EQ(Red("token aaaaaaaaaaaaaaaaaaaa1"), "token aaaaaaaaaaaaaaaaaaaa1");
}

TEST(RedactorTest, OrdinaryMlCommandLinesAreLeftAlone) {
  for (const char* s : {"python train.py --lr 0.01 --epochs 3 --tokenizer bert",
                        "python generate.py --max-tokens 512 --max_new_tokens 128 --temperature 0.7",
                        "python x.py --pad_token '<pad>' --eos-token '</s>' --num-tokens 8",
                        "torchrun --nproc_per_node 4 train.py --batch-size 32 --tokens-per-batch 4096",
                        "python -m pip install scikit-learn", "tokens/s=1234.5 passes=3 keyboard=us",
                        "author=alice monkey=3 key_column=id", "https://huggingface.co/bert-base-uncased",
                        "Epoch 3/10 loss=0.123 acc=0.98 lr=1e-4", "tokenizer_config.json: 100%"}) {
    int n = -1;
    EXPECT_EQ(Red(s, &n), s);
    EXPECT_EQ(n, 0) << s;
  }
}

TEST(RedactorTest, CountsAndIsIdempotent) {
  int n = 0;
  std::string once = Red("--password=a TOKEN=b https://u:c@h", &n);
  EXPECT_EQ(n, 3);
  EXPECT_EQ(Red(once, &n), once);
  EXPECT_EQ(n, 0);
}

TEST(RedactorTest, UserPatternsRedactTheirGroupOrTheirMatch) {
  auto r = Redactor::Make({"internal-[0-9a-f]{8}", "project=(\\w+)"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::string s = "id internal-deadbeef in project=apollo";
  EXPECT_EQ((*r)->Redact(s), 2);
  EXPECT_EQ(s, "id [redacted] in project=[redacted]");
  // The built-in patterns still apply.
  std::string t = "API_KEY=x";
  EXPECT_EQ((*r)->Redact(t), 1);
  EXPECT_EQ(t, "API_KEY=[redacted]");
}

TEST(RedactorTest, AnInvalidUserPatternIsAnErrorNamingIt) {
  auto r = Redactor::Make({"ok", "(unclosed"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("(unclosed"), std::string::npos);
  // A pattern holding control characters (found by the fuzzer) still makes a one-line error.
  auto cr = Redactor::Make({std::string("a\r[\0\n(", 7)});
  ASSERT_FALSE(cr.ok());
  EXPECT_EQ(cr.status().message().find_first_of(std::string("\r\n\0", 3)), std::string::npos) << cr.status().message();
}

TEST(RedactorTest, ArgvRedactsTheValueAfterABareSecretFlag) {
  std::vector<std::string> argv = {"python", "x.py", "--password", "hunter2", "--lr", "0.1", "--token=abc"};
  EXPECT_EQ(Redactor::BuiltIn()->RedactArgv(argv), 2);
  EXPECT_EQ(argv, (std::vector<std::string>{"python", "x.py", "--password", "[redacted]", "--lr", "0.1",
                                            "--token=[redacted]"}));
  std::vector<std::string> ml = {"python", "x.py", "--max-tokens", "512", "--tokenizer", "bert"};
  EXPECT_EQ(Redactor::BuiltIn()->RedactArgv(ml), 0);
}

TEST(RedactorTest, TagsWhoseKeyNamesASecretAreRedactedWhole) {
  std::string v = "plain value";
  EXPECT_EQ(Redactor::BuiltIn()->RedactTag("api_token", v), 1);
  EXPECT_EQ(v, "[redacted]");
  std::string w = "512";
  EXPECT_EQ(Redactor::BuiltIn()->RedactTag("max_tokens", w), 0);
  EXPECT_EQ(w, "512");
  std::string x = "pw is --password=abc";
  EXPECT_EQ(Redactor::BuiltIn()->RedactTag("note", x), 1);
  EXPECT_EQ(x, "pw is --password=[redacted]");
}

TEST(RedactorTest, SecretKeys) {
  for (const char* k : {"password", "DB_PASSWORD", "api-key", "--api_key", "token", "HF_TOKEN", "auth_token",
                        "client.secret", "AWS_SECRET_ACCESS_KEY", "credentials", "passphrase"})
    EXPECT_TRUE(Redactor::IsSecretKey(k)) << k;
  for (const char* k : {"tokens", "max_tokens", "pad_token", "--eos-token", "tokenizer", "key", "author", "PWD",
                        "num_token", "passes", ""})
    EXPECT_FALSE(Redactor::IsSecretKey(k)) << k;
}

// The builder redacts every text before it hands it out, and counts what it replaced.
TEST(RedactorTest, RunBuilderRedactsEverythingItHandsOut) {
  RunInfo info;
  info.command = {"python", "x.py", "--password", "hunter2"};
  RunBuilder b(info, 0, Redactor::BuiltIn());
  PhaseId root = b.BeginPhase({.name = "run TOKEN=abc", .type = "run", .tags = {{"api_key", "k1"}}});
  b.AddPhase({.parent = root, .name = "curl https://u:p@h", .type = "x", .tags = {{"note", "secret=s"}}}, 5);
  b.SetPhaseTag(root, "hf_token", "t0");
  b.AddLogLine({.phase = root, .text = "login password=pw1"});
  b.AddResource({.kind = ResourceKind::kOutsideProcess, .name = "mysql --password=pw2"});
  RunDelta d = b.TakeDelta(true);
  ASSERT_TRUE(d.info.has_value());
  EXPECT_EQ(d.info->command, (std::vector<std::string>{"python", "x.py", "--password", "[redacted]"}));
  ASSERT_EQ(d.phases.size(), 2u);
  EXPECT_EQ(d.phases[0].name, "run TOKEN=[redacted]");
  EXPECT_EQ(d.phases[0].tags, (Tags{{"api_key", "[redacted]"}, {"hf_token", "[redacted]"}}));
  EXPECT_EQ(d.phases[1].name, "curl https://u:[redacted]@h");
  EXPECT_EQ(d.phases[1].tags, (Tags{{"note", "secret=[redacted]"}}));
  ASSERT_EQ(d.logs.size(), 1u);
  EXPECT_EQ(d.logs[0].text, "login password=[redacted]");
  ASSERT_EQ(d.resources.size(), 1u);
  EXPECT_EQ(d.resources[0].name, "mysql --password=[redacted]");
  int64_t counted = 0;
  for (const IngestStat& s : d.ingest_stats)
    if (s.reason == "secrets_redacted" && s.source == 0) counted += s.count;
  EXPECT_EQ(counted, 8);  // hunter2, abc, k1, p, s, t0, pw1, pw2
}

TEST(RedactorTest, RunBuilderWithoutARedactorKeepsTexts) {
  RunBuilder b(RunInfo{.command = {"x", "--password=p"}}, 0, nullptr);
  b.AddLogLine({.text = "token=abc"});
  RunDelta d = b.TakeDelta(true);
  EXPECT_EQ(d.info->command[1], "--password=p");
  EXPECT_EQ(d.logs[0].text, "token=abc");
  EXPECT_TRUE(d.ingest_stats.empty());
}

}  // namespace
}  // namespace grademl::model
