#pragma once
/// @file
/// Recorded per-layer score trajectories of a reranker (the calibration input of GRATING's
/// automatic threshold mode, section 4.1) and their text file format.

#include <charconv>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <istream>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frugal/core/atomic_file.hpp"
#include "frugal/core/checked.hpp"
#include "frugal/core/error.hpp"

namespace frugal::prune {

/// One query's candidate pool: the classifier-head score of every candidate after each
/// layer of a full (unpruned) forward pass. The last layer's scores define the reference top-K.
/// @code
/// frugal::prune::score_trajectory q(20, 28);
/// q.at(candidate, layer) = score;
/// @endcode
class score_trajectory {
public:
    score_trajectory() = default;
    /// A pool of `candidates` x `layers` zero scores; both must be positive and their
    /// product must fit in std::size_t.
    score_trajectory(std::size_t candidates, std::size_t layers)
        : score_trajectory(candidates, layers, std::vector<float>(checked_size(candidates, layers), 0.0f)) {}
    /// A pool holding `scores`, candidate by candidate (`layers` scores each); its size must
    /// be `candidates * layers`.
    score_trajectory(std::size_t candidates, std::size_t layers, std::vector<float> scores)
        : candidates_(candidates), layers_(layers), scores_(std::move(scores)) {
        FRUGAL_CHECK(scores_.size() == checked_size(candidates, layers), "score_trajectory: ", scores_.size(),
                     " scores for ", candidates, " candidates x ", layers, " layers");
    }
    [[nodiscard]] std::size_t candidates() const noexcept { return candidates_; }
    [[nodiscard]] std::size_t layers() const noexcept { return layers_; }
    [[nodiscard]] float& at(std::size_t candidate, std::size_t layer) {
        FRUGAL_CHECK_AS(out_of_range, candidate < candidates_ && layer < layers_, "score_trajectory: (",
                        candidate, ", ", layer, ") outside ", candidates_, " x ", layers_);
        return scores_[candidate * layers_ + layer];
    }
    [[nodiscard]] float at(std::size_t candidate, std::size_t layer) const {
        FRUGAL_CHECK_AS(out_of_range, candidate < candidates_ && layer < layers_, "score_trajectory: (",
                        candidate, ", ", layer, ") outside ", candidates_, " x ", layers_);
        return scores_[candidate * layers_ + layer];
    }
    /// All layers of one candidate.
    [[nodiscard]] std::span<const float> candidate(std::size_t c) const {
        FRUGAL_CHECK_AS(out_of_range, c < candidates_, "score_trajectory: candidate ", c, " >= ", candidates_);
        return {scores_.data() + c * layers_, layers_};
    }

private:
    [[nodiscard]] static std::size_t checked_size(std::size_t candidates, std::size_t layers) {
        FRUGAL_CHECK(candidates > 0 && layers > 0, "score_trajectory: ", candidates, " candidates x ", layers,
                     " layers: both must be positive");
        return checked_mul(candidates, layers, "score_trajectory: candidates x layers");
    }

