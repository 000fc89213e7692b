"""Small real workloads for the census tests: run with TORCH_TRACE and TORCH_LOGS set, observed by
a seamscope session, so a test can compare the live receipt, the import of the same run's log, and
PyTorch's own logs and counters.

    python census.py KIND OUT_DIR

writes OUT_DIR/receipt.json (the session's) and OUT_DIR/counters.json
(``torch._dynamo.utils.counters``), and, for KIND ``bert``, OUT_DIR/profile.json (compiled-region
events of ``torch.profiler`` for one steady call).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

import torch

import seamscope


def pad_twice(x, must_pad: bool):
    x = x + 1
    if must_pad: torch._dynamo.graph_break()  # noqa: E701
    x = x * 2
    if must_pad: torch._dynamo.graph_break()  # noqa: E701
    return x - 1


def tiny_bert():
    import transformers

    cfg = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=64)
    torch.manual_seed(0)
    return transformers.BertModel(cfg).eval()


def tiny_reformer():
    import transformers

    cfg = transformers.ReformerConfig(
        vocab_size=64, hidden_size=16, num_attention_heads=2, attention_head_size=8, axial_pos_embds=False,
        num_hashes=1, lsh_attn_chunk_length=4, local_attn_chunk_length=4, attn_layers=["local", "lsh"],
        feed_forward_size=16, max_position_embeddings=64, is_decoder=True, num_buckets=2, pad_token_id=0,
    )
    torch.manual_seed(0)
    return transformers.ReformerModel(cfg).eval()


def main() -> None:
    kind, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    quiet = contextlib.redirect_stdout(open(os.devnull, "w"))  # noqa: SIM115 - transformers prints
    profile = None
    with quiet, seamscope.session(out=out), torch.no_grad():
        if kind == "dup":
            f = torch.compile(pad_twice, backend="eager")
            for _ in range(3):
                f(torch.ones(4), True)
        elif kind == "reformer":
            m = torch.compile(tiny_reformer(), backend="eager")
            for n in (10,):  # not a multiple of the chunk length: padded, np.lcm in the branch
                m(input_ids=torch.randint(1, 64, (1, n)))
        elif kind == "bert":
            m = torch.compile(tiny_bert(), backend="eager")
            for n in (8, 8, 12, 12, 16, 16):
                m(input_ids=torch.randint(0, 100, (1, n)), output_attentions=True)
            from torch.profiler import profile as prof

            with prof() as p:
                m(input_ids=torch.randint(0, 100, (1, 16)), output_attentions=True)
            profile = sorted(e.name for e in p.events() if e.name.startswith("Torch-Compiled Region"))
        elif kind == "bert_static":
            torch._dynamo.config.recompile_limit = 2
            m = torch.compile(tiny_bert(), backend="eager", dynamic=False)
            for n in (8, 12, 16, 8):  # A, B, C (over the limit), A again
                m(input_ids=torch.randint(0, 100, (1, n)))
        else:
            raise SystemExit(f"unknown kind {kind}")
    from torch._dynamo.utils import counters

    with open(os.path.join(out, "counters.json"), "w") as fh:
        json.dump({k: dict(v) for k, v in counters.items()}, fh)
    if profile is not None:
        with open(os.path.join(out, "profile.json"), "w") as fh:
            json.dump(profile, fh)


if __name__ == "__main__":
    main()
