"""The project's own FLOP formulas: those torch's registry (torch.utils.flop_counter.flop_registry) lacks or
gets wrong, kept in our table (engine/measure/flops.py ``FORMULAS``) rather than registered with torch, which
refuses an operation it already has and would change torch for the whole process of a user's script.

Each formula takes the operation's arguments as the dispatcher passes them (tensors, not their shapes) and
``out_val``, its output, and returns the dense, naive count, as torch's do: a multiply-add is 2 FLOPs, bias adds
and element-wise work (an RNN's gate non-linearities, a cell update) are not counted, as torch's ``addmm``
formula counts only its product.

- Recurrent layers (``mkldnn_rnn_layer``: an LSTM on a CPU through oneDNN; ``_cudnn_rnn``: LSTM, GRU and RNN on
  CUDA; ``miopen_rnn``: on ROCm) and their backwards. Every token of every layer and direction is multiplied by
  each of its weight matrices (input-to-hidden, hidden-to-hidden, an LSTM's projection), so the forward is
  2 x tokens x the matrices' elements: an LSTM layer 2 x 4 gates x hidden x (input + hidden) a token. The
  backward is 2x that: each matrix's weight gradient, and the data gradient through it, except the first
  layer's input gradient where its input needs none (as ``convolution_backward`` and a matmul's backward).
  The other paths on a CPU (GRU, RNN, the cells; an LSTM with ``proj_size``, a packed one, a float64 one, a
  bfloat16 one where the CPU has no oneDNN bfloat16) dispatch matmuls (``addmm``, ``mm``) that torch counts.
- ``convolution_backward``: torch's formula (2.14) counts a grouped convolution's weight gradient ``groups``
  times over (a depthwise convolution's by its channels). Each gradient the backward computes (input's,
  weight's: ``output_mask``) is the forward's count, groups or not, transposed or not.
"""
from __future__ import annotations

import re

import torch
from torch.utils.flop_counter import conv_flop_count, flop_registry

aten = torch.ops.aten


def _tokens(input: torch.Tensor) -> int:
    """Tokens an RNN layer steps through: all but the feature dimension, whether (seq, batch, feature),
    (batch, seq, feature) or packed (sum of batch sizes, feature)."""
    return input.numel() // input.shape[-1] if input.dim() else 0


def _matrices(weights) -> int:
    return sum(w.numel() for w in weights if isinstance(w, torch.Tensor) and w.dim() == 2)


def mkldnn_rnn_layer_flop(input, weight0, weight1, *args, out_val=None, **kwargs) -> int:
    """One layer, one direction of a oneDNN LSTM: ``weight0`` is its input-to-hidden matrix (4 hidden x
    input), ``weight1`` its hidden-to-hidden one (4 hidden x hidden)."""
    return 2 * _tokens(input) * (weight0.numel() + weight1.numel())


def mkldnn_rnn_layer_backward_flop(input, weight1, weight2, *args, out_val=None, **kwargs) -> int:
    """The kernel computes every gradient; the count is those autograd needs (as for a matmul): a weight's
    where it requires one, the input's where the layer's input does (not the first layer's, over data), and
    always the gradient through the hidden-to-hidden matrix, which carries every other back through time."""
    tokens = _tokens(input)
    data = weight2.numel() + (weight1.numel() if input.requires_grad else 0)
    weights = (weight1.numel() if weight1.requires_grad else 0) + (weight2.numel() if weight2.requires_grad else 0)
    return 2 * tokens * (data + weights)


def _stacked_rnn_flop(input, weight) -> int:
    return 2 * _tokens(input) * _matrices(weight)


def _stacked_rnn_backward_flop(input, weight, num_layers, bidirectional, output_mask) -> int:
    """``output_mask``: the gradients asked for, (input, hx, cx, weights) — autograd's ``grad_input_mask`` in
    derivatives.yaml's order. The data gradient runs through every matrix whenever any gradient is asked for
    (the weights' need it too), less the first layer's input-to-hidden matrices where the input needs none.
    ``weight`` is the module's flat list, layer by layer, direction by direction, each group's first tensor its
    input-to-hidden matrix (torch.nn.RNNBase._flat_weights)."""
    if not any(output_mask):
        return 0
    directions = 2 if bidirectional else 1
    per_group = len(weight) // (num_layers * directions)
    first_input = sum(weight[d * per_group].numel() for d in range(directions)) if per_group else 0
    matrices = _matrices(weight)
    data = matrices - (0 if output_mask[0] else first_input)
    return 2 * _tokens(input) * (data + (matrices if output_mask[3] else 0))


