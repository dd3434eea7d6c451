"""The .pyi stubs describe the API the module really has: every public name and method of
each submodule is in its stub, and the stub names nothing the module lacks."""
import ast
import importlib
from pathlib import Path

import pytest

import frugal

STUB_ONLY = {"_Cache", "_PrefixMatch", "_PrefixTree", "SemanticEntry", "SemanticHit", "ProgressiveModel", "Key", "T",
             "EvictionCallback", "ChunkCallback", "DraftArrays", "PackedDrafts", "Generator", "Retriever", "Router",
             "UserAction"}


def stub_of(name):
    """{top-level name: set of member names} of frugal/<name>.pyi, bases' members included."""
    tree = ast.parse((Path(frugal.__file__).parent / f"{name}.pyi").read_text())
    members = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            own = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AnnAssign)) and hasattr(n, "name")}
            own |= {n.target.id for n in node.body if isinstance(n, ast.AnnAssign)}
            own |= {t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets}
            for base in node.bases:
                if isinstance(base, ast.Name) and base.id in members:
                    own |= members[base.id]
            members[node.name] = own
        elif isinstance(node, ast.FunctionDef):
            members[node.name] = set()
        elif isinstance(node, ast.Assign):
            members.update({t.id: set() for t in node.targets})
        elif isinstance(node, ast.AnnAssign):
            members[node.target.id] = set()
    return members


@pytest.mark.parametrize("name", ["draft", "cache", "prune", "attention", "schedule", "sim", "rag"])
def test_stub_matches_module(name):
    module = importlib.import_module(f"frugal.{name}")
    stub = stub_of(name)
    public = {n for n in dir(module) if not n.startswith("_")}
    assert public == set(stub) - STUB_ONLY
    for cls in public:
        obj = getattr(module, cls)
        if not isinstance(obj, type):
            continue
        runtime = {n for n in dir(obj) if not n.startswith("_") or n in ("__len__", "__contains__", "__getitem__",
                                                                          "__setitem__", "__delitem__", "__iter__",
                                                                          "__enter__", "__exit__")}
        runtime -= {"name", "value"} if hasattr(obj, "__members__") else set()  # pybind11 enum internals
        assert runtime <= stub[cls] | set(getattr(obj, "__members__", {})), (cls, runtime - stub[cls])


def test_package_exports():
    assert {"Error", "InvalidArgumentError", "OutOfRangeError", "RuntimeFailureError", "__version__"} <= set(frugal.__all__)
    assert frugal.draft.Drafter.__module__ == "frugal.draft"
