#pragma once
// Reader for the drafting evaluation format (.tok, ../shared/data/drafting/README.md):
// "# <id> <category>", "P <prompt ids>", "R <response ids>" per record. Shared by the
// draft tests and `frugal-bench draft` (which includes it by relative path) so both read
// the file the same way.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <frugal/core/error.hpp>

namespace frugal::testing {

struct token_record {
    std::string id, category;
    std::vector<std::int32_t> prompt, response;
};

/// Reads up to `limit` records of a .tok file; a malformed line throws frugal::runtime_error.
inline std::vector<token_record> read_tok_file(const std::filesystem::path& path,
                                               std::size_t limit = std::numeric_limits<std::size_t>::max()) {
    std::ifstream in(path);
    if (!in) FRUGAL_FAIL(frugal::runtime_error, "cannot open token file ", path.string());
    std::vector<token_record> out;
    std::string line;
    std::size_t line_no = 0;
    auto ids = [&](const std::string& text, std::vector<std::int32_t>& dst) {
        std::istringstream s(text.substr(1));
        long long v = 0;
        while (s >> v) {
            if (v < 0 || v > std::numeric_limits<std::int32_t>::max())
                FRUGAL_FAIL(frugal::runtime_error, path.string(), ":", line_no, ": token ", v, " out of range");
            dst.push_back(static_cast<std::int32_t>(v));
        }
        if (!s.eof()) FRUGAL_FAIL(frugal::runtime_error, path.string(), ":", line_no, ": not a token id");
    };
    while (out.size() < limit && std::getline(in, line)) {
        ++line_no;
        if (line.empty()) continue;
        if (line[0] == '#') {
            out.emplace_back();
            std::istringstream s(line.substr(1));
            s >> out.back().id >> out.back().category;
        } else if (!out.empty() && line[0] == 'P') {
            ids(line, out.back().prompt);
        } else if (!out.empty() && line[0] == 'R') {
            ids(line, out.back().response);
        } else {
            FRUGAL_FAIL(frugal::runtime_error, path.string(), ":", line_no, ": unexpected line");
        }
    }
    if (out.size() == limit && std::getline(in, line) && !line.empty() && line[0] == 'R') {
        ++line_no;
        ids(line, out.back().response);
    }
    return out;
}

}  // namespace frugal::testing