    std::size_t candidates_ = 0, layers_ = 0;
    std::vector<float> scores_;  // [candidate][layer]
};

/// Trajectories of many queries over one model (all with the same number of layers).
struct trajectory_set {
    std::size_t layers = 0;
    std::vector<score_trajectory> queries;
};

/// Writes `set` in the text format read by read_trajectories (version 2):
///
///     # any comment line
///     frugal-trajectories 2
///     layers <L>
///     queries <Q>
///     query <candidates N>
///     <score after layer 1> ... <score after layer L>     (N lines, one per candidate)
///     query <N'> ...                                       (Q queries in all)
///     end
///
/// The query count and the `end` line let a reader tell a whole file from a truncated one.
/// Scores are written with 9 significant digits (float round-trips exactly).
/// @code
/// std::ostringstream out; frugal::prune::write_trajectories(out, set, "synthetic, seed 1");
/// @endcode
inline void write_trajectories(std::ostream& out, const trajectory_set& set, std::string_view comment = {}) {
    if (!comment.empty()) out << "# " << comment << "\n";
    out << "frugal-trajectories 2\nlayers " << set.layers << "\nqueries " << set.queries.size() << "\n";
    char buf[32];
    for (const auto& q : set.queries) {
        FRUGAL_CHECK(q.layers() == set.layers, "write_trajectories: a query has ", q.layers(),
                     " layers, the set ", set.layers);
        out << "query " << q.candidates() << "\n";
        for (std::size_t c = 0; c < q.candidates(); ++c) {
            for (std::size_t l = 0; l < q.layers(); ++l) {
                const auto r = std::to_chars(buf, buf + sizeof buf, q.at(c, l), std::chars_format::general, 9);
                if (l > 0) out << ' ';
                out << std::string_view(buf, static_cast<std::size_t>(r.ptr - buf));
            }
            out << "\n";
        }
    }
    out << "end\n";
    FRUGAL_CHECK_AS(runtime_error, out.good(), "write_trajectories: the stream failed");
}

/// Reads the text format of write_trajectories, version 2 or the earlier version 1 (no
/// `queries` line, no `end` line: a version-1 file cut between two queries reads as the
/// queries before the cut). Validates everything and trusts no count to size memory (it
/// grows only with what the file holds): a missing or unknown header, a count that is not
/// a positive decimal (negative, overflowing, trailing text), a ragged row (not L scores),
/// a non-finite or unparsable score, a missing row, a query count that disagrees with the
/// queries read, a missing `end` or anything after it throws frugal::runtime_error naming
/// the line.
/// @code
/// std::ifstream in("cal.txt"); frugal::prune::trajectory_set set = frugal::prune::read_trajectories(in);
/// @endcode
inline trajectory_set read_trajectories(std::istream& in) {
    trajectory_set set;
    std::string line;
    std::vector<std::string_view> words;
    std::size_t line_no = 0;
    const auto fail = [&](const auto&... what) {
        FRUGAL_FAIL(runtime_error, "trajectory file line ", line_no, ": ", what...);
    };
    // the next line that is neither blank nor a comment, split into words; false at the end
    const auto next = [&]() -> bool {
        while (std::getline(in, line)) {
            ++line_no;
            words.clear();
            std::size_t at = 0;
            while ((at = line.find_first_not_of(" \t\r", at)) != std::string::npos) {
                const std::size_t end = std::min(line.find_first_of(" \t\r", at), line.size());
                words.emplace_back(line.data() + at, end - at);
                at = end;
            }
            if (!words.empty() && words[0][0] != '#') return true;
        }
        return false;
    };
    // the line must be `keyword <positive count>`
    const auto count_line = [&](std::string_view keyword) -> std::size_t {
        std::size_t n = 0;
        if (words.size() == 2 && words[0] == keyword) {
            const auto r = std::from_chars(words[1].data(), words[1].data() + words[1].size(), n);
            if (r.ec == std::errc() && r.ptr == words[1].data() + words[1].size() && n > 0) return n;
        }
        fail("expected '", keyword, " <N>' with N a positive decimal count, got '", line.substr(0, 60),
             line.size() > 60 ? "...'" : "'");
        return 0;
    };
    if (!next() || words.size() != 2 || words[0] != "frugal-trajectories" || (words[1] != "1" && words[1] != "2"))
        fail("expected the header 'frugal-trajectories 2' (or 1)");
    const bool version2 = words[1] == "2";
    if (!next()) fail("expected 'layers <L>'");
    set.layers = count_line("layers");
    std::size_t expected_queries = 0;
    if (version2) {
        if (!next()) fail("expected 'queries <Q>'");
        expected_queries = count_line("queries");
    }
    bool ended = false;
    std::vector<float> scores;
    while (next()) {
        if (version2 && words.size() == 1 && words[0] == "end") {
            ended = true;
            break;
        }
        const std::size_t n = count_line("query");
        scores.clear();
        for (std::size_t c = 0; c < n; ++c) {
            if (!next()) fail("query ends after ", c, " of ", n, " candidate rows");
            if (words.size() != set.layers)
                fail("ragged row: ", words.size(), " scores, expected ", set.layers);
            for (const std::string_view w : words) {
                float v = 0.0f;
                const auto r = std::from_chars(w.data(), w.data() + w.size(), v);
                if (r.ec != std::errc() || r.ptr != w.data() + w.size() || !std::isfinite(v))
                    fail("unparsable or non-finite score '", w.substr(0, 40), "'");
                scores.push_back(v);
            }
        }
        set.queries.emplace_back(n, set.layers, std::move(scores));
        scores = {};
    }
    if (version2) {
        if (!ended) fail("no 'end' line: the file is truncated (", set.queries.size(), " of ", expected_queries, " queries)");
        if (set.queries.size() != expected_queries)
            fail("'end' after ", set.queries.size(), " queries, the header announced ", expected_queries);
        if (next()) fail("content after 'end'");
    }
    FRUGAL_CHECK_AS(runtime_error, !set.queries.empty(), "trajectory file holds no query");
    return set;
}

/// Reads a trajectory file; throws frugal::runtime_error when it cannot be opened.
/// @code
/// auto set = frugal::prune::load_trajectories("cal.txt");
/// @endcode
inline trajectory_set load_trajectories(const std::filesystem::path& path) {
    std::ifstream in(path);
    FRUGAL_CHECK_AS(runtime_error, in.is_open(), "cannot open trajectory file ", path);
    return read_trajectories(in);
}

/// Writes `set` to `path` crash-safely (write_file_atomically: a crash leaves the old file
/// or the new one, never a mix).
/// @code
/// frugal::prune::save_trajectories("cal.txt", set, "recorded from bge-reranker, 200 queries");
/// @endcode
inline void save_trajectories(const std::filesystem::path& path, const trajectory_set& set,
                              std::string_view comment = {}) {
    std::ostringstream out;
    write_trajectories(out, set, comment);
    write_file_atomically(path, out.str());
}

}  // namespace frugal::prune
