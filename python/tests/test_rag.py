"""frugal.rag: workflow graphs and the HedraRAG runtime over a Python generator and retriever.

The oracles: a plain sequential Python walk of each workflow (written here from the paper's
Listing 1, not from frugal's graphs) over a deterministic engine and a brute-force top-k of a
tiny corpus with exact small-integer distances, which every request's final state must equal
under every scheduling policy; the engine's own record of every generation (steps in order,
one commit or discard each); counts of on_done calls and futures per request (every request
ends exactly once); and the membership of the batch a callback raised in (exactly those
requests fail, with the callback's exception)."""
import gc
import random
import sys
import threading
import time
import weakref
import zlib

import numpy as np
import pytest

import frugal
from frugal import rag

# ---- a tiny corpus: 24 documents in 4 lists, integer vectors, so float32 distances are exact ----

DIM = 4
DOCS = np.random.default_rng(7).integers(-3, 4, (24, DIM))
LISTS = [list(range(c, 24, 4)) for c in range(4)]
CENTROIDS = [DOCS[ids].mean(axis=0) for ids in LISTS]


def embed(text):
    return np.random.default_rng(zlib.crc32(text.encode())).integers(-3, 4, DIM)


def distance(q, d):
    return int(((q - d) ** 2).sum())


def brute_top_k(text, k):
    q = embed(text)
    return sorted(range(len(DOCS)), key=lambda i: (distance(q, DOCS[i]), i))[:k]


def subquestions(text):
    return 1 + zlib.crc32(text.encode()) % 3


def generated(name, steps, question, docs):
    return f"{name}[{steps}]({question}|{','.join(map(str, docs))})"


def query_text(state):
    return state.text("last") or state.input


class Engine:
    """A deterministic generator in the shape of an engine's loop: a generation starts at step 0
    with the documents of its slot, decodes one token per step, and its text (from those
    documents) is written at commit. Records every breach of the generator contract."""

    def __init__(self, stop_at=None, step_ms=0.05):
        self.open = {}  # request -> [node name, steps decoded, docs, speculative]
        self.stop_at = stop_at
        self.step_ms = step_ms
        self.breaches = []
        self.commits = self.discards = 0
        self.inside = 0

    def enter(self):
        self.inside += 1
        if self.inside != 1:
            self.breaches.append("two generator calls at once")

    def step(self, batch):
        self.enter()
        try:
            for s in batch:
                g = self.open.get(s.request)
                if s.step == 0:
                    if g is not None:
                        self.breaches.append(f"request {s.request}: a generation began before the last ended")
                    g = self.open[s.request] = [s.node.name, 0, s.docs, s.speculative]
                if g is None or g[1] != s.step or g[0] != s.node.name or s.state.request != s.request:
                    self.breaches.append(f"request {s.request}: step {s.step} out of order")
                    continue
                g[1] += 1
            if self.step_ms:
                time.sleep(self.step_ms / 1000)
            return self.step_ms
        finally:
            self.inside -= 1

    def step_time(self, count, context):
        return self.step_ms

    def length(self, state, node):
        return node.tokens

    def stopped(self, request):
        return self.stop_at is not None and self.open[request][1] >= self.stop_at

    def commit(self, state, node):
        self.enter()
        g = self.open.pop(state.request, None)
        self.inside -= 1
        if g is None:
            self.breaches.append(f"request {state.request}: commit without a generation")
            return
        expected = state.retrieved[-1] if state.retrieved else []
        if g[2] != expected:
            self.breaches.append(f"request {state.request}: committed a generation over {g[2]}, not {expected}")
        text = generated(node.name, g[1], state.input, g[2])
        state.texts[node.name] = text
        state.texts["last"] = text
        if node.name == "decompose":
            state.values["subquestions"] = subquestions(state.input)
        self.commits += 1

    def discard(self, request):
        if self.open.pop(request, None) is not None:
            self.discards += 1


class Index:
    """A retriever over the corpus: the query is the latest generated text (the question at
    first), the lists probed nearest centroid first, every list of the probe searched."""

    def __init__(self, search_ms=0.05):
        self.search_ms = search_ms

    def query_of(self, state, node):
        return query_text(state)

    def probe(self, query):
        q = embed(query)
        return sorted(range(len(LISTS)), key=lambda c: (float(((q - CENTROIDS[c]) ** 2).sum()), c))

    def cluster_time(self, c):
        return self.search_ms / len(LISTS)

    def search(self, batch):
        for s in batch:
            q = embed(s.query)
            for c in s.clusters:
                for d in LISTS[c]:
                    s.offer(float(distance(q, DOCS[d])), d)
        if self.search_ms:
            time.sleep(self.search_ms / 1000)
        return self.search_ms


class OrderedIndex(Index):
    """Also names each document's list: the runtime then orders a request's lists by its last results."""

    def list_of(self, id):
        return id % 4


# ---- the oracle: the paper's workflows walked alone, node by node, in plain Python -----------

class Walk:
    """The state of a request walked alone (the methods routers and user nodes call)."""

    def __init__(self, question, values=None):
        self.input = question
        self.texts, self.values = {}, dict(values or {})
        self.visits, self.retrieved = {}, []

    def text(self, key):
        return self.texts.get(key, "")

    def get(self, key):
        return self.values.get(key, 0)

    def visited(self, node):
        return self.visits.get(node, 0)


