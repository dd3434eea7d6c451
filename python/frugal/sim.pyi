"""The lab: paper baselines (frugal::sim)."""
from typing import List

import numpy as np
import numpy.typing as npt

from ._types import Int32Array
from .schedule import GraphSwitchProblem

def prompt_lookup_draft(context: Int32Array, max_ngram: int = 3, max_draft: int = 10) -> npt.NDArray[np.int32]: ...
def paper_greedy_graph_switch(problem: GraphSwitchProblem) -> List[int]: ...
