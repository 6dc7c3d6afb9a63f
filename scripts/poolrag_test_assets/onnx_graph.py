"""Reading a quantised transformer ONNX export: its weights as torch-named fp32 arrays, and the
sizes the weights do not encode (attention heads, LayerNorm epsilon) from the graph itself."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from poolrag_test_assets.errors import AssetBuildError

logger = logging.getLogger(__name__)


_STATE_KEY = re.compile(r"^[A-Za-z_]\w*(\.\w+)*\.(weight|bias)$")


def module_from_graph_name(name: str) -> str | None:
    """Turn an exporter path such as ``/bert/encoder/layer.0/attention/self/query/MatMul_output_0``
    into the PyTorch module path ``bert.encoder.layer.0.attention.self.query``."""
    parts = [p for p in name.split("/") if p]
    if len(parts) < 2 or not name.startswith("/"):
        return None
    return ".".join(parts[:-1])


def _linear_weight_name(initializer_base: str, node: onnx.NodeProto) -> str:
    """Name a MatMul weight: exporters keep the torch name for Gemm weights but call MatMul weights
    ``onnx::MatMul_<n>``; those are named after the module the consuming node belongs to."""
    if _STATE_KEY.match(initializer_base):
        return initializer_base
    for candidate in (*node.output, node.name):
        module = module_from_graph_name(candidate)
        if module:
            return f"{module}.weight"
    raise AssetBuildError(f"cannot name weight {initializer_base!r} used by node {node.name!r}")


def _dequantize_affine(q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray) -> np.ndarray:
    """``(q - zero_point) * scale`` with per-tensor or per-last-axis (per output column) parameters."""
    for param in (scale, zero_point):
        if param.size not in (1, q.shape[-1]):
            raise AssetBuildError(f"unsupported quantisation axis: param {param.shape} for tensor {q.shape}")
    return (q.astype(np.float32) - zero_point.astype(np.float32)) * scale.astype(np.float32)


def unpack_bits(packed: np.ndarray, bits: int) -> np.ndarray:
    """Unpack little-end-first ``bits``-wide unsigned values from the last axis of a uint8 array."""
    if 8 % bits:
        raise AssetBuildError(f"unsupported MatMulNBits width: {bits} bits")
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    fields = [(packed >> (i * bits)) & mask for i in range(per_byte)]
    return np.stack(fields, axis=-1).reshape(*packed.shape[:-1], packed.shape[-1] * per_byte)


def dequantize_nbits(node: onnx.NodeProto, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """Dequantise a ``com.microsoft.MatMulNBits`` weight to a torch ``Linear`` weight [N, K].

    B is [N, blocks, bytes_per_block] with values packed low bits first; each block of
    ``block_size`` values along K has one scale and a zero point (default ``2**(bits-1)``).
    """
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    k, n, bits, block = attrs["K"], attrs["N"], attrs["bits"], attrs["block_size"]
    inputs = list(node.input) + [""] * 6
    if inputs[4] or inputs[5]:
        raise AssetBuildError(f"{node.name}: MatMulNBits g_idx/bias inputs are not supported")
    values = unpack_bits(arrays[inputs[1]], bits)  # [N, blocks, block]
    blocks = values.shape[1]
    scales = arrays[inputs[2]].astype(np.float32).reshape(n, blocks)
    if inputs[3]:
        zp = arrays[inputs[3]]
        if zp.dtype == np.uint8:  # packed like B, padded per row
            zp = unpack_bits(zp.reshape(n, -1), bits)[:, :blocks]
        zero_points = zp.astype(np.float32).reshape(n, blocks)
    else:
        zero_points = np.full((n, blocks), float(1 << (bits - 1)), dtype=np.float32)
    weight = (values.astype(np.float32) - zero_points[..., None]) * scales[..., None]
    return np.ascontiguousarray(weight.reshape(n, blocks * block)[:, :k])


def load_graph(model_path: Path) -> onnx.GraphProto:
    """Load an ONNX graph once; the converters below all read the same parsed graph."""
    return onnx.load(str(model_path)).graph


def onnx_state_dict(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Dequantise every weight of a quantised transformer ONNX export into torch-named fp32 arrays.

    Handles onnxruntime dynamic int8 (``<w>_quantized``/``_scale``/``_zero_point`` consumed by
    ``MatMulInteger`` [in, out] or ``Gather`` + ``DequantizeLinear``) and n-bit ``MatMulNBits``.
    Plain float initializers (LayerNorm, biases) already carry their torch names.
    """
    arrays = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    state: dict[str, np.ndarray] = {}
    consumed: set[str] = set()

    def put(name: str, value: np.ndarray) -> None:
        if name in state:
            raise AssetBuildError(f"{graph.name}: two ONNX tensors map to {name!r}")
        state[name] = np.ascontiguousarray(value, dtype=np.float32)

    linear_consumers: dict[str, onnx.NodeProto] = {}
    for node in graph.node:
        if node.op_type == "MatMulInteger" and node.input[1] in arrays:
            linear_consumers[node.input[1]] = node
        elif node.op_type == "MatMulNBits":
            base = re.sub(r"_Q\d+$", "", node.input[1])
            put(_linear_weight_name(base, node), dequantize_nbits(node, arrays))
            consumed.update(i for i in node.input[1:] if i)

    for name in list(arrays):
        if not name.endswith("_quantized"):
            continue
        base = name.removesuffix("_quantized")
        scale, zero_point = arrays.get(f"{base}_scale"), arrays.get(f"{base}_zero_point")
        if scale is None or zero_point is None:
            raise AssetBuildError(f"{graph.name}: {name} lacks its scale or zero point")
        weight = _dequantize_affine(arrays[name], scale, zero_point)
        if name in linear_consumers:  # MatMulInteger computes x @ W with W stored [in, out]
            put(_linear_weight_name(base, linear_consumers[name]), weight.T)
        elif _STATE_KEY.match(base):  # embedding tables, read through Gather + DequantizeLinear
            put(base, weight)
        else:
            raise AssetBuildError(f"{graph.name}: quantised tensor {name} has no known consumer")
        consumed.update({name, f"{base}_scale", f"{base}_zero_point"})

    for name, value in arrays.items():
        if name in consumed:
            continue
        if value.dtype == np.float32 and _STATE_KEY.match(name):
            put(name, value)
        else:
            logger.debug("ignoring ONNX initializer %s %s %s", name, value.dtype, value.shape)
    return state


