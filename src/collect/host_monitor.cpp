#include "collect/host_monitor.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <system_error>

#include "model/metric_names.h"
#include "core/strings.h"

namespace grademl::collect {

namespace metric = model::metric;
using model::ResourceId;
using model::ResourceKind;
using model::SeriesId;
using model::SeriesKind;

namespace {

// Beyond this a "cpuN" index is taken for garbage rather than a CPU.
constexpr int kMaxCpuIndex = 1 << 16;

// The line starting at *pos (without its '\n'); advances *pos past it.
std::string_view NextLine(std::string_view text, size_t* pos) {
  size_t eol = text.find('\n', *pos);
  if (eol == std::string_view::npos) eol = text.size();
  std::string_view line = text.substr(*pos, eol - *pos);
  *pos = eol + 1;
  return line;
}

// The tick fields of a "cpuN user nice system idle iowait irq softirq steal ..." line of
// /proc/stat. Fields an old kernel does not have read as 0.
struct CpuTicks {
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
};

// Parses a per-CPU line; false for the aggregate "cpu " line and for anything malformed.
bool ParseCpuLine(std::string_view line, int* index, CpuTicks* ticks) {
  FieldScanner fields(line);
  std::string_view name = fields.Next();
  if (name.size() < 4 || !StartsWith(name, "cpu")) return false;
  const char* end = name.data() + name.size();
  auto [ptr, ec] = std::from_chars(name.data() + 3, end, *index);
  if (ec != std::errc() || ptr != end || *index < 0 || *index > kMaxCpuIndex) return false;
  uint64_t v[8] = {};
  int n = 0;
  while (n < 8 && fields.NextU64(&v[n])) ++n;
  if (n < 4) return false;  // user nice system idle exist on every kernel
  *ticks = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
  return true;
}

// MemTotal and MemAvailable in bytes. Kernels before 3.14 have no MemAvailable; there
// MemFree + Buffers + Cached stands in for it.
bool ParseMeminfo(std::string_view text, uint64_t* total, uint64_t* available) {
  uint64_t total_kb = 0, available_kb = 0;
  if (!FindKeyedU64(text, "MemTotal", &total_kb)) return false;
  if (!FindKeyedU64(text, "MemAvailable", &available_kb)) {
    uint64_t free_kb = 0, buffers_kb = 0, cached_kb = 0;
    if (!FindKeyedU64(text, "MemFree", &free_kb)) return false;
    FindKeyedU64(text, "Buffers", &buffers_kb);
    FindKeyedU64(text, "Cached", &cached_kb);
    available_kb = free_kb + buffers_kb + cached_kb;
  }
  *total = total_kb * 1024;
  *available = std::min(available_kb, total_kb) * 1024;
  return true;
}

// A /proc/diskstats line: "major minor name reads merged sectors_read ms_read writes merged
// sectors_written ms_written in_flight io_ticks ...". Sectors are 512 bytes whatever the device.
struct DiskLine {
  std::string_view name;
  uint64_t sectors_read = 0, sectors_written = 0, io_ticks_ms = 0;
};

bool ParseDiskLine(std::string_view line, DiskLine* out) {
  FieldScanner fields(line);
  fields.Skip(2);
  out->name = fields.Next();
  if (out->name.empty()) return false;
  uint64_t v[10];
  for (uint64_t& x : v)
    if (!fields.NextU64(&x)) return false;
  out->sectors_read = v[2];
  out->sectors_written = v[6];
  out->io_ticks_ms = v[9];
  return true;
}

// A /proc/net/dev line: "  name: rx_bytes rx_packets ... (8 rx fields) tx_bytes ...".
// Old kernels print no space after the colon once the number is wide.
struct NetLine {
  std::string_view name;
  uint64_t rx_bytes = 0, tx_bytes = 0;
};

bool ParseNetLine(std::string_view line, NetLine* out) {
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return false;  // the two header lines
  out->name = TrimSpace(line.substr(0, colon));
  if (out->name.empty()) return false;
  FieldScanner fields(line.substr(colon + 1));
  uint64_t v[9];
  for (uint64_t& x : v)
    if (!fields.NextU64(&x)) return false;
  out->rx_bytes = v[0];
  out->tx_bytes = v[8];
  return true;
}

// Finds the entry named `name`, trying *hint first: lines come in the same order every
// pass, so the hint almost always hits and the lookup is one comparison.
template <typename T>
T* FindByName(std::vector<T>& items, std::string_view name, size_t* hint) {
  if (*hint < items.size() && items[*hint].name == name) return &items[(*hint)++];
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].name == name) {
      *hint = i + 1;
      return &items[i];
    }
  }
  return nullptr;
}

