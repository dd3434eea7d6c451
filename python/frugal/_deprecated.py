"""The module-level names this release replaced, kept working for one more release: each use
warns (DeprecationWarning, naming its replacement) and forwards to the new API. The list, with
what replaces each name, is docs/python.md's "Names replaced in this release"; the C++ module
keeps the rest (BatchPlan's dtype strings, results that still unpack as the tuples or index as
the dicts they replaced). Delete this file, its import in __init__.py and the names in the stubs
in the next release.
"""
import warnings

from . import _frugal

_attention, _cache = _frugal.attention, _frugal.cache


def _warn(old, new):
    warnings.warn(f"{old} is deprecated and will be removed in the next release: use {new}", DeprecationWarning,
                  stacklevel=3)


class _DeprecatedMember:
    """A class attribute that warns and returns its replacement (an enum value's old name)."""

    def __init__(self, old, new, value):
        self.old, self.new, self.value = old, new, value

    def __get__(self, obj, owner=None):
        _warn(self.old, self.new)
        return self.value


def _tree_alias(name, policy):
    """A PrefixTree subclass whose constructor takes the previous release's arguments."""
    def __init__(self, budget_bytes, *, on_evict=None):  # the module's __getattr__ warned already
        _cache.PrefixTree.__init__(self, budget_bytes, policy=policy, on_evict=on_evict)

    return type(name, (_cache.PrefixTree,), {
        "__init__": __init__, "__module__": "frugal.cache",
        "__doc__": f"Deprecated: PrefixTree(budget_bytes, policy=PrefixTreePolicy.{policy.name}, on_evict=...)."})


def _module_aliases(module, aliases):
    """Lets `module.<old>` reach the replacement named in `aliases` ({old: (object, new name)})."""
    def __getattr__(name):
        if name in aliases:
            value, new = aliases[name]
            _warn(f"{module.__name__}.{name}", new)
            return value
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
    module.__getattr__ = __getattr__


for _old, _new in (("head_major", "hnd"), ("token_major", "nhd")):
    setattr(_attention.Layout, _old, _DeprecatedMember(f"frugal.attention.Layout.{_old}",
                                                       f"frugal.attention.Layout.{_new}",
                                                       getattr(_attention.Layout, _new)))

_module_aliases(_attention, {"KVLayout": (_attention.Layout, "frugal.attention.Layout")})

_P = _cache.PrefixTreePolicy
_module_aliases(_cache, {
    **{name: (_tree_alias(name, policy), f"frugal.cache.PrefixTree(..., policy=PrefixTreePolicy.{policy.name})")
       for name, policy in (("LRUPrefixTree", _P.lru), ("GDSFPrefixTree", _P.gdsf), ("S3FIFOPrefixTree", _P.s3fifo))},
    **{name: (_cache.PrefixTreeMatch, "frugal.cache.PrefixTreeMatch")
       for name in ("LRUPrefixTreeMatch", "GDSFPrefixTreeMatch", "S3FIFOPrefixTreeMatch")},
    "TieredInsert": (_cache.InsertResult, "frugal.cache.InsertResult"),
})

del _old, _new, _P
