#include "collect/process_events.h"

#include <errno.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace grademl::collect {

namespace {
// Header sizes as laid out on the wire (cn_msg ends in a flexible array).
constexpr size_t kCnMsgSize = offsetof(cn_msg, data);

// Sends one proc connector control message (listen or ignore).
bool SendControl(int fd, proc_cn_mcast_op op) {
  char buf[NLMSG_SPACE(kCnMsgSize + sizeof(op))] = {};
  auto* nl = reinterpret_cast<nlmsghdr*>(buf);
  nl->nlmsg_len = static_cast<uint32_t>(NLMSG_LENGTH(kCnMsgSize + sizeof(op)));
  nl->nlmsg_type = NLMSG_DONE;
  nl->nlmsg_pid = 0;
  cn_msg msg{};
  msg.id.idx = CN_IDX_PROC;
  msg.id.val = CN_VAL_PROC;
  msg.len = sizeof(op);
  std::memcpy(NLMSG_DATA(nl), &msg, kCnMsgSize);
  std::memcpy(static_cast<char*>(NLMSG_DATA(nl)) + kCnMsgSize, &op, sizeof(op));
  return send(fd, buf, nl->nlmsg_len, 0) == static_cast<ssize_t>(nl->nlmsg_len);
}
}  // namespace

std::unique_ptr<ProcessEvents> ProcessEvents::Open(std::string* error) {
  int fd = socket(PF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_CONNECTOR);
  if (fd < 0) {
    *error = std::string("no netlink connector socket: ") + std::strerror(errno);
    return nullptr;
  }
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  addr.nl_groups = CN_IDX_PROC;
  addr.nl_pid = 0;  // the kernel picks a port id
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *error = std::string("the kernel's process events need root or CAP_NET_ADMIN (") + std::strerror(errno) + ")";
    close(fd);
    return nullptr;
  }
  // Room for bursts (a shell loop forking fast): 4 MiB where allowed (root), else the default.
  int rcvbuf = 4 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  }
  if (!SendControl(fd, PROC_CN_MCAST_LISTEN)) {
    *error = std::string("the kernel's process events could not be subscribed to (") + std::strerror(errno) + ")";
    close(fd);
    return nullptr;
  }
  return std::unique_ptr<ProcessEvents>(new ProcessEvents(fd));
}

ProcessEvents::~ProcessEvents() {
  if (fd_ >= 0) {
    SendControl(fd_, PROC_CN_MCAST_IGNORE);
    close(fd_);
  }
}

void ParseProcessEventDatagram(const char* data, size_t size, std::vector<ProcessEvents::Event>* out) {
  size_t off = 0;
  while (off + NLMSG_HDRLEN <= size) {
    nlmsghdr nl;
    std::memcpy(&nl, data + off, sizeof nl);
    if (nl.nlmsg_len < NLMSG_HDRLEN || nl.nlmsg_len > size - off) return;
    const char* payload = data + off + NLMSG_HDRLEN;
    size_t payload_size = nl.nlmsg_len - NLMSG_HDRLEN;
    off += NLMSG_ALIGN(nl.nlmsg_len);
    if (nl.nlmsg_type == NLMSG_ERROR || nl.nlmsg_type == NLMSG_NOOP) continue;
    if (payload_size < kCnMsgSize) continue;
    cn_msg msg;
    std::memcpy(&msg, payload, kCnMsgSize);
    if (msg.id.idx != CN_IDX_PROC || msg.id.val != CN_VAL_PROC) continue;
    size_t event_size = std::min<size_t>(msg.len, payload_size - kCnMsgSize);
    proc_event ev;
    std::memset(&ev, 0, sizeof ev);
    std::memcpy(&ev, payload + kCnMsgSize, std::min(event_size, sizeof ev));
    // The fixed part (what, cpu, timestamp) and the event's own fields must be there.
    constexpr size_t kHead = offsetof(proc_event, event_data);
    switch (ev.what) {
      case proc_event::PROC_EVENT_FORK:
        if (event_size < kHead + sizeof ev.event_data.fork) continue;
        if (ev.event_data.fork.child_pid != ev.event_data.fork.child_tgid) continue;  // a thread
        out->push_back({.kind = ProcessEvents::Event::Kind::kFork,
                        .pid = ev.event_data.fork.child_tgid,
                        .parent = ev.event_data.fork.parent_tgid,
                        .monotonic_ns = static_cast<int64_t>(ev.timestamp_ns)});
        break;
      case proc_event::PROC_EVENT_EXEC:
        if (event_size < kHead + sizeof ev.event_data.exec) continue;
        out->push_back({.kind = ProcessEvents::Event::Kind::kExec,
                        .pid = ev.event_data.exec.process_tgid,
                        .monotonic_ns = static_cast<int64_t>(ev.timestamp_ns)});
        break;
      case proc_event::PROC_EVENT_EXIT:
        if (event_size < offsetof(proc_event, event_data.exit.parent_pid)) continue;
        if (ev.event_data.exit.process_pid != ev.event_data.exit.process_tgid) continue;  // a thread
        out->push_back({.kind = ProcessEvents::Event::Kind::kExit,
                        .pid = ev.event_data.exit.process_tgid,
                        .exit_status = static_cast<int>(ev.event_data.exit.exit_code),
                        .monotonic_ns = static_cast<int64_t>(ev.timestamp_ns)});
        break;
      default:
        break;
    }
  }
}

void ProcessEvents::Drain(std::vector<Event>* out, size_t max) {
  alignas(nlmsghdr) char buf[8192];
  size_t start = out->size();
  while (out->size() - start < max) {
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {  // the buffer overflowed: events were lost; go on reading
        ++lost_;
        continue;
      }
      return;  // EAGAIN: nothing more waits
    }
    if (n == 0) return;
    ParseProcessEventDatagram(buf, static_cast<size_t>(n), out);
  }
}

}  // namespace grademl::collect