// Whole disks worth watching: /sys/block lists whole disks only (no partitions); loop, RAM
// and compressed-RAM devices are not storage.
std::vector<std::string> ListBlockDevices(const std::string& sys_root) {
  std::vector<std::string> names;
  std::error_code ec;
  std::filesystem::directory_iterator it(sys_root + "/block", ec);
  if (ec) return names;
  for (const auto& entry : it) {
    std::string name = entry.path().filename().string();
    if (StartsWith(name, "loop") || StartsWith(name, "ram") || StartsWith(name, "zram")) continue;
    names.push_back(std::move(name));
  }
  return names;
}

// Link speed in bytes/s from /sys/class/net/IF/speed (Mbit/s), or kNoCapacity when the file
// is missing, unreadable (EINVAL for lo and down links) or not positive (-1: unknown).
double LinkCapacity(const std::string& sys_root, const std::string& interface) {
  auto text = ReadFileOnce(sys_root + "/class/net/" + interface + "/speed");
  if (!text.ok()) return model::kNoCapacity;
  std::string_view s = TrimSpace(*text);
  int64_t mbit = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), mbit);
  if (ec != std::errc() || ptr != s.data() + s.size() || mbit <= 0) return model::kNoCapacity;
  return static_cast<double>(mbit) * 125000.0;
}

}  // namespace

HostMonitor::HostMonitor(model::RunBuilder* builder, model::ResourceId host_resource, std::string host,
                         std::string proc_root, std::string sys_root)
    : builder_(builder),
      host_resource_(host_resource),
      host_(std::move(host)),
      proc_root_(std::move(proc_root)),
      sys_root_(std::move(sys_root)) {
  long tck = ::sysconf(_SC_CLK_TCK);
  if (tck > 0) ticks_per_second_ = static_cast<double>(tck);
}

