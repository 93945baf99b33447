#include "collect/process_stat.h"

#include <gtest/gtest.h>

namespace grademl::collect {
namespace {

TEST(ProcessStatTest, ParsesACommWithSpacesAndParens) {
  std::string line =
      "4242 (a b) (c)) S 4000 4242 4000 0 -1 4194560 100 0 0 0 "
      "250 30 7 3 20 0 3 0 123456 1000000 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  ProcessStat st;
  ASSERT_TRUE(ParseProcessStat(line, &st));
  EXPECT_EQ(st.pid, 4242);
  EXPECT_EQ(st.comm, "a b) (c)");
  EXPECT_EQ(st.state, 'S');
  EXPECT_EQ(st.ppid, 4000);
  EXPECT_EQ(st.utime, 250u);
  EXPECT_EQ(st.stime, 30u);
  EXPECT_EQ(st.cutime, 7u);
  EXPECT_EQ(st.cstime, 3u);
  EXPECT_EQ(st.num_threads, 3);
  EXPECT_EQ(st.starttime, 123456u);
  EXPECT_EQ(st.rss_pages, 2048u);
}

TEST(ProcessStatTest, ParsesPageFaultsAndState) {
  // A real line of a process in disk wait (fields 10..13: minflt cminflt majflt cmajflt).
  std::string line =
      "16671 (dd) D 16670 16671 16671 0 -1 4194560 4251 43258 17 4 7 12 95 147 20 0 1 0 892788 5124096 975 "
      "18446744073709551615 93837367234560 93837368023965 140732600404064 0 0 0 65536 4 1132560123 1 0 0 17 1 0 0 0 0 "
      "0 93837368257264 93837368305508 93837411811328 140732600404793 140732600404808 140732600404808 "
      "140732600405994 0\n";
  ProcessStat st;
  ASSERT_TRUE(ParseProcessStat(line, &st));
  EXPECT_EQ(st.state, 'D');
  EXPECT_EQ(st.minflt, 4251u);
  EXPECT_EQ(st.majflt, 17u);
  EXPECT_EQ(st.utime, 7u);
  EXPECT_EQ(st.stime, 12u);
  EXPECT_EQ(st.rss_pages, 975u);
}

TEST(ProcessStatTest, ParsesSchedStat) {
  ProcessSchedStat ss;
  ASSERT_TRUE(ParseProcessSchedStat("2593134 8789185 2\n", &ss));
  EXPECT_EQ(ss.run_ns, 2593134u);
  EXPECT_EQ(ss.wait_ns, 8789185u);
  EXPECT_EQ(ss.timeslices, 2u);
  ASSERT_TRUE(ParseProcessSchedStat("18446744073709551615 0 0", &ss));  // no newline, largest value
  EXPECT_EQ(ss.run_ns, 18446744073709551615u);
  EXPECT_FALSE(ParseProcessSchedStat("", &ss));
  EXPECT_FALSE(ParseProcessSchedStat("12 34\n", &ss));
  EXPECT_FALSE(ParseProcessSchedStat("12 x 3\n", &ss));
}

TEST(ProcessStatTest, RejectsTruncatedLines) {
  ProcessStat st;
  EXPECT_FALSE(ParseProcessStat("", &st));
  EXPECT_FALSE(ParseProcessStat("12 (x) S 1 2 3", &st));
  EXPECT_FALSE(ParseProcessStat("12 x S 1", &st));
}

TEST(ProcessStatTest, ParsesIoAndContextSwitches) {
  ProcessIo io;
  ASSERT_TRUE(ParseProcessIo(
      "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n", &io));
  EXPECT_EQ(io.rchar, 10u);
  EXPECT_EQ(io.wchar, 20u);
  EXPECT_EQ(io.read_bytes, 4096u);
  EXPECT_EQ(io.write_bytes, 8192u);
  ProcessContextSwitches cs;
  ASSERT_TRUE(ParseProcessContextSwitches("Name:\tx\nvoluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t6\n", &cs));
  EXPECT_EQ(cs.voluntary, 5u);
  EXPECT_EQ(cs.involuntary, 6u);
}

TEST(ProcessStatTest, FormatsCmdlines) {
  EXPECT_EQ(FormatCmdline(std::string_view("python3\0train.py\0--lr\0" "0.1\0", 26)), "python3 train.py --lr 0.1");
  EXPECT_EQ(FormatCmdline(std::string_view("")), "");
  EXPECT_EQ(FormatCmdline(std::string_view("abcdefghij"), 8), "abcde...");
}

TEST(ProcessStatTest, RecognisesSocketWaitChannels) {
  EXPECT_TRUE(IsSocketWaitChannel("wait_woken"));
  EXPECT_TRUE(IsSocketWaitChannel("sk_wait_data\n"));
  EXPECT_FALSE(IsSocketWaitChannel("hrtimer_nanosleep"));
  EXPECT_FALSE(IsSocketWaitChannel("anon_pipe_read"));
  EXPECT_FALSE(IsSocketWaitChannel("0"));
  EXPECT_FALSE(IsSocketWaitChannel(""));
}

}  // namespace
}  // namespace grademl::collect