class Spec:
    """A workflow as plain data: nodes {id: (kind, name, tokens or top_k or action)}, edges {id:
    target or (router, targets)}, visit bounds. Builds the frugal Graph and walks the oracle."""

    def __init__(self, nodes, edges, bounds=None):
        self.nodes, self.edges, self.bounds = nodes, edges, bounds or {}

    def graph(self):
        g = rag.Graph()
        for i, (kind, name, arg) in self.nodes.items():
            {"gen": lambda: g.add_generation(i, name, arg, 16), "ret": lambda: g.add_retrieval(i, name, arg),
             "user": lambda: g.add_user(i, name, arg)}[kind]()
        for source, target in self.edges.items():
            if isinstance(target, tuple):
                g.add_edge(source, target[0], targets=target[1])
            else:
                g.add_edge(source, target)
        for i, bound in self.bounds.items():
            g.bound_visits(i, bound)
        return g

    def walk(self, question, values=None, stop_at=None):
        s = Walk(question, values)
        at = rag.START
        while True:
            edge = self.edges[at]
            at = edge[0](s) if isinstance(edge, tuple) else edge
            if at == rag.END:
                return s
            assert s.visited(at) < self.bounds.get(at, 1 << 30), "the oracle went past a bound"
            kind, name, arg = self.nodes[at]
            if kind == "user":
                arg(s)
            elif kind == "gen":
                steps = arg if stop_at is None else min(arg, stop_at)
                text = generated(name, steps, s.input, s.retrieved[-1] if s.retrieved else [])
                s.texts[name] = s.texts["last"] = text
                if name == "decompose":
                    s.values["subquestions"] = subquestions(s.input)
            else:
                s.retrieved.append(brute_top_k(query_text(s), arg))
            s.visits[at] = s.visited(at) + 1


# Listing 1's workflows and IRG, as the paper draws them (tokens shortened so tests take seconds).
H, A, K = 3, 4, 3
ONE_SHOT = Spec({0: ("ret", "retrieve", K), 1: ("gen", "answer", A)}, {rag.START: 0, 0: 1, 1: rag.END})
HYDE = Spec({0: ("gen", "hypothesis", H), 1: ("ret", "retrieve", K), 2: ("gen", "answer", A)},
            {rag.START: 0, 0: 1, 1: 2, 2: rag.END})
MULTISTEP = Spec({0: ("gen", "decompose", H), 1: ("ret", "retrieve", 2), 2: ("gen", "answer", A)},
                 {rag.START: 0, 0: 1, 1: 2, 2: (lambda s: 1 if s.visited(2) < s.get("subquestions") else rag.END,
                                                [1, rag.END])}, {1: 16})
IRG = Spec({0: ("ret", "retrieve", K), 1: ("gen", "generate", A)},
           {rag.START: 0, 0: 1, 1: (lambda s: 0 if s.visited(1) < 3 else rag.END, [0, rag.END])}, {0: 3})
BUILT_IN = {
    "one_shot": (ONE_SHOT, lambda: rag.one_shot_workflow(K, answer=A, prompt=16)),
    "hyde": (HYDE, lambda: rag.hyde_workflow(K, hypothesis=H, answer=A, prompt=16)),
    "multistep": (MULTISTEP, lambda: rag.multistep_workflow(2, hypothesis=H, answer=A, prompt=16)),
    "irg": (IRG, lambda: rag.irg_workflow(K, 3, answer=A, prompt=16)),
}
QUESTIONS = [f"question {i}: what is retrieval-augmented generation, part {i % 5}?" for i in range(16)]


def assert_state_is(state, walk):
    assert state.input == walk.input
    assert dict(state.texts.items()) == walk.texts
    assert dict(state.values.items()) == walk.values
    assert state.visits == walk.visits
    assert state.retrieved == walk.retrieved


def check_engine(engine):
    assert engine.breaches == []
    assert engine.open == {}  # every generation ended in a commit or a discard


# ---- workflows through the runtime equal the sequential walk ------------------------------------

@pytest.mark.parametrize("policy", [rag.Policy.sequential, rag.Policy.naive_async, rag.Policy.wavefront])
@pytest.mark.parametrize("workflow", sorted(BUILT_IN))
@pytest.mark.parametrize("index", [Index, OrderedIndex])
def test_built_in_workflows_equal_the_sequential_walk(workflow, policy, index):
    spec, make = BUILT_IN[workflow]
    engine, done = Engine(), []
    with rag.Runtime(engine, index(), policy=policy, max_in_flight=8, on_done=done.append) as rt:
        graph = make()
        futures = [rt.submit(graph, q) for q in QUESTIONS]
        results = [f.result(timeout=60) for f in futures]
        m = rt.metrics()
    for q, r in zip(QUESTIONS, results):
        assert r.status == rag.Status.finished, r.error
        assert r.error == "" and r.exception is None
        assert_state_is(r.state, spec.walk(q))
    assert sorted(map(id, done)) == sorted(map(id, results))  # each once, the same Result object
    assert (m.submitted, m.finished, m.in_flight, m.queued) == (len(QUESTIONS), len(QUESTIONS), 0, 0)
    assert m.generation_batch_max <= 8
    check_engine(engine)


def test_a_generator_that_stops_early_ends_its_generation_there():
    spec, make = BUILT_IN["hyde"]
    engine = Engine(stop_at=2)
    with rag.Runtime(engine, OrderedIndex(), speculate=False) as rt:  # no discarded steps to count
        results = [f.result(timeout=60) for f in [rt.submit(make(), q) for q in QUESTIONS[:6]]]
    for q, r in zip(QUESTIONS, results):
        assert_state_is(r.state, spec.walk(q, stop_at=2))
        assert r.metrics.decode_steps == 4
    check_engine(engine)


