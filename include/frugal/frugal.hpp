#pragma once
/// @file
/// frugal umbrella header: every algorithm module. Never includes Eigen or CUDA;
/// include `frugal/backend/eigen/...` or `frugal/backend/cuda/...` for those.
/// @code
/// #include <frugal/frugal.hpp>
/// @endcode

// core
#include "frugal/core/assert.hpp"
#include "frugal/core/atomic_file.hpp"
#include "frugal/core/checked.hpp"
#include "frugal/core/concepts.hpp"
#include "frugal/core/cpu_features.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/executor.hpp"
#include "frugal/core/hash.hpp"
#include "frugal/core/huge_page_allocator.hpp"
#include "frugal/core/matrix_view.hpp"
#include "frugal/core/memory_budget.hpp"
#include "frugal/core/record_file.hpp"
#include "frugal/core/record_frame.hpp"
#include "frugal/core/spin_lock.hpp"
#include "frugal/core/stats.hpp"
#include "frugal/core/thread_pool.hpp"
#include "frugal/core/version.hpp"

// attention
#include "frugal/attention/attention_plan.hpp"
#include "frugal/attention/batch_attention.hpp"
#include "frugal/attention/batch_plan.hpp"
#include "frugal/attention/dtype.hpp"
#include "frugal/attention/heads_view.hpp"
#include "frugal/attention/host_device.hpp"
#include "frugal/attention/kv_quantization.hpp"
#include "frugal/attention/masks.hpp"
#include "frugal/attention/memory_model.hpp"
#include "frugal/attention/online_softmax.hpp"
#include "frugal/attention/out_of_core.hpp"
#include "frugal/attention/paged_kv.hpp"
#include "frugal/attention/tiled_attention.hpp"

// draft
#include "frugal/draft/acceptance_calibrator.hpp"
#include "frugal/draft/calibration.hpp"
#include "frugal/draft/draft_size.hpp"
#include "frugal/draft/drafter.hpp"
#include "frugal/draft/history.hpp"
#include "frugal/draft/reuse.hpp"
#include "frugal/draft/speculator.hpp"
#include "frugal/draft/suffix_automaton.hpp"
#include "frugal/draft/verification_cost.hpp"
#include "frugal/draft/verify.hpp"

// cache
#include "frugal/cache/admission_policy.hpp"
#include "frugal/cache/admitted_policy.hpp"
#include "frugal/cache/arc_policy.hpp"
#include "frugal/cache/basic_cache.hpp"
#include "frugal/cache/basic_cache_fwd.hpp"
#include "frugal/cache/cache_index.hpp"
#include "frugal/cache/cache_policy.hpp"
#include "frugal/cache/count_min_sketch.hpp"
#include "frugal/cache/counting_bloom_filter.hpp"
#include "frugal/cache/disk_tier.hpp"
#include "frugal/cache/embedding_row_cache.hpp"
#include "frugal/cache/eviction_reason.hpp"
#include "frugal/cache/gdsf_policy.hpp"
#include "frugal/cache/ghost_queue.hpp"
#include "frugal/cache/lfu_policy.hpp"
#include "frugal/cache/lirs_policy.hpp"
#include "frugal/cache/lru_policy.hpp"
#include "frugal/cache/page_keys.hpp"
#include "frugal/cache/percache_scheduler.hpp"
#include "frugal/cache/prefix_tree.hpp"
#include "frugal/cache/priority_buckets.hpp"
#include "frugal/cache/s3fifo_policy.hpp"
#include "frugal/cache/semantic_cache.hpp"
#include "frugal/cache/sharded_cache.hpp"
#include "frugal/cache/shared_documents.hpp"
#include "frugal/cache/sieve_policy.hpp"
#include "frugal/cache/tier.hpp"
#include "frugal/cache/tiered_prefix_tree.hpp"
#include "frugal/cache/tiered_semantic_cache.hpp"
#include "frugal/cache/tinylfu_admission.hpp"
#include "frugal/cache/two_queue_policy.hpp"
#include "frugal/cache/wtinylfu_policy.hpp"

// prune
#include "frugal/prune/calibrate.hpp"
#include "frugal/prune/cluster_pruner.hpp"
#include "frugal/prune/dispersion.hpp"
#include "frugal/prune/kmeans1d.hpp"
#include "frugal/prune/progressive_ranker.hpp"
#include "frugal/prune/progressive_selection.hpp"
#include "frugal/prune/trajectory.hpp"

// schedule
#include "frugal/schedule/chunk_plan.hpp"
#include "frugal/schedule/graph_switch.hpp"
#include "frugal/schedule/placement.hpp"
#include "frugal/schedule/timeline.hpp"

// rag
#include "frugal/rag/clock.hpp"
#include "frugal/rag/cluster_order.hpp"
#include "frugal/rag/engine.hpp"
#include "frugal/rag/hot_set.hpp"
#include "frugal/rag/ivf_retriever.hpp"
#include "frugal/rag/runtime.hpp"
#include "frugal/rag/scheduler.hpp"
#include "frugal/rag/substage.hpp"
#include "frugal/rag/tiered_ivf.hpp"
#include "frugal/rag/workflow.hpp"

// retrieve
#include "frugal/retrieve/distance.hpp"
#include "frugal/retrieve/ivf_flat.hpp"
#include "frugal/retrieve/similarity_index.hpp"
#include "frugal/retrieve/top_k.hpp"
#include "frugal/retrieve/vector_index.hpp"

// stream
#include "frugal/stream/file_layer_loader.hpp"
#include "frugal/stream/hidden_state_offload.hpp"
#include "frugal/stream/io_thread.hpp"
#include "frugal/stream/layer_window.hpp"
