// The importers' bounds against hostile files (docs/import.md, "Limits"): files that are not
// regular files are refused before a byte is read, compression bombs end with a one-line
// error, slices nested deeper than the bound are dropped with one line naming the first, and
// a file with more events than the bound stops with one line naming the byte. Every fixture
// is generated here; expectations are counted from how the fixture was made.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "importers/chrome_json/chrome_importer.h"
#include "importers/importer.h"
#include "importers/trace_input.h"
#include "model/run.h"
#include "model/run_builder.h"

namespace grademl::importers {
namespace import_limits {

std::string TempDir(const std::string& name) {
  std::string dir = std::filesystem::temp_directory_path() / ("gm_import_limits_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string Zstd(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 19);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

std::string Gzip(const std::string& text) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// `depth` identical B events on one thread (all at ts 0), then their E events (all at ts 1): each
// B inside the last (equal times nest in file order), as the bomb.
std::string NestedTrace(int depth) {
  std::string t = "{\"traceEvents\": [\n";
  for (int i = 0; i < depth; ++i) t += "{\"ph\":\"B\",\"name\":\"x\",\"cat\":\"c\",\"ts\":0,\"pid\":1,\"tid\":1},\n";
  for (int i = 0; i < depth; ++i) {
    t += "{\"ph\":\"E\",\"ts\":1,\"pid\":1,\"tid\":1}";
    t += i + 1 < depth ? ",\n" : "\n";
  }
  return t + "]}\n";
}

struct Imported {
  StatusOr<ImportResult> result = Internal("not run");
  model::RunDelta delta;
};

Imported Import(const std::string& bytes, const std::string& name, int64_t max_events = 0) {
  Imported out;
  model::RunBuilder builder(model::RunInfo{});
  ImportTarget target;
  target.builder = &builder;
  target.under = builder.BeginPhase({.parent = 0, .name = "root", .type = "run", .start_ns = 1});
  target.align_start_ns = 1'000'000'000'000'000'000;
  target.max_events = max_events;
  out.result = ImportTraceBytes(bytes, name, target);
  out.delta = builder.TakeDelta(true);
  return out;
}

int64_t StatCount(const model::RunDelta& delta, const std::string& reason) {
  int64_t n = 0;
  for (const auto& s : delta.ingest_stats) {
    if (s.reason == reason) n += s.count;
  }
  return n;
}

TEST(ImportLimitsTest, AFifoIsRefusedAtOnceNamingIt) {
  const std::string dir = TempDir("fifo");
  const std::string fifo = dir + "/trace.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // Before: open() waited for a writer that never came. The alarm kills the test binary
  // (a failure) instead of hanging it if that comes back.
  alarm(60);
  auto opened = TraceInput::Open(fifo);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find(fifo), std::string::npos) << opened.status().message();
  EXPECT_NE(opened.status().message().find("FIFO"), std::string::npos) << opened.status().message();
  EXPECT_EQ(opened.status().message().find('\n'), std::string::npos);

  model::RunBuilder builder(model::RunInfo{});
  ImportTarget target;
  target.builder = &builder;
  target.under = builder.BeginPhase({.parent = 0, .name = "root", .type = "run", .start_ns = 1});
  auto imported = ImportTraceFile(fifo, target);
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("not a regular file"), std::string::npos) << imported.status().message();
  alarm(0);
  EXPECT_TRUE(builder.TakeDelta(true).sources.empty());
  std::filesystem::remove_all(dir);
}

TEST(ImportLimitsTest, DevicesAreRefusedBeforeAByteIsRead) {
  // /dev/zero would be read forever (an endless run of NULs, each chunk "not yet an event").
  auto zero = TraceInput::Open("/dev/zero");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("/dev/zero: a character device, not a regular file"), std::string::npos)
      << zero.status().message();
  auto dir = TraceInput::Open("/");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("a directory"), std::string::npos) << dir.status().message();
}

TEST(ImportLimitsTest, ARegularFileStillOpens) {
  const std::string dir = TempDir("regular");
  const std::string path = dir + "/t.json.zst";
  const std::string bytes = Zstd(NestedTrace(3));
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  auto opened = TraceInput::Open(path);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  EXPECT_EQ((*opened)->compression(), "zstd");
  std::string all = ReadHead(**opened, size_t{1} << 20);
  EXPECT_EQ(all, NestedTrace(3));
  std::filesystem::remove_all(dir);
}

