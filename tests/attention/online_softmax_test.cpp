#include <frugal/attention/online_softmax.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attention_reference.hpp"

namespace {

using frugal::attention::softmax_base;

constexpr double log2e = 1.4426950408889634;

// softmax(scores) V and log-sum-exp in double, natural base.
std::pair<std::vector<double>, double> reference(const std::vector<float>& s, const std::vector<float>& v,
                                                 std::size_t d) {
    double mx = -INFINITY;
    for (float x : s) mx = std::max(mx, double(x));
    double sum = 0;
    std::vector<double> o(d, 0.0);
    for (std::size_t j = 0; j < s.size(); ++j) {
        const double p = std::exp(double(s[j]) - mx);
        sum += p;
        for (std::size_t c = 0; c < d; ++c) o[c] += p * v[j * d + c];
    }
    for (auto& x : o) x /= sum;
    return {o, mx + std::log(sum)};
}

template <softmax_base Base>
void check_merge_of_parts(std::size_t parts) {
    const std::size_t n = 37, d = 9;
    auto s = frugal::testing::normal_floats(n, 11 + unsigned(parts));
    for (auto& x : s) x *= 4.0f;  // spread the maxima between parts
    const auto v = frugal::testing::normal_floats(n * d, 5);
    const auto [want, want_lse] = reference(s, v, d);
    const float in_base = Base == softmax_base::two ? float(log2e) : 1.0f;
    std::vector<frugal::attention::softmax_state<Base>> states;
    for (std::size_t p = 0; p < parts; ++p) {
        const std::size_t b = p * n / parts, e = (p + 1) * n / parts;
        std::vector<float> part(s.begin() + long(b), s.begin() + long(e));
        for (auto& x : part) x *= in_base;
        frugal::attention::softmax_state<Base> st(d);
        st.absorb(part, frugal::matrix_view<const float>(v.data() + b * d, e - b, d));
        states.push_back(std::move(st));
    }
    // Merge in reverse order too: the merge is order-independent up to rounding.
    for (bool reverse : {false, true}) {
        auto order = states;
        if (reverse) std::reverse(order.begin(), order.end());
        const auto merged = frugal::attention::merge_states(std::span<const frugal::attention::softmax_state<Base>>(order));
        const auto out = merged.normalized();
        for (std::size_t c = 0; c < d; ++c) EXPECT_NEAR(out[c], want[c], 2e-6) << "parts " << parts;
        EXPECT_NEAR(merged.lse() / in_base, want_lse, 2e-5) << "parts " << parts;
    }
}

TEST(OnlineSoftmax, MergingTwoToEightPartsEqualsTheWholeSoftmax) {
    for (std::size_t parts = 2; parts <= 8; ++parts) {
        check_merge_of_parts<softmax_base::e>(parts);
        check_merge_of_parts<softmax_base::two>(parts);
    }
}

TEST(OnlineSoftmax, EmptyAndFullyMaskedStatesAreNeutral) {
    using state = frugal::attention::softmax_state<softmax_base::e>;
    state a(2);
    const std::vector<float> v = {1, 2, 3, 4};
    a.absorb(std::vector<float>{0.5f, -1.0f}, frugal::matrix_view<const float>(v.data(), 2, 2));
    const auto before = a.normalized();
    state masked(2);
    masked.absorb(std::vector<float>{-INFINITY, -INFINITY}, frugal::matrix_view<const float>(v.data(), 2, 2));
    EXPECT_EQ(masked.lse(), -INFINITY);
    frugal::attention::merge_state(a, masked);
    EXPECT_EQ(a.normalized(), before);
    state empty(2);
    frugal::attention::merge_state(empty, a);
    EXPECT_EQ(empty.normalized(), before);
    EXPECT_EQ(state(3).normalized(), std::vector<float>(3, 0.0f));
}

TEST(OnlineSoftmax, OutputsWithLseMergeLikeStates) {
    const std::size_t n = 20, d = 4;
    const auto s = frugal::testing::normal_floats(n, 3);
    const auto v = frugal::testing::normal_floats(n * d, 4);
    const auto [want, want_lse] = reference(s, v, d);
    const auto [a, lse_a] = reference({s.begin(), s.begin() + 8}, {v.begin(), v.begin() + 8 * d}, d);
    const auto [b, lse_b] = reference({s.begin() + 8, s.end()}, {v.begin() + 8 * d, v.end()}, d);
    std::vector<float> out(a.begin(), a.end()), other(b.begin(), b.end());
    float lse = float(lse_a);
    frugal::attention::merge_output<softmax_base::e>(std::span<float>(out), lse, std::span<const float>(other), float(lse_b));
    for (std::size_t c = 0; c < d; ++c) EXPECT_NEAR(out[c], want[c], 1e-6);
    EXPECT_NEAR(lse, want_lse, 1e-5);
    const auto st = frugal::attention::softmax_state<softmax_base::e>::from_output(other, float(lse_b));
    EXPECT_NEAR(st.lse(), lse_b, 1e-6);
}

TEST(OnlineSoftmax, BadInputIsRejected) {
    using state = frugal::attention::softmax_state<softmax_base::two>;
    state a(3), b(4);
    EXPECT_THROW(frugal::attention::merge_state(a, b), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::attention::merge_states(std::span<const state>{}), frugal::invalid_argument);
    const std::vector<float> v(6, 1.0f);
    EXPECT_THROW(a.absorb(std::vector<float>{1.0f}, frugal::matrix_view<const float>(v.data(), 2, 3)),
                 frugal::invalid_argument);
    EXPECT_THROW((void)state::from_output(std::vector<float>(3), NAN), frugal::invalid_argument);
    // merge_output refuses a NaN or +inf LSE on either side before writing (-inf merges: no keys).
    for (const float bad : {NAN, INFINITY}) {
        std::vector<float> out{1, 2}, other{3, 4};
        float lse = 0.5f;
        EXPECT_THROW(frugal::attention::merge_output<softmax_base::e>(std::span<float>(out), lse,
                                                                       std::span<const float>(other), bad),
                     frugal::invalid_argument);
        lse = bad;
        EXPECT_THROW(frugal::attention::merge_output<softmax_base::e>(std::span<float>(out), lse,
                                                                       std::span<const float>(other), 0.5f),
                     frugal::invalid_argument);
        EXPECT_EQ(out, (std::vector<float>{1, 2}));
    }
    std::vector<float> out{1, 2}, other{3, 4};
    float lse = -INFINITY;
    frugal::attention::merge_output<softmax_base::e>(std::span<float>(out), lse, std::span<const float>(other), 0.5f);
    EXPECT_EQ(out, other);
    EXPECT_FLOAT_EQ(lse, 0.5f);
}

// States of different bases are different types: merge_state(e_state, two_state) does not compile.
static_assert(!std::is_same_v<frugal::attention::softmax_state<softmax_base::e>, frugal::attention::softmax_state<softmax_base::two>>);
template <class A, class B>
concept mergeable = requires(A& a, const B& b) { frugal::attention::merge_state(a, b); };
static_assert(mergeable<frugal::attention::softmax_state<softmax_base::e>, frugal::attention::softmax_state<softmax_base::e>>);
static_assert(!mergeable<frugal::attention::softmax_state<softmax_base::e>, frugal::attention::softmax_state<softmax_base::two>>);

}  // namespace
