// core/files: atomic writes, kforge's own-write registry and the folder listing that the HGEMM
// judge's cache check is built on (src/eval/hgemm_worker.cpp: cache_listing).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/files.hpp"

namespace kforge {
namespace {
namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "kforge-files-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void raw_write(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
}

// The cache check's rule: in-flight compile folders and the PyTorch builds are left out.
bool skip(const std::string& path, int depth) {
  const fs::path p(path);
  return (p.filename().string().rfind("tmp-", 0) == 0 && p.parent_path().filename() == "compile") ||
         (depth == 0 && p.filename() == "torch");
}

TEST(OwnWrites, AnAtomicWriteIsKforgesOwnUntilSomeoneElseTouchesIt) {
  TempDir d;
  const std::string f = (d.path / "a.json").string();
  write_file_atomic(f, "{}\n");
  FileStamp st;
  ASSERT_TRUE(stamp_of(f, st));
  EXPECT_TRUE(is_own_write(f, st));
  // The same spelling twice: a relative or unnormalised path names the same entry.
  EXPECT_TRUE(is_own_write((d.path / "." / "a.json").string(), st));
  usleep(20000);  // file times tick with the kernel's coarse clock (a few ms)
  raw_write(f, "{}\n");  // same size, same content, by another hand
  FileStamp after;
  ASSERT_TRUE(stamp_of(f, after));
  EXPECT_FALSE(is_own_write(f, after));
}

TEST(OwnWrites, MtimeSetBackStillShowsThroughTheStatusChangeTime) {
  TempDir d;
  const std::string f = (d.path / "k.so").string();
  write_file_atomic(f, std::string(128, 'x'));
  FileStamp before;
  ASSERT_TRUE(stamp_of(f, before));
  struct stat st {};
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  usleep(20000);  // a status-change time the clock's granularity can tell from the write's
  const int fd = ::open(f.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, 40), 1);
  ASSERT_EQ(::pwrite(fd, &b, 1, 40), 1);  // content unchanged
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::futimens(fd, times), 0);  // mtime set back
  ::close(fd);
  FileStamp after;
  ASSERT_TRUE(stamp_of(f, after));
  EXPECT_EQ(after.size, before.size);
  EXPECT_EQ(after.mtime_ns, before.mtime_ns);
  EXPECT_NE(after, before);
  EXPECT_FALSE(is_own_write(f, after));
}

TEST(FolderWatch, KforgesConcurrentWorkIsNotTamperingAPlantedOrRewrittenFileIs) {
  TempDir d;
  fs::create_directories(d.path / "compile" / "tmp-abc123");
  fs::create_directories(d.path / "torch" / "ext" / "0123");
  write_file_atomic((d.path / "compile" / "old.so").string(), std::string(100, 'o'));
  write_file_atomic((d.path / "ceilings-GPU.json").string(), "{\"tensor_tflops\": 989}\n");
  raw_write(d.path / "compile" / "tmp-abc123" / "out.so", "in flight");
  raw_write(d.path / "torch" / "ext" / "0123" / "m.so", "built by a worker");
  const std::string root = d.path.string();
  const auto before = list_files(root, skip);
  EXPECT_EQ(before.size(), 2u) << "only old.so and the ceilings file are watched";

  // kforge's own concurrent work: a compile finishes (its work folder goes, a new object is
  // published through the registry), an atomic write leaves a NAME.tmp.PID in passing, a torch
  // build writes under torch/.
  fs::remove_all(d.path / "compile" / "tmp-abc123");
  write_file_atomic((d.path / "compile" / "new.so").string(), "published");
  write_file_atomic((d.path / "compile" / "old.so").string(), std::string(100, 'n'));  // same key rebuilt
  raw_write(d.path / "compile" / "x.so.tmp.4242", "a writer's temporary");
  raw_write(d.path / "torch" / "ext" / "0123" / "m.so", "rebuilt");
  EXPECT_EQ(foreign_change(before, list_files(root, skip)).first, "");

  // Someone else: a planted object ...
  const auto mid = list_files(root, skip);
  raw_write(d.path / "compile" / "5eed.so", "\177ELF");
  auto [path, what] = foreign_change(mid, list_files(root, skip));
  EXPECT_EQ(what, "created");
  EXPECT_EQ(fs::path(path).filename(), "5eed.so");
  fs::remove(d.path / "compile" / "5eed.so");
  // ... a rewritten one ...
  usleep(20000);  // file times tick with the kernel's coarse clock (a few ms)
  raw_write(d.path / "ceilings-GPU.json", "{\"tensor_tflops\": 98}\n");
  std::tie(path, what) = foreign_change(mid, list_files(root, skip));
  EXPECT_EQ(what, "changed");
  EXPECT_EQ(fs::path(path).filename(), "ceilings-GPU.json");
  // ... and a removed one.
  fs::remove(d.path / "compile" / "new.so");
  write_file_atomic((d.path / "ceilings-GPU.json").string(), "{\"tensor_tflops\": 989}\n");
  std::tie(path, what) = foreign_change(mid, list_files(root, skip));
  EXPECT_EQ(what, "removed");
  EXPECT_EQ(fs::path(path).filename(), "new.so");

  // Deferred: objects another process may have published are handed on with their stamps.
  const auto now = list_files(root, skip);
  raw_write(d.path / "compile" / "other.so", "published by the parent process");
  std::vector<std::pair<std::string, FileStamp>> deferred;
  const auto in_compile = [](const std::string& p) { return fs::path(p).parent_path().filename() == "compile"; };
  EXPECT_EQ(foreign_change(now, list_files(root, skip), in_compile, &deferred).first, "");
  ASSERT_EQ(deferred.size(), 1u);
  EXPECT_EQ(fs::path(deferred[0].first).filename(), "other.so");
  FileStamp st;
  ASSERT_TRUE(stamp_of(deferred[0].first, st));
  EXPECT_EQ(deferred[0].second, st);
}

TEST(FolderWatch, TransientNames) {
  EXPECT_TRUE(is_transient_name("table.json.tmp.123"));
  EXPECT_TRUE(is_transient_name(".kforge-probe-AbC123"));
  EXPECT_FALSE(is_transient_name("0123abcd.so"));
  EXPECT_FALSE(is_transient_name("ceilings-GPU-1.json"));
}

}  // namespace
}  // namespace kforge