// A compressed stream of `spaces` blanks inside a trace's array, compressed as it is produced.
std::string ZstdOfBlanks(uint64_t spaces) {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1);
  std::string out;
  std::string chunk(size_t{1} << 20, ' ');
  std::string buf(ZSTD_CStreamOutSize(), '\0');
  auto feed = [&](std::string_view in, ZSTD_EndDirective mode) {
    ZSTD_inBuffer ib{in.data(), in.size(), 0};
    for (;;) {
      ZSTD_outBuffer ob{buf.data(), buf.size(), 0};
      size_t left = ZSTD_compressStream2(c, &ob, &ib, mode);
      EXPECT_FALSE(ZSTD_isError(left));
      out.append(buf.data(), ob.pos);
      if (mode == ZSTD_e_end ? left == 0 : ib.pos == ib.size) break;
    }
  };
  feed("{\"traceEvents\": [", ZSTD_e_continue);
  for (uint64_t done = 0; done < spaces; done += chunk.size()) feed(chunk, ZSTD_e_continue);
  feed("]}", ZSTD_e_end);
  ZSTD_freeCCtx(c);
  return out;
}

std::string GzipOfBlanks(uint64_t spaces) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out;
  std::string chunk(size_t{1} << 20, ' ');
  std::string buf(size_t{1} << 16, '\0');
  auto feed = [&](std::string_view in, int flush) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf.data());
      z.avail_out = static_cast<uInt>(buf.size());
      deflate(&z, flush);
      out.append(buf.data(), buf.size() - z.avail_out);
    } while (z.avail_out == 0 || z.avail_in > 0);
  };
  feed("{\"traceEvents\": [", Z_NO_FLUSH);
  for (uint64_t done = 0; done < spaces; done += chunk.size()) feed(chunk, Z_NO_FLUSH);
  feed("]}", Z_FINISH);
  deflateEnd(&z);
  return out;
}

// Reads all of `bytes` through TraceInput; the error that ended it, if any.
Status Drain(const std::string& bytes, const std::string& name, uint64_t* read) {
  auto input = TraceInput::FromMemory(bytes, name);
  if (!input.ok()) return input.status();
  for (;;) {
    auto chunk = (*input)->Next();
    if (!chunk.ok()) {
      *read = (*input)->offset();
      return chunk.status();
    }
    if (chunk->empty()) break;
  }
  *read = (*input)->offset();
  return Status::Ok();
}

TEST(ImportLimitsTest, CompressionBombsEndWithOneLinePastAGiB) {
  const uint64_t gib = uint64_t{1} << 30;
  for (bool gzip : {false, true}) {
    SCOPED_TRACE(gzip ? "gzip" : "zstd");
    const uint64_t spaces = gib + (gib / 4);  // 1.25 GiB of blanks from about a MiB (gzip) or less (zstd)
    const std::string bomb = gzip ? GzipOfBlanks(spaces) : ZstdOfBlanks(spaces);
    ASSERT_LT(bomb.size(), spaces / 500);  // what makes it a bomb
    uint64_t read = 0;
    Status s = Drain(bomb, "bomb.json", &read);
    ASSERT_FALSE(s.ok()) << "decompressed all " << read << " bytes";
    EXPECT_NE(s.message().find("bomb.json: byte "), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("compression bomb"), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos);
    EXPECT_GT(read, gib);                          // the floor: below it nothing is refused
    EXPECT_LT(read, gib + (uint64_t{64} << 20));   // refused soon after it, not at the end
    // And as a whole import: the error is the import's, nothing imported.
    Imported im = Import(bomb, "bomb.json");
    ASSERT_FALSE(im.result.ok() && !im.result->partial);
    const std::string message = im.result.ok() ? im.result->error.message() : im.result.status().message();
    EXPECT_NE(message.find("compression bomb"), std::string::npos) << message;
  }
}

TEST(ImportLimitsTest, ATraceThatCompressesWellIsNotABomb) {
  // 64 MiB of identical events (well under the floor) compress to less than a thousandth of
  // their size with zstd: read whole.
  std::string text = "{\"traceEvents\": [\n";
  const std::string event = "{\"ph\":\"i\",\"name\":\"x\",\"ts\":1,\"pid\":1,\"tid\":1},\n";
  while (text.size() < (size_t{64} << 20)) text += event;
  text += "{\"ph\":\"i\",\"name\":\"x\",\"ts\":1,\"pid\":1,\"tid\":1}]}";
  uint64_t read = 0;
  EXPECT_TRUE(Drain(Zstd(text), "ok.json", &read).ok());
  EXPECT_EQ(read, text.size());
}

