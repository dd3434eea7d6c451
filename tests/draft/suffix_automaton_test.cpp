// The suffix automaton and matcher against a brute-force substring oracle.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <frugal/draft/suffix_automaton.hpp>

#include "frugal_test_data.hpp"
#include "replay.hpp"

namespace {

using frugal::draft::no_position;
using frugal::draft::no_state;
using frugal::draft::suffix_automaton;
using frugal::draft::suffix_matcher;

// Brute force over a text split into documents: every end position of `pattern`.
template <class T>
std::vector<std::uint32_t> occurrences(const std::vector<std::vector<T>>& docs, const std::vector<T>& pattern) {
    std::vector<std::uint32_t> ends;
    std::uint32_t offset = 0;
    for (const auto& d : docs) {
        for (std::size_t e = 0; e < d.size(); ++e)
            if (e + 1 >= pattern.size() &&
                std::equal(pattern.begin(), pattern.end(), d.begin() + std::ptrdiff_t(e + 1 - pattern.size())))
                ends.push_back(offset + std::uint32_t(e));
        offset += std::uint32_t(d.size());
    }
    return ends;
}

template <class T>
suffix_automaton<T> build(const std::vector<std::vector<T>>& docs) {
    suffix_automaton<T> sam;
    for (const auto& d : docs) {
        sam.begin_document();
        sam.append(std::span<const T>(d));
    }
    return sam;
}

// Every substring of length <= max_len (and some absent ones) against the oracle.
template <class T>
void check_against_oracle(const std::vector<std::vector<T>>& docs, std::size_t max_len, T alphabet) {
    const auto sam = build(docs);
    std::size_t total = 0;
    for (const auto& d : docs) total += d.size();
    ASSERT_EQ(sam.size(), total);
    EXPECT_LE(sam.state_count(), std::max<std::size_t>(2 * total, 2));
    std::set<std::vector<T>> patterns;
    for (const auto& d : docs)
        for (std::size_t i = 0; i < d.size(); ++i)
            for (std::size_t len = 1; len <= max_len && i + len <= d.size(); ++len) {
                std::vector<T> p(d.begin() + std::ptrdiff_t(i), d.begin() + std::ptrdiff_t(i + len));
                patterns.insert(p);
                p.back() = T((p.back() + 1) % alphabet);  // a neighbour that may be absent
                patterns.insert(p);
            }
    for (const auto& p : patterns) {
        const auto ends = occurrences(docs, p);
        const auto s = sam.find(p);
        if (ends.empty()) {
            EXPECT_EQ(s, no_state);
            continue;
        }
        ASSERT_NE(s, no_state);
        EXPECT_EQ(sam.count(s), ends.size());
        EXPECT_EQ(sam.first_end(s), ends.front());
        EXPECT_EQ(sam.last_end(s), ends.back());
        EXPECT_GE(sam.length(s), p.size());
        EXPECT_LT(sam.length(sam.link(s)), p.size());
    }
}

TEST(SuffixAutomaton, EmptyAndRoot) {
    suffix_automaton<int> sam;
    EXPECT_EQ(sam.size(), 0u);
    EXPECT_EQ(sam.state_count(), 1u);
    EXPECT_EQ(sam.find(std::vector<int>{}), sam.root);
    EXPECT_EQ(sam.find(std::vector<int>{1}), no_state);
    EXPECT_EQ(sam.link(sam.root), no_state);
    EXPECT_THROW((void)sam.count(7), frugal::out_of_range);
    EXPECT_THROW((void)sam.continuation(0, 3), frugal::out_of_range);
}

TEST(SuffixAutomaton, DocExample) {
    suffix_automaton<int> sam;
    sam.append(std::vector<int>{5, 7, 5, 7, 9});
    const auto s = sam.find(std::vector<int>{5, 7});
    ASSERT_NE(s, no_state);
    EXPECT_EQ(sam.count(s), 2u);
    EXPECT_EQ(sam.first_end(s), 1u);
    EXPECT_EQ(sam.last_end(s), 3u);
    EXPECT_EQ(sam.count(sam.root), 5u);
    const auto c = sam.continuation(1, 10);
    EXPECT_EQ(std::vector<int>(c.begin(), c.end()), (std::vector<int>{5, 7, 9}));
}

TEST(SuffixAutomaton, RandomTextsMatchOracle) {
    std::mt19937 rng(7);
    for (int alphabet : {1, 2, 3, 5, 40}) {
        for (int trial = 0; trial < 6; ++trial) {
            std::uniform_int_distribution<int> tok(0, alphabet - 1);
            std::vector<std::vector<int>> docs(1);
            for (int i = 0; i < 160; ++i) docs[0].push_back(tok(rng));
            check_against_oracle(docs, 12, alphabet);
        }
    }
}

TEST(SuffixAutomaton, DocumentsNeverSpanBoundaries) {
    std::mt19937 rng(11);
    for (int alphabet : {2, 3, 6}) {
        std::uniform_int_distribution<int> tok(0, alphabet - 1), len(0, 40);
        std::vector<std::vector<int>> docs(8);
        for (auto& d : docs) {
            const int n = len(rng);
            for (int i = 0; i < n; ++i) d.push_back(tok(rng));
        }
        docs[3] = docs[1];  // a repeated document
        check_against_oracle(docs, 10, alphabet);
        const auto sam = build(docs);
        // A continuation stops at the end of its document.
        std::uint32_t offset = 0;
        for (const auto& d : docs) {
            for (std::uint32_t e = 0; e < d.size(); ++e)
                EXPECT_EQ(sam.continuation(offset + e, 100).size(), d.size() - e - 1);
            offset += std::uint32_t(d.size());
        }
    }
}

TEST(SuffixAutomaton, UnsignedAndWideTokens) {
    std::mt19937 rng(3);
    std::uniform_int_distribution<std::uint64_t> tok(0, 3);
    std::vector<std::vector<std::uint64_t>> docs(1);
    for (int i = 0; i < 120; ++i) docs[0].push_back(tok(rng) * 0x1000000000ull);
    const auto sam = build(docs);
    const std::vector<std::uint64_t> p(docs[0].begin() + 10, docs[0].begin() + 14);
    EXPECT_EQ(sam.count(sam.find(p)), occurrences(docs, p).size());
    std::vector<std::vector<std::uint8_t>> small(1);
    for (int i = 0; i < 300; ++i) small[0].push_back(std::uint8_t(i * 37 % 256));
    check_against_oracle(small, 6, std::uint8_t(255));
}

// Longest suffix of query[0..i] that occurs in the text, by brute force.
template <class T>
std::size_t longest_match(const std::vector<std::vector<T>>& docs, const std::vector<T>& query, std::size_t i) {
    std::size_t best = 0;
    for (std::size_t len = 1; len <= i + 1; ++len) {
        std::vector<T> p(query.begin() + std::ptrdiff_t(i + 1 - len), query.begin() + std::ptrdiff_t(i + 1));
        if (occurrences(docs, p).empty()) break;  // suffixes of a non-occurring string never occur
        best = len;
    }
    return best;
}

TEST(SuffixMatcher, LongestMatchAgainstFixedText) {
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> tok(0, 3);
    std::vector<std::vector<int>> docs(2);
    for (auto& d : docs)
        for (int i = 0; i < 80; ++i) d.push_back(tok(rng));
    const auto sam = build(docs);
    std::vector<int> query;
    for (int i = 0; i < 200; ++i) query.push_back(tok(rng));
    suffix_matcher<int> m(sam);
    for (std::size_t i = 0; i < query.size(); ++i) {
        m.advance(query[i]);
        const std::size_t want = longest_match(docs, query, i);
        ASSERT_EQ(m.length(), want) << "at " << i;
        if (want == 0) {
            EXPECT_EQ(m.last_end(), no_position);
            continue;
        }
        const std::vector<int> p(query.begin() + std::ptrdiff_t(i + 1 - want), query.begin() + std::ptrdiff_t(i + 1));
        EXPECT_EQ(m.state(), sam.find(p));
        EXPECT_EQ(m.last_end(), occurrences(docs, p).back());
    }
}

// Advancing before appending: the match is the longest suffix with an earlier occurrence,
// and stays right while later appends split its state.
template <class T>
void check_self_match(const std::vector<T>& text) {
    suffix_automaton<T> sam;
    suffix_matcher<T> m(sam);
    for (std::size_t i = 0; i < text.size(); ++i) {
        m.advance(text[i]);
        const std::vector<std::vector<T>> before{std::vector<T>(text.begin(), text.begin() + std::ptrdiff_t(i))};
        const std::size_t want = longest_match(before, text, i);
        ASSERT_EQ(m.length(), want) << "at " << i;
        if (want > 0) {
            const std::vector<T> p(text.begin() + std::ptrdiff_t(i + 1 - want), text.begin() + std::ptrdiff_t(i + 1));
            EXPECT_EQ(m.last_end(), occurrences(before, p).back());
        }
        sam.append(text[i]);
        ASSERT_EQ(sam.repeat_length(), want) << "at " << i;
        if (want > 0) {
            const std::vector<T> p(text.begin() + std::ptrdiff_t(i + 1 - want), text.begin() + std::ptrdiff_t(i + 1));
            EXPECT_EQ(m.state(), sam.find(p)) << "at " << i;
            EXPECT_EQ(sam.repeat_state(), sam.find(p)) << "at " << i;
            EXPECT_EQ(sam.repeat_end(), occurrences(before, p).back()) << "at " << i;
        } else {
            EXPECT_EQ(sam.repeat_end(), no_position);
        }
    }
}

TEST(SuffixMatcher, SelfMatchOnRandomText) {
    std::mt19937 rng(9);
    for (int alphabet : {1, 2, 4}) {
        std::uniform_int_distribution<int> tok(0, alphabet - 1);
        std::vector<int> text;
        for (int i = 0; i < 150; ++i) text.push_back(tok(rng));
        check_self_match(text);
    }
}

TEST(SuffixAutomaton, RepeatAcrossDocumentsMatchesOracle) {
    // In a generalized automaton the repeat is the longest suffix of the current document
    // that ended earlier, in an earlier document or earlier in this one.
    std::mt19937 rng(21);
    std::uniform_int_distribution<int> tok(0, 2), len(1, 25);
    suffix_automaton<int> sam;
    std::vector<std::vector<int>> before;  // earlier documents, then the current one's prefix
    for (int d = 0; d < 10; ++d) {
        sam.begin_document();
        std::vector<int> doc;
        const int n = len(rng);
        for (int i = 0; i < n; ++i) {
            doc.push_back(tok(rng));
            sam.append(doc.back());
            auto earlier = before;
            earlier.emplace_back(doc.begin(), doc.end() - 1);
            std::size_t want = 0;
            for (std::size_t l = 1; l <= doc.size(); ++l) {
                if (occurrences(earlier, std::vector<int>(doc.end() - std::ptrdiff_t(l), doc.end())).empty()) break;
                want = l;
            }
            ASSERT_EQ(sam.repeat_length(), want) << "document " << d << " token " << i;
            if (want == 0) {
                EXPECT_EQ(sam.repeat_end(), no_position);
                continue;
            }
            const std::vector<int> p(doc.end() - std::ptrdiff_t(want), doc.end());
            EXPECT_EQ(sam.repeat_state(), sam.find(p));
            EXPECT_EQ(sam.repeat_end(), occurrences(earlier, p).back());
        }
        before.push_back(doc);
    }
}

TEST(SuffixAutomaton, BatchAppendsAreExactAfterEveryBatch) {
    // append(span) defers the end positions of a batch to one pass over the union of the
    // suffix-link paths: after every batch (and every single append between them) counts,
    // first/last ends and the repeat must equal the oracle's, on random, periodic and
    // multi-document text.
    std::mt19937 rng(31);
    for (int alphabet : {1, 2, 3, 6}) {
        std::uniform_int_distribution<int> tok(0, alphabet - 1), chunk(0, 9);
        suffix_automaton<int> sam;
        std::vector<std::vector<int>> docs(1);
        for (int step = 0; step < 40; ++step) {
            if (step % 13 == 12) {
                sam.begin_document();
                docs.emplace_back();
            }
            std::vector<int> batch(std::size_t(chunk(rng)));
            for (std::size_t i = 0; i < batch.size(); ++i)  // periodic runs stress shared paths
                batch[i] = step % 3 == 0 ? int(i % 2) : tok(rng);
            if (step % 4 == 0 && !batch.empty()) {
                for (int t : batch) sam.append(t);
            } else {
                sam.append(std::span<const int>(batch));
            }
            auto earlier = docs;  // the text before the batch's last token
            docs.back().insert(docs.back().end(), batch.begin(), batch.end());
            if (batch.empty()) continue;
            earlier.back().insert(earlier.back().end(), batch.begin(), batch.end() - 1);
            std::set<std::vector<int>> patterns;
            for (const auto& d : docs)
                for (std::size_t i = 0; i < d.size(); ++i)
                    for (std::size_t len = 1; len <= 5 && i + len <= d.size(); ++len)
                        patterns.emplace(d.begin() + std::ptrdiff_t(i), d.begin() + std::ptrdiff_t(i + len));
            for (const auto& p : patterns) {
                const auto ends = occurrences(docs, p);
                const auto s = sam.find(p);
                ASSERT_NE(s, no_state);
                ASSERT_EQ(sam.count(s), ends.size()) << "step " << step;
                ASSERT_EQ(sam.first_end(s), ends.front()) << "step " << step;
                ASSERT_EQ(sam.last_end(s), ends.back()) << "step " << step;
            }
            const auto& doc = docs.back();
            std::size_t want = 0;
            for (std::size_t l = 1; l <= doc.size(); ++l) {
                if (occurrences(earlier, std::vector<int>(doc.end() - std::ptrdiff_t(l), doc.end())).empty()) break;
                want = l;
            }
            ASSERT_EQ(sam.repeat_length(), want) << "step " << step;
            if (want > 0) {
                EXPECT_EQ(sam.repeat_end(),
                          occurrences(earlier, std::vector<int>(doc.end() - std::ptrdiff_t(want), doc.end())).back());
            }
        }
    }
}

TEST(SuffixAutomaton, RepetitiveBatchesMatchOracle) {
    // Periodic text makes suffix-link paths long (n / p states), which switches append(span)
    // from per-token walks to the batched pass over their union.
    for (int period : {1, 3}) {
        std::vector<std::vector<int>> docs(1);
        suffix_automaton<int> sam;
        for (int chunk = 0; chunk < 8; ++chunk) {
            std::vector<int> batch;
            for (int i = 0; i < 45; ++i) batch.push_back(int(docs[0].size() + batch.size()) % period);
            sam.append(std::span<const int>(batch));
            docs[0].insert(docs[0].end(), batch.begin(), batch.end());
        }
        for (std::size_t len = 1; len <= docs[0].size(); len += 7)
            for (int shift = 0; shift < period; ++shift) {
                const std::vector<int> p(docs[0].begin() + shift, docs[0].begin() + shift + std::ptrdiff_t(len));
                const auto ends = occurrences(docs, p);
                const auto s = sam.find(p);
                ASSERT_NE(s, no_state);
                EXPECT_EQ(sam.count(s), ends.size()) << "period " << period << " length " << len;
                EXPECT_EQ(sam.first_end(s), ends.front());
                EXPECT_EQ(sam.last_end(s), ends.back());
            }
    }
}

TEST(SuffixAutomaton, RealTokenSequencesMatchOracle) {
    FRUGAL_SHARED_DATA_OR_SKIP(file, "drafting/specbench_vicuna7b.tok");
    const auto records = frugal::testing::read_tok_file(file, 6);
    ASSERT_EQ(records.size(), 6u);
    std::vector<std::vector<std::int32_t>> docs;
    for (const auto& r : records) docs.push_back(r.response);
    check_against_oracle(docs, 6, std::int32_t(32000));
    std::vector<std::int32_t> text = records[0].prompt;
    text.insert(text.end(), records[0].response.begin(), records[0].response.end());
    text.resize(std::min<std::size_t>(text.size(), 300));
    check_self_match(text);
}

}  // namespace
