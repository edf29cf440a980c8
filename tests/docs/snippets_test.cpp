// The README and the user guide quote compiled examples. Every quote in README.md and in
// docs/**/*.md is introduced by
//   <!-- snippet: examples/<file>.cpp#<name> -->
// followed by a fenced code block, and must equal the lines between `// [<name>]` and
// `// [/<name>]` in that file. So the documents never show code that does not compile.
// scripts/update_snippets.py rewrites the quotes from the examples.

#include <gtest/gtest.h>

#include <algorithm>
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

// README.md and every .md file under docs/, in a stable order.
std::vector<fs::path> documents(const fs::path& root) {
  std::vector<fs::path> docs{root / "README.md"};
  for (const auto& entry : fs::recursive_directory_iterator(root / "docs"))
    if (entry.is_regular_file() && entry.path().extension() == ".md") docs.push_back(entry.path());
  std::sort(docs.begin() + 1, docs.end());
  return docs;
}

// Checks every quote of `doc` against its example; counts them in `quotes`.
void check_quotes(const fs::path& root, const fs::path& doc, int& quotes) {
  const auto lines = read_lines(doc);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string marker = "<!-- snippet: ";
    const auto at = lines[i].find(marker);
    if (at == std::string::npos) continue;
    const auto end = lines[i].find(" -->", at);
    ASSERT_NE(end, std::string::npos) << doc << ":" << i + 1;
    const std::string ref = lines[i].substr(at + marker.size(), end - at - marker.size());
    const auto hash = ref.find('#');
    ASSERT_NE(hash, std::string::npos) << ref;
    const fs::path file = root / ref.substr(0, hash);
    const std::string name = ref.substr(hash + 1);
    ASSERT_TRUE(fs::exists(file)) << doc << " quotes missing " << file;
    ASSERT_LT(i + 1, lines.size());
    ASSERT_EQ(lines[i + 1].rfind("```", 0), 0u)
        << doc << ":" << i + 2 << ": a fenced block must follow the marker";
    std::vector<std::string> quoted;
    std::size_t j = i + 2;
    for (; j < lines.size() && lines[j].rfind("```", 0) != 0; ++j) quoted.push_back(lines[j]);
    ASSERT_LT(j, lines.size()) << doc << ": unterminated block after " << ref;
    bool found = false;
    const auto expected = region(file, name, found);
    ASSERT_TRUE(found) << file << " has no region [" << name << "]";
    EXPECT_EQ(join(quoted), join(expected))
        << doc << " quote of " << ref << " differs from the example";
    ++quotes;
  }
}

TEST(Docs_Snippets, EveryQuoteMatchesItsCompiledExample) {
  const fs::path root = AKT_SOURCE_DIR;
  int guide_quotes = 0;
  for (const auto& doc : documents(root)) {
    SCOPED_TRACE(doc.string());
    int quotes = 0;
    check_quotes(root, doc, quotes);
    if (doc.parent_path().filename() == "guide") guide_quotes += quotes;
  }
  EXPECT_GT(guide_quotes, 0) << "the guide (docs/guide/) quotes no example";
}

// The README shows no C++ that is not compiled: each of its C++ blocks is a quote.
TEST(Docs_Snippets, EveryCppBlockOfTheReadmeIsAQuote) {
  const fs::path readme = fs::path(AKT_SOURCE_DIR) / "README.md";
  const auto lines = read_lines(readme);
  int blocks = 0;
  bool inside = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("```", 0) != 0) continue;
    if (inside) {
      inside = false;
      continue;
    }
    inside = true;
    if (lines[i] != "```cpp" && lines[i] != "```c++") continue;
    ++blocks;
    EXPECT_TRUE(i > 0 && lines[i - 1].find("<!-- snippet: ") != std::string::npos)
        << "README.md:" << i + 1 << ": a C++ block that is not quoted from examples/";
  }
  EXPECT_GT(blocks, 0) << "the README shows no C++";
}

}  // namespace
