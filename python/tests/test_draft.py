"""frugal.draft against independent oracles: brute-force substring statistics, a Python
transcription of Prompt Lookup Decoding, and drafts derived by hand from the documented
probability rule."""
import time

import numpy as np
import pytest

import frugal
from frugal import draft, sim


def occurrences(docs, pattern):
    """End positions (in the concatenated text) of `pattern` inside one document."""
    ends, offset = [], 0
    n = len(pattern)
    for doc in docs:
        for i in range(len(doc) - n + 1):
            if doc[i:i + n] == pattern:
                ends.append(offset + i + n - 1)
        offset += len(doc)
    return ends


def test_suffix_automaton_matches_brute_force(rng):
    docs = [rng.integers(0, 3, size=int(rng.integers(5, 30))).tolist() for _ in range(4)]
    sam = draft.SuffixAutomaton()
    for i, doc in enumerate(docs):
        if i:
            sam.begin_document()
        sam.append(np.array(doc, np.int32))
    assert len(sam) == sum(map(len, docs))
    assert sam.text.tolist() == sum(docs, [])
    for n in range(1, 6):
        for pattern in {tuple(d[i:i + n]) for d in docs for i in range(len(d) - n + 1)} | {(7,) * n}:
            ends = occurrences(docs, list(pattern))
            s = sam.find(list(pattern))
            if not ends:
                assert s is None
                continue
            assert sam.count(s) == len(ends), pattern
            assert sam.first_end(s) == ends[0] and sam.last_end(s) == ends[-1], pattern
            assert sam.length(s) >= n


def test_suffix_automaton_continuation_stays_in_its_document():
    sam = draft.SuffixAutomaton()
    sam.append([1, 2, 3])
    sam.begin_document()
    sam.append([4, 5])
    assert sam.continuation(0, 10).tolist() == [2, 3]
    assert sam.document_starts.tolist() == [0, 3]
    assert sam.next(draft.SuffixAutomaton.root, 9) is None


def python_pld(ids, max_ngram=3, num_pred=10):
    """prompt-lookup-decoding's find_candidate_pred_tokens, transcribed from torch to lists."""
    n_in = len(ids)
    for n in range(max_ngram, 0, -1):
        ngram = ids[-n:]
        for idx in range(n_in - n + 1):
            if ids[idx:idx + n] == ngram:
                start, end = idx + n, idx + n + num_pred
                if end <= n_in and start < n_in - n:
                    return ids[start:end]
    return []


@pytest.mark.parametrize("max_ngram,num_pred", [(3, 10), (3, 2), (2, 5), (1, 1)])
def test_prompt_lookup_matches_the_original(rng, max_ngram, num_pred):
    for _ in range(200):
        ctx = rng.integers(0, 4, size=int(rng.integers(max_ngram, 40))).astype(np.int32)
        got = sim.prompt_lookup_draft(ctx, max_ngram, num_pred)
        assert got.tolist() == python_pld(ctx.tolist(), max_ngram, num_pred)
        if len(got):
            assert np.shares_memory(got, ctx)  # a view into the context, as in C++


def python_verify_tree(tokens, parents, predictions):
    node, path, want = -1, [], predictions[0]
    while True:
        child = next((i for i in range(len(tokens)) if parents[i] == node and tokens[i] == want), None)
        if child is None:
            return path, want
        node = child
        path.append(child)
        want = predictions[child + 1]


def test_verify_against_python(rng):
    for _ in range(300):
        n = int(rng.integers(0, 12))
        chain = rng.integers(0, 3, n).astype(np.int32)
        pred = rng.integers(0, 3, n + 1).astype(np.int32)
        r = draft.verify_chain(chain, pred)
        k = next((i for i in range(n) if chain[i] != pred[i]), n)
        assert (r.accepted, r.bonus) == (k, pred[k])
        parents = np.array([int(rng.integers(-1, i)) if i else -1 for i in range(n)], np.int32)
        t = draft.verify_tree(chain, parents, pred)
        path, bonus = python_verify_tree(chain.tolist(), parents.tolist(), pred.tolist())
        assert t.path.tolist() == path and t.accepted == len(path) and t.bonus == bonus


