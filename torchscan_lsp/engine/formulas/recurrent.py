"""Recurrent layers: ``RNN`` (tanh/relu), ``LSTM``, ``GRU`` (every layer and direction,
``batch_first``, ``proj_size``, ``PackedSequence`` inputs) and the cells ``RNNCell``, ``LSTMCell``,
``GRUCell``.

Notation: ``G`` gates (LSTM 4, GRU 3, RNN 1), ``H = hidden_size``, ``Ho`` the state fed back and
emitted (``proj_size`` when set, else ``H``), ``I_l`` the input width of layer ``l`` (``input_size``
for the first layer, ``directions·Ho`` above it), ``N`` tokens (time steps × batch; the total
length of a ``PackedSequence``), ``T`` time steps, ``[bias]`` = 1 when the layer has biases.
Every direction of every layer processes all ``N`` tokens.

MACs (docs/formulas.md, "Recurrent layers"): per token, layer and direction ``G·H·(I_l + Ho)`` — the input
and recurrent gate matmuls — plus ``H·Ho`` for the LSTM projection. LSTM without projection:
``T·4H(I + H)`` per layer and direction. Biases are folded into the accumulation; the gate
non-linearities and the state updates are element-wise work, not MACs. PyTorch's ``FlopCounterMode``
sees the same matmuls (``2·MACs``) when the layer runs on the meta device, where it decomposes into
``addmm``/``mm`` calls; on CPU it runs the fused ``aten.mkldnn_rnn_layer`` and counts 0.

FLOPs per token, layer and direction: the two gate matmuls with the Linear convention,
``G·H·(2·I_l − 1) + G·H·(2·Ho − 1) + [bias]·2·G·H``, the projection ``Ho·(2H − 1)``, and the
cell's element-wise work with the activation costs of ``activation.py``:

* LSTM ``32·H``: add the two pre-activations (4H), three sigmoids (12H), one tanh for g (6H),
  ``c = f·c + i·g`` (3H), ``tanh(c)`` (6H), ``h = o·tanh(c)`` (H);
* GRU ``22·H``: r and z pre-activation adds and sigmoids (2·5H), ``n = tanh(x_n + r·h_n)``
  (multiply, add, tanh: 8H), ``h = (1 − z)·n + z·h`` (4H);
* RNN ``7·H`` (tanh: add, tanh) or ``2·H`` (relu: add, max).

DMAs, a staged logical algorithm per layer and direction: the input projection over all tokens at
once (read the layer input ``N·I_l``, read ``W_ih``/``b_ih`` once, write the gate pre-activations
``N·G·H``), then one fused cell step per time step (read the pre-activations ``N·G·H`` and the
previous state ``N·Ho`` in total, read ``W_hh``/``b_hh`` — and ``W_hr`` — once **per step**, since a
recurrence cannot batch its steps; LSTM also reads and writes the cell state, ``2·N·H``) writing the
output ``N·Ho``. The final ``h_n``/``c_n`` are the last step's states, not a further pass. For a
``PackedSequence``, ``T`` is its number of steps: pass ``inputs=`` to ``module_dmas`` (FLOPs and MACs
depend only on ``N``; without ``inputs=`` a 2-D ``x`` is read as one unbatched sequence).

Cells are one time step of one layer and direction (``T = 1``).

Receptive field: not defined for the sequence layers — the output at step ``t`` depends on every
earlier step (every step, bidirectional); the formula warns and the crawler reports it unavailable.
Cells are ``(1.0, 1.0, 0.0)``.
"""

from __future__ import annotations

from torch import nn
from torch.nn.utils.rnn import PackedSequence

from ._common import arg, as_inputs, first_tensor, rf_pointwise, rf_undefined, shape
from ._registry import Family

__all__ = [
    "dmas_rnn",
    "dmas_rnn_cell",
    "flops_rnn",
    "flops_rnn_cell",
    "macs_rnn",
    "macs_rnn_cell",
    "rf_rnn",
    "rf_rnn_cell",
]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
# element-wise FLOPs per hidden unit of one cell step (see the module docstring)
_CELL_FLOPS = {"LSTM": 32, "GRU": 22, "RNN_TANH": 7, "RNN_RELU": 2}


def _cell_mode(module: nn.Module) -> str:
    if isinstance(module, nn.LSTMCell):
        return "LSTM"
    if isinstance(module, nn.GRUCell):
        return "GRU"
    return "RNN_RELU" if module.nonlinearity == "relu" else "RNN_TANH"


def _steps(module: nn.RNNBase, x, inputs) -> tuple[int, int]:
    """(N tokens, T steps) of a call."""
    first = arg(as_inputs(inputs), 0) if inputs is not None else None
    if isinstance(first, PackedSequence):
        return int(first.data.shape[0]), int(first.batch_sizes.shape[0])
    dims = shape(x)
    if len(dims) == 3:
        batch, steps = (dims[0], dims[1]) if module.batch_first else (dims[1], dims[0])
        return batch * steps, steps
    if len(dims) == 2:  # unbatched (T, I), or the data of a PackedSequence given without inputs=
        return dims[0], dims[0]
    raise NotImplementedError(f"{type(module).__name__} formulas need a 2-D or 3-D input, got {len(dims)}-D.")


