#include "collect/process_stat.h"

#include "collect/proc_file.h"

namespace grademl::collect {

bool ParseProcessStat(std::string_view text, ProcessStat* out) {
  size_t open = text.find('(');
  size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return false;
  uint64_t pid = 0;
  if (!ParseU64(text.substr(0, open > 0 ? open - 1 : 0), &pid)) return false;
  out->pid = static_cast<int32_t>(pid);
  out->comm = text.substr(open + 1, close - open - 1);
  // Fields after the comm, numbered as in proc(5): 3 state, 4 ppid, ..., 14 utime.
  FieldScanner f(text.substr(close + 1));
  std::string_view state = f.Next();
  if (state.size() != 1) return false;
  out->state = state[0];
  uint64_t ppid = 0;
  if (!f.NextU64(&ppid)) return false;
  out->ppid = static_cast<int32_t>(ppid);
  f.Skip(5);  // 5 pgrp, 6 session, 7 tty_nr, 8 tpgid, 9 flags
  if (!f.NextU64(&out->minflt)) return false;                             // 10
  f.Skip(1);  // 11 cminflt
  if (!f.NextU64(&out->majflt)) return false;                             // 12
  f.Skip(1);  // 13 cmajflt
  if (!f.NextU64(&out->utime) || !f.NextU64(&out->stime)) return false;  // 14, 15
  int64_t cutime = 0, cstime = 0;
  if (!f.NextI64(&cutime) || !f.NextI64(&cstime)) return false;           // 16, 17
  out->cutime = static_cast<uint64_t>(cutime < 0 ? 0 : cutime);
  out->cstime = static_cast<uint64_t>(cstime < 0 ? 0 : cstime);
  f.Skip(2);  // 18 priority, 19 nice
  if (!f.NextI64(&out->num_threads)) return false;                        // 20
  f.Skip(1);  // 21 itrealvalue
  if (!f.NextU64(&out->starttime)) return false;                          // 22
  f.Skip(1);  // 23 vsize
  int64_t rss = 0;
  if (!f.NextI64(&rss)) return false;                                     // 24
  out->rss_pages = static_cast<uint64_t>(rss < 0 ? 0 : rss);
  return true;
}

bool ParseProcessIo(std::string_view text, ProcessIo* out) {
  return FindKeyedU64(text, "rchar", &out->rchar) && FindKeyedU64(text, "wchar", &out->wchar) &&
         FindKeyedU64(text, "read_bytes", &out->read_bytes) && FindKeyedU64(text, "write_bytes", &out->write_bytes);
}

bool ParseProcessSchedStat(std::string_view text, ProcessSchedStat* out) {
  FieldScanner f(text);
  return f.NextU64(&out->run_ns) && f.NextU64(&out->wait_ns) && f.NextU64(&out->timeslices);
}

bool ParseProcessContextSwitches(std::string_view text, ProcessContextSwitches* out) {
  return FindKeyedU64(text, "voluntary_ctxt_switches", &out->voluntary) &&
         FindKeyedU64(text, "nonvoluntary_ctxt_switches", &out->involuntary);
}

std::string FormatCmdline(std::string_view raw, size_t max_len) {
  while (!raw.empty() && raw.back() == '\0') raw.remove_suffix(1);
  std::string out;
  out.reserve(std::min(raw.size(), max_len));
  for (char c : raw) {
    if (out.size() >= max_len) {
      out.resize(max_len - 3);
      out += "...";
      break;
    }
    out += (c == '\0' || c == '\n' || c == '\t') ? ' ' : c;
  }
  return out;
}

bool IsSocketWaitChannel(std::string_view wchan) {
  while (!wchan.empty() && (wchan.back() == '\n' || wchan.back() == ' ')) wchan.remove_suffix(1);
  // wait_woken: TCP/UDP receive and send (sk_wait_data / sk_stream_wait_memory sleep there
  // on current kernels); the others name the socket waits of older kernels.
  for (std::string_view name : {"wait_woken", "sk_wait_data", "sk_stream_wait_memory", "sk_wait_event",
                                "__skb_wait_for_more_packets", "tcp_recvmsg", "tcp_recvmsg_locked"}) {
    if (wchan == name) return true;
  }
  return false;
}

bool ParseSmapsRollup(std::string_view text, ProcessMemoryRollup* out) {
  uint64_t rss_kb = 0, pss_kb = 0;
  if (!FindKeyedU64(text, "Rss", &rss_kb) || !FindKeyedU64(text, "Pss", &pss_kb)) return false;
  out->rss_bytes = rss_kb * 1024;
  out->pss_bytes = pss_kb * 1024;
  return true;
}

}  // namespace grademl::collect
