// The trajectory reader on mutated files. A valid file is written from a set decoded from
// the input, then mutated (bytes flipped, spans cut or duplicated, digits and signs inserted,
// the file truncated). The reader must throw frugal::error or return a set that holds what
// the text holds: every row of `layers` finite scores, no more scores than the text has
// numbers, the original set when the text is unchanged, and the same set again after a write
// and a read. Every strict prefix of a version-2 file (short of its final newline) must be
// rejected.
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

#include <frugal/prune/trajectory.hpp>

#include "fuzz.hpp"

namespace {

bool same(const frugal::prune::trajectory_set& a, const frugal::prune::trajectory_set& b) {
    if (a.layers != b.layers || a.queries.size() != b.queries.size()) return false;
    for (std::size_t q = 0; q < a.queries.size(); ++q) {
        if (a.queries[q].candidates() != b.queries[q].candidates()) return false;
        for (std::size_t c = 0; c < a.queries[q].candidates(); ++c)
            for (std::size_t l = 0; l < a.layers; ++l)
                if (a.queries[q].at(c, l) != b.queries[q].at(c, l)) return false;
    }
    return true;
}

// Reads `text`: true and `out` set when it loads, false on a frugal::error; aborts on any
// other exception.
bool try_read(const std::string& text, frugal::prune::trajectory_set& out) {
    std::istringstream in(text);
    try {
        out = frugal::prune::read_trajectories(in);
        return true;
    } catch (const frugal::error&) {
        return false;
    } catch (const std::exception& e) {
        FRUGAL_FUZZ_CHECK(false, "non-frugal exception: %s", e.what());
    }
    return false;
}

std::string written(const frugal::prune::trajectory_set& set) {
    std::ostringstream out;
    frugal::prune::write_trajectories(out, set);
    return out.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    frugal::fuzz::input in(data, size);
    frugal::prune::trajectory_set set;
    set.layers = 1 + in.below(4);
    const std::size_t queries = 1 + in.below(3);
    for (std::size_t q = 0; q < queries; ++q) {
        frugal::prune::score_trajectory t(1 + in.below(3), set.layers);
        for (std::size_t c = 0; c < t.candidates(); ++c)
            for (std::size_t l = 0; l < set.layers; ++l)
                t.at(c, l) = static_cast<float>(static_cast<int>(in.below(2001)) - 1000) / 64.0f;
        set.queries.push_back(std::move(t));
    }
    const std::string original = written(set);
    frugal::prune::trajectory_set back;
    FRUGAL_FUZZ_CHECK(try_read(original, back) && same(back, set), "a written file does not read back");
    const std::size_t cut = in.below(original.size() - 1);
    FRUGAL_FUZZ_CHECK(!try_read(original.substr(0, cut), back), "prefix of %zu bytes accepted", cut);

    std::string text = original;
    const std::size_t mutations = in.below(4);
    for (std::size_t m = 0; m < mutations && !text.empty(); ++m) {
        const std::size_t at = in.below(text.size());
        switch (in.below(5)) {
        case 0: text[at] = static_cast<char>(text[at] ^ (1 << in.below(8))); break;
        case 1: text.erase(at, 1 + in.below(8)); break;
        case 2: text.insert(at, text.substr(at, 1 + in.below(16))); break;
        case 3: text.insert(at, in.below(2) != 0 ? "-" : "99999999999999999999"); break;
        default: text.resize(at); break;
        }
    }
    frugal::prune::trajectory_set got;
    if (!try_read(text, got)) return 0;
    std::size_t numbers = 0;
    {
        std::istringstream words(text);
        for (std::string w; words >> w;) numbers += w.find_first_of("0123456789") != std::string::npos;
    }
    std::size_t scores = 0;
    for (const auto& q : got.queries) {
        FRUGAL_FUZZ_CHECK(q.layers() == got.layers && q.candidates() > 0, "inconsistent query shape");
        for (std::size_t c = 0; c < q.candidates(); ++c)
            for (std::size_t l = 0; l < q.layers(); ++l) FRUGAL_FUZZ_CHECK(std::isfinite(q.at(c, l)), "non-finite score");
        scores += q.candidates() * q.layers();
    }
    FRUGAL_FUZZ_CHECK(scores <= numbers, "%zu scores from a text of %zu numbers", scores, numbers);
    if (text == original) FRUGAL_FUZZ_CHECK(same(got, set), "the unmutated file read differently");
    frugal::prune::trajectory_set again;
    FRUGAL_FUZZ_CHECK(try_read(written(got), again) && same(again, got), "a loaded set does not round-trip");
    return 0;
}
