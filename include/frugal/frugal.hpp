#pragma once
/// @file
/// frugal umbrella header: every algorithm module. Never includes Eigen or CUDA;
/// include `frugal/backend/eigen/...` or `frugal/backend/cuda/...` for those.
/// @code
/// #include <frugal/frugal.hpp>
/// @endcode

// core
#include "frugal/core/assert.hpp"
#include "frugal/core/concepts.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/matrix_view.hpp"
#include "frugal/core/memory_budget.hpp"
#include "frugal/core/stats.hpp"
#include "frugal/core/version.hpp"

// prune
#include "frugal/prune/calibrate.hpp"
#include "frugal/prune/cluster_pruner.hpp"
#include "frugal/prune/dispersion.hpp"
#include "frugal/prune/kmeans1d.hpp"
#include "frugal/prune/progressive_ranker.hpp"
#include "frugal/prune/progressive_selection.hpp"
#include "frugal/prune/synthetic_trajectories.hpp"
#include "frugal/prune/trajectory.hpp"

// stream
#include "frugal/stream/file_layer_loader.hpp"
#include "frugal/stream/hidden_state_offload.hpp"
#include "frugal/stream/io_thread.hpp"
#include "frugal/stream/layer_window.hpp"