TEST(ImportLimitsTest, NestingDeeperThanTheBoundIsDroppedWithOneLine) {
  // The bomb: 16,000 nested identical events (2.6 KB as gzip). Before, each phase
  // stored its whole type path; now the first kMaxNestingDepth levels are imported and the
  // rest counted, with one line naming the first event too deep.
  const int depth = 16000;
  const int bound = chrome_json::ChromeTraceImporter::kMaxNestingDepth;
  ASSERT_LT(bound, depth);
  for (int compression = 0; compression < 3; ++compression) {
    SCOPED_TRACE(compression);
    const std::string text = NestedTrace(depth);
    const std::string bytes = compression == 0 ? text : compression == 1 ? Gzip(text) : Zstd(text);
    if (compression > 0) {
      EXPECT_LT(bytes.size(), size_t{64} << 10);
    }
    Imported im = Import(bytes, "deep.json");
    ASSERT_TRUE(im.result.ok()) << im.result.status().message();
    EXPECT_TRUE(im.result->partial);
    const std::string message = im.result->error.message();
    // The (bound+1)-th B in file order is the first too deep: event bound + 1.
    EXPECT_NE(message.find("deep.json: event " + std::to_string(bound + 1) + ": slices nested more than " +
                           std::to_string(bound) + " deep"),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find('\n'), std::string::npos);
    EXPECT_EQ(im.result->events, 2 * depth);
    EXPECT_EQ(im.result->phases, bound + 1);  // the slices within the bound and the process phase
    EXPECT_EQ(StatCount(im.delta, "slice_nested_too_deep"), depth - bound);
    EXPECT_EQ(im.result->dropped, depth - bound);
    // The deepest phase kept has its type path bounded as any other (RunBuilder::kMaxTypePathBytes).
    size_t longest = 0;
    for (const auto& p : im.delta.phases) longest = std::max(longest, p.type.size());
    EXPECT_LE(longest, model::RunBuilder::kMaxTypePathBytes + 16);
  }
}

TEST(ImportLimitsTest, NestingAtTheBoundIsImportedWhole) {
  const int bound = chrome_json::ChromeTraceImporter::kMaxNestingDepth;
  Imported im = Import(NestedTrace(bound), "at_bound.json");
  ASSERT_TRUE(im.result.ok()) << im.result.status().message();
  EXPECT_FALSE(im.result->partial) << im.result->error.message();
  EXPECT_EQ(im.result->phases, bound + 1);
  EXPECT_EQ(im.result->dropped, 0);
}

TEST(ImportLimitsTest, MoreEventsThanTheBoundStopWithOneLineNamingTheByte) {
  std::string text = "{\"traceEvents\": [\n";
  std::vector<size_t> offsets;
  for (int i = 0; i < 100; ++i) {
    offsets.push_back(text.size());
    text += "{\"ph\":\"X\",\"name\":\"e\",\"ts\":" + std::to_string(10 * i) + ",\"dur\":1,\"pid\":1,\"tid\":1}";
    text += i + 1 < 100 ? ",\n" : "\n";
  }
  text += "]}";
  Imported im = Import(Gzip(text), "many.json", 40);
  ASSERT_TRUE(im.result.ok()) << im.result.status().message();
  EXPECT_TRUE(im.result->partial);
  EXPECT_EQ(im.result->events, 40);
  EXPECT_EQ(im.result->phases, 41);  // 40 slices and their process
  // The 41st event's '{' (an offset in the uncompressed text).
  EXPECT_NE(im.result->error.message().find("many.json: byte " + std::to_string(offsets[40]) + ": more than 40 events"),
            std::string::npos)
      << im.result->error.message();
  // Without the bound given, the importer's own applies, far above this file.
  Imported whole = Import(Gzip(text), "many.json");
  ASSERT_TRUE(whole.result.ok());
  EXPECT_FALSE(whole.result->partial);
  EXPECT_EQ(whole.result->events, 100);
  static_assert(chrome_json::ChromeTraceImporter::kMaxEventsPerFile >= 10'000'000);
}

}  // namespace import_limits
}  // namespace grademl::importers
