"""Backward operators of the families above, for forward-and-backward workloads (training steps).

Convention: the gradient of an element-wise function is grad_out x f'(x); count the operations of
the derivative's formula plus the multiplication by the incoming gradient (a comparison and a
selection for piecewise functions), with Sigmoid = 4 and Tanh = 6 as in the forward pass. Matrix
products keep PyTorch's 2*M*N*K. Accumulating gradients into a shared source (a scatter-add, the
rows of an embedding, the inputs of overlapping windows) costs one addition per contribution.
Convolutions are in ``convolution`` (a formula that replaces PyTorch's).
"""

from __future__ import annotations

import math
from typing import Any

from ._base import arg, expand_ints, is_shape, numel, out_numel, register
from .activation import GELU_ERF, SIGMOID, TANH, softmax_flops
from .interpolation import weighted_sum_flops
from .pooling import _adaptive_volume
from .recurrent import _GATES_CELL


def _grad_numel(args: tuple[Any, ...], out_shape: Any) -> int:
    grad = args[0] if args else None
    return numel(grad) if is_shape(grad) else out_numel(out_shape)


def _per_element(per_element: int, names: tuple[str, ...], definition: str) -> None:
    def formula(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        return per_element * _grad_numel(args, out_shape)

    formula.__doc__ = f"{per_element} FLOPs per gradient element: {definition}."
    formula.__name__ = f"{names[0]}_flop"
    formula.__qualname__ = formula.__name__
    register(*names, family="backward")(formula)


_per_element(2, ("threshold_backward",), "ReLU: grad * [x > 0], one comparison and one selection")
_per_element(3, ("leaky_relu_backward", "rrelu_with_noise_backward"), "grad * (x > 0 ? 1 : slope): compare, select, multiply")
_per_element(3, ("hardtanh_backward",), "grad * [min < x < max]: two comparisons and a selection")
_per_element(3, ("elu_backward",), "x > 0 ? grad : grad * (y + alpha): compare, add, multiply")
_per_element(3, ("sigmoid_backward",), "grad * y * (1 - y): subtract, two multiplies")
_per_element(3, ("tanh_backward",), "grad * (1 - y^2): square, subtract, multiply")
_per_element(2 + SIGMOID + 3, ("silu_backward",), "grad * s * (1 + x (1 - s)), s = sigmoid(x): Sigmoid (4), "
             "subtract, multiply, add, multiply, multiply")
_per_element(6, ("hardswish_backward",), "piecewise grad * (2x + 3) / 6: two comparisons, multiply, add, divide, multiply")
_per_element(3, ("hardsigmoid_backward",), "grad / 6 inside (-3, 3): two comparisons and a divide")
_per_element(6, ("softplus_backward",), "grad * sigmoid(beta x): multiply, Sigmoid (4), multiply")
_per_element(6, ("log_sigmoid_backward",), "grad * (1 - sigmoid(x)): Sigmoid (4), subtract, multiply")
_per_element(3, ("softshrink_backward", "hardshrink_backward"), "grad * [|x| > lambda]: two comparisons and a selection")
_per_element(2, ("native_dropout_backward",), "grad * mask * scale: two multiplies")
_per_element(3 + TANH + 2 + SIGMOID + 2 + 1 + 1, ("mish_backward",),
             "t = Tanh(softplus(x)) (3 + 6), grad * (t + x (1 - t^2) sigmoid(x)): square, subtract, Sigmoid (4), "
             "two multiplies, add, multiply by grad")


@register("gelu_backward", family="backward")
def gelu_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """GELU: 11 FLOPs per element exactly, 23 with the tanh approximation.

    Exact: grad * (Phi(x) + x phi(x)), Phi as in the forward (4), phi(x) = exp(-x^2/2) / sqrt(2 pi)
    (square, multiply, exp, multiply = 4), x * phi, add, multiply by grad.
    Tanh: u (4) and Tanh(u) (6) as in the forward, then 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3c x^2):
    13 more operations.
    """
    approximate = kwargs.get("approximate", "none")
    per = 23 if approximate == "tanh" else GELU_ERF + 6
    return per * _grad_numel(args, out_shape)


@register("glu_backward", family="backward")
def glu_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """9 FLOPs per output-gradient element: grad_a = g * s (Sigmoid 4 + multiply), grad_b =
    g * a * s * (1 - s) (subtract, three multiplies)."""
    return 9 * _grad_numel(args, out_shape)


@register("_prelu_kernel_backward", family="backward")
def prelu_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """6 FLOPs per element: grad_input as LeakyReLU's (compare, select, multiply) and grad_weight
    contributions x * grad where x < 0 (select, multiply, accumulate)."""
    return 6 * _grad_numel(args, out_shape)


# --- softmax ------------------------------------------------------------------------------------


def _rows(shape: Any, dim: Any) -> tuple[int, int]:
    n = numel(shape)
    if not is_shape(shape) or not len(shape):
        return n, 1
    size = shape[int(dim) % len(shape)]
    return n, (n // size if size else 0)


@register("_softmax_backward_data", family="backward")
def softmax_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """4N - R: y * (g - sum(g * y)): multiply N, row sums N - R, subtract N, multiply N."""
    n, rows = _rows(args[0] if args else None, arg(args, kwargs, 2, "dim", -1))
    return softmax_flops(n, rows) + n


@register("_log_softmax_backward_data", family="backward")
def log_softmax_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """4N - R: g - exp(y) * sum(g): row sums N - R, exp N, multiply N, subtract N."""
    n, rows = _rows(args[0] if args else None, arg(args, kwargs, 2, "dim", -1))
    return softmax_flops(n, rows) + n


# --- normalisation ------------------------------------------------------------------------------


def _norm_backward(n: int, weight: bool, mask: Any, train: bool = True) -> int:
    """dx: x_hat = (x - mean) * rstd (2N), g * w (N), the two row means of g*w and g*w*x_hat (3N),
    dx = rstd * (g w - m1 - x_hat m2) (4N) = 9N + [w]N (evaluation batch norm: g * w * invstd, 2N);
    grad_weight = sum g * x_hat (2N, + 2N for x_hat when not computed for dx); grad_bias = sum g (N)."""
    want = list(mask) if isinstance(mask, (list, tuple)) and len(mask) == 3 else [True, True, True]
    flops = 0
    if want[0]:
        flops += (9 * n + (n if weight else 0)) if train else (2 * n if weight else n)
    if want[1]:
        flops += 2 * n + (0 if train and want[0] else 2 * n)
    if want[2]:
        flops += n
    return flops


@register("native_layer_norm_backward", family="backward")
def layer_norm_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
    output_mask)``: grad_input 9N + [w]N, grad_weight 2N, grad_bias N (as requested by output_mask)."""
    n = numel(arg(args, kwargs, 1, "input"))
    weight = arg(args, kwargs, 5, "weight") is not None
    return _norm_backward(n, weight, arg(args, kwargs, 7, "output_mask"))


@register("native_group_norm_backward", family="backward")
def group_norm_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group,
    output_mask)``: as layer norm, 9N + [w]N + 2N + N."""
    n = numel(arg(args, kwargs, 1, "input"))
    weight = arg(args, kwargs, 4, "weight") is not None
    return _norm_backward(n, weight, arg(args, kwargs, 9, "output_mask"))


@register("native_batch_norm_backward", family="backward")
def batch_norm_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
    save_invstd, train, eps, output_mask)``: training as layer norm over each channel (9N + [w]N +
    2N + N); evaluation grad_input = g * w * invstd (2N) and grad_weight needs x_hat (4N)."""
    n = numel(arg(args, kwargs, 1, "input"))
    weight = arg(args, kwargs, 2, "weight") is not None
    train = bool(arg(args, kwargs, 7, "train", True))
    return _norm_backward(n, weight, arg(args, kwargs, 9, "output_mask"), train)


@register("batch_norm_backward", family="backward")
def batch_norm_backward_new_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_var,
    update, eps, output_mask, reserve)``: as ``native_batch_norm_backward``."""
    n = numel(arg(args, kwargs, 1, "input"))
    weight = arg(args, kwargs, 2, "weight") is not None
    train = bool(arg(args, kwargs, 7, "update", True))
    return _norm_backward(n, weight, arg(args, kwargs, 9, "output_mask"), train)