def user_graph_spec():
    """A user-built graph: a user node counts rounds, a router loops retrieval and a draft until
    the draft's round count reaches the question's, under a visit bound."""
    def count(s):
        s.values["rounds"] = s.get("rounds") + 1

    def route(s):
        return 1 if s.get("rounds") < s.get("wanted") else 4

    nodes = {0: ("user", "count", count), 1: ("ret", "retrieve", 2), 2: ("gen", "draft", 2), 4: ("gen", "answer", 3)}
    edges = {rag.START: 1, 1: 2, 2: 0, 0: (route, [1, 4]), 4: rag.END}
    return Spec(nodes, edges, {1: 5})


def test_a_user_graph_with_user_nodes_router_and_bounded_loop_equals_the_walk():
    spec = user_graph_spec()
    graph = spec.graph()
    graph.validate()
    assert [n.id for n in graph.nodes] == [0, 1, 2, 4]
    assert graph.node(0).kind == rag.NodeKind.user and graph.node(1).top_k == 2 and graph.node(4).tokens == 3
    assert graph.conditional(0) and not graph.conditional(1) and 4 in graph and 3 not in graph
    states = [rag.State(q, values={"wanted": 1 + i % 4}) for i, q in enumerate(QUESTIONS)]
    with rag.Runtime(Engine(), OrderedIndex(), threads=2) as rt:
        results = [f.result(timeout=60) for f in [rt.submit(graph, s) for s in states]]
    for s, r in zip(states, results):
        assert r.status == rag.Status.finished, r.error
        assert_state_is(r.state, spec.walk(s.input, {"wanted": s.get("wanted")}))
    assert graph.frozen


