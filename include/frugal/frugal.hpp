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

// attention
#include "frugal/attention/heads_view.hpp"
#include "frugal/attention/host_device.hpp"
#include "frugal/attention/masks.hpp"
#include "frugal/attention/online_softmax.hpp"
#include "frugal/attention/out_of_core.hpp"
#include "frugal/attention/parallel_for.hpp"
#include "frugal/attention/staged_attention.hpp"
#include "frugal/attention/tiled_attention.hpp"
#include "frugal/schedule/attention_plan.hpp"
#include "frugal/schedule/memory_model.hpp"
