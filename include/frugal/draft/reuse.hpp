#pragma once
/// @file
/// CoordGen's draft reuse (section 3.4, Eq. 3): after a rejection, keep the longest
/// segment of the rejected draft that agrees with the model's predictions and offer it
/// again in later steps while the step's draft stays within a length threshold.

#include <concepts>
#include <cstddef>
#include <span>
#include <vector>

#include "frugal/core/error.hpp"

namespace frugal::draft {

/// A half-open range [begin, end) of draft positions.
struct draft_segment {
    std::size_t begin = 0, end = 0;
    [[nodiscard]] std::size_t size() const noexcept { return end - begin; }
    [[nodiscard]] bool empty() const noexcept { return end == begin; }
    friend bool operator==(const draft_segment&, const draft_segment&) = default;
};

/// CoordGen Eq. 3: with the draft rejected at e (the first i with draft[i] != predictions[i]),
/// the longest run of positions i > e with draft[i] == predictions[i] (the earliest such run
/// on ties). Empty when the draft was fully accepted or nothing after e agrees.
/// `predictions[i]` is the model's token after the context plus draft[0..i), draft.size() + 1 of them.
/// @code
/// // draft a b c d e f, model a X c d Y f Z: rejected at 1, reusable {c, d} = [2, 4)
/// auto seg = frugal::draft::reusable_segment<int>(draft, predictions);
/// @endcode
template <std::integral Token>
[[nodiscard]] draft_segment reusable_segment(std::span<const Token> draft, std::span<const Token> predictions) {
    FRUGAL_CHECK(predictions.size() == draft.size() + 1, "reusable_segment: ", predictions.size(),
                 " predictions for a draft of ", draft.size(), " tokens (need draft + 1)");
    std::size_t e = 0;
    while (e < draft.size() && draft[e] == predictions[e]) ++e;
    draft_segment best{e, e};
    for (std::size_t i = e + 1; i < draft.size();) {
        if (draft[i] != predictions[i]) {
            ++i;
            continue;
        }
        std::size_t j = i;
        while (j < draft.size() && draft[j] == predictions[j]) ++j;
        if (j - i > best.size()) best = {i, j};
        i = j;
    }
    return best;
}

/// The reuse bookkeeping of CoordGen 3.4: segments found by `reusable_segment` after each
/// rejection are kept and appended to later drafts. Every segment is offered at least once;
/// after that it is dropped as soon as offering it would push the step's cumulative draft
/// length past `length_threshold`, or once `max_segments` newer segments exist.
/// @code
/// frugal::draft::draft_reuse<int> reuse(16);
/// auto extra = reuse.offer(fresh_draft.size());      // segments to verify this step too
/// reuse.observe(fresh_draft, model_predictions);     // after verification
/// @endcode
template <std::integral Token>
class draft_reuse {
public:
    /// Reuse with a cumulative per-step draft length threshold and a cap on kept segments.
    explicit draft_reuse(std::size_t length_threshold, std::size_t max_segments = 4)
        : threshold_(length_threshold), max_segments_(max_segments) {
        FRUGAL_CHECK(length_threshold >= 1, "draft_reuse: length_threshold must be >= 1, got ", length_threshold);
        FRUGAL_CHECK(max_segments >= 1, "draft_reuse: max_segments must be >= 1, got ", max_segments);
    }

    /// Records the reusable segment (Eq. 3) of a verified draft, if any.
    void observe(std::span<const Token> draft, std::span<const Token> predictions) {
        const draft_segment seg = reusable_segment(draft, predictions);
        if (seg.empty()) return;
        kept_.insert(kept_.begin(), {std::vector<Token>(draft.begin() + static_cast<std::ptrdiff_t>(seg.begin),
                                                        draft.begin() + static_cast<std::ptrdiff_t>(seg.end)),
                                     false});
        if (kept_.size() > max_segments_) kept_.pop_back();
    }

    /// The kept segments to add to a step whose fresh draft has `drafted` tokens, newest
    /// first. Segments already offered once that no longer fit under the threshold are
    /// discarded. The spans stay valid until the next call.
    [[nodiscard]] std::vector<std::span<const Token>> offer(std::size_t drafted) {
        std::size_t total = drafted;
        std::erase_if(kept_, [&](kept& k) {
            if (k.offered && total + k.tokens.size() > threshold_) return true;
            k.offered = true;
            total += k.tokens.size();
            return false;
        });
        std::vector<std::span<const Token>> out;
        for (const kept& k : kept_) out.emplace_back(k.tokens);
        return out;
    }

    /// Number of segments kept.
    [[nodiscard]] std::size_t size() const noexcept { return kept_.size(); }
    /// Drops every kept segment (a new request).
    void clear() noexcept { kept_.clear(); }

private:
    struct kept {
        std::vector<Token> tokens;
        bool offered;
    };
    std::size_t threshold_, max_segments_;
    std::vector<kept> kept_;  // newest first; a handful, so a vector
};

}  // namespace frugal::draft