@register("cudnn_batch_norm_backward", "miopen_batch_norm_backward", family="backward")
def cudnn_batch_norm_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """cuDNN/MIOpen batch norm backward (training, all three gradients): 9N + N + 2N + N = 13N."""
    return _norm_backward(numel(args[0] if args else None), True, None)


@register("_fused_rms_norm_backward", family="backward")
def rms_norm_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``_fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask)``:
    grad_input rstd * (g w - x_hat mean(g w x_hat)): x_hat N, g w N, product and mean 2N, multiply,
    subtract, multiply 3N = 7N (6N without weight); grad_weight sum g * x_hat 2N."""
    n = numel(arg(args, kwargs, 1, "input"))
    weight = arg(args, kwargs, 4, "weight") is not None
    mask = arg(args, kwargs, 5, "output_mask")
    want = list(mask) if isinstance(mask, (list, tuple)) and len(mask) == 2 else [True, weight]
    return (7 * n if weight else 6 * n) * bool(want[0]) + 2 * n * bool(want[1])


# --- pooling, interpolation, embeddings ---------------------------------------------------------


@register("max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward", "adaptive_max_pool2d_backward",
          "adaptive_max_pool3d_backward", "fractional_max_pool2d_backward", "fractional_max_pool3d_backward",
          family="backward")
def max_pool_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """1 FLOP per output gradient: each is added into the input position that was the maximum."""
    return _grad_numel(args, out_shape)


def _avg_pool_backward(ndim: int):
    def formula(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        k = math.prod(expand_ints(arg(args, kwargs, 2, "kernel_size"), ndim, 1))
        return (k + 1) * _grad_numel(args, out_shape)

    formula.__doc__ = (f"Average pooling backward ({ndim}-D): K + 1 FLOPs per output gradient (one "
                       "division, then K additions into the window's inputs).")
    formula.__name__ = f"avg_pool{ndim}d_backward_flop"
    formula.__qualname__ = formula.__name__
    return formula


register("avg_pool2d_backward", family="backward")(_avg_pool_backward(2))
register("avg_pool3d_backward", family="backward")(_avg_pool_backward(3))


def _adaptive_avg_backward(ndim: int):
    def formula(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        grad, x = (args + (None, None))[:2]
        total, outputs = _adaptive_volume(x, grad, ndim)
        return total + outputs

    formula.__doc__ = (f"Adaptive average pooling backward ({ndim}-D): one division per output gradient "
                       "and one addition per window element, over PyTorch's exact windows.")
    formula.__name__ = f"adaptive_avg_pool{ndim}d_backward_flop"
    formula.__qualname__ = formula.__name__
    return formula


register("_adaptive_avg_pool2d_backward", family="backward")(_adaptive_avg_backward(2))
register("_adaptive_avg_pool3d_backward", family="backward")(_adaptive_avg_backward(3))


def _interp_backward(taps: int, names: tuple[str, ...]) -> None:
    def formula(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        grads = _grad_numel(args, out_shape)
        return grads if taps == 0 else weighted_sum_flops(grads, taps) + grads

    formula.__doc__ = ("Interpolation backward: each output gradient is scattered to its input taps "
                       f"({taps} taps: a multiply and an add each = {2 * taps} per gradient element; "
                       "nearest modes: one addition).")
    formula.__name__ = f"{names[0]}_flop"
    formula.__qualname__ = formula.__name__
    register(*names, family="backward")(formula)


_interp_backward(0, ("upsample_nearest1d_backward", "upsample_nearest2d_backward", "upsample_nearest3d_backward",
                     "_upsample_nearest_exact1d_backward", "_upsample_nearest_exact2d_backward",
                     "_upsample_nearest_exact3d_backward"))
_interp_backward(2, ("upsample_linear1d_backward",))
_interp_backward(4, ("upsample_bilinear2d_backward", "_upsample_bilinear2d_aa_backward"))
_interp_backward(8, ("upsample_trilinear3d_backward",))
_interp_backward(16, ("upsample_bicubic2d_backward", "_upsample_bicubic2d_aa_backward"))


@register("embedding_dense_backward", "embedding_backward", family="backward")
def embedding_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """1 FLOP per gradient element: each looked-up row's gradient is added into the weight's row."""
    return _grad_numel(args, out_shape)


@register("_embedding_bag_backward", "_embedding_bag_dense_backward", family="backward")
def embedding_bag_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """I * D additions (each of the I looked-up indices receives its bag's D-wide gradient), + I * D
    divisions in mean mode and + I * D multiplies with per-sample weights."""
    grad, indices = (args + (None, None))[:2]
    dim = grad[-1] if is_shape(grad) and len(grad) else 0
    looked_up = numel(indices) if is_shape(indices) else 0
    mode = arg(args, kwargs, 8, "mode", 0) if len(args) > 11 else arg(args, kwargs, 7, "mode", 0)
    per_sample = kwargs.get("per_sample_weights", args[10] if len(args) > 10 and is_shape(args[10]) else None)
    return looked_up * dim * (1 + (mode == 1) + (per_sample is not None))


# --- losses -------------------------------------------------------------------------------------


@register("nll_loss_backward", "nll_loss2d_backward", family="backward")
def nll_loss_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Per target position: negate the incoming gradient (1), divide by the count or total weight for
    a mean (1), multiply by the class weight (1); zeros elsewhere are not arithmetic."""
    target = arg(args, kwargs, 2, "target")
    weight = arg(args, kwargs, 3, "weight")
    reduction = arg(args, kwargs, 4, "reduction", 1)
    t = numel(target) if is_shape(target) else 0
    return t * (1 + (reduction == 1) + (weight is not None))


@register("mse_loss_backward", family="backward")
def mse_loss_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """3N (+ N for mean): 2 (x - y) * grad: subtract, two multiplies (and a division by N)."""
    n = numel(arg(args, kwargs, 1, "self"))
    return 3 * n + (n if arg(args, kwargs, 3, "reduction", 1) == 1 else 0)


@register("binary_cross_entropy_backward", family="backward")
def bce_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """5N (+ N with weight, + N for mean): grad * (x - y) / (x (1 - x)): subtract, subtract,
    multiply, divide, multiply."""
    n = numel(arg(args, kwargs, 1, "self"))
    weight = arg(args, kwargs, 3, "weight")
    return 5 * n + (n if weight is not None else 0) + (n if arg(args, kwargs, 4, "reduction", 1) == 1 else 0)


@register("smooth_l1_loss_backward", "huber_loss_backward", family="backward")
def smooth_l1_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """4N (+ N for mean): subtract, abs and compare, then the branch's scale (multiply or sign) times grad."""
    n = numel(arg(args, kwargs, 1, "self"))
    return 4 * n + (n if arg(args, kwargs, 3, "reduction", 1) == 1 else 0)


# --- fused kernels ------------------------------------------------------------------------------


@register("_scaled_dot_product_flash_attention_for_cpu_backward", family="backward")
def sdpa_cpu_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``_scaled_dot_product_flash_attention_for_cpu_backward(grad_out, q, k, v, out, logsumexp,
    dropout_p, is_causal, *, attn_mask, scale)``.

    Products (PyTorch's ``sdpa_backward_flop_count``): recomputed Q K^T, dP = dO V^T, dV = P^T dO,
    dQ = dS K, dK = dS^T Q: 2*BHLS*(3D + 2Dv). Element-wise: recomputing P from the log-sum-exp
    (scale, subtract, exp: 3 BHLS, + BHLS with a mask), the row terms rowsum(dO * O) (2 BHL Dv),
    dS = P * (dP - rowterm) (2 BHLS) and its scaling (BHLS), + 2 BHLS for dropout.
    """
    grad_out, q, k, v = (args + (None,) * 4)[:4]
    if not all(is_shape(s) for s in (q, k, v)):
        return 0
    bh = math.prod(q[:-2])
    length_q, dim = q[-2], q[-1]
    length_kv, dim_v = k[-2], v[-1]
    scores = bh * length_q * length_kv
    flops = 2 * scores * (3 * dim + 2 * dim_v)
    flops += 3 * scores + 2 * bh * length_q * dim_v + 2 * scores + scores
    if kwargs.get("attn_mask") is not None:
        flops += scores
    if (arg(args, kwargs, 6, "dropout_p", 0.0) or 0.0) > 0:
        flops += 2 * scores
    return flops


#: element-wise backward work per hidden unit and step (LSTM derived; other cells: 2x forward)
_CELL_BACKWARD = {4: 30}


@register("mkldnn_rnn_layer_backward", family="backward")
def mkldnn_rnn_layer_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``mkldnn_rnn_layer_backward(input, weight1, weight2, weight3, weight4, hx, cx, output, hy, cy,
    grad_output, grad_hy, grad_cy, reverse, mode, hidden_size, ...)``: one layer and direction.

    Products: twice the forward's 2*T*B*G*H*(I + H) (gradients of the inputs/hidden states and of the
    weights). Element-wise LSTM cell backward per unit and step, 30: do (1), dc (5), di, dg, df,
    dc_prev (4), sigmoid' for i, f, o (9), tanh' for g (3), the two bias gradients (8). Other cells:
    twice the forward cell (estimate).
    """
    x = args[0] if args else None
    w_ih = arg(args, kwargs, 1, "weight1")
    w_hh = arg(args, kwargs, 2, "weight2")
    if not (is_shape(x) and is_shape(w_ih) and is_shape(w_hh)):
        return 0
    hidden = int(arg(args, kwargs, 15, "hidden_size", 0) or 0) or int(w_hh[1])
    gates = int(w_ih[0]) // hidden if hidden else 0
    tokens = math.prod(x[:-1])
    matmul = 2 * 2 * tokens * gates * hidden * (int(w_ih[1]) + int(w_hh[1]))
    cell = _CELL_BACKWARD.get(gates, 2 * _GATES_CELL.get(gates, 0))
    return matmul + cell * tokens * hidden

