"""What the tier tests share: the bytes a page of a key holds, and a request served as an
engine serves it (match, compute the rest into allocated rows, insert)."""
import numpy as np


def pages_for(keys, nbytes=256):
    """Row i: bytes derived from key i (what a loaded page must hold)."""
    rows = np.empty((len(keys), nbytes), np.uint8)
    for i, (high, low) in enumerate(keys.tolist()):
        rows[i] = np.random.default_rng([high & 0xFFFFFFFF, low & 0xFFFFFFFF]).integers(0, 256, nbytes, dtype=np.uint8)
    return rows


def serve(tree, pages, keys):
    """A request as an engine runs it: match, compute the rest into allocated rows, insert."""
    with tree.match(keys) as hit:
        for i, row in enumerate(hit.pages):
            np.testing.assert_array_equal(pages[row], pages_for(keys[i:i + 1])[0])
        rows = tree.allocate(len(keys) - len(hit))
        assert len(rows) == len(keys) - len(hit)
        pages[rows] = pages_for(keys[len(hit):])
        r = tree.insert(hit, keys, rows)
        assert len(hit) == r.cached
        return hit.from_tier, r
