// The suffix automaton and its matcher against brute force over the documents: occurrence
// counts, first and last end positions, continuations, the repeat match after every append,
// and a matcher's longest suffix match (exact while the text is unchanged; a valid, possibly
// shorter, match once the text grew under it), under single and batched appends.
#include <frugal/draft/suffix_automaton.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "fuzz.hpp"

namespace {

using frugal::draft::no_position;
using frugal::draft::no_state;

struct model {
    std::vector<int> text;               // documents concatenated
    std::vector<std::size_t> starts{0};  // document starts

    [[nodiscard]] std::size_t doc_start(std::size_t end) const {  // start of the document holding `end`
        return *(std::upper_bound(starts.begin(), starts.end(), end) - 1);
    }
    [[nodiscard]] std::size_t doc_stop(std::size_t end) const {
        const auto next = std::upper_bound(starts.begin(), starts.end(), end);
        return next == starts.end() ? text.size() : *next;
    }
    // End positions of `p` inside documents, below `limit`.
    [[nodiscard]] std::vector<std::size_t> ends(const std::vector<int>& p, std::size_t limit) const {
        std::vector<std::size_t> out;
        for (std::size_t e = p.size() - 1; e < limit; ++e)
            if (e + 1 - p.size() >= doc_start(e) &&
                std::equal(p.begin(), p.end(), text.begin() + std::ptrdiff_t(e + 1 - p.size())))
                out.push_back(e);
        return out;
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    frugal::fuzz::input in(data, size);
    const int alphabet = 1 + int(in.below(4));
    frugal::draft::suffix_automaton<int> sam;
    frugal::draft::suffix_matcher<int> matcher(sam);
    std::vector<int> stream;  // what the matcher was advanced with
    bool grown = false;       // text appended since the matcher's first token
    model m;
    auto check_repeat = [&] {
        // The longest suffix of the current document that also ends earlier.
        const std::size_t start = m.starts.back(), n = m.text.size();
        std::size_t best = 0;
        for (std::size_t len = 1; start + len <= n; ++len) {
            const std::vector<int> suffix(m.text.end() - std::ptrdiff_t(len), m.text.end());
            if (m.ends(suffix, n - 1).empty()) break;
            best = len;
        }
        FRUGAL_FUZZ_CHECK(sam.repeat_length() == best, "repeat %u, want %zu", sam.repeat_length(), best);
        if (best > 0) {
            const std::vector<int> suffix(m.text.end() - std::ptrdiff_t(best), m.text.end());
            FRUGAL_FUZZ_CHECK(sam.repeat_end() == m.ends(suffix, n - 1).back(), "repeat end");
        }
    };
    for (int ops = 0; !in.empty() && ops < 200; ++ops) {
        switch (in.below(5)) {
        case 0: {
            const int t = int(in.below(std::uint64_t(alphabet)));
            sam.append(t);
            m.text.push_back(t);
            grown = !stream.empty();
            check_repeat();
            break;
        }
        case 1: {  // a batch (the union pass when walks get long)
            std::vector<int> batch(1 + in.below(24));
            for (auto& t : batch) t = int(in.below(std::uint64_t(alphabet)));
            sam.append(std::span<const int>(batch));
            m.text.insert(m.text.end(), batch.begin(), batch.end());
            grown = !stream.empty();
            check_repeat();
            break;
        }
        case 2:
            sam.begin_document();
            if (m.starts.back() != m.text.size()) m.starts.push_back(m.text.size());
            break;
        case 3: {
            std::vector<int> p(1 + in.below(6));
            for (auto& t : p) t = int(in.below(std::uint64_t(alphabet)));
            const auto ends = m.ends(p, m.text.size());
            const auto s = sam.find(p);
            FRUGAL_FUZZ_CHECK((s == no_state) == ends.empty(), "find: %s", ends.empty() ? "absent" : "present");
            if (s == no_state) break;
            FRUGAL_FUZZ_CHECK(sam.count(s) == ends.size(), "count %u, want %zu", sam.count(s), ends.size());
            FRUGAL_FUZZ_CHECK(sam.first_end(s) == ends.front() && sam.last_end(s) == ends.back(), "end positions");
            const std::size_t k = in.below(8), e = ends.back();
            const auto c = sam.continuation(std::uint32_t(e), k);
            const std::size_t want = std::min(k, m.doc_stop(e) - e - 1);
            FRUGAL_FUZZ_CHECK(c.size() == want && std::equal(c.begin(), c.end(), m.text.begin() + std::ptrdiff_t(e + 1)),
                              "continuation");
            break;
        }
        default: {  // the matcher: the longest suffix of its stream that occurs in a document
            const int t = int(in.below(std::uint64_t(alphabet)));
            matcher.advance(t);
            stream.push_back(t);
            std::size_t best = 0;
            for (std::size_t len = 1; len <= stream.size(); ++len) {
                const std::vector<int> suffix(stream.end() - std::ptrdiff_t(len), stream.end());
                if (m.ends(suffix, m.text.size()).empty()) break;
                best = len;
            }
            FRUGAL_FUZZ_CHECK(grown ? matcher.length() <= best : matcher.length() == best, "matcher %u, want %zu",
                              matcher.length(), best);
            if (matcher.length() > 0) {
                const std::vector<int> suffix(stream.end() - std::ptrdiff_t(matcher.length()), stream.end());
                FRUGAL_FUZZ_CHECK(matcher.last_end() == m.ends(suffix, m.text.size()).back(), "matcher end");
            } else {
                FRUGAL_FUZZ_CHECK(matcher.last_end() == no_position, "matcher end without a match");
            }
            if (in.below(16) == 0) {  // start over
                matcher.reset();
                stream.clear();
                grown = false;
            }
        }
        }
    }
    return 0;
}
