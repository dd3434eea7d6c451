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

// draft
#include "frugal/draft/calibration.hpp"
#include "frugal/draft/drafter.hpp"
#include "frugal/draft/history.hpp"
#include "frugal/draft/ngram.hpp"
#include "frugal/draft/reuse.hpp"
#include "frugal/draft/suffix_automaton.hpp"
#include "frugal/draft/verify.hpp"