def test_submitting_from_several_threads_at_once():
    spec, make = BUILT_IN["multistep"]
    graph = make()
    engine, done = Engine(step_ms=0.02), []
    with rag.Runtime(engine, OrderedIndex(search_ms=0.02), max_in_flight=16, on_done=lambda r: done.append(r)) as rt:
        barrier = threading.Barrier(4)
        out = {}

        def client(t):
            barrier.wait()
            futures = [(q, rt.submit(graph, q)) for q in QUESTIONS[t::4] * 3]
            out[t] = [(q, f.result(timeout=60)) for q, f in futures]

        threads = [threading.Thread(target=client, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
    results = [qr for t in range(4) for qr in out[t]]
    assert len(results) == len(done) == 3 * len(QUESTIONS)
    for q, r in results:
        assert r.status == rag.Status.finished, r.error
        assert_state_is(r.state, spec.walk(q))
    assert len({r.state.request for _, r in results}) == len(results)  # one id each
    check_engine(engine)


def test_a_parallel_search_splits_batches_and_keeps_the_results():
    spec, make = BUILT_IN["one_shot"]
    seen = set()

    class Recording(OrderedIndex):
        def search(self, batch):
            seen.add(threading.get_ident())
            return super().search(batch)

    with rag.Runtime(Engine(step_ms=0), Recording(search_ms=1.0), threads=3, policy=rag.Policy.naive_async) as rt:
        graph = make()
        results = [f.result(timeout=60) for f in [rt.submit(graph, q) for q in QUESTIONS]]
    for q, r in zip(QUESTIONS, results):
        assert_state_is(r.state, spec.walk(q))
    assert len(seen) >= 1


# ---- failures fail exactly the requests they belong to ---------------------------------------

class PoisonEngine(Engine):
    """Raises in `method` whenever a poisoned request is involved; records who was in the batch."""

    def __init__(self, method):
        super().__init__(step_ms=0.2)
        self.method = method
        self.failed_batches = []

    def step(self, batch):
        if self.method == "step" and any(s.state.input.startswith("poison") for s in batch):
            self.failed_batches.append({s.request for s in batch})
            for s in batch:
                self.open.pop(s.request, None)  # the runtime discards nothing of a failed batch
            raise ValueError("poisoned batch")
        return super().step(batch)

    def length(self, state, node):
        if self.method == "length" and state.input.startswith("poison"):
            raise KeyError("no length for poison")
        return super().length(state, node)

    def commit(self, state, node):
        if self.method == "commit" and state.input.startswith("poison"):
            self.open.pop(state.request, None)
            raise RuntimeError("cannot commit poison")
        super().commit(state, node)


def run_with_poison(engine, index, poisoned=(3, 7), n=12, **options):
    questions = [("poison " if i in poisoned else "") + QUESTIONS[i] for i in range(n)]
    with rag.Runtime(engine, index, **options) as rt:
        graph = BUILT_IN["hyde"][1]()
        results = [f.result(timeout=60) for f in [rt.submit(graph, q) for q in questions]]
        m = rt.metrics()
    assert m.failed == sum(r.status == rag.Status.failed for r in results)
    assert m.finished + m.failed == n
    return questions, results


def test_a_generator_step_that_raises_fails_only_the_requests_of_its_batch():
    engine = PoisonEngine("step")
    questions, results = run_with_poison(engine, OrderedIndex())
    failed_ids = set().union(*engine.failed_batches)
    assert engine.failed_batches
    for q, r in zip(questions, results):
        if r.state.request in failed_ids:
            assert r.status == rag.Status.failed
            assert "the generator failed" in r.error and "generator.step raised ValueError: poisoned batch" in r.error
            assert isinstance(r.exception, ValueError) and str(r.exception) == "poisoned batch"
        else:
            assert not q.startswith("poison")
            assert r.status == rag.Status.finished, r.error
            assert_state_is(r.state, HYDE.walk(q))
    check_engine(engine)


@pytest.mark.parametrize("method, error", [("length", KeyError), ("commit", RuntimeError)])
def test_a_generator_method_that_raises_for_one_request_fails_it_alone(method, error):
    engine = PoisonEngine(method)
    questions, results = run_with_poison(engine, OrderedIndex())
    for q, r in zip(questions, results):
        if q.startswith("poison"):
            assert r.status == rag.Status.failed
            assert f"generator.{method} raised {error.__name__}" in r.error
            assert isinstance(r.exception, error)
        else:
            assert r.status == rag.Status.finished, r.error
            assert_state_is(r.state, HYDE.walk(q))
    check_engine(engine)


class PoisonIndex(OrderedIndex):
    def __init__(self, method):
        super().__init__(search_ms=0.5)
        self.method = method
        self.failed_batches = []

    def search(self, batch):
        if self.method == "search" and any(s.query.startswith("poison") or "(poison" in s.query for s in batch):
            self.failed_batches.append({s.request for s in batch})
            raise ZeroDivisionError("poisoned search")
        return super().search(batch)

    def probe(self, query):
        if self.method == "probe" and "poison" in query:
            raise LookupError("no lists for poison")
        return super().probe(query)

    def cluster_time(self, c):
        return super().cluster_time(c)


def test_a_retriever_search_that_raises_fails_only_the_requests_of_its_batch():
    index = PoisonIndex("search")
    engine = Engine()
    questions, results = run_with_poison(engine, index)
    failed_ids = set().union(*index.failed_batches)
    assert index.failed_batches
    for q, r in zip(questions, results):
        if r.state.request in failed_ids:
            assert r.status == rag.Status.failed
            assert "retriever.search raised ZeroDivisionError: poisoned search" in r.error
            assert isinstance(r.exception, ZeroDivisionError)
        else:
            assert r.status == rag.Status.finished, r.error
            assert_state_is(r.state, HYDE.walk(q))
    check_engine(engine)


def test_a_probe_that_raises_fails_its_request_alone():
    questions, results = run_with_poison(Engine(), PoisonIndex("probe"))
    for q, r in zip(questions, results):
        assert (r.status == rag.Status.failed) == q.startswith("poison")
        if q.startswith("poison"):
            assert "retriever.probe raised LookupError: no lists for poison" in r.error


def test_a_step_time_that_raises_fails_the_batch_it_was_asked_for():
    class Estimating(Engine):
        calls = 0

        def step_time(self, count, context):
            Estimating.calls += 1
            if Estimating.calls % 4 == 0:
                raise OSError("no estimate")
            return super().step_time(count, context)

    engine = Estimating()
    with rag.Runtime(engine, OrderedIndex()) as rt:  # wavefront: asked for every batch once retrievals ran
        results = [f.result(timeout=60) for f in [rt.submit(BUILT_IN["hyde"][1](), q) for q in QUESTIONS]]
    failed = [r for r in results if r.status == rag.Status.failed]
    assert failed and Estimating.calls >= 4
    for q, r in zip(QUESTIONS, results):
        if r.status == rag.Status.failed:
            assert "the generator's step_time failed: generator.step_time raised OSError: no estimate" in r.error
            assert isinstance(r.exception, OSError)
        else:
            assert_state_is(r.state, HYDE.walk(q))
    check_engine(engine)  # the failed members' generations were discarded


def test_a_cluster_time_that_raises_in_a_sub_stage_fails_its_request_alone():
    class Costly(OrderedIndex):
        """A poisoned question also probes a list of its own, whose cost estimate raises after its first."""

        def __init__(self):
            super().__init__()
            self.asked = {}

        def probe(self, query):
            extra = [100 + int(query.split()[2].rstrip(":"))] if "(poison" in query else []
            return super().probe(query) + extra

        def cluster_time(self, c):
            if c >= 100:
                self.asked[c] = self.asked.get(c, 0) + 1
                if self.asked[c] > 1:
                    raise ArithmeticError(f"list {c} has no cost")
            return super().cluster_time(c)

        def search(self, batch):
            for s in batch:
                assert all(c < 100 for c in s.clusters), "a sub-stage reached the list whose cost raised"
            return super().search(batch)

    index = Costly()
    questions, results = run_with_poison(Engine(), index)
    for q, r in zip(questions, results):
        if q.startswith("poison"):
            assert r.status == rag.Status.failed and "retriever.cluster_time raised ArithmeticError" in r.error
        else:
            assert r.status == rag.Status.finished, r.error
            assert_state_is(r.state, HYDE.walk(q))
    assert all(n >= 2 for n in index.asked.values()) and len(index.asked) == 2


def test_bad_engine_values_fail_with_a_message_naming_them():
    class NoDuration(Engine):
        def step(self, batch):
            super().step(batch)
            return None

    class NegativeLength(Engine):
        def length(self, state, node):
            return -1

    with rag.Runtime(NoDuration(), Index()) as rt:
        r = rt.submit(BUILT_IN["hyde"][1](), "q").result(timeout=60)
    assert r.status == rag.Status.failed and "generator.step must return a number of ms, got NoneType" in r.error
    assert isinstance(r.exception, frugal.InvalidArgumentError)
    with rag.Runtime(NegativeLength(), Index()) as rt:
        r = rt.submit(BUILT_IN["hyde"][1](), "q").result(timeout=60)
    assert r.status == rag.Status.failed and "generator.length must be an int >= 0, got -1" in r.error


def test_a_router_that_chooses_an_undeclared_node_fails_its_request_with_invalid_argument():
    g = rag.Graph()
    g.add_retrieval(0, "retrieve", 2)
    g.add_generation(1, "answer", 2)
    g.add_edge(rag.START, 0)
    g.add_edge(0, 1)
    g.add_edge(1, lambda s: 7 if "bad" in s.input else rag.END, targets=[rag.END])
    with pytest.raises(frugal.InvalidArgumentError, match=r"chose 7, which is not among its declared targets"):
        g.next(1, rag.State("bad"))
    assert g.next(1, rag.State("good")) == rag.END
    with rag.Runtime(Engine(), Index()) as rt:
        bad, good = rt.submit(g, "bad").result(timeout=60), rt.submit(g, "good").result(timeout=60)
    assert bad.status == rag.Status.failed and isinstance(bad.exception, frugal.InvalidArgumentError)
    assert "not among its declared targets" in bad.error
    assert good.status == rag.Status.finished


def test_a_router_or_user_node_that_raises_fails_its_request_alone():
    g = rag.Graph()
    g.add_user(0, "check", lambda s: s.values.__setitem__("ok", 1 // (0 if "bad" in s.input else 1)))
    g.add_generation(1, "answer", 2)
    g.add_edge(rag.START, 0)
    g.add_edge(0, lambda s: int("x") if "worse" in s.input else 1, targets=[1])
    g.add_edge(1, rag.END)
    with rag.Runtime(Engine(), Index()) as rt:
        rs = [rt.submit(g, q).result(timeout=60) for q in ("fine", "bad", "worse", "fine too")]
    assert [r.status for r in rs] == [rag.Status.finished, rag.Status.failed, rag.Status.failed, rag.Status.finished]
    assert "user node 0 raised ZeroDivisionError" in rs[1].error and isinstance(rs[1].exception, ZeroDivisionError)
    assert "the router of node 0 raised ValueError" in rs[2].error and isinstance(rs[2].exception, ValueError)
    assert rs[0].state.get("ok") == 1


def test_a_request_past_its_visit_bound_fails_with_runtime_failure():
    g = rag.Graph()
    g.add_retrieval(0, "retrieve", 2)
    g.add_generation(1, "generate", 2)
    g.add_edge(rag.START, 0)
    g.add_edge(0, 1)
    g.add_edge(1, lambda s: 0 if s.visited(1) < s.get("rounds") else rag.END, targets=[0, rag.END])
    g.bound_visits(0, 2)
    with rag.Runtime(Engine(), Index()) as rt:
        ok = rt.submit(g, rag.State("q", values={"rounds": 2})).result(timeout=60)
        over = rt.submit(g, rag.State("q", values={"rounds": 3})).result(timeout=60)
    assert ok.status == rag.Status.finished and ok.state.visited(0) == 2
    assert over.status == rag.Status.failed and isinstance(over.exception, frugal.RuntimeFailureError)
    assert "would run node 0 (retrieve) a 3th time, beyond its bound of 2" in over.error


def test_bad_graphs_raise_frugal_errors():
    g = rag.Graph()
    g.add_generation(0, "a", 2)
    with pytest.raises(frugal.InvalidArgumentError, match="no edge from START"):
        g.validate()
    g.add_edge(rag.START, 0)
    g.add_edge(0, 5)
    with pytest.raises(frugal.InvalidArgumentError, match=r"dangling edge 0 \(a\) -> 5 \(no node 5\)"):
        g.validate()
    with pytest.raises(frugal.InvalidArgumentError, match="added twice"):
        g.add_generation(0, "again", 2)
    with pytest.raises(frugal.InvalidArgumentError, match="bound on unknown node 9"):
        g.bound_visits(9, 2)
    with pytest.raises(frugal.OutOfRangeError, match="unknown node 9"):
        g.node(9)
    with pytest.raises(frugal.InvalidArgumentError, match="with 0 tokens"):
        g.add_generation(3, "empty", 0)
    with pytest.raises(frugal.InvalidArgumentError, match="needs its declared targets"):
        g.add_edge(3, lambda s: 0)
    with pytest.raises(frugal.InvalidArgumentError, match="must be an int >= 0, got -1"):
        g.add_edge(3, -1)
    with pytest.raises(TypeError, match="must be callable"):
        g.add_user(4, "u", 42)

    loop = rag.Graph()  # a loop whose router can leave it, but no node on it is bounded
    loop.add_retrieval(0, "retrieve", 2)
    loop.add_generation(1, "generate", 2)
    loop.add_edge(rag.START, 0)
    loop.add_edge(0, 1)
    loop.add_edge(1, lambda s: rag.END, targets=[0, rag.END])
    with pytest.raises(frugal.InvalidArgumentError, match="has no visit bound"):
        loop.validate()
    with rag.Runtime(Engine(), Index()) as rt:
        with pytest.raises(frugal.InvalidArgumentError, match="has no visit bound"):
            rt.submit(loop, "q")
        assert not loop.frozen  # refused before it froze
        loop.bound_visits(0, 3)
        assert rt.submit(loop, "q").result(timeout=60).status == rag.Status.finished
        with pytest.raises(frugal.RuntimeFailureError, match="no longer changes"):
            loop.add_generation(2, "late", 2)
        with pytest.raises(TypeError, match="must be a frugal.rag.Graph"):
            rt.submit("not a graph", "q")
        with pytest.raises(TypeError, match="State or its input text"):
            rt.submit(loop, 42)
        with pytest.raises(frugal.InvalidArgumentError, match="deadline_ms = -1"):
            rt.submit(loop, "q", deadline_ms=-1)


def test_runtime_arguments_are_checked():
    with pytest.raises(TypeError, match="the generator has no step_time"):
        rag.Runtime(type("G", (), {"step": lambda self, b: 0})(), Index())
    with pytest.raises(TypeError, match="the retriever has no search"):
        rag.Runtime(Engine(), type("R", (), {"query_of": 0, "probe": 0, "cluster_time": 0})())
    with pytest.raises(frugal.InvalidArgumentError, match="speculate_retrieval needs a generator with preview"):
        rag.Runtime(Engine(), OrderedIndex(), speculate_retrieval=True)
    with pytest.raises(frugal.InvalidArgumentError, match="admission limit of 0"):
        rag.Runtime(Engine(), Index(), max_in_flight=0)
    with pytest.raises(frugal.InvalidArgumentError, match="threads = 0"):
        rag.Runtime(Engine(), Index(), threads=0)
    with pytest.raises(TypeError, match="on_done must be callable"):
        rag.Runtime(Engine(), Index(), on_done=3)


def test_speculative_retrieval_with_a_previewing_generator_equals_the_walk():
    class Previewing(Engine):
        def preview(self, state, node):
            g = self.open[state.request]
            text = generated(node.name, node.tokens, state.input, g[2])  # what commit will write
            state.texts[node.name] = state.texts["last"] = text

    spec, make = BUILT_IN["hyde"]
    engine = Previewing()
    with rag.Runtime(engine, OrderedIndex(), speculate_retrieval=True, speculate_retrieval_at=0.3) as rt:
        results = [f.result(timeout=60) for f in [rt.submit(make(), q) for q in QUESTIONS]]
    for q, r in zip(QUESTIONS, results):
        assert_state_is(r.state, spec.walk(q))
    check_engine(engine)


# ---- cancellation, deadlines, timeouts, exactly once ------------------------------------------

def test_cancel_deadline_and_stage_timeout_end_requests_with_their_status():
    graph = BUILT_IN["hyde"][1]()
    with rag.Runtime(Engine(step_ms=20), Index()) as rt:
        f = rt.submit(graph, "cancel me")
        time.sleep(0.01)
        assert f.cancel()
        r = f.result(timeout=30)
        assert r.status == rag.Status.cancelled and "cancelled by its stop token" in r.error and r.exception is None
        assert not f.cancel() and f.done()
        late = rt.submit(graph, "too slow", deadline_ms=30).result(timeout=30)
        assert late.status == rag.Status.timed_out and "deadline" in late.error
        assert late.metrics.end_to_end_ms >= 30
    with rag.Runtime(Engine(step_ms=20), Index(), stage_timeout_ms=25) as rt:
        r = rt.submit(graph, "long stage").result(timeout=30)
        assert r.status == rag.Status.timed_out and "ran longer than" in r.error


def test_result_timeout_and_done():
    gate = threading.Event()

    class Held(Engine):
        def step(self, batch):
            gate.wait(30)
            return super().step(batch)

    with rag.Runtime(Held(), Index()) as rt:
        f = rt.submit(BUILT_IN["one_shot"][1](), "q")
        with pytest.raises(TimeoutError):
            f.result(timeout=0.05)
        assert not f.done()
        gate.set()
        r = f.result()
        assert f.done() and f.result() is r and "done" in repr(f)


def test_every_request_ends_exactly_once_under_cancels_deadlines_and_faults():
    rnd = random.Random(5)

    class Flaky(Engine):
        def step(self, batch):
            if rnd.random() < 0.05:
                for s in batch:
                    self.open.pop(s.request, None)
                raise OSError("device lost")
            return super().step(batch)

    class FlakyIndex(OrderedIndex):
        def search(self, batch):
            if rnd.random() < 0.05:
                raise OSError("disk lost")
            return super().search(batch)

    n = 80
    calls = [0] * n
    everything = []
    engine = Flaky(step_ms=0.3)
    rt = rag.Runtime(engine, FlakyIndex(search_ms=0.3), max_in_flight=12, on_done=everything.append)
    graphs = [make() for _, make in BUILT_IN.values()]
    futures = []
    for i in range(n):
        def count(r, i=i):
            calls[i] += 1
        deadline = rnd.choice([None, None, 5.0, 40.0])
        futures.append(rt.submit(rnd.choice(graphs), QUESTIONS[i % len(QUESTIONS)], deadline_ms=deadline, on_done=count))
        if rnd.random() < 0.2:
            rnd.choice(futures).cancel()
        if i == n // 2:
            rt.drain()
            assert all(f.done() for f in futures)
    rt.drain()
    m = rt.metrics()
    rt.close()
    results = [f.result(timeout=0) for f in futures]
    assert calls == [1] * n
    assert sorted(map(id, everything)) == sorted(map(id, results))
    statuses = [r.status for r in results]
    assert (m.finished, m.cancelled, m.timed_out, m.failed) == tuple(statuses.count(s) for s in (
        rag.Status.finished, rag.Status.cancelled, rag.Status.timed_out, rag.Status.failed))
    assert m.submitted == n and m.in_flight == 0 and m.queued == 0
    assert set(statuses) >= {rag.Status.finished, rag.Status.failed}
    check_engine(engine)


def test_close_while_the_generator_runs_cancels_the_rest_and_delivers_everything():
    started = threading.Event()

    class Slow(Engine):
        def step(self, batch):
            started.set()
            time.sleep(0.2)  # Python code still running when close() is called
            return super().step(batch)

    engine, done = Slow(step_ms=0), []
    rt = rag.Runtime(engine, Index(), max_in_flight=2, on_done=done.append)
    graph = BUILT_IN["hyde"][1]()
    futures = [rt.submit(graph, q) for q in QUESTIONS[:6]]
    assert started.wait(30)
    t0 = time.monotonic()
    rt.close()
    assert time.monotonic() - t0 < 10
    assert rt.closed
    assert all(f.done() for f in futures) and len(done) == 6
    results = [f.result() for f in futures]
    assert all(r.status == rag.Status.cancelled for r in results)
    assert sum("before it was admitted" in r.error for r in results) == 4  # the admission limit held them
    m = rt.metrics()
    assert (m.submitted, m.cancelled, m.in_flight, m.queued) == (6, 6, 0, 0)
    rt.close()  # idempotent
    with pytest.raises(frugal.RuntimeFailureError, match="the runtime is closed"):
        rt.submit(graph, "q")
    rt.drain()
    check_engine(engine)  # the generation in progress was discarded at shutdown
    assert engine.discards >= 1


def test_a_dropped_runtime_closes_and_keeps_its_engine_alive_until_then():
    engine, index = Engine(), Index()
    alive = weakref.ref(engine), weakref.ref(index)
    rt = rag.Runtime(engine, index)
    del engine, index
    gc.collect()
    assert alive[0]() is not None and alive[1]() is not None and rt.generator is alive[0]()
    graph = BUILT_IN["one_shot"][1]()
    graph_alive = weakref.ref(graph)
    f = rt.submit(graph, "q")
    del graph  # the request holds it until it ends
    gc.collect()
    assert f.result(timeout=60).status == rag.Status.finished
    rt.drain()
    gc.collect()
    assert graph_alive() is None
    del rt
    gc.collect()
    assert alive[0]() is None and alive[1]() is None
    assert f.result().state.input == "q"  # the result outlives its runtime


# ---- callbacks calling the runtime ----------------------------------------------------------

def test_callbacks_may_submit_from_on_done_and_step_but_not_under_the_lock():
    graph = BUILT_IN["one_shot"][1]()
    box = {}

    class Nested(Engine):
        def step(self, batch):
            if "spawn" in batch[0].state.input and "child" not in box:
                box["child"] = box["rt"].submit(graph, "child of step")
                box["metrics"] = box["rt"].metrics()
            return super().step(batch)

        def commit(self, state, node):
            if "greedy" in state.input:
                box["rt"].submit(graph, "never")
            super().commit(state, node)

    class Draining(Engine):
        def step(self, batch):
            box["rt"].drain()

    with rag.Runtime(Nested(), Index()) as rt:
        box["rt"] = rt
        follow = []
        first = rt.submit(graph, "spawn", on_done=lambda r: follow.append(rt.submit(graph, "follow-up")))
        assert first.result(timeout=60).status == rag.Status.finished
        rt.drain()
        assert box["child"].result(timeout=60).status == rag.Status.finished
        assert follow[0].result(timeout=60).state.input == "follow-up"
        assert box["metrics"].submitted >= 2
        greedy = rt.submit(graph, "greedy").result(timeout=60)
        assert greedy.status == rag.Status.failed and isinstance(greedy.exception, frugal.RuntimeFailureError)
        assert "called from a router, user node or engine method that the runtime calls under its lock" in greedy.error
    with rag.Runtime(Draining(), Index()) as rt:
        box["rt"] = rt
        r = rt.submit(graph, "q").result(timeout=60)
        assert r.status == rag.Status.failed and "one of this runtime's own callbacks" in r.error


def test_a_callback_that_raises_is_reported_and_the_request_still_ends(monkeypatch):
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))
    graph = BUILT_IN["one_shot"][1]()
    waited, gate = [], threading.Event()

    class Gated(Engine):
        def step(self, batch):
            gate.wait(30)
            return super().step(batch)

    def on_done(r):
        try:
            f.result()  # its own result: ready already
            waited.append(True)
            g.result()  # another request of the same runtime: would wait on the runtime's thread
        except frugal.RuntimeFailureError as e:
            waited.append(str(e))
        raise ValueError("callback bug")

    with rag.Runtime(Gated(step_ms=0), Index(), max_in_flight=1) as rt:
        f = rt.submit(graph, "q", on_done=on_done)
        g = rt.submit(graph, "other")  # admitted when f ends, so still running in f's on_done
        gate.set()
        assert f.result(timeout=60).status == rag.Status.finished
        rt.drain()
    assert waited[0] is True and "would wait for itself" in waited[1]
    assert any(isinstance(e, ValueError) and str(e) == "callback bug" for e in reported)


# ---- the objects callbacks see -------------------------------------------------------------

def test_slots_are_usable_during_their_call_only():
    kept = {}

    class Keeping(Engine):
        def step(self, batch):
            kept.setdefault("gen", batch[0])
            assert batch[0].state.input == "q" and batch[0].node.name in ("retrieve", "answer")
            return super().step(batch)

    class KeepingIndex(Index):
        def search(self, batch):
            s = kept.setdefault("ret", batch[0])
            assert s.k == K and s.query == "q" and s.clusters == self.probe("q")
            out = super().search(batch)
            assert [i for _, i in s.results] == brute_top_k("q", K) and s.worst == s.results[-1][0]
            return out

    with rag.Runtime(Keeping(), KeepingIndex(), policy=rag.Policy.naive_async) as rt:  # whole probe lists
        rt.submit(BUILT_IN["one_shot"][1](), "q").result(timeout=60)
    gen, ret = kept["gen"], kept["ret"]
    assert (gen.request, gen.step, gen.speculative, gen.node.name) == (0, 0, False, "answer")
    with pytest.raises(frugal.RuntimeFailureError, match="used after its step"):
        gen.state
    with pytest.raises(frugal.RuntimeFailureError, match="used after its step"):
        gen.docs
    with pytest.raises(frugal.RuntimeFailureError, match="used after its search"):
        ret.offer(1.0, 3)
    assert ret.query == "q" and ret.request == 0


def test_state_mappings_are_live_and_callbacks_get_copies():
    s = rag.State("q", texts={"a": "x"}, values={"n": 2})
    s.texts["b"] = "y"
    s.values["n"] += 1
    assert s.text("b") == "y" and s.get("n") == 3 and s.text("none") == "" and s.get("none") == 0
    assert dict(s.texts.items()) == {"a": "x", "b": "y"} and "a" in s.texts and len(s.values) == 1
    t = s.copy()
    t.texts["a"] = "changed"
    assert s.text("a") == "x"
    s.texts = {"only": "this"}
    assert list(s.texts) == ["only"] and s.visits == {} and s.retrieved == [] and s.request == 0
    with pytest.raises(TypeError):
        s.values["n"] = "not an int"
    with pytest.raises(TypeError):
        rag.State("q", texts={"a": 1})
    assert "State(input='q'" in repr(s)
    graph = rag.Graph()
    kept = []
    graph.add_user(0, "keep", lambda st: kept.append(st) or st.texts.__setitem__("user", "wrote"))
    graph.add_edge(rag.START, 0)
    graph.add_edge(0, rag.END)
    with rag.Runtime(Engine(), Index()) as rt:
        r = rt.submit(graph, s).result(timeout=60)
    assert r.state.text("user") == "wrote" and r.state.visits == {0: 1}  # written back from the copy
    assert kept[0].text("user") == "wrote" and kept[0] is not r.state and s.text("user") == ""
    assert graph.node(0).name == "keep" and "user" in repr(graph.node(0))


def test_metrics_as_attributes_json_and_dicts():
    import json
    with rag.Runtime(Engine(), OrderedIndex(), speculate=False) as rt:
        r = rt.submit(BUILT_IN["hyde"][1](), "q").result(timeout=60)
        m = rt.metrics()
    d = r.metrics.to_dict()
    assert d == json.loads(r.metrics.to_json())
    assert d["decode_steps"] == r.metrics.decode_steps == H + A
    assert r.metrics.end_to_end_ms >= r.metrics.generation_ms > 0 and r.metrics.first_token_ms > 0
    assert r.metrics.retrieval_substages >= 1
    md = m.to_dict()
    assert md == json.loads(m.to_json()) and md["finished"] == m.finished == 1
    assert 0 < m.generation_busy <= 1 and m.generation_batches >= 1 and m.retrieval_batches >= 1
    assert "RuntimeMetrics(elapsed_ms=" in repr(m) and "Result(status=<Status.finished: 0>" in repr(r)


# ---- lifetimes at the edges: interpreter exit, a runtime dropped inside its own callback --------

TINY = """
    import threading, time
    from frugal import rag

    class Engine:
        def __init__(self, ms): self.ms = ms
        def step(self, batch):
            time.sleep(self.ms / 1000)
            return self.ms
        def step_time(self, count, context): return self.ms
        def length(self, state, node): return 2
        def commit(self, state, node): state.texts[node.name] = "x"
        def discard(self, request): pass

    class Index:
        def query_of(self, state, node): return state.input
        def probe(self, query): return [0]
        def cluster_time(self, c): return 0.1
        def search(self, batch):
            for s in batch: s.offer(1.0, 1)
            return 0.1
"""


def test_exiting_without_close_cancels_and_delivers_every_request(run_alone):
    out = run_alone(TINY + """
    ended = []
    rt = rag.Runtime(Engine(50), Index(), on_done=lambda r: print(r.status.name, flush=True))
    for i in range(5):
        rt.submit(rag.one_shot_workflow(1), f"q{i}")
    time.sleep(0.02)
    print("exiting", flush=True)
    """, timeout=120)
    lines = out.split()
    assert lines[0] == "exiting" and sorted(lines[1:]) == ["cancelled"] * 5  # closed at exit, each delivered


def test_a_runtime_dropped_inside_its_own_callback_closes_on_a_thread_of_its_own(run_alone):
    out = run_alone(TINY + """
    box, ended, closed = {}, [], threading.Event()

    def on_done(r):
        ended.append(r.status.name)
        if len(ended) == 1:
            del box["rt"]  # the last reference, dropped on the runtime's generation thread

    box["rt"] = rag.Runtime(Engine(1), Index(), on_done=on_done)
    futures = [box["rt"].submit(rag.one_shot_workflow(1), f"q{i}") for i in range(4)]
    for f in futures:
        f.result(timeout=60)
    print(len(ended), set(ended) <= {"cancelled", "finished"}, "rt" not in box)
    """, timeout=120)
    assert out.split() == ["4", "True", "True"]
