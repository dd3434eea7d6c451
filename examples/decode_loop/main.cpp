// A speculative decode loop with frugal's drafter: tree drafts, greedy tree verification,
// the end-of-sequence rule, and the history of past outputs saved and restored between
// "sessions".
//
// The "model" is a stand-in: a greedy generator that replays a fixed answer per request
// (ending with EOS), so the output must equal plain token-by-token decoding while taking
// fewer forward passes.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include <frugal/frugal.hpp>

namespace fd = frugal::draft;

constexpr int eos = 2;

// The stand-in model: its greedy next token after `generated` tokens of the answer.
struct toy_model {
    std::vector<int> answer;  // ends with EOS
    std::size_t forward_passes = 0;
    // Past the EOS a real model still predicts something: here token 0, which must never be output.
    int next(std::size_t generated) const { return generated < answer.size() ? answer[generated] : 0; }
    // One forward pass over a draft tree: the greedy token after the context and after every node.
    std::vector<int> verify(std::size_t generated, const fd::draft_tree<int>& tree) {
        ++forward_passes;
        std::vector<std::size_t> depth(tree.size());
        std::vector<int> argmax{next(generated)};
        for (std::size_t i = 0; i < tree.size(); ++i) {
            depth[i] = tree.parents[i] < 0 ? 1 : depth[std::size_t(tree.parents[i])] + 1;
            argmax.push_back(next(generated + depth[i]));  // right on the path the verifier follows
        }
        return argmax;
    }
};

std::vector<int> generate(toy_model& model, std::span<const int> prompt, const fd::live_history<int>& history) {
    fd::drafter<int> drafter({.tree_depth = 16, .tree_budget = 32}, &history);
    drafter.begin(prompt);
    std::vector<int> out;
    while (true) {
        const fd::draft_tree<int>& tree = drafter.tree();
        const std::vector<int> argmax = model.verify(out.size(), tree);
        const auto r = fd::verify_tree(tree, std::span<const int>(argmax));
        // The accepted path then the bonus token, cut after the first EOS: an EOS inside the
        // accepted draft ends the request there.
        const auto step = fd::emitted_tokens(tree, r, eos);
        out.insert(out.end(), step.tokens.begin(), step.tokens.end());
        drafter.accept(step.tokens);
        if (step.finished) break;
    }
    return out;
}

int main() {
    const std::vector<int> prompt{1, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    // Answers that quote the prompt and repeat each other's wording, as real ones do. The
    // third repeats the second: its draft, from the history, ends with the EOS, which the
    // model accepts, so the step's bonus token (after the EOS) must not be output.
    const std::vector<std::vector<int>> answers{
        {30, 31, 14, 15, 16, 17, 32, 33, 34, 35, 36, 37, 38, 39, 40, eos},
        {30, 31, 18, 19, 20, 32, 33, 34, 35, 36, 37, 38, 39, 41, 42, eos},
        {30, 31, 18, 19, 20, 32, 33, 34, 35, 36, 37, 38, 39, 41, 42, eos}};
    const auto file = std::filesystem::temp_directory_path() / "frugal_decode_loop_history.bin";
    bool identical = true;
    std::size_t tokens = 0, passes = 0;
    for (std::size_t session = 0; session < answers.size(); ++session) {
        // Each request is a new session: the history comes back from disk.
        auto history = session == 0 ? std::make_unique<fd::live_history<int>>(1 << 16)
                                    : std::make_unique<fd::live_history<int>>(file);
        toy_model model{answers[session]};
        const auto out = generate(model, prompt, *history);
        identical = identical && out == answers[session];
        tokens += out.size();
        passes += model.forward_passes;
        std::printf("request %zu: %zu tokens in %zu forward passes (history: %zu tokens)\n", session, out.size(),
                    model.forward_passes, history->snapshot()->size());
        history->add(out);
        history->publish();  // single-threaded: visible at once
        history->save(file);
    }
    std::filesystem::remove(file);
    std::printf("mean accepted tokens per pass: %.2f; output identical to greedy decoding: %s\n",
                double(tokens) / double(passes), identical ? "yes" : "no");
    return identical ? 0 : 1;
}