def cudnn_rnn_flop(input, weight, weight_stride0, weight_buf, hx, cx, mode, hidden_size, proj_size, num_layers,
                   batch_first, dropout, train, bidirectional, *args, out_val=None, **kwargs) -> int:
    """All layers and directions of a cuDNN LSTM, GRU or RNN (``mode``): the module's weight matrices, a
    projection's (``proj_size``) among them, say which; their shapes already hold the gates (4, 3 or 1)."""
    return _stacked_rnn_flop(input, weight)


def cudnn_rnn_backward_flop(input, weight, weight_stride0, weight_buf, hx, cx, output, grad_output, grad_hy,
                            grad_cy, mode, hidden_size, proj_size, num_layers, batch_first, dropout, train,
                            bidirectional, batch_sizes, dropout_state, reserve, output_mask, *, out_val=None,
                            **kwargs) -> int:
    return _stacked_rnn_backward_flop(input, weight, num_layers, bidirectional, output_mask)


def miopen_rnn_flop(input, weight, weight_stride0, hx, cx, mode, hidden_size, num_layers, batch_first, dropout,
                    train, bidirectional, *args, out_val=None, **kwargs) -> int:
    """ROCm's counterpart of ``_cudnn_rnn`` (no projection)."""
    return _stacked_rnn_flop(input, weight)


def miopen_rnn_backward_flop(input, weight, weight_stride0, weight_buf, hx, cx, output, grad_output, grad_hy,
                             grad_cy, mode, hidden_size, num_layers, batch_first, dropout, train, bidirectional,
                             batch_sizes, dropout_state, reserve, output_mask, *, out_val=None, **kwargs) -> int:
    return _stacked_rnn_backward_flop(input, weight, num_layers, bidirectional, output_mask)


def conv_backward_flop(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                       output_padding, groups, output_mask, *, out_val=None, **kwargs) -> int:
    """Each gradient is a convolution as large as the forward (the input's a transposed one of the output's
    gradient by the weight; the weight's one of the input by the output's gradient, per group): the forward's
    count once for each asked for. A bias's gradient (``output_mask[2]``) is a sum: not counted."""
    forward = conv_flop_count(list(input.shape), list(weight.shape), list(grad_output.shape), transposed)
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


OWN_FORMULAS = {packet: formula for packet, formula in (
    (getattr(aten, "mkldnn_rnn_layer", None), mkldnn_rnn_layer_flop),
    (getattr(aten, "mkldnn_rnn_layer_backward", None), mkldnn_rnn_layer_backward_flop),
    (getattr(aten, "_cudnn_rnn", None), cudnn_rnn_flop),
    (getattr(aten, "_cudnn_rnn_backward", None), cudnn_rnn_backward_flop),
    (getattr(aten, "miopen_rnn", None), miopen_rnn_flop),
    (getattr(aten, "miopen_rnn_backward", None), miopen_rnn_backward_flop),
    (aten.convolution_backward, conv_backward_flop),
    # nn.Linear with its activation fused (a Transformer's fast path on CUDA): the product is addmm's
    (getattr(aten, "_addmm_activation", None), flop_registry[aten.addmm])) if packet is not None}


# Operations that by the convention of model FLOPs have none, so that their time without a formula is no gap in
# the count (flops.py ``DeviceFlops.unformulated``): torch's own tags where it has them...
_NO_MODEL_FLOPS_TAGS = frozenset({torch.Tag.pointwise, torch.Tag.reduction, torch.Tag.view_copy,
                                  torch.Tag.inplace_view})
# ...operators that move or observe, never compute...
_NO_MODEL_FLOPS_NAMESPACES = frozenset({"prim", "prims", "profiler", "c10d", "_c10d_functional",
                                        "_c10d_functional_autograd", "_dtensor", "rngprims", "debugprims"})