def test_chain_follows_the_unique_continuation():
    # With context_escape near 0 a token seen alone after the match has probability ~1, so the
    # chain runs to max_draft; with the default escape each step's probability is below 1
    # and the chain stops once its path probability would fall below min_path_score.
    prompt = np.array(list(range(1, 21)) + [1, 2, 3], np.int32)
    d = draft.Drafter(max_draft=10, context_escape=1e-9)
    d.begin(prompt)
    assert d.context_match == 3
    assert d.chain().tolist() == list(range(4, 14))
    c = d.chain_with_probabilities()
    assert c.tokens.tolist() == list(range(4, 14)) and c.parents.tolist() == list(range(-1, 9))
    assert c.probabilities.dtype == np.float32 and repr(c).startswith("DraftTree(tokens=array([")
    np.testing.assert_allclose(c.probabilities, 1.0, rtol=1e-6)
    d = draft.Drafter(max_draft=10)
    d.begin(prompt)
    c = d.chain_with_probabilities()
    tokens, probs = c.tokens, c.probabilities
    assert 0 < len(tokens) <= 10 and tokens.tolist() == list(range(4, 4 + len(tokens)))
    assert np.all((probs > 0) & (probs < 1)) and np.prod(probs, dtype=np.float64) >= d.config.min_path_score
    d.accept([4, 5])
    d.accept(99)  # never seen: no match, no draft
    assert d.context_match == 0 and d.chain().size == 0
    assert d.context_size == len(prompt) + 3


def test_chain_takes_the_vectorcall_path():
    # The per-request call is a CPython method descriptor (METH_FASTCALL), not pybind11's
    # generic dispatcher, which alone costs more than a draft (docs/python.md's overhead).
    assert type(draft.Drafter.__dict__["chain"]) is type(str.upper)  # method_descriptor
    d = draft.Drafter()
    d.begin([1, 2, 1])
    assert d.chain().dtype == np.int32
    with pytest.raises(TypeError, match=r"chain\(\) takes 0 positional arguments \(1 given\)"):
        d.chain(1)


def test_history_drafts_and_documents():
    history = draft.History(1000)
    history.add(np.array([7, 8, 9, 10, 11, 12], np.int32))
    history.add([40, 41])
    assert len(history) == 8 and history.documents == 2
    d = draft.Drafter(history, context_escape=1e-9, history_escape=1e-9)
    d.begin([100, 101, 7, 8])
    assert d.history_match == 2
    assert d.chain().tolist() == [9, 10, 11, 12]  # stops at the document's end


def test_tree_holds_both_continuations_best_first_with_probabilities():
    # After "5 6": 7 twice (then 1 both times), 8 once (then 2). Best-first by path
    # probability with escape near 0 (probability = count / total): 7 (2/3), 7 1 (1 given 7),
    # 8 (1/3), 8 2 (1 given 8).
    d = draft.Drafter(context_escape=1e-9, backoff=False, tree_budget=4, tree_depth=2)
    d.begin([5, 6, 7, 1, 20, 5, 6, 8, 2, 21, 5, 6, 7, 1, 22, 5, 6])
    assert d.context_match == 2
    t = d.tree()
    tokens, parents, probs = t.tokens, t.parents, t.probabilities
    assert tokens.dtype == np.int32 and parents.dtype == np.int32 and probs.dtype == np.float32
    assert tokens.tolist() == [7, 1, 8, 2] and parents.tolist() == [-1, 0, -1, 2]
    np.testing.assert_allclose(probs, [2 / 3, 1, 1 / 3, 1], rtol=1e-6)


def test_tree_children_probabilities_sum_to_at_most_one(rng):
    for _ in range(50):
        d = draft.Drafter(tree_budget=32)
        d.begin(rng.integers(0, 4, 200).astype(np.int32))
        t = d.tree()
        tokens, parents, probs = t.tokens, t.parents, t.probabilities
        for node in range(-1, len(tokens)):
            assert probs[parents == node].sum(dtype=np.float64) <= 1 + 1e-5


def test_history_round_trip_and_live_adds(tmp_path):
    history = draft.History(1 << 12)
    rng = np.random.default_rng(3)
    docs = [rng.integers(0, 20, 50).astype(np.int32) for _ in range(5)]
    for doc in docs:
        history.add(doc)
    history.save(tmp_path / "h.bin")
    loaded = draft.History.load(tmp_path / "h.bin")
    assert len(loaded) == len(history) and loaded.documents == history.documents
    for doc in docs:
        a, b = draft.Drafter(history), draft.Drafter(loaded)
        a.begin(doc[:10])
        b.begin(doc[:10])
        assert a.chain().tolist() == b.chain().tolist()
    # A drafter keeps drafting while outputs are added; its next draft sees them.
    fresh = np.arange(1000, 1010, dtype=np.int32)
    d = draft.Drafter(history, context_escape=1e-9, history_escape=1e-9)
    d.begin(fresh[:3])
    assert d.chain().size == 0
    history.add(fresh, publish=False)
    assert history.pending == 1 and d.chain().size == 0  # queued, not yet published
    version = history.version
    assert history.publish() and history.version == version + 1 and history.pending == 0
    assert d.chain().tolist() == fresh[3:].tolist()


