"""Operators that do no arithmetic and are missing from the reference ignore list (docs/operator-formulas.md).

Most are ATen's; a sharded training step adds collectives, FSDP2's buffer copies and profiler markers.

The engine merges ``EXTRA_IGNORED`` into its ignore list: these operators then appear under
``ignored_operators`` with their reason instead of as ``uncounted_operator`` diagnostics. Every name
here was observed in real models (see tests/engine/operators/test_model_coverage.py) or belongs to the
same family as one that was. The reasons reuse the reference wording where one fits.
"""

from __future__ import annotations

VIEW = "Metadata-only tensor view."
MOVE = "Data movement is excluded from FLOPs."
ALLOC = "Tensor allocation is excluded from FLOPs."
CREATE = "Tensor creation is excluded from FLOPs."
RANDOM = "Random number generation is excluded from FLOPs."
QUERY = "Runtime query or check; no arithmetic."

_GROUPS: dict[str, tuple[str, ...]] = {
    VIEW: (
        "_reshape_alias", "as_strided_", "diagonal", "expand_as", "movedim", "squeeze_", "unsqueeze_",
        "t_", "transpose_", "swapaxes", "swapdims", "unfold", "unflatten", "view_as", "view_as_real",
        "view_as_complex", "real", "imag", "_conj", "_neg_view", "positive", "resolve_conj",
        "resolve_neg", "split_with_sizes", "unsafe_split", "unsafe_split_with_sizes", "unsafe_chunk",
        "chunk", "tensor_split", "_nested_view_from_buffer", "_nested_get_values", "detach_",
        "_indices", "_values", "indices", "values", "lift", "alias_copy", "expand_copy",
        "permute_copy", "select_copy", "slice_copy", "split_copy", "split_with_sizes_copy",
        "squeeze_copy", "t_copy", "transpose_copy", "unbind_copy", "unsqueeze_copy", "view_copy",
        "as_strided_copy", "detach_copy", "diagonal_copy", "_reshape_copy", "reshape",
    ),
    MOVE: (
        "stack", "hstack", "vstack", "dstack", "column_stack", "repeat", "repeat_interleave", "tile",
        "roll", "flip", "fliplr", "flipud", "rot90", "index", "_unsafe_index", "index_select",
        "gather", "take", "take_along_dim", "masked_select", "masked_scatter", "masked_scatter_",
        "nonzero", "nonzero_static", "argwhere", "index_copy", "index_copy_",
        "index_fill", "index_fill_", "slice_scatter", "select_scatter", "diagonal_scatter",
        "as_strided_scatter", "constant_pad_nd", "pad", "reflection_pad1d", "reflection_pad2d",
        "reflection_pad3d", "replication_pad1d", "replication_pad2d", "replication_pad3d",
        "_pad_circular", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
        "native_channel_shuffle", "im2col", "col2im", "tril", "tril_", "triu", "triu_",
        "max_unpool2d", "max_unpool3d", "_copy_from", "_copy_from_and_resize", "fill_", "fill",
        "zero_", "narrow_copy", "_pack_padded_sequence", "_pad_packed_sequence",
        "_nested_tensor_from_mask", "_nested_tensor_from_tensor_list", "to_padded_tensor",
        "_nested_from_padded", "_nested_from_padded_and_nested_example", "flatten", "ravel",
        "block_diag", "diag", "diag_embed", "one_hot", "set_", "resize_", "resize_as_",
        "_to_dense", "to_dense", "to_sparse", "_to_sparse", "_resize_output_",
        "_foreach_copy_", "record_stream", "_make_dep_token", "select_backward", "slice_backward",
        "diagonal_backward", "unfold_backward", "as_strided_backward", "permute_backward",
        "expand_backward", "max_unpool2d_backward", "max_unpool3d_backward",
    ),
    ALLOC: ("empty_like", "new_empty", "new_empty_strided", "empty_permuted", "_empty_affine_quantized"),
    CREATE: (
        "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full", "arange",
        "linspace", "logspace", "eye", "tril_indices", "triu_indices", "_efficientzerotensor",
        "scalar_tensor", "tensor", "_sparse_coo_tensor_with_dims_and_tensors",
    ),
    RANDOM: (
        "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "normal",
        "normal_", "uniform_", "bernoulli", "bernoulli_", "exponential_", "geometric_", "cauchy_",
        "log_normal_", "random_", "multinomial", "poisson",
    ),
    QUERY: (
        "_local_scalar_dense", "item", "is_nonzero", "is_same_size", "_assert_async",
        "_functional_assert_async", "_assert_scalar", "_functional_assert_scalar",
        "_assert_tensor_metadata", "sym_constrain_range", "sym_constrain_range_for_size",
        "_fused_sdp_choice", "_nested_tensor_size", "_nested_tensor_strides",
        "_nested_tensor_storage_offsets", "_nested_tensor_from_mask_left_aligned",
        "_has_compatible_shallow_copy_type", "_version",
        "is_pinned", "_is_any_true", "_is_all_true",
    ),
}

COMMUNICATION = "Communication between ranks is excluded from FLOPs (a sharded plan counts its bytes)."
MARKER = "Profiler marker; no arithmetic."

#: Operators of other namespaces, by full name: what a sharded step runs besides the model's own
#: work (FSDP2's collectives and its copies into and out of their buffers, as ``FlopCounterMode``
#: leaves them out too), and the markers of ``torch.profiler.record_function``.
_OTHER_NAMESPACES: dict[str, tuple[str, ...]] = {
    COMMUNICATION: (
        "c10d._allgather_base_", "c10d.allgather_", "c10d._reduce_scatter_base_", "c10d.reduce_scatter_",
        "c10d.allreduce_", "c10d.broadcast_", "c10d.barrier", "_c10d_functional.all_gather_into_tensor",
        "_c10d_functional.reduce_scatter_tensor", "_c10d_functional.all_reduce", "_c10d_functional.all_reduce_",
        "_c10d_functional.wait_tensor", "_c10d_functional.broadcast", "fsdp.all_gather_copy_in",
        "fsdp.split_with_sizes_copy", "fsdp.chunk_cat", "fsdp.copy_",
    ),
    MARKER: ("profiler._record_function_enter", "profiler._record_function_enter_new",
             "profiler._record_function_exit"),
}

#: op name ("aten.arange", "c10d.allreduce_") -> reason, for the engine to merge into its ignore list.
EXTRA_IGNORED: dict[str, str] = {
    f"aten.{name}": reason for reason, names in _GROUPS.items() for name in dict.fromkeys(names)
} | {name: reason for reason, names in _OTHER_NAMESPACES.items() for name in names}
