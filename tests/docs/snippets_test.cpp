// The user guide quotes compiled examples. Every quote in docs/**/*.md is introduced by
//   <!-- snippet: examples/<file>.cpp#<name> -->
// followed by a fenced code block, and must equal the lines between `// [<name>]` and
// `// [/<name>]` in that file. So the guide never shows code that does not compile.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string join(const std::vector<std::string>& lines) {
  std::ostringstream out;
  for (const auto& l : lines) out << l << '\n';
  return out.str();
}

// Lines strictly between the region markers, or nothing when the region is missing.
std::vector<std::string> region(const fs::path& file, const std::string& name, bool& found) {
  const auto lines = read_lines(file);
  std::vector<std::string> out;
  found = false;
  bool inside = false;
  for (const auto& l : lines) {
    const auto trimmed = l.substr(std::min(l.find_first_not_of(' '), l.size()));
    if (trimmed == "// [" + name + "]") {
      inside = true;
      found = true;
      continue;
    }
    if (trimmed == "// [/" + name + "]") break;
    if (inside) out.push_back(l);
  }
  return out;
}

TEST(Docs_Snippets, EveryQuoteMatchesItsCompiledExample) {
  const fs::path root = AKT_SOURCE_DIR;
  int quotes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root / "docs")) {
    if (entry.path().extension() != ".md") continue;
    const auto lines = read_lines(entry.path());
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const std::string marker = "<!-- snippet: ";
      const auto at = lines[i].find(marker);
      if (at == std::string::npos) continue;
      const auto end = lines[i].find(" -->", at);
      ASSERT_NE(end, std::string::npos) << entry.path() << ":" << i + 1;
      const std::string ref = lines[i].substr(at + marker.size(), end - at - marker.size());
      const auto hash = ref.find('#');
      ASSERT_NE(hash, std::string::npos) << ref;
      const fs::path file = root / ref.substr(0, hash);
      const std::string name = ref.substr(hash + 1);
      ASSERT_TRUE(fs::exists(file)) << entry.path() << " quotes missing " << file;
      ASSERT_LT(i + 1, lines.size());
      ASSERT_EQ(lines[i + 1].rfind("```", 0), 0u)
          << entry.path() << ":" << i + 2 << ": a fenced block must follow the marker";
      std::vector<std::string> quoted;
      std::size_t j = i + 2;
      for (; j < lines.size() && lines[j].rfind("```", 0) != 0; ++j) quoted.push_back(lines[j]);
      ASSERT_LT(j, lines.size()) << entry.path() << ": unterminated block after " << ref;
      bool found = false;
      const auto expected = region(file, name, found);
      ASSERT_TRUE(found) << file << " has no region [" << name << "]";
      EXPECT_EQ(join(quoted), join(expected))
          << entry.path() << " quote of " << ref << " differs from the example";
      ++quotes;
    }
  }
  EXPECT_GT(quotes, 0) << "the guide quotes no example";
}

}  // namespace
