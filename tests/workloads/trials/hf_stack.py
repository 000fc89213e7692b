"""A transformers Llama from a tiny config (no download), two identical decoder layers (four in
``benchmarks/try_decides.py``: ``TRIAL_LAYERS``), compiled whole with dynamic=False and called on
three sequence lengths (four in the benchmark: ``TRIAL_LENGTHS``): it recompiles the whole model
(every layer traced again) per length. Two remedies act on different things: regional compilation
(one layer compiled, serving both) and dynamic=true (one compilation for every length)."""
import os

import torch
from transformers import LlamaConfig, LlamaModel

torch.manual_seed(0)
LAYERS = int(os.environ.get("TRIAL_LAYERS", "2"))
LENGTHS = (8, 12, 16, 20)[:int(os.environ.get("TRIAL_LENGTHS", "3"))]
cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=LAYERS, num_attention_heads=2,
                  num_key_value_heads=2, max_position_embeddings=64, use_cache=False)
model = LlamaModel(cfg).eval()
compiled = torch.compile(model, backend="eager", dynamic=False)
with torch.no_grad():
    for n in (*LENGTHS, 8, 12):
        ids = torch.randint(0, 64, (1, n), generator=torch.Generator().manual_seed(n))
        compiled(input_ids=ids)