# ...and, for aten operations torch does not tag, the families an op's name says it belongs to, matched as whole
# words of the name (``native_batch_norm_backward`` has "norm", ``max_pool2d_with_indices`` "pool" with its
# dimensions), so that no contraction (mm, conv, attention, linalg, fft, cdist, rnn) is ever among them.
_NO_MODEL_FLOPS_WORDS = (
    # creating, filling, drawing random numbers
    "empty", "zeros", "ones", "full", "like", "arange", "linspace", "logspace", "eye", "scalar", "tensor", "new",
    "fill", "zero", "rand", "randn", "randint", "randperm", "normal", "uniform", "bernoulli", "exponential",
    "geometric", "cauchy", "random", "multinomial", "poisson", "gamma", "dirichlet", "binomial", "window",
    # moving, copying, viewing, indexing (embedding, gather, scatter)
    "copy", "clone", "contiguous", "to", "cat", "stack", "split", "chunk", "unbind", "index", "gather", "scatter",
    "embedding", "masked", "where", "nonzero", "take", "put", "select", "slice", "narrow", "pad", "roll", "flip",
    "repeat", "tile", "expand", "permute", "transpose", "unfold", "im2col", "col2im", "local", "item", "resize",
    "set", "strided", "alias", "detach", "lift", "view", "reshape", "squeeze", "unsqueeze", "pin", "unique",
    "sort", "argsort", "topk", "kthvalue", "searchsorted", "bucketize", "tril", "triu", "diag", "one", "pack",
    "packed", "unpack", "assert", "equal", "broadcast", "meshgrid", "diagonal", "rot", "complex", "polar", "isin",
    "cross",
    # asking about a tensor or the program, not computing
    "is", "dim", "numel", "size", "stride", "offset", "sym", "constrain", "token", "print", "philox", "check",
    # reducing (those torch does not tag), normalizing, softmax
    "sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "aminmax", "var", "std", "cumsum",
    "cumprod", "cummax", "cummin", "logsumexp", "logcumsumexp", "any", "all", "count", "median", "nanmedian",
    "mode", "histc", "histogram", "bincount", "reduce", "trace", "norm", "renorm", "softmax", "softmin",
    # losses, dropout, activations and other element-wise operations torch does not tag, pooling, resampling
    "loss", "entropy", "nll", "kl", "ctc", "dropout", "relu", "gelu", "silu", "mish", "elu", "selu", "celu",
    "hardswish", "hardsigmoid", "hardtanh", "hardshrink", "softshrink", "softplus", "sigmoid", "tanh", "threshold",
    "glu", "prelu", "rrelu", "leaky", "clamp", "clip", "pool", "upsample", "interpolate", "grid", "sampler",
    "affine", "shuffle", "unshuffle", "fix",
    # optimizers', the gradient scaler's and quantization observers' element-wise updates
    "foreach", "adam", "adamw", "sgd", "adagrad", "amp", "obs",
)
_NO_MODEL_FLOPS_NAME = re.compile(r"(?:^|_)(?:" + "|".join(_NO_MODEL_FLOPS_WORDS) + r")(?:\d+d?)?(?=_|$)")
# The fused gate updates of the RNN cells on CUDA: element-wise, their matmuls dispatched apart.
_NO_MODEL_FLOPS_OPS = frozenset({"_thnn_fused_lstm_cell", "_thnn_fused_lstm_cell_backward_impl",
                                 "_thnn_fused_gru_cell", "_thnn_fused_gru_cell_backward"})
_classified: dict = {}   # OpOverload -> has_model_flops(it): an op's class never changes


def _family_tags(func) -> set:
    """The tags of all an operation's overloads and of its out-of-place form's (``abs_``: ``abs``'s): torch
    tags some overloads of an element-wise op and not others (``rsub.Scalar`` but not ``rsub.Tensor``)."""
    tags = set()
    for name in {func._opname, func._opname.removesuffix("_")}:
        packet = getattr(getattr(torch.ops, func.namespace), name, None) if name else None
        for overload in packet.overloads() if packet is not None else ():
            tags.update(getattr(packet, overload).tags)
    return tags


def has_model_flops(func) -> bool:
    """Whether an operation is one that model FLOPs count (a contraction: matmul, convolution, attention, a
    recurrence, linear algebra, a transform; or an operation of unknown kind, a custom one's), so that one
    without a formula is a gap in the count, rather than one they leave out (element-wise, data movement,
    indexing, reductions, normalization, softmax, losses, dropout, pooling, optimizer updates)."""
    known = _classified.get(func)
    if known is None:
        known = _classified[func] = not (
            func.namespace in _NO_MODEL_FLOPS_NAMESPACES or func.is_view
            or not _NO_MODEL_FLOPS_TAGS.isdisjoint(_family_tags(func))
            or func._opname in _NO_MODEL_FLOPS_OPS or _NO_MODEL_FLOPS_NAME.search(func._opname) is not None)
    return known