def test_history_publisher_publishes_queued_adds():
    # The oracle: the drafter continues a document only once it is published, and a
    # publisher that was stopped publishes nothing more.
    history = draft.History(1 << 12)
    doc = np.arange(500, 520, dtype=np.int32)
    d = draft.Drafter(history, context_escape=1e-9, history_escape=1e-9)
    d.begin(doc[:4])
    with history.start_publisher() as publisher:
        assert publisher.running
        version = history.version
        history.add(doc, publish=False)
        deadline = time.monotonic() + 10
        while history.version == version and time.monotonic() < deadline:  # bumped once the snapshot is out
            time.sleep(0.001)
        assert history.version == version + 1 and history.pending == 0 and len(history) == len(doc)
    assert not publisher.running
    assert d.chain().tolist() == doc[4:].tolist()[:d.config.max_draft]
    history.add([1, 2, 3], publish=False)
    time.sleep(0.01)
    assert history.pending == 1  # nothing publishes after stop()
    publisher.stop()  # stopping twice is harmless


def test_history_outlives_its_python_name():
    history = draft.History(100)
    history.add([1, 2, 3, 4])
    d = draft.Drafter(history, context_escape=1e-9, history_escape=1e-9)
    del history  # the drafter keeps it alive
    d.begin([1, 2])
    assert d.chain().tolist() == [3, 4]


def test_speculator_batch_equals_one_drafter_per_request(rng):
    history = draft.History(1 << 14)
    for _ in range(20):
        history.add(rng.integers(0, 30, 100).astype(np.int32))
    spec = draft.Speculator(history, tree_budget=16)
    prompts = {int(i): rng.integers(0, 30, 40).astype(np.int32) for i in rng.choice(1 << 40, 12, replace=False)}
    oracle = {}
    for rid, prompt in prompts.items():
        spec.start(rid, prompt)
        oracle[rid] = draft.Drafter(history, tree_budget=16)
        oracle[rid].begin(prompt)
    ids = list(prompts)
    appended = {rid: [] for rid in ids}
    for step in range(3):
        got = spec.propose(ids)
        for rid, d in zip(ids, got):
            want = oracle[rid].tree()
            assert d.tokens.tolist() == want.tokens.tolist() and d.parents.tolist() == want.parents.tolist()
            np.testing.assert_array_equal(d.probabilities, want.probabilities)
        chains = spec.propose(np.array(ids, np.uint64), tree=False)
        for rid, tokens in zip(ids, (c.tokens for c in chains)):
            assert tokens.tolist() == oracle[rid].chain().tolist()
            accepted = np.append(tokens[:1], np.int32(step))
            spec.append(rid, accepted)
            oracle[rid].accept(accepted)
            appended[rid] += accepted.tolist()
        packed = spec.propose(ids, packed=True)  # the same trees, concatenated
        tokens, parents, probs, offsets = packed.tokens, packed.parents, packed.probabilities, packed.offsets
        assert offsets.dtype == np.int64 and offsets[0] == 0 and offsets[-1] == len(tokens) == len(parents)
        for i, rid in enumerate(ids):
            want, (a, b) = oracle[rid].tree(), offsets[i:i + 2]
            assert tokens[a:b].tolist() == want.tokens.tolist() and parents[a:b].tolist() == want.parents.tolist()
            np.testing.assert_array_equal(probs[a:b], want.probabilities)
    rid = ids[0]
    assert spec.stop(rid).tolist() == appended[rid]  # the output: every token appended since start
    assert rid not in spec and len(spec) == len(ids) - 1


def test_speculator_refuses_bad_ids():
    spec = draft.Speculator()
    spec.start(1, [1, 2, 3])
    with pytest.raises(frugal.InvalidArgumentError, match="already started"):
        spec.start(1, [4])
    with pytest.raises(frugal.InvalidArgumentError, match="never started"):
        spec.propose([2])
    with pytest.raises(frugal.InvalidArgumentError, match="twice"):
        spec.propose([1, 1])
    assert spec.stop(1).tolist() == []
    with pytest.raises(frugal.InvalidArgumentError, match="was stopped"):
        spec.append(1, [5])


def path_probabilities(parents, probs):
    """Each node's probability from the root: the product of its path's conditionals."""
    path = []
    for p, q in zip(parents.tolist(), probs.tolist()):
        path.append(q * (1.0 if p < 0 else path[p]))
    return path


def tree_paths(tokens, parents):
    """Every node's token path from the root."""
    paths = []
    for tok, p in zip(tokens.tolist(), parents.tolist()):
        paths.append((paths[p] if p >= 0 else []) + [tok])
    return paths