def _layers(module: nn.RNNBase):
    """Yield (gates, H, Ho, I_l, proj) per layer (each direction has the same shape)."""
    gates = _GATES[module.mode]
    hidden = module.hidden_size
    proj = getattr(module, "proj_size", 0) or 0
    out = proj or hidden
    directions = 2 if module.bidirectional else 1
    for layer in range(module.num_layers):
        width = module.input_size if layer == 0 else directions * out
        yield gates, hidden, out, width, proj


def _token_macs(gates: int, hidden: int, out: int, width: int, proj: int) -> int:
    return gates * hidden * (width + out) + (hidden * proj if proj else 0)


def _token_flops(mode: str, bias: bool, gates: int, hidden: int, out: int, width: int, proj: int) -> int:
    flops = gates * hidden * (2 * width - 1) + gates * hidden * (2 * out - 1)
    flops += 2 * gates * hidden if bias else 0
    flops += _CELL_FLOPS[mode] * hidden
    if proj:
        flops += proj * (2 * hidden - 1)
    return flops


def _layer_dmas(mode, bias, tokens, steps, gates, hidden, out, width, proj) -> int:
    gate_width = gates * hidden
    bias_elems = gate_width if bias else 0
    projection = gate_width * width + bias_elems + tokens * width + tokens * gate_width
    recurrence = tokens * gate_width + tokens * out + tokens * out
    recurrence += steps * (gate_width * out + bias_elems + (proj * hidden if proj else 0))
    if mode == "LSTM":
        recurrence += 2 * tokens * hidden
    return projection + recurrence


def _sequence_x(inputs, out=None):
    x = first_tensor(as_inputs(inputs))
    if x is None:
        raise ValueError("Recurrent formulas need an input tensor, got none.")
    return x


def macs_rnn(module: nn.RNNBase, x, y=None, *, inputs=None) -> int:
    """``N·Σ_layers directions·(G·H·(I_l + Ho) + [proj]·H·Ho)``."""
    tokens, _ = _steps(module, x, inputs)
    directions = 2 if module.bidirectional else 1
    return tokens * directions * sum(_token_macs(*layer) for layer in _layers(module))


def flops_rnn(module: nn.RNNBase, inputs, out=None) -> int:
    """``N·Σ_layers directions·(gate matmuls + biases + cell element-wise + projection)``."""
    inputs = as_inputs(inputs)
    tokens, _ = _steps(module, _sequence_x(inputs), inputs)
    directions = 2 if module.bidirectional else 1
    per_token = sum(_token_flops(module.mode, module.bias, *layer) for layer in _layers(module))
    return tokens * directions * per_token


def dmas_rnn(module: nn.RNNBase, x, y=None, *, inputs=None) -> int:
    """Staged per layer and direction (see the module docstring)."""
    tokens, steps = _steps(module, x, inputs)
    directions = 2 if module.bidirectional else 1
    return directions * sum(_layer_dmas(module.mode, module.bias, tokens, steps, *layer) for layer in _layers(module))


def rf_rnn(module: nn.RNNBase, x=None, y=None):
    """Not defined (warns)."""
    return rf_undefined(
        module,
        "its output at each step depends on every earlier step (every step when bidirectional).",
    )


def _cell(module: nn.RNNCellBase, x) -> tuple[str, int, tuple]:
    mode = _cell_mode(module)
    dims = shape(x)
    tokens = dims[0] if len(dims) == 2 else 1
    layer = (_GATES[mode], module.hidden_size, module.hidden_size, module.input_size, 0)
    return mode, tokens, layer


def macs_rnn_cell(module: nn.RNNCellBase, x, y=None, *, inputs=None) -> int:
    """``B·G·H·(I + H)``."""
    _, tokens, layer = _cell(module, x)
    return tokens * _token_macs(*layer)


def flops_rnn_cell(module: nn.RNNCellBase, inputs, out=None) -> int:
    """One step of the layer formula."""
    mode, tokens, layer = _cell(module, _sequence_x(inputs))
    return tokens * _token_flops(mode, module.bias, *layer)


def dmas_rnn_cell(module: nn.RNNCellBase, x, y=None, *, inputs=None) -> int:
    """One step of the layer formula (``T = 1``)."""
    mode, tokens, layer = _cell(module, x)
    return _layer_dmas(mode, module.bias, tokens, 1, *layer)


rf_rnn_cell = rf_pointwise

FAMILIES = [
    Family("rnn", (nn.RNNBase,), flops_rnn, macs_rnn, dmas_rnn, rf_rnn),
    Family("rnn_cell", (nn.RNNCellBase,), flops_rnn_cell, macs_rnn_cell, dmas_rnn_cell, rf_rnn_cell),
]
