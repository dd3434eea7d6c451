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

#include <chrono>
#include <span>

#include <frugal/draft/verify.hpp>

namespace frugal::testing {

/// Totals of an offline replay (../shared/data/drafting/README.md): the response is the
/// model's greedy output; each step drafts, accepts the longest matching prefix (or tree
/// path) plus one bonus token, and is one verification pass.
struct replay_stats {
    std::size_t records = 0, tokens = 0, steps = 0, drafted = 0, accepted = 0;
    std::vector<double> draft_us;       // one per step
    [[nodiscard]] double mat() const { return steps ? double(tokens) / double(steps) : 0.0; }
    void merge(const replay_stats& o) {
        records += o.records, tokens += o.tokens, steps += o.steps, drafted += o.drafted, accepted += o.accepted;
        draft_us.insert(draft_us.end(), o.draft_us.begin(), o.draft_us.end());
    }
};

/// Verifies one step's draft against a record whose first `pos` response tokens are
/// accepted: the model's greedy prediction after a node at depth d is response[pos + d]
/// (past the end, EOS: -1 here, which no draft token equals). Adds the step to `s` and
/// returns how many tokens it emits (the accepted path plus the bonus token).
inline std::size_t replay_step(const token_record& r, std::size_t pos, const frugal::draft::draft_tree<std::int32_t>& tree,
                               replay_stats& s) {
    std::vector<std::int32_t> predictions(tree.size() + 1, -1);
    std::vector<std::size_t> depth(tree.size(), 0);
    const std::size_t remaining = r.response.size() - pos;
    predictions[0] = r.response[pos];
    for (std::size_t i = 0; i < tree.size(); ++i) {
        depth[i] = tree.parents[i] < 0 ? 1 : depth[std::size_t(tree.parents[i])] + 1;
        if (depth[i] < remaining) predictions[i + 1] = r.response[pos + depth[i]];
    }
    const auto v = frugal::draft::verify_tree(tree, std::span<const std::int32_t>(predictions));
    ++s.steps;
    s.drafted += tree.size();
    s.accepted += v.accepted;
    return std::min(v.accepted + 1, remaining);
}

/// Replays one record. `begin(prompt)` and `accept(tokens)` feed the drafter; `draft()`
/// returns the step's draft as a draft_tree (a chain is a path) and is timed.
template <class Begin, class Draft, class Accept>
replay_stats replay_record(const token_record& r, Begin&& begin, Draft&& draft, Accept&& accept) {
    using clock = std::chrono::steady_clock;
    replay_stats s;
    s.records = 1;
    s.tokens = r.response.size();
    begin(std::span<const std::int32_t>(r.prompt));
    for (std::size_t pos = 0; pos < r.response.size();) {
        const auto t0 = clock::now();
        const frugal::draft::draft_tree<std::int32_t>& tree = draft();
        s.draft_us.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count());
        const std::size_t emitted = replay_step(r, pos, tree, s);
        accept(std::span<const std::int32_t>(r.response).subspan(pos, emitted));
        pos += emitted;
    }
    return s;
}

}  // namespace frugal::testing
