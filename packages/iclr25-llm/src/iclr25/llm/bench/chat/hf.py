"""Local Hugging Face causal LM behind the :class:`ChatModel` protocol (needs the ``hf`` extra).

Decoding is an explicit KV-cached loop rather than ``model.generate`` so that three promises hold
across transformers versions: (1) batching never changes outputs: prompts are left-padded with
position ids counted over real tokens, sorted by length (longest first) and restored to input order;
(2) seeded sampling is per request: each (conversation, sample) row draws from its own
``torch.Generator`` seeded by a hash of (seed, conversation content, sample index), so the batch
size and the neighbours in a batch do not matter; (3) log-probs are ``log_softmax`` of the raw
logits, not of temperature/top-p processed scores.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from typing import Any

from ...lm._kv_compat import cache_kwarg, returned_cache
from ._util import Bar, derived_seed, logger
from .types import (
    DEFAULT_GENERATION,
    MAX_TOP_LOGPROBS,
    Capabilities,
    ChatResponse,
    Conversation,
    GenerationConfig,
    TextPart,
    TokenLogprob,
    UnsupportedModality,
    Usage,
    validate_conversations,
)

__all__ = ["HFChatModel"]


def _require_transformers() -> Any:
    try:
        import transformers
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("HFChatModel needs transformers: pip install 'iclr25-llm[hf]'") from e
    return transformers


class HFChatModel:
    """Chat with a local causal LM.

    Parameters
    ----------
    model : a ``PreTrainedModel`` (or any causal LM returning ``.logits`` / ``.past_key_values``), a local
        directory, or a hub id (only where the hub is reachable).
    tokenizer : its tokenizer (loaded from ``model`` when it is a path; else ``processor.tokenizer``).
    device : "auto", "cpu", "cuda", ... (a passed model is moved there).
    dtype : "auto" (keep a passed model's dtype; bf16 on CUDA / fp32 on CPU when loading), a torch dtype or
        its name ("bfloat16").
    batch_size : rows (conversation × sample) per forward batch.
    chat_template : Jinja template overriding the tokenizer's.
    processor : multimodal processor; override :meth:`build_inputs` to use it.
    modalities : content types accepted (default text only, or text+image+audio+video with a processor).
    name : identity for caches and reports.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        device: str = "auto",
        dtype: Any = "auto",
        batch_size: int = 8,
        chat_template: str | None = None,
        processor: Any = None,
        trust_remote_code: bool = False,
        modalities: Sequence[str] | None = None,
        name: str | None = None,
    ) -> None:
        import torch

        from iclr25.core.device import resolve_device

        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        self.device = resolve_device(device)
        given = dtype
        if isinstance(dtype, str) and dtype != "auto":
            dtype = getattr(torch, dtype, dtype)  # "bfloat16" -> torch.bfloat16, as from_pretrained accepts
        if not (isinstance(dtype, torch.dtype) or dtype == "auto"):
            raise ValueError(f"dtype must be 'auto', a torch.dtype or its name (e.g. 'bfloat16'), got {given!r}")
        if isinstance(model, (str, os.PathLike)):
            tf = _require_transformers()
            td = (torch.bfloat16 if self.device.type == "cuda" else torch.float32) if dtype == "auto" else dtype
            path = os.fspath(model)
            model = tf.AutoModelForCausalLM.from_pretrained(path, dtype=td, trust_remote_code=trust_remote_code)
            if tokenizer is None and processor is None:
                tokenizer = tf.AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
        elif dtype != "auto":
            model = model.to(dtype)
        if tokenizer is None and processor is not None:
            tokenizer = getattr(processor, "tokenizer", None)
        if tokenizer is None:
            raise ValueError("tokenizer is required when model is an object (or pass a processor with .tokenizer)")
        self.model = model.to(self.device).eval()
        self.tokenizer, self.processor, self.batch_size = tokenizer, processor, batch_size
        self.chat_template = chat_template
        if chat_template is None and not getattr(tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat template; pass chat_template=")
        cfg = getattr(model, "config", None)
        self.name = name or getattr(cfg, "_name_or_path", None) or type(model).__name__
        self._modalities = tuple(modalities or (("text", "image", "audio", "video") if processor else ("text",)))
        self._pad_id = next(
            (v for v in (tokenizer.pad_token_id, tokenizer.eos_token_id) if v is not None),
            0,
        )
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        eos = eos if eos is not None else tokenizer.eos_token_id
        self._eos = set(eos if isinstance(eos, (list, tuple)) else ([] if eos is None else [eos]))
        self._fingerprint: dict[str, Any] | None = None
        self._cache_kw = cache_kwarg(self.model)

    def capabilities(self) -> Capabilities:
        ctx = getattr(getattr(self.model, "config", None), "max_position_embeddings", None)
        return Capabilities(self._modalities, True, MAX_TOP_LOGPROBS, ctx)

    def cache_identity(self) -> dict[str, Any]:
        """Class, name/path, a hash of the config and of the first/last parameter tensors, the template."""
        if self._fingerprint is None:
            params = list(self.model.parameters())
            h = hashlib.sha256()
            for p in (params[0], params[-1]) if params else ():
                h.update(p.detach().float().cpu().numpy().tobytes())
            cfg = getattr(self.model, "config", None)
            cfg_s = cfg.to_json_string(use_diff=False) if hasattr(cfg, "to_json_string") else repr(cfg)
            self._fingerprint = {
                "backend": "hf",
                "class": f"{type(self.model).__module__}.{type(self.model).__qualname__}",
                "name_or_path": getattr(cfg, "_name_or_path", None),
                "config_sha256": hashlib.sha256(cfg_s.encode()).hexdigest(),
                "params_sha256": h.hexdigest(),
                "template_sha256": hashlib.sha256(
                    (self.chat_template or getattr(self.tokenizer, "chat_template", "") or "").encode()
                ).hexdigest(),
            }
        return self._fingerprint

    # -- inputs ---------------------------------------------------------------------------------
    def prompt_ids(self, conversation: Conversation) -> list[int]:
        """Token ids of ``conversation`` rendered by the chat template with the generation prompt."""
        msgs = []
        for m in conversation:
            if any(not isinstance(p, TextPart) for p in m.parts):
                raise UnsupportedModality(
                    "HFChatModel's default build_inputs handles text only; subclass and override build_inputs"
                )
            msgs.append({"role": m.role, "content": "\n".join(p.text for p in m.parts)})
        kw = {"chat_template": self.chat_template} if self.chat_template else {}
        text = self.tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, **kw)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def build_inputs(self, conversations: Sequence[Conversation]) -> dict[str, Any]:
        """Left-padded model inputs for a batch: ``input_ids``/``attention_mask`` ``(B, L)`` long tensors.

        Override (with a ``processor``) for audio/video/image LMs; extra keys are passed to the first
        forward call only.
        """
        import torch

        ids = [self.prompt_ids(c) for c in conversations]
        width = max(len(x) for x in ids)
        input_ids = torch.full((len(ids), width), self._pad_id, dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        for r, x in enumerate(ids):
            if x:
                input_ids[r, width - len(x) :] = torch.tensor(x)
                mask[r, width - len(x) :] = 1
        return {"input_ids": input_ids, "attention_mask": mask}

    # -- decoding -------------------------------------------------------------------------------
    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def _batch(self, rows: list[tuple[Conversation, int]], config: GenerationConfig) -> list[ChatResponse]:
        import torch

        t0 = time.perf_counter()
        inputs = {k: v.to(self.device) for k, v in self.build_inputs([c for c, _ in rows]).items()}
        input_ids, mask = inputs.pop("input_ids"), inputs.pop("attention_mask")
        b = input_ids.shape[0]
        prompt_lens = mask.sum(-1).tolist()
        gens = None
        if config.temperature > 0 and config.seed is not None:
            gens = []
            for conv, s in rows:
                g = torch.Generator(device=self.device)
                g.manual_seed(derived_seed(config.seed, conv, s))
                gens.append(g)
        out_ids: list[list[int]] = [[] for _ in range(b)]
        out_lp: list[list[TokenLogprob]] = [[] for _ in range(b)]
        finish = ["length"] * b
        done = [False] * b
        k_top = config.top_logprobs if config.logprobs else 0
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=pos, use_cache=True, **inputs)
            for _step in range(config.max_tokens):
                logits = out.logits[:, -1, :].float()
                nxt = self._choose(logits, config, gens)
                logp = torch.log_softmax(logits, dim=-1) if config.logprobs else None
                for r in range(b):
                    if done[r]:
                        continue
                    tok = int(nxt[r])
                    if tok in self._eos:
                        done[r], finish[r] = True, "stop"
                        continue
                    out_ids[r].append(tok)
                    if logp is not None:
                        top = []
                        if k_top:
                            v, i = torch.topk(logp[r], k_top)
                            top = [
                                (self._decode([int(t)]), float(x)) for x, t in zip(v.tolist(), i.tolist(), strict=True)
                            ]
                        out_lp[r].append(TokenLogprob(self._decode([tok]), float(logp[r, tok]), top))
                    if config.stop and any(s in self._decode(out_ids[r]) for s in config.stop):
                        done[r], finish[r] = True, "stop"
                if all(done) or _step == config.max_tokens - 1:
                    break  # the last chosen token is never fed back (no wasted step past the context)
                mask = torch.cat([mask, mask.new_ones((b, 1))], dim=1)
                step_pos = (mask.sum(-1, keepdim=True) - 1).clamp(min=0)
                out = self.model(
                    input_ids=nxt[:, None].to(input_ids.dtype),
                    attention_mask=mask,
                    position_ids=step_pos,
                    use_cache=True,
                    **{self._cache_kw: returned_cache(out)},
                )
        dt = time.perf_counter() - t0
        res = []
        for r, (_, s) in enumerate(rows):
            ids, lps = out_ids[r], out_lp[r]
            text = self._decode(ids)
            if config.stop:
                cut = min((i for i in (text.find(x) for x in config.stop) if i >= 0), default=-1)
                if cut >= 0:
                    text, finish[r] = text[:cut], "stop"
                    # keep the tokens whose text starts before the cut
                    keep = next((j for j in range(len(ids)) if len(self._decode(ids[: j + 1])) > cut), len(ids))
                    ids, lps = ids[:keep], lps[:keep]
            res.append(
                ChatResponse(
                    text=text,
                    finish_reason=finish[r],
                    logprobs=lps if config.logprobs else None,
                    usage=Usage(int(prompt_lens[r]), len(out_ids[r])),
                    model=self.name,
                    latency_s=dt / b,
                    sample_index=s,
                    raw={"token_ids": ids},
                )
            )
        return res

    def _choose(self, logits: Any, config: GenerationConfig, gens: list[Any] | None) -> Any:
        import torch

        if config.temperature == 0:
            return logits.argmax(-1)
        probs = torch.softmax(logits / config.temperature, dim=-1)
        if config.top_p < 1.0:
            sp, si = probs.sort(dim=-1, descending=True)
            # drop tokens once the mass before them already reaches top_p (the first token always stays)
            drop = (sp.cumsum(-1) - sp) >= config.top_p
            sp = sp.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, si, sp)
        if gens is None:
            return torch.multinomial(probs, 1).squeeze(-1)
        return torch.stack([torch.multinomial(probs[r], 1, generator=g)[0] for r, g in enumerate(gens)])

    def _raise_if_past_context(
        self, indices: list[int], lengths: dict[int, int], config: GenerationConfig, err: BaseException
    ) -> None:
        """Turn a failure deep in the model (e.g. a position embedding index error) into a clear error when
        a conversation of the failed batch cannot fit the model's context."""
        ctx = self.capabilities().context_tokens
        if ctx is None:
            return
        for i in sorted(set(indices)):
            n = lengths.get(i)
            # decoding feeds positions 0 .. prompt + max_tokens - 2
            if n is not None and n + config.max_tokens - 1 > ctx:
                raise ValueError(
                    f"conversations[{i}] has {n} prompt tokens; with max_tokens={config.max_tokens} it needs up to "
                    f"{n + config.max_tokens - 1} positions but the model's context is {ctx} tokens "
                    "(config.max_position_embeddings): shorten the conversation or lower max_tokens"
                ) from err

    def generate(
        self,
        conversations: Sequence[Conversation],
        config: GenerationConfig | None = DEFAULT_GENERATION,
        *,
        progress: bool | str = False,
    ) -> list[list[ChatResponse]]:
        """Generate ``config.n`` samples per conversation in length-sorted batches; input order is kept."""
        config = DEFAULT_GENERATION if config is None else config  # None: the default config
        convs = validate_conversations(conversations, config, self.capabilities())
        if not convs:
            return []
        rows = [(i, s) for i in range(len(convs)) for s in range(config.n)]
        lengths = {i: len(self.prompt_ids(c)) for i, c in enumerate(convs)} if self._modalities == ("text",) else {}
        rows.sort(key=lambda rs: (-lengths.get(rs[0], 0), rs[0], rs[1]))
        results: list[list[ChatResponse | None]] = [[None] * config.n for _ in convs]
        bar = Bar(progress, len(rows), self.name)
        for start in range(0, len(rows), self.batch_size):
            chunk = rows[start : start + self.batch_size]
            try:
                batch = self._batch([(convs[i], s) for i, s in chunk], config)
            except (IndexError, RuntimeError) as e:
                self._raise_if_past_context([i for i, _ in chunk], lengths, config, e)
                raise
            for (i, s), r in zip(chunk, batch, strict=True):
                results[i][s] = r
            bar.update(len(chunk))
        bar.close()
        logger.debug("HFChatModel %s: %d rows", self.name, len(rows))
        return [list(row) for row in results]  # type: ignore[arg-type]