def _constant_ints(graph: onnx.GraphProto, name: str) -> list[int] | None:
    """Value of a small integer tensor produced by a Constant node or stored as an initializer."""
    for tensor in graph.initializer:
        if tensor.name == name:
            return numpy_helper.to_array(tensor).astype(int).ravel().tolist()
    for node in graph.node:
        if node.op_type == "Constant" and name in node.output:
            for attr in node.attribute:
                if attr.name == "value":
                    return numpy_helper.to_array(attr.t).astype(int).ravel().tolist()
    return None


def infer_num_heads(graph: onnx.GraphProto, hidden_size: int) -> int:
    """Read the attention head count from the graph: weights do not encode it, but the reshape to
    ``[batch, seq, heads, head_dim]`` in the first self-attention block does."""
    producers = {out: node for node in graph.node for out in node.output}
    for node in graph.node:
        if node.op_type != "Reshape" or "/attention/self/" not in node.name:
            continue
        concat = producers.get(node.input[1])
        if concat is None or concat.op_type != "Concat" or len(concat.input) != 4:
            continue
        heads, head_dim = (_constant_ints(graph, i) for i in concat.input[2:])
        if heads and head_dim and heads[0] * head_dim[0] == hidden_size:
            return heads[0]
    raise AssetBuildError(f"{graph.name}: cannot find the attention head count in the graph")


def infer_layer_norm_eps(graph: onnx.GraphProto) -> float:
    """Read LayerNorm epsilon from the graph (fused ``LayerNormalization`` or ``Sqrt(var + eps)``),
    rounded to float32 precision so 1e-12 is written as 1e-12 rather than 9.999999960041972e-13."""
    producers = {out: node for node in graph.node for out in node.output}
    for node in graph.node:
        if node.op_type == "LayerNormalization":
            for attr in node.attribute:
                if attr.name == "epsilon":
                    return float(f"{attr.f:.7g}")
        if node.op_type == "Sqrt" and "LayerNorm" in node.name:
            add = producers.get(node.input[0])
            for name in add.input if add is not None and add.op_type == "Add" else ():
                const = producers.get(name)
                if const is not None and const.op_type == "Constant":
                    return float(f"{numpy_helper.to_array(const.attribute[0].t).ravel()[0]:.7g}")
    raise AssetBuildError(f"{graph.name}: cannot find the LayerNorm epsilon in the graph")
