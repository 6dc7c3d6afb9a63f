"""Run a transformers module on a batch of :class:`PoolingRequest` objects.

Two layouts, same results (the runner checks this on a probe batch before using packing):

* **padded**: sequences right-padded (positions stay 0..n-1, exact for encoders and causal
  decoders alike) and unpadded straight after the forward pass;
* **packed**: all tokens in one row with varlen attention, so no FLOP is spent on padding.
  Always for poolrag's native models (:mod:`poolrag.models`, which pad only inside attention);
  for transformers modules the default on CUDA only: on CPU their jagged attention is slower
  than the little padding the length-sorted batches leave (see benchmarks/RESULTS.md).

Nothing downstream sees padding either way: the output is always :class:`PackedStates` rows (or
one logits row per sequence). Results stay on the device; the poolers make the one copy to the
host per batch.

Running out of memory on a batch splits it in two and retries each half, and lowers the token
budget the scheduler plans with (raised back as batches fit again, see :class:`OomBudget`), so a
request never fails because its batch was too big.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from poolrag.config.network_head import NetworkHead
from poolrag.config.positions import position_offset
from poolrag.loading.cpu_fast_mode import pack_linear_weights
from poolrag.models.fused_linear import onednn_available
from poolrag.models.packed_attention import pads_to_longest
from poolrag.request import PoolingRequest, ResolvedParams
from poolrag.runner.batch_inputs import BatchInputs, build_image_inputs, build_inputs, build_page_inputs
from poolrag.runner.forward_output import ForwardOutput, PackedStates
from poolrag.runner.oom import OomBudget, is_out_of_memory, release_cached_memory, too_big_alone
from poolrag.runner.varlen_attention import packed_forward, register

if TYPE_CHECKING:  # importing it loads transformers' whole modelling stack (seconds)
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)


class ModelRunner:
    """Owns the forward pass. Not thread-safe by itself: the engine core calls it from one thread.

    Args:
        model: the transformers module (backbone or ``*For...Classification``).
        head: what the model's own forward returns (hidden states, token logits or sequence logits).
        pad_token_id: id used for padding in the padded layout.
        device: where inputs go (the model's input-embedding device).
        packing: ``True``/``False`` to force the layout; ``None`` = packed for native models and on CUDA.
        pack_weights: on CPU, pre-pack linear weights for oneDNN once at load (exact fp32).
        first_row_tasks: tasks whose pooler reads only each sequence's first row (CLS pooling).
            A packed batch of only these tasks on a native backbone skips the last layer's work for
            every other row and comes back as one-row sequences (exact: the math per row is unchanged).
        token_states: a sequence classifier also returns its backbone's last hidden state per
            token (``token_classify`` with ``convert='classify'``), caught on the way past.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        head: NetworkHead,
        pad_token_id: int,
        device: torch.device,
        packing: bool | None = None,
        pack_weights: bool = True,
        first_row_tasks: frozenset[str] = frozenset(),
        token_states: bool = False,
    ) -> None:
        self.model = model
        self.token_states = token_states and head is NetworkHead.SEQUENCE
        self._native = bool(getattr(model, "native", False))
        self.first_row_tasks = first_row_tasks
        # packed attention attends to every earlier token: a batch with a sequence longer than the
        # model's sliding window runs padded, where transformers' mask applies the window
        self._window = None if self._native else sliding_window(getattr(model, "config", None))
        # packed at the start of serving (see ``prepare_for_serving``), so a fast mode can still
        # convert the plain weights after construction
        self._pack_weights = pack_weights and device.type == "cpu"
        self._serving = False
        self.head = head
        self.pad_token_id = pad_token_id
        self.device = device
        # the model's forward takes ``token_type_ids``, so the tokenizer should produce them
        self.accepts_token_types = "token_type_ids" in inspect.signature(model.forward).parameters
        self._pin = device.type == "cuda"
        self._position_offset = position_offset(getattr(model, "config", None))
        # the token budget after an out-of-memory split, and how deep in one the running batch is
        self.oom_budget = OomBudget()
        self._split_depth = 0
        self.packed = False
        # a compiled forward (``install_compiled``) and the lock that keeps its swap between batches
        self._compiled: Callable[[BatchInputs], Any] | None = None
        self._batch_lock = threading.Lock()
        if packing is None:
            packing = self._native or device.type == "cuda"
        if packing:
            self.enable_packing()

    # -- layouts ------------------------------------------------------------------------------------
    def enable_packing(self) -> bool:
        """Switch to packed batches if this model supports them exactly; returns whether it did."""
        if self._native:
            self.packed = True
            return True
        reason = self._packing_unsupported()
        if reason is None:
            previous = getattr(self.model.config, "_attn_implementation", None)
            # packable means a transformers model (transformers>=5.0), which has this setter
            self.model.set_attn_implementation(register())
            try:
                reason = self._probe_packing()
            except Exception as exc:  # a model whose layers reject packed kwargs
                reason = f"probe failed: {exc!r}"
            if reason is not None and previous is not None:
                self.model.set_attn_implementation(previous)
        if reason is not None:
            logger.info("packed batches off for this model (%s); using padded batches", reason)
        self.packed = reason is None
        return self.packed

    @property
    def padding_free(self) -> bool:
        """Packed, and attention pads no sequence to the batch's longest, so batches need no
        padding cap (a native model on a CPU pads only within groups of neighbouring lengths)."""
        return self.packed and self.attention_hidden_size is None

    def padding_free_for(self, lengths: Sequence[int]) -> bool:
        """:attr:`padding_free` for a batch planned from these sequence lengths: one longer than
        the model's sliding window runs padded (:meth:`prepare`), so its batch is planned padded."""
        if self._window is not None and lengths and max(lengths) > self._window:
            return False
        return self.padding_free

    @property
    def attention_hidden_size(self) -> int | None:
        """Hidden size when only attention pads, to the batch's longest sequence (native models on
        a GPU off its half-precision varlen kernel), for the batcher's cap on wasted attention FLOPs."""
        if not (self.packed and self._native):
            return None
        param = next(self.model.parameters())
        if not pads_to_longest(param.device, param.dtype):
            return None
        return int(self.model.config.hidden_size)

    def _packing_unsupported(self) -> str | None:
        if not self.head.packable:
            return "its sequence head reads fixed positions of padded rows"
        if not getattr(self.model, "_supports_attention_backend", False):
            return "its attention layers do not take transformers' attention interface"
        if "position_ids" not in inspect.signature(self.model.forward).parameters:
            return "its forward takes no position_ids"
        return None

    def _probe_packing(self) -> str | None:
        """Compare packed with padded on two short sequences of different lengths."""
        vocab = int(getattr(self.model.config, "vocab_size", 1000) or 1000)
        probe_params = ResolvedParams(task="probe")
        batch = [
            PoolingRequest(tuple(100 + (7 * i) % max(vocab - 100, 1) for i in range(n)), probe_params)
            for n in (5, 11, 3)
        ]
        padded = self._run(self._prepare(batch, packed=False)).tokens
        packed = self._run(self._prepare(batch, packed=True)).tokens
        assert padded is not None and packed is not None
        tol = 1e-4 if padded.states.dtype == torch.float32 else 3e-2
        diff = (padded.states.float() - packed.states.float()).abs().max().item()
        if diff > tol * max(1.0, padded.states.float().abs().max().item()):
            return f"packed differs from padded by {diff:.2e}"
        return None

    # -- one batch ----------------------------------------------------------------------------------
    def prepare(self, batch: Sequence[PoolingRequest]) -> BatchInputs:
        """Host tensors for ``batch`` (pinned on CUDA); cheap, so it can run ahead of the forward."""
        packed = self.packed and all(r.attention is None for r in batch)
        if packed and self._window is not None:
            packed = all(len(r.token_ids) <= self._window for r in batch)
        inputs = self._prepare(batch, packed)
        if packed and self._native and self.head is NetworkHead.NONE and self.first_row_tasks:
            inputs.first_rows_only = all(r.params.task in self.first_row_tasks for r in batch)
        return inputs

    def _prepare(self, batch: Sequence[PoolingRequest], packed: bool) -> BatchInputs:
        if batch and batch[0].pixels is not None:
            if batch[0].token_ids:  # a page retriever's page: image tokens and a prompt, and pixels
                return build_page_inputs(batch, pad_token_id=self.pad_token_id, pin=self._pin)
            return build_image_inputs(batch, pin=self._pin)
        # only when the tokenizer made them: GPT-2 accepts token_type_ids but adds embeddings for them
        with_types = self.accepts_token_types and any(r.token_type_ids is not None for r in batch)
        return build_inputs(
            batch,
            pad_token_id=self.pad_token_id,
            with_token_types=with_types,
            packed=packed,
            position_offset=self._position_offset,
            pin=self._pin,
        )

    @torch.inference_mode()
    def _run(self, inputs: BatchInputs) -> ForwardOutput:
        inputs = inputs.to(self.device)
        if self.token_states:
            output, states = self._classify_keeping_states(inputs)
            return ForwardOutput(sequences=output.logits, tokens=self._rows(inputs, states))
        with self._batch_lock:  # a compiled forward is swapped in between batches, never during one
            output = self._compiled(inputs) if self._compiled is not None else None
            if output is None:
                output = self._eager(inputs)
        if self.head is NetworkHead.SEQUENCE:
            return ForwardOutput(sequences=output.logits)
        if self.head is NetworkHead.PROJECTED:
            return ForwardOutput(sequences=output.pooler_output)
        states = output.logits if self.head is NetworkHead.TOKEN else output.last_hidden_state
        ids = inputs.kwargs["input_ids"]
        assert isinstance(ids, torch.Tensor)
        if inputs.first_rows_only:  # [B, H]: one row per sequence, each a sequence of one token
            cu = inputs.kwargs["cu_seq_lens_q"]
            assert isinstance(cu, torch.Tensor)
            first_ids = ids[0].index_select(0, cu[:-1].to(torch.int64))
            ones = torch.ones_like(inputs.lengths)
            return ForwardOutput(tokens=PackedStates(states=states, lengths=ones, token_ids=first_ids))
        return ForwardOutput(tokens=self._rows(inputs, states))

    @staticmethod
    def _rows(inputs: BatchInputs, states: torch.Tensor) -> PackedStates:
        ids = inputs.kwargs["input_ids"]
        assert isinstance(ids, torch.Tensor)
        if inputs.packed:
            rows, row_ids = states[0], ids[0]
        else:
            keep = inputs.keep
            assert keep is not None
            rows, row_ids = states[keep], ids[keep]
        return PackedStates(states=rows, lengths=inputs.lengths, token_ids=row_ids)

    def _classify_keeping_states(self, inputs: BatchInputs) -> tuple[Any, torch.Tensor]:
        """The classifier's output and its backbone's last hidden state, from one eager forward."""
        caught: list[torch.Tensor] = []
        backbone = self.model.base_model
        handle = backbone.register_forward_hook(lambda _module, _args, out: caught.append(out[0]))
        try:
            output = self._eager(inputs)
        finally:
            handle.remove()
        return output, caught[-1]

    def _eager(self, inputs: BatchInputs) -> Any:
        if inputs.packed:
            first_rows = {"first_rows_only": True} if inputs.first_rows_only else {}
            with packed_forward():
                return self.model(**inputs.kwargs, **first_rows)
        return self.model(**inputs.kwargs)

    def forward(self, batch: Sequence[PoolingRequest]) -> ForwardOutput:
        """The outputs of ``batch`` (in order); splits and retries on out-of-memory. A mix of texts
        and images (a dual encoder's probe) runs as one pass each, its rows put back in order."""
        images = [i for i, r in enumerate(batch) if r.pixels is not None]
        if images and len(images) < len(batch):
            return self._forward_mixed(batch, images)
        return self.run_prepared(batch, self.prepare(batch))

    def _forward_mixed(self, batch: Sequence[PoolingRequest], images: list[int]) -> ForwardOutput:
        texts = sorted(set(range(len(batch))) - set(images))
        parts = [(rows, self.forward([batch[i] for i in rows]).sequences) for rows in (texts, images)]
        first = parts[0][1]
        assert first is not None and parts[1][1] is not None  # images go to one-vector-per-input networks
        merged = first.new_empty((len(batch), first.shape[-1]))
        for rows, vectors in parts:
            merged[torch.tensor(rows, device=merged.device)] = vectors
        return ForwardOutput(sequences=merged)

    def reset_after_fork(self) -> None:
        """In a forked child: a parent's thread may have held the batch lock at the fork, and no
        thread of the child will release it."""
        self._batch_lock = threading.Lock()

    def run_prepared(self, batch: Sequence[PoolingRequest], inputs: BatchInputs) -> ForwardOutput:
        try:
            output = self._run(inputs)
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            tokens = inputs.num_tokens
            if len(batch) < 2:  # nothing left to split: this call fails, the next batch runs
                raise too_big_alone(exc, tokens) from exc
        else:
            if not self._split_depth:  # a half that fits says nothing of the planned batches
                self.oom_budget.fitted()
            return output
        inputs.release()  # the caller holds it too (the engine core): the halves run without it
        release_cached_memory(self.device)
        half = len(batch) // 2
        logger.warning(
            "out of memory on a batch of %d sequences (%d tokens): splitting it in two", len(batch), tokens
        )
        self._split_depth += 1
        try:
            first = self.forward(batch[:half])  # the longest inputs: one too big even alone raises here
            # a half fit where the whole did not: later batches are planned below it (not before, as
            # an input too big alone says nothing of the batch size later batches would be held under)
            self.oom_budget.ran_out(tokens)
            second = self.forward(batch[half:])
        finally:
            self._split_depth -= 1
        return ForwardOutput.concat([first, second])

    def token_budget(self, planned: int) -> int:
        """The scheduler's budget for the next batch: ``planned``, or lower after running out of memory."""
        return self.oom_budget.budget(planned)

    # -- changing the model in place -----------------------------------------------------------------
    def prepare_for_serving(self) -> None:
        """Last step before the engine core's first batch: pre-pack CPU weights (once)."""
        if self._serving:
            return
        self._serving = True
        if not self._pack_weights:
            return
        pack = getattr(self.model, "pack_weights", None)  # native models pack (and fuse) their own
        if pack is not None:
            if onednn_available(next(self.model.parameters()).dtype):
                pack()
        else:
            self.model = pack_linear_weights(self.model)  # type: ignore[assignment]

    def install_compiled(self, forward: Callable[[BatchInputs], Any] | None) -> None:
        """Use ``forward`` (the model's compiled equivalent; it returns None for a batch it does
        not cover, which the eager model then runs) from the next batch on; None goes back to eager.
        Waits for a batch in flight to finish, so no batch mixes the two."""
        with self._batch_lock:
            self._compiled = forward

    @property
    def compiled(self) -> bool:
        """A compiled forward is installed (see :mod:`poolrag.compile`)."""
        return self._compiled is not None

    def replace_model(self, transform: Callable[[torch.nn.Module], torch.nn.Module]) -> None:
        """Apply ``transform`` (e.g. a fast CPU mode) to the model, before serving starts."""
        if self._serving:
            raise RuntimeError("the model can only be replaced before the engine has run a batch")
        self.model = transform(self.model)  # type: ignore[assignment]


def sliding_window(config: object) -> int | None:
    """The tokens a layer of this decoder attends back to, where some layer's window is shorter
    than the model (Mistral's ``sliding_window``; Gemma 2's and Qwen's ``sliding_attention``
    layers); ``None`` where every layer attends to the whole sequence."""
    window = getattr(config, "sliding_window", None)
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
        return None
    if getattr(config, "use_sliding_window", True) is False:  # Qwen2 lists one it does not use
        return None
    layer_types = getattr(config, "layer_types", None)
    if layer_types is not None and "sliding_attention" not in layer_types:
        return None
    return window
