"""Progressive cluster pruning of reranker candidates, GRATING (frugal::prune)."""
import enum
from typing import Iterable, List, Optional, Protocol, Tuple

import numpy as np
import numpy.typing as npt

from ._types import Float32Array, Path, Scores

class DispersionMeasure(enum.Enum):
    cv = 0
    robust_cv = 1

class RankingMode(enum.Enum):
    top_k = 0
    exact = 1

class Route(enum.Enum):
    deferred = 0
    selected = 1
    dropped = 2

class PruneStep:
    @property
    def triggered(self) -> bool: ...
    @property
    def done(self) -> bool: ...
    @property
    def dispersion(self) -> float: ...
    @property
    def clusters(self) -> int: ...
    @property
    def selected(self) -> int: ...
    @property
    def deferred(self) -> int: ...
    @property
    def dropped(self) -> int: ...

class LayerStats:
    layer: int
    active: int
    selected: int
    dropped: int
    chunks: int
    chunk_size: int
    triggered: bool
    dispersion: float

class ThresholdPoint:
    threshold: float
    precision_at_k: float
    layer_compute_saved: float

class CalibrationResult:
    threshold: float
    met: bool
    chosen: ThresholdPoint
    curve: List[ThresholdPoint]

class PruningEvaluation:
    queries: int
    k: int
    precision_at_k: float
    layer_compute_saved: float
    @property
    def mean_active_per_layer(self) -> npt.NDArray[np.float64]: ...
    @property
    def query_loss(self) -> npt.NDArray[np.float64]: ...

class KMeansResult:
    @property
    def labels(self) -> npt.NDArray[np.uint32]: ...
    @property
    def centroids(self) -> npt.NDArray[np.float64]: ...
    @property
    def sizes(self) -> npt.NDArray[np.uint64]: ...
    @property
    def withinss(self) -> npt.NDArray[np.float64]: ...
    @property
    def sse(self) -> float: ...

def dispersion(scores: Scores, measure: DispersionMeasure = ..., mean_floor: float = 1e-12) -> float: ...
def kmeans1d_optimal(scores: Scores, k: int) -> KMeansResult: ...

class KMeans1D:
    def __init__(self) -> None: ...
    def fit(self, scores: Scores, k_max: int) -> None: ...
    def sse(self, k: int) -> float: ...
    def bic(self, k: int) -> float: ...
    def select_k_bic(self) -> int: ...
    def clustering(self, k: int) -> KMeansResult: ...
    @property
    def order(self) -> npt.NDArray[np.uint32]: ...
    @property
    def k_max(self) -> int: ...
    def __len__(self) -> int: ...

class ClusterPrunerOptions:
    def __init__(self, *, threshold: float = 0.2, measure: DispersionMeasure = ..., mode: RankingMode = ...,
                 clusters: int = 0, max_clusters: int = 6, patience: int = 3, lead_over_change: float = 0.5,
                 confirmations: int = 1) -> None: ...
    threshold: float
    measure: DispersionMeasure
    mode: RankingMode
    clusters: int
    max_clusters: int
    patience: int
    lead_over_change: float
    confirmations: int

class ClusterPruner:
    def __init__(self, options: ClusterPrunerOptions = ..., *, threshold: float = 0.2,
                 measure: DispersionMeasure = ..., mode: RankingMode = ..., clusters: int = 0, max_clusters: int = 6,
                 patience: int = 3, lead_over_change: float = 0.5, confirmations: int = 1) -> None: ...
    def decide(self, scores: Float32Array, open_slots: int,
               out: Optional[npt.NDArray[np.uint8]] = None) -> Tuple[PruneStep, npt.NDArray[np.uint8]]: ...
    def reset(self) -> None: ...
    @property
    def options(self) -> ClusterPrunerOptions: ...

class TrajectorySet:
    def __init__(self, queries: Iterable[npt.NDArray[np.float32]]) -> None: ...
    @staticmethod
    def load(path: Path) -> "TrajectorySet": ...
    def save(self, path: Path) -> None: ...
    @property
    def layers(self) -> int: ...
    def __len__(self) -> int: ...
    def __getitem__(self, i: int) -> npt.NDArray[np.float32]: ...

def evaluate_pruning(trajectories: TrajectorySet, k: int,
                     options: ClusterPrunerOptions = ...) -> PruningEvaluation: ...
def threshold_grid(trajectories: TrajectorySet, options: ClusterPrunerOptions = ..., points: int = 96) -> List[float]: ...
def calibrate_threshold(trajectories: TrajectorySet, k: int, target: float, *, policy: ClusterPrunerOptions = ...,
                        grid_points: int = 96, delta: Optional[float] = None, margin_standard_errors: float = ...,
                        padding_queries: int = 1) -> CalibrationResult: ...

class ChunkPlanning:
    def __init__(self, *, per_token_seconds: float, min_chunk_seconds: float, intermediate_bytes_per_token: float,
                 next_layer_load_seconds: float, memory_limit_bytes: float) -> None: ...

class ProgressiveRanking:
    @property
    def top(self) -> npt.NDArray[np.uint64]: ...
    @property
    def scores(self) -> npt.NDArray[np.float32]: ...
    layers: List[LayerStats]
    candidate_layers_computed: int
    candidate_layers_skipped: int

class ProgressiveModel(Protocol):
    """What progressive_rank drives: `layers`, embed, forward, score (begin_layer/end_layer optional)."""
    @property
    def layers(self) -> int: ...
    def embed(self, ids: npt.NDArray[np.int64]) -> object: ...
    def forward(self, layer: int, ids: npt.NDArray[np.int64]) -> object: ...
    def score(self, ids: npt.NDArray[np.int64]) -> Float32Array: ...

def progressive_rank(model: ProgressiveModel, pool: int, k: int, policy: ClusterPruner, *, chunk_size: int = 0,
                     planning: Optional[ChunkPlanning] = None) -> ProgressiveRanking: ...
