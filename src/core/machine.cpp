#include "core/machine.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>

namespace grademl {

std::string NewUuid() {
  std::random_device rd;
  std::uniform_int_distribution<uint32_t> dist;
  uint32_t a = dist(rd), b = dist(rd), c = dist(rd), d = dist(rd);
  b = (b & 0xffff0fffu) | 0x00004000u;  // RFC 4122 version 4
  c = (c & 0x3fffffffu) | 0x80000000u;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%04x%08x", a, b >> 16, b & 0xffff, c >> 16, c & 0xffff, d);
  return buf;
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

std::string MachineId() {
  for (const char* path : {"/etc/machine-id", "/var/lib/dbus/machine-id"}) {
    std::ifstream in(path);
    std::string id;
    if (in && std::getline(in, id) && !id.empty()) return id.substr(0, 64);
  }
  return "";
}

}  // namespace grademl
