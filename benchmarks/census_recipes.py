"""Reduced configs and inputs for the census sweep (``census_sweep.py``): general rules, then a few
family rules, never one model at a time.

A config gets small sizes for every size field it has (sub-configs too), made coherent: the head
size is hidden / heads, key-value heads divide heads, per-layer lists (``layer_types``,
``mlp_layer_types``) cut to the layer count keeping each kind once, a multimodal rope's sections
scaled to the new head size, experts picked per token no more than experts. Inputs are made by
name from the forward signature: the main input, every required argument, both towers of a
dual encoder (``return_loss`` in the signature); when the eager run names an input it misses
("You have to specify bbox", "missing 1 required positional argument: 'x'"), that one is added
and the run tried again; an image too small for the model is doubled, audio features that do not
fit are tried in the other layout.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

VOCAB = 128
LAYERS = 2
LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
              "num_decoder_layers", "num_encoder_layers", "num_blocks")
HIDDEN_KEYS = ("hidden_size", "d_model", "n_embd", "embed_dim", "dim", "hidden_dim", "projection_dim")
HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
             "decoder_attention_heads")
FF_KEYS = ("intermediate_size", "d_ff", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "n_inner",
           "shared_expert_intermediate_size")
SMALL = {  # upper bounds: a field larger than this is set to it
    **dict.fromkeys(LAYER_KEYS, LAYERS), **dict.fromkeys(HIDDEN_KEYS, 32), **dict.fromkeys(HEAD_KEYS, 2),
    **dict.fromkeys(FF_KEYS, 64), "vocab_size": VOCAB, "num_key_value_heads": 2, "head_dim": 16,
    "image_size": 32, "num_experts": 2, "num_local_experts": 2, "n_routed_experts": 2,
    "num_experts_per_tok": 2, "top_k": 2, "moe_topk": 2, "n_group": 1, "topk_group": 1,
    "moe_intermediate_size": 32, "n_shared_experts": 1, "num_shared_experts": 1,
    # multi-head latent attention (DeepSeek-like): the rope part is the head size
    "kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
    "qk_head_dim": 16, "index_head_dim": 16, "index_n_heads": 2, "index_topk": 4,
    # linear attention and state-space layers
    "linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_num_key_heads": 2,
    "linear_num_value_heads": 2, "state_size": 16, "n_groups": 1,
    # detection queries: no more than the tokens of a small image
    "num_queries": 8, "first_k_dense_replace": 1, "num_frames": 4,
    "mamba_d_head": 16, "mamba_d_state": 16, "mamba_n_groups": 1, "rotary_dim": 8,
}


def reduce_config(cfg: Any, depth: int = 0) -> Any:
    """Small sizes for every size field the config has (sub-configs too), made coherent."""
    from transformers import PretrainedConfig

    d = cfg.__dict__
    for key, value in SMALL.items():
        if isinstance(d.get(key), int) and not isinstance(d.get(key), bool) and d[key] > value:
            setattr(cfg, key, value)
    for key in ("depths",):
        if isinstance(d.get(key), list):
            setattr(cfg, key, [1] * len(d[key]))
    for key in HEAD_KEYS:  # per-stage head counts (Swin-like): 2 divides every stage's width
        if isinstance(d.get(key), (list, tuple)):
            setattr(cfg, key, [min(v, 2) for v in d[key]])
    if isinstance(d.get("image_size"), (list, tuple)):
        cfg.image_size = [32] * len(d["image_size"])
    _coherent(cfg, d)
    for key, value in list(d.items()):
        if key.endswith("token_id") and isinstance(value, int) and value >= VOCAB:
            setattr(cfg, key, VOCAB - 1)
        elif isinstance(value, PretrainedConfig) and depth < 3:
            reduce_config(value, depth + 1)
    return cfg


def _coherent(cfg: Any, d: dict[str, Any]) -> None:
    heads = d.get("num_attention_heads")
    if isinstance(d.get("qk_rope_head_dim"), int) and isinstance(d.get("head_dim"), int):
        cfg.head_dim = d["qk_rope_head_dim"]  # MLA: rotary on the rope part only
    elif isinstance(heads, int) and heads and isinstance(d.get("hidden_size"), int) and isinstance(
            d.get("head_dim"), int):
        cfg.head_dim = d["hidden_size"] // heads
    if isinstance(heads, int) and isinstance(d.get("num_key_value_heads"), int) and heads % d["num_key_value_heads"]:
        cfg.num_key_value_heads = heads
    if isinstance(d.get("num_experts_per_tok"), int):
        experts = [d[k] for k in ("num_experts", "num_local_experts", "n_routed_experts") if isinstance(d.get(k), int)]
        if experts:
            cfg.num_experts_per_tok = min(d["num_experts_per_tok"], *experts)
    if isinstance(d.get("expand"), int) and isinstance(d.get("head_dim"), int) and isinstance(d.get("num_heads"), int):
        # Mamba-2: heads x head size is the inner width
        cfg.num_heads = max(1, d["expand"] * d.get("hidden_size", 32) // d["head_dim"])
    if all(isinstance(d.get(k), int) for k in ("mamba_expand", "mamba_d_head", "mamba_n_heads")):
        cfg.mamba_n_heads = max(1, d["mamba_expand"] * d.get("hidden_size", 32) // d["mamba_d_head"])
    layers = d.get("num_hidden_layers")
    for key in ("layer_types", "mlp_layer_types", "block_types"):
        kinds = d.get(key)
        if isinstance(kinds, list) and kinds and isinstance(layers, int):
            distinct = list(dict.fromkeys(kinds))  # each kind once, in order of first use
            n = max(layers, len(distinct))
            cfg.num_hidden_layers = n
            setattr(cfg, key, (distinct * n)[:n])
    if d.get("prediction_length", 0) is None:
        cfg.prediction_length = 4  # time-series transformers need a horizon
    if isinstance(d.get("attn_layer_indices"), (list, type(None))) and "attn_layer_indices" in d:
        cfg.attn_layer_indices = [LAYERS - 1]  # hybrids (Bamba-like): one attention layer among the others
    multimodal_rope = "mrope_section" in getattr(type(cfg), "ignore_keys_at_rope_validation", ())
    for rope in (d.get("rope_parameters"), d.get("rope_scaling")):
        if isinstance(rope, dict) and (multimodal_rope or isinstance(rope.get("mrope_section"), list)):
            head = d.get("head_dim") or d.get("hidden_size", 32) // (heads or 2)
            rope["mrope_section"] = _scaled(rope.get("mrope_section") or [2, 3, 3], head)


def _scaled(sections: list[int], head_dim: int) -> list[int]:
    """Sections of a multimodal rope summing to half the head size, in the old proportions."""
    total, half = sum(sections), head_dim // 2
    out = [max(1, s * half // total) for s in sections]
    out[0] += half - sum(out)
    return out


# --- inputs -------------------------------------------------------------------------------------

CALLS = ((1, 8), (1, 8), (2, 12))  # (batch, length): two alike, then a new shape


class Ctx:
    """What a maker needs: the config (and sub-configs) to read sizes from, a generator, torch."""

    def __init__(self, model: Any, torch: Any) -> None:
        self.cfg, self.torch = model.config, torch
        self.gen = torch.Generator().manual_seed(0)
        self.zoom = 1  # images made larger where the model says they are too small
        self.flip = False  # audio features in the other layout where the first one does not fit

    def get(self, name: str, default: Any) -> Any:
        for c in (self.cfg, *(getattr(self.cfg, s, None) for s in ("vision_config", "audio_config",
                                                                   "encoder_config", "text_config"))):
            v = getattr(c, name, None) if c is not None else None
            if isinstance(v, (int, list, tuple)) and not isinstance(v, bool):
                return v
        return default

    def side(self) -> int:
        size = self.get("image_size", 32)
        return int(size[0] if isinstance(size, (list, tuple)) else size) * self.zoom

    def channels(self) -> int:
        return int(self.get("num_channels", self.get("in_channels", self.get("in_chans", 3))))

    def ids(self, b: int, n: int) -> Any:
        return self.torch.randint(3, VOCAB, (b, n), generator=self.gen)

    def randn(self, *shape: int) -> Any:
        return self.torch.randn(*shape, generator=self.gen)


def _pixels(c: Ctx, b: int, n: int) -> Any:
    frames = c.get("num_frames", 0)
    if isinstance(frames, int) and frames > 0:  # video models: (batch, frames, channels, h, w)
        return c.randn(b, frames, c.channels(), c.side(), c.side())
    return c.randn(b, c.channels(), c.side(), c.side())


def _features(c: Ctx, b: int, n: int) -> Any:
    mel = int(c.get("num_mel_bins", c.get("input_feat_per_channel", c.get("feature_size", 80))))
    whisper = isinstance(c.get("max_source_positions", None), int) and isinstance(c.get("num_mel_bins", None), int)
    if whisper != c.flip:  # Whisper-like: (batch, mel, 2 x positions)
        return c.randn(b, mel, 2 * c.get("max_source_positions", 50))
    return c.randn(b, 10 * n, mel)  # conformers, Speech2Text: (batch, frames, mel)


def _audio(c: Ctx, b: int, n: int) -> Any:
    mel, frames = c.get("num_mel_bins", 0), c.get("max_length", 0)
    if isinstance(mel, int) and mel > 0 and isinstance(frames, int) and frames > 0:
        return c.randn(b, frames, mel)  # spectrogram transformers (AST): (batch, frames, mel)
    channels = c.get("audio_channels", 0)
    if isinstance(channels, int) and channels > 0:  # codecs: (batch, channels, samples)
        return c.randn(b, channels, 500 * n)
    return c.randn(b, 500 * n)


def _bbox(c: Ctx, b: int, n: int) -> Any:
    xy = c.torch.randint(0, 500, (b, n, 2), generator=c.gen)
    return c.torch.cat([xy, xy + 10], dim=-1)


def _patches(c: Ctx, b: int, n: int) -> tuple[int, int]:
    """A grid of 4 x (2 or 3) patches, a multiple of any 2 x 2 merge."""
    return 4, 4 if n == 8 else 6


def _grid_thw(c: Ctx, b: int, n: int) -> Any:
    h, w = _patches(c, b, n)
    return c.torch.tensor([[1, h, w]] * b)


def _grid_states(c: Ctx, b: int, n: int) -> Any:
    h, w = _patches(c, b, n)
    p, t = c.get("patch_size", 14), c.get("temporal_patch_size", 1)
    return c.randn(b * h * w, c.channels() * t * p * p)


MAKERS: dict[str, Callable[[Ctx, int, int], Any]] = {
    "input_ids": lambda c, b, n: c.ids(b, n),
    "decoder_input_ids": lambda c, b, n: c.ids(b, n),
    "attention_mask": lambda c, b, n: c.torch.ones(b, n, dtype=c.torch.long),
    "token_type_ids": lambda c, b, n: c.torch.zeros(b, n, dtype=c.torch.long),
    "bbox": _bbox,
    "pixel_values": _pixels,
    "pixel_values_videos": lambda c, b, n: c.randn(b, max(2, min(c.get("num_frames", 2), 4)), c.channels(),
                                                   c.side(), c.side()),
    "pixel_mask": lambda c, b, n: c.torch.ones(b, c.side(), c.side(), dtype=c.torch.long),
    "input_features": _features,
    "input_values": _audio,
    "past_values": lambda c, b, n: c.randn(b, c.get("context_length", 32), c.get("num_input_channels", 1)),
    "grid_thw": _grid_thw,
    "image_grid_thw": _grid_thw,
}
FAMILY = {  # arguments that only make sense together: made by one rule
    # Qwen-VL-like vision towers: flattened patches and their grid
    "grid_thw": {"hidden_states": _grid_states, "pixel_values": _grid_states},
}
_MISSING = (re.compile(r"missing \d+ required positional arguments?: (.*)"),
            re.compile(r"(?:have to|must) specify (?:either |exactly one of )?(\w+)"),
            re.compile(r"(?:^|: )(\w+) is required", re.IGNORECASE))


_TOO_SMALL = re.compile(r"too small|must be at least one|is invalid for input of size|\b0\b,")


def missing_inputs(error: str) -> list[str]:
    """The input names an eager failure says are missing (``''`` quoted lists, or one word)."""
    for pat in _MISSING:
        m = pat.search(error)
        if m:
            return [x.lower() for x in (re.findall(r"'(\w+)'", m.group(1)) or [m.group(1)])]
    return []


def input_names(model: Any) -> list[str]:
    """The first try: the main input (where the signature has it), every required argument with a
    maker, and both towers of a dual encoder."""
    params = inspect.signature(model.forward).parameters
    required = [n for n, p in params.items() if p.default is inspect.Parameter.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    main = getattr(model, "main_input_name", "input_ids")
    names = [main] if main in params else []
    names += [n for n in required if n not in names]
    if "return_loss" in params:  # CLIP-like: text and image together
        names += [n for n in ("input_ids", "pixel_values") if n in params and n not in names]
    if "decoder_input_ids" in params and getattr(model.config, "is_encoder_decoder", False):
        names.append("decoder_input_ids")
    return names


def make_calls(model: Any, torch: Any, names: list[str], zoom: int = 1, flip: bool = False) -> list[dict[str, Any]]:
    c = Ctx(model, torch)
    c.zoom, c.flip = zoom, flip
    makers = dict(MAKERS)
    for key, extra in FAMILY.items():
        if key in names:
            makers.update(extra)
    return [{n: makers[n](c, b, length) for n in names if n in makers} for b, length in CALLS]


def modality(names: list[str]) -> str:
    kinds = [k for k, keys in (("text", ("input_ids",)), ("image", ("pixel_values", "hidden_states")),
                               ("video", ("pixel_values_videos",)), ("audio", ("input_values", "input_features")),
                               ("layout", ("bbox",)), ("time series", ("past_values",)))
             if any(n in names for n in keys)]
    return " + ".join(kinds) + (" (encoder-decoder)" if "decoder_input_ids" in names else "") or "other"


def recipe(model: Any, torch: Any, tries: int = 3) -> tuple[str, list[dict[str, Any]], str | None]:
    """(modality, the three calls' inputs, the eager error or None): run eagerly, adding the inputs
    an error names as missing, up to ``tries`` more times."""
    params = inspect.signature(model.forward).parameters
    names = input_names(model)
    error, zoom, flip = None, 1, False
    for _ in range(tries + 1):
        calls = make_calls(model, torch, names, zoom, flip)
        try:
            with torch.no_grad():
                for kw in calls:
                    model(**kw)
            return modality(names), calls, None
        except Exception as e:  # noqa: BLE001 - the model's own failure is the result
            error = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        more = [n for n in missing_inputs(error) if n in params and n in MAKERS and n not in names]
        if more:
            names += more
        elif "pixel_values" in names and zoom < 4 and _TOO_SMALL.search(error):
            zoom *= 2
        elif "input_features" in names and not flip:
            flip = True
        else:
            break
    return modality(names), calls, error