def test_costs_model_the_step_and_refuse_bad_values():
    h100 = draft.RooflineCost.h100_7b()
    assert h100.step_ms(1) == pytest.approx(1e3 * 14e9 / 3.35e12)
    assert h100.step_ms(1000) == pytest.approx(1e3 * 1000 * 14e9 / 5e14)
    assert draft.RooflineCost(4.0, 0.5).step_ms(10) == 5.0
    measured = draft.MeasuredCost([(4, 10.0), (8, 10.0), (16, 18.0)])
    assert [measured.step_ms(t) for t in (1, 6, 12, 32)] == [10.0, 10.0, 14.0, 34.0]
    assert measured.points == [(4, 10.0), (8, 10.0), (16, 18.0)]
    with pytest.raises(frugal.InvalidArgumentError, match="weights_ms must be finite and > 0, got -1"):
        draft.RooflineCost(-1.0, 0.1)
    with pytest.raises(frugal.InvalidArgumentError, match="time decreases from 5 ms at 1 tokens to 4 ms at 8"):
        draft.MeasuredCost([(1, 5.0), (8, 4.0)])


def test_speculator_sizes_drafts_for_the_batch(rng):
    prompt = np.array(list(range(5, 13)) * 6 + [5], np.int32)  # repeats: deep drafts with high probabilities
    spec = draft.Speculator(max_draft=8, tree_depth=8, tree_budget=16)
    ids = list(range(8))
    for i in ids:
        spec.start(i, prompt)
    whole = [(d.tokens, d.parents, d.probabilities) for d in spec.propose(ids)]
    # Below the knee (8 requests x 17 tokens < 149): every drafted node is worth its verification.
    sized = [(d.tokens, d.parents, d.probabilities) for d in spec.propose(ids, cost=draft.RooflineCost.h100_7b())]
    for (t, p, _), (wt, wp, _) in zip(sized, whole):
        assert t.tolist() == wt.tolist() and p.tolist() == wp.tolist()
    # A steep cost past the base tokens: the choice beats drafting nothing and everything
    # under its own model (the calibrated probabilities it returns), and keeps trees whole.
    cost = draft.MeasuredCost([(8, 10.0), (12, 10.0), (40, 200.0)])
    sized = [(d.tokens, d.parents, d.probabilities) for d in spec.propose(ids, cost=cost)]

    def rate(drafts):
        kept = sum(len(t) for t, _, _ in drafts)
        expected = len(ids) + sum(sum(path_probabilities(p, q)) for _, p, q in drafts)
        return expected / cost.step_ms(len(ids) + kept)

    assert 0 < sum(len(t) for t, _, _ in sized) < sum(len(t) for t, _, _ in whole)
    assert rate(sized) > len(ids) / cost.step_ms(len(ids))
    for (t, p, _), (wt, wp, _) in zip(sized, whole):
        assert all(parent < i for i, parent in enumerate(p.tolist()))  # parents kept before children
        # each kept path is a path of the whole tree
        whole_paths = {tuple(path) for path in tree_paths(wt, wp)}
        assert all(tuple(path) in whole_paths for path in tree_paths(t, p))

    class Python:  # any object with step_ms
        def __init__(self, fn):
            self.step_ms = fn
    assert all(len(d.tokens) == 0 for d in spec.propose(ids, cost=Python(lambda n: 1.0 if n <= 8 else float("inf"))))
    with pytest.raises(frugal.InvalidArgumentError, match=r"decreases: step_ms\(9\) = 1 < step_ms\(8\) = 2"):
        spec.propose(ids, cost=Python(lambda n: 2.0 if n <= 8 else 1.0))
    with pytest.raises(ZeroDivisionError):
        spec.propose(ids, cost=Python(lambda n: 1 / 0))
    with pytest.raises(frugal.InvalidArgumentError, match="RooflineCost, a MeasuredCost or an object with step_ms"):
        spec.propose(ids, cost=3)


def test_speculator_calibration_learns_from_appended_tokens():
    prompt = np.array(list(range(5, 13)) * 6 + [5], np.int32)
    spec = draft.Speculator(max_draft=8, tree_depth=8, tree_budget=16)
    spec.start(1, prompt)
    assert spec.calibration_observations == 0
    for step in range(4):
        d, = spec.propose([1], cost=draft.RooflineCost.h100_7b())
        spec.append(1, np.append(d.tokens[:2], np.int32(99 + step)))  # two accepted, then the model's own token
    assert spec.calibration_observations > 0


def test_draft_results_still_unpack_as_tuples_with_a_warning():
    spec = draft.Speculator()
    spec.start(1, [5, 6, 7, 5, 6])
    d, = spec.propose([1])
    with pytest.deprecated_call(match="DraftTree is no longer a tuple: read its fields by name"):
        tokens, parents, probabilities = d
    assert tokens is d.tokens and parents is d.parents and probabilities is d.probabilities
    p = spec.propose([1], packed=True)
    with pytest.deprecated_call(match="PackedDrafts is no longer a tuple"):
        assert p[3] is p.offsets and len(p) == 4
