// The ordinary build's side of a fuzz target (tests/fuzz/CMakeLists.txt): replays every file of
// the target's seed corpus (corpus/<target>/) and regression inputs (regressions/<target>/)
// through LLVMFuzzerTestOneInput, so the target keeps compiling and every input that once failed
// stays a test. A failing input aborts (or trips the sanitizers) after its path is printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

// The regular files of `dir`, sorted; none if it does not exist.
std::vector<fs::path> filesIn(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

void replay(const std::vector<fs::path>& files) {
  for (const fs::path& file : files) {
    std::cerr << "replaying " << file.string() << "\n";
    std::ifstream in(file, std::ios::binary);
    ASSERT_TRUE(in) << "cannot read " << file;
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
    // An empty vector's data() may be null: libFuzzer never passes null, so neither do we.
    const uint8_t empty = 0;
    const uint8_t* data =
        bytes.empty() ? &empty : reinterpret_cast<const uint8_t*>(bytes.data());
    LLVMFuzzerTestOneInput(data, bytes.size());
  }
}

const fs::path kTargetDir = fs::path(REGENT_FUZZ_DIR);

TEST(REGENT_FUZZ_SUITE, EverySeedOfTheCorpusRuns) {
  const auto seeds = filesIn(kTargetDir / "corpus" / REGENT_FUZZ_TARGET);
  ASSERT_FALSE(seeds.empty()) << "no seeds in " << (kTargetDir / "corpus" / REGENT_FUZZ_TARGET);
  replay(seeds);
}

TEST(REGENT_FUZZ_SUITE, EveryRegressionInputRuns) {
  replay(filesIn(kTargetDir / "regressions" / REGENT_FUZZ_TARGET));
}

}  // namespace
