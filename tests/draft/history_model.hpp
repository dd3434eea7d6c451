#pragma once
// A brute-force model of the live history (which documents it holds, in what order, what
// their substrings count), shared by the history tests and the history fuzz target.

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include <frugal/draft/history.hpp>

namespace frugal::testing {

using docs_t = std::vector<std::vector<int>>;

/// Occurrences of `p` inside the documents (never across them), by brute force.
inline std::size_t count_in(const docs_t& docs, const std::vector<int>& p) {
    std::size_t n = 0;
    for (const auto& d : docs)
        for (std::size_t i = 0; i + p.size() <= d.size(); ++i)
            n += std::equal(p.begin(), p.end(), d.begin() + std::ptrdiff_t(i));
    return n;
}

/// The documents of a snapshot, oldest first.
inline docs_t documents_of(const frugal::draft::history_snapshot<int>& snap) {
    docs_t out;
    snap.for_each_document([&](std::span<const int> d) { out.emplace_back(d.begin(), d.end()); });
    return out;
}

/// Occurrences of `p` in a snapshot, as its two automata count them.
inline std::size_t count_in(const frugal::draft::history_snapshot<int>& snap, const std::vector<int>& p) {
    std::size_t n = 0;
    for (const auto* g : {&snap.old_generation(), &snap.young_generation()}) {
        const auto s = g->automaton.find(p);
        n += s == frugal::draft::no_state ? 0 : g->automaton.count(s);
    }
    return n;
}

/// The documented bound and eviction order, by brute force over document lists.
struct history_model {
    std::size_t max_tokens, young_tokens;
    docs_t old_docs, young_docs;

    static std::size_t tokens(const docs_t& d) {
        std::size_t n = 0;
        for (const auto& x : d) n += x.size();
        return n;
    }
    void publish(docs_t batch) {
        if (batch.empty()) return;
        const std::size_t old_cap = max_tokens - young_tokens;
        for (auto& d : batch)
            if (d.size() > old_cap) d.erase(d.begin(), d.end() - std::ptrdiff_t(old_cap));
        const std::size_t incoming = tokens(batch);
        if (tokens(young_docs) + incoming <= young_tokens &&
            tokens(old_docs) + tokens(young_docs) + incoming <= max_tokens) {
            young_docs.insert(young_docs.end(), batch.begin(), batch.end());
            return;
        }
        docs_t all = held();
        all.insert(all.end(), batch.begin(), batch.end());
        std::size_t kept = 0, first = all.size();
        while (first > 0 && kept + all[first - 1].size() <= old_cap) kept += all[--first].size();
        old_docs.assign(all.begin() + std::ptrdiff_t(first), all.end());
        young_docs.clear();
    }
    [[nodiscard]] docs_t held() const {
        docs_t all = old_docs;
        all.insert(all.end(), young_docs.begin(), young_docs.end());
        return all;
    }
};

}  // namespace frugal::testing