Status HostMonitor::Init() {
  GRADEML_CHECK_MSG(!stat_.is_open(), "HostMonitor::Init called twice");

  // Discover everything first, declare afterwards: a failure declares nothing.
  GRADEML_ASSIGN_OR_RETURN(ProcFile stat, ProcFile::Open(proc_root_ + "/stat"));
  GRADEML_ASSIGN_OR_RETURN(std::string_view stat_text, stat.Read());
  std::vector<int> cpu_indexes;
  size_t pos = 0;
  while (pos < stat_text.size()) {
    std::string_view line = NextLine(stat_text, &pos);
    if (!StartsWith(line, "cpu")) break;  // the cpu lines come first
    int index = 0;
    CpuTicks ticks;
    if (ParseCpuLine(line, &index, &ticks)) cpu_indexes.push_back(index);
  }
  if (cpu_indexes.empty()) return Corrupt("{}: no per-CPU lines", stat.path());

  GRADEML_ASSIGN_OR_RETURN(ProcFile meminfo, ProcFile::Open(proc_root_ + "/meminfo"));
  GRADEML_ASSIGN_OR_RETURN(std::string_view meminfo_text, meminfo.Read());
  uint64_t mem_total = 0, mem_available = 0;
  if (!ParseMeminfo(meminfo_text, &mem_total, &mem_available) || mem_total == 0)
    return Corrupt("{}: no MemTotal", meminfo.path());

  // Disks: in /sys/block and in /proc/diskstats, in diskstats order.
  std::vector<std::string> disk_names;
  auto diskstats = ProcFile::Open(proc_root_ + "/diskstats");
  if (diskstats.ok()) {
    std::vector<std::string> block = ListBlockDevices(sys_root_);
    if (auto text = diskstats->Read(); text.ok()) {
      pos = 0;
      while (pos < text->size()) {
        DiskLine d;
        if (!ParseDiskLine(NextLine(*text, &pos), &d)) continue;
        if (std::find(block.begin(), block.end(), d.name) != block.end() &&
            std::find(disk_names.begin(), disk_names.end(), d.name) == disk_names.end())
          disk_names.emplace_back(d.name);
      }
    }
  }

  // Interfaces: every one in /proc/net/dev, lo included.
  std::vector<std::string> net_names;
  auto netdev = ProcFile::Open(proc_root_ + "/net/dev");
  if (netdev.ok()) {
    if (auto text = netdev->Read(); text.ok()) {
      pos = 0;
      while (pos < text->size()) {
        NetLine n;
        if (ParseNetLine(NextLine(*text, &pos), &n) &&
            std::find(net_names.begin(), net_names.end(), n.name) == net_names.end())
          net_names.emplace_back(n.name);
      }
    }
  }

  // Declare.
  auto resource = [&](ResourceId parent, ResourceKind kind, std::string name) {
    return builder_->AddResource({.parent = parent, .kind = kind, .name = std::move(name), .host = host_});
  };
  auto series = [&](ResourceId r, std::string_view name, std::string_view unit, SeriesKind kind,
                    double capacity) -> SeriesId {
    return builder_->AddSeries({.resource = r,
                                .name = std::string(name),
                                .unit = std::string(unit),
                                .kind = kind,
                                .capacity = capacity});
  };
  constexpr SeriesKind kCounter = SeriesKind::kCounter;
  constexpr SeriesKind kGauge = SeriesKind::kGauge;

  ResourceId cpu = resource(host_resource_, ResourceKind::kCpu, "cpu");
  for (int index : cpu_indexes) {
    if (static_cast<size_t>(index) < core_slot_.size() && core_slot_[index] >= 0) continue;  // duplicate line
    ResourceId r = resource(cpu, ResourceKind::kCore, "cpu" + std::to_string(index));
    Core core;
    core.index = index;
    core.user.id = series(r, metric::kCoreUser, metric::kUnitSeconds, kCounter, 1);
    core.system.id = series(r, metric::kCoreSystem, metric::kUnitSeconds, kCounter, 1);
    core.iowait.id = series(r, metric::kCoreIowait, metric::kUnitSeconds, kCounter, 1);
    core.steal.id = series(r, metric::kCoreSteal, metric::kUnitSeconds, kCounter, 1);
    core.idle.id = series(r, metric::kCoreIdle, metric::kUnitSeconds, kCounter, 1);
    if (static_cast<size_t>(index) >= core_slot_.size()) core_slot_.resize(index + 1, -1);
    core_slot_[index] = static_cast<int>(cores_.size());
    cores_.push_back(core);
  }

  ResourceId memory = resource(host_resource_, ResourceKind::kMemory, "memory");
  double mem_capacity = static_cast<double>(mem_total);
  mem_used_ = series(memory, metric::kMemUsed, metric::kUnitBytes, kGauge, mem_capacity);
  mem_available_ = series(memory, metric::kMemAvailable, metric::kUnitBytes, kGauge, mem_capacity);

  for (const std::string& name : disk_names) {
    ResourceId r = resource(host_resource_, ResourceKind::kDisk, name);
    Disk disk;
    disk.name = name;
    disk.read_bytes.id = series(r, metric::kDiskReadBytes, metric::kUnitBytes, kCounter, model::kNoCapacity);
    disk.write_bytes.id = series(r, metric::kDiskWriteBytes, metric::kUnitBytes, kCounter, model::kNoCapacity);
    disk.busy_ms.id = series(r, metric::kDiskBusy, metric::kUnitSeconds, kCounter, 1);
    disks_.push_back(std::move(disk));
  }

  for (const std::string& name : net_names) {
    ResourceId r = resource(host_resource_, ResourceKind::kNet, name);
    double capacity = LinkCapacity(sys_root_, name);
    Net net;
    net.name = name;
    net.rx_bytes.id = series(r, metric::kNetRxBytes, metric::kUnitBytes, kCounter, capacity);
    net.tx_bytes.id = series(r, metric::kNetTxBytes, metric::kUnitBytes, kCounter, capacity);
    nets_.push_back(std::move(net));
  }

  stat_ = std::move(stat);
  meminfo_ = std::move(meminfo);
  if (!disks_.empty()) diskstats_ = std::move(*diskstats);
  if (!nets_.empty()) netdev_ = std::move(*netdev);
  return Status::Ok();
}

