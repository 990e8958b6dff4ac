// load_config: file-level checks (permissions, file type, size, I/O errors) before parsing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "lib/config/config.hh"
#include "lib/config/json_tree.hh"

namespace ferry::config {
namespace {

class LoadConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "ferry-config-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text, mode_t mode) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);  // explicit: the test must not depend on umask
    return path;
  }

  static ConfigError error_of(const std::string& path) {
    try {
      load_config(path);
    } catch (const ConfigError& e) {
      return e;
    }
    ADD_FAILURE() << "no error for " << path;
    return ConfigError("", -1, -1, "");
  }

  std::filesystem::path dir_;
};

TEST_F(LoadConfig, ReadsAPrivateFileAndRecordsItsPath) {
  std::string path = write("ok.json", R"({"log": {"level": "debug"}})", 0640);
  Config c = load_config(path);
  EXPECT_EQ(c.source_path, path);
  EXPECT_EQ(c.log.level, "debug");
}

TEST_F(LoadConfig, RefusesAFileWritableByOthers) {
  std::string path = write("o.json", "{}", 0646);
  ConfigError e = error_of(path);
  EXPECT_EQ(e.line(), 0);
  EXPECT_EQ(e.column(), 0);
  EXPECT_EQ(e.message(), "is writable by others; chmod go-w it");
  EXPECT_EQ(std::string(e.what()), path + ": is writable by others; chmod go-w it");
}

TEST_F(LoadConfig, RefusesAFileWritableByItsGroup) {
  std::string path = write("g.json", "{}", 0664);
  EXPECT_EQ(error_of(path).message(), "is writable by its group; chmod go-w it");
}

TEST_F(LoadConfig, RefusesADirectory) {
  ConfigError e = error_of(dir_.string());
  EXPECT_EQ(e.message(), "is not a regular file");
  EXPECT_EQ(e.file(), dir_.string());
}

TEST_F(LoadConfig, RefusesAFifoWithoutBlocking) {
  std::string path = (dir_ / "fifo.json").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_EQ(error_of(path).message(), "is not a regular file");
}

TEST_F(LoadConfig, ReportsAMissingFileWithStrerrorAtLineZero) {
  std::string path = (dir_ / "missing.json").string();
  ConfigError e = error_of(path);
  EXPECT_EQ(e.line(), 0);
  EXPECT_EQ(e.column(), 0);
  EXPECT_EQ(e.message(), "cannot open: No such file or directory");
  EXPECT_EQ(std::string(e.what()), path + ": cannot open: No such file or directory");
}

TEST_F(LoadConfig, RefusesAFileLargerThanOneMebibyte) {
  std::string path = write("big.json", "{}" + std::string(kMaxConfigBytes, ' '), 0644);
  EXPECT_EQ(error_of(path).message(),
            "file is 1048578 bytes; a config may be at most 1048576 bytes (1 MiB)");
}

TEST_F(LoadConfig, SchemaErrorsCarryThePathLineAndColumn) {
  std::string path =
      write("bad.json", "{\n  \"metrics\": { \"listen\": \"127.0.0.1:99999\" }\n}\n", 0600);
  ConfigError e = error_of(path);
  EXPECT_EQ(e.file(), path);
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.column(), 26);
  EXPECT_EQ(std::string(e.what()),
            path +
                ":2:26: metrics.listen: '127.0.0.1:99999' is not ADDRESS:PORT (e.g. "
                "\"127.0.0.1:9469\" or \"[::1]:9469\")");
}

}  // namespace
}  // namespace ferry::config
