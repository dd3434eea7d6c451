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
#include <vector>

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
    /// A pool of `candidates` x `layers` zero scores; both must be positive.
    score_trajectory(std::size_t candidates, std::size_t layers) : candidates_(candidates), layers_(layers) {
        FRUGAL_CHECK(candidates > 0 && layers > 0, "score_trajectory: ", candidates, " candidates x ", layers,
                     " layers: both must be positive");
        scores_.assign(candidates * layers, 0.0f);
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
    std::size_t candidates_ = 0, layers_ = 0;
    std::vector<float> scores_;  // [candidate][layer]
};

/// Trajectories of many queries over one model (all with the same number of layers).
struct trajectory_set {
    std::size_t layers = 0;
    std::vector<score_trajectory> queries;
};

/// Writes `set` in the text format read by read_trajectories:
///
///     # any comment line
///     frugal-trajectories 1
///     layers <L>
///     query <candidates N>
///     <score after layer 1> ... <score after layer L>     (N lines, one per candidate)
///     query <N'> ...
///
/// Scores are written with 9 significant digits (float round-trips exactly).
/// @code
/// std::ofstream out("cal.txt"); frugal::prune::write_trajectories(out, set, "synthetic, seed 1");
/// @endcode
inline void write_trajectories(std::ostream& out, const trajectory_set& set, std::string_view comment = {}) {
    if (!comment.empty()) out << "# " << comment << "\n";
    out << "frugal-trajectories 1\nlayers " << set.layers << "\n";
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
    FRUGAL_CHECK_AS(runtime_error, out.good(), "write_trajectories: the stream failed");
}

/// Reads the text format of write_trajectories. A missing header, a ragged row (not L
/// scores), a non-finite or unparsable score, a missing row or trailing garbage throws
/// frugal::runtime_error naming the line.
/// @code
/// std::ifstream in("cal.txt"); frugal::prune::trajectory_set set = frugal::prune::read_trajectories(in);
/// @endcode
inline trajectory_set read_trajectories(std::istream& in) {
    trajectory_set set;
    std::string line;
    std::size_t line_no = 0;
    const auto next = [&]() -> bool {
        while (std::getline(in, line)) {
            ++line_no;
            const auto first = line.find_first_not_of(" \t\r");
            if (first == std::string::npos || line[first] == '#') continue;
            return true;
        }
        return false;
    };
    const auto fail = [&](const std::string& what) {
        FRUGAL_FAIL(runtime_error, "trajectory file line ", line_no, ": ", what);
    };
    if (!next() || line.rfind("frugal-trajectories 1", 0) != 0) fail("expected the header 'frugal-trajectories 1'");
    std::size_t layers = 0;
    {
        if (!next()) fail("expected 'layers <L>'");
        std::istringstream head(line);
        std::string word;
        if (!(head >> word >> layers) || word != "layers" || layers == 0) fail("expected 'layers <L>' with L > 0");
    }
    set.layers = layers;
    while (next()) {
        std::istringstream head(line);
        std::string word;
        std::size_t n = 0;
        std::string rest;
        if (!(head >> word >> n) || word != "query" || n == 0 || (head >> rest)) fail("expected 'query <N>' with N > 0");
        score_trajectory q(n, layers);
        for (std::size_t c = 0; c < n; ++c) {
            if (!next()) fail("query ends after " + std::to_string(c) + " of " + std::to_string(n) + " candidate rows");
            const char* p = line.data();
            const char* end = line.data() + line.size();
            std::size_t l = 0;
            while (true) {
                while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) ++p;
                if (p == end) break;
                float v = 0.0f;
                const auto r = std::from_chars(p, end, v);
                if (r.ec != std::errc() || !std::isfinite(v)) fail("unparsable or non-finite score");
                if (l == layers) fail("ragged row: more than " + std::to_string(layers) + " scores");
                q.at(c, l++) = v;
                p = r.ptr;
            }
            if (l != layers) fail("ragged row: " + std::to_string(l) + " scores, expected " + std::to_string(layers));
        }
        set.queries.push_back(std::move(q));
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

}  // namespace frugal::prune