void HostMonitor::Sample(TimeNs now) {
  SampleCpu(now);
  SampleMemory(now);
  if (!disks_.empty()) SampleDisks(now);
  if (!nets_.empty()) SampleNet(now);
}

void HostMonitor::AddTicks(Counter& c, uint64_t ticks, TimeNs now) {
  if (ticks < c.last_raw) ticks = c.last_raw;
  c.last_raw = ticks;
  builder_->AddSample(c.id, now, static_cast<double>(ticks) / ticks_per_second_);
}

void HostMonitor::AddRebased(Counter& c, uint64_t raw, double scale, TimeNs now) {
  if (raw < c.last_raw) c.offset += c.last_raw;
  c.last_raw = raw;
  builder_->AddSample(c.id, now, static_cast<double>(raw + c.offset) * scale);
}

void HostMonitor::SampleCpu(TimeNs now) {
  auto text = stat_.Read();
  if (!text.ok()) return;
  size_t pos = 0;
  while (pos < text->size()) {
    std::string_view line = NextLine(*text, &pos);
    if (!StartsWith(line, "cpu")) break;  // past the cpu lines: skip intr, softirq, ...
    int index = 0;
    CpuTicks t;
    if (!ParseCpuLine(line, &index, &t)) continue;
    if (static_cast<size_t>(index) >= core_slot_.size() || core_slot_[index] < 0) continue;  // came online later
    Core& core = cores_[core_slot_[index]];
    AddTicks(core.user, t.user + t.nice, now);
    AddTicks(core.system, t.system + t.irq + t.softirq, now);
    AddTicks(core.iowait, t.iowait, now);
    AddTicks(core.steal, t.steal, now);
    AddTicks(core.idle, t.idle, now);
  }
}

void HostMonitor::SampleMemory(TimeNs now) {
  auto text = meminfo_.Read();
  if (!text.ok()) return;
  uint64_t total = 0, available = 0;
  if (!ParseMeminfo(*text, &total, &available)) return;
  builder_->AddSample(mem_used_, now, static_cast<double>(total - available));
  builder_->AddSample(mem_available_, now, static_cast<double>(available));
}

void HostMonitor::SampleDisks(TimeNs now) {
  auto text = diskstats_.Read();
  if (!text.ok()) return;
  size_t pos = 0, hint = 0;
  while (pos < text->size()) {
    DiskLine d;
    if (!ParseDiskLine(NextLine(*text, &pos), &d)) continue;
    Disk* disk = FindByName(disks_, d.name, &hint);
    if (disk == nullptr) continue;  // a partition, a loop device, or a disk added later
    AddRebased(disk->read_bytes, d.sectors_read, 512, now);
    AddRebased(disk->write_bytes, d.sectors_written, 512, now);
    AddRebased(disk->busy_ms, d.io_ticks_ms, 1e-3, now);
  }
}

void HostMonitor::SampleNet(TimeNs now) {
  auto text = netdev_.Read();
  if (!text.ok()) return;
  size_t pos = 0, hint = 0;
  while (pos < text->size()) {
    NetLine n;
    if (!ParseNetLine(NextLine(*text, &pos), &n)) continue;
    Net* net = FindByName(nets_, n.name, &hint);
    if (net == nullptr) continue;  // an interface added later
    AddRebased(net->rx_bytes, n.rx_bytes, 1, now);
    AddRebased(net->tx_bytes, n.tx_bytes, 1, now);
  }
}

}  // namespace grademl::collect
