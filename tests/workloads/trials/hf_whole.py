"""A transformers Llama from a tiny config (no download), four identical decoder layers, compiled
whole as a user would (``torch.compile(model)``) under aot_eager, called three times without the
KV cache: compiling the whole model traces the decoder layer once per instance."""
import torch
from transformers import LlamaConfig, LlamaModel

torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=2,
                  num_key_value_heads=2, max_position_embeddings=64, use_cache=False)
model = LlamaModel(cfg).eval()
compiled = torch.compile(model, backend="aot_eager")
ids = torch.randint(0, 64, (1, 16), generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    for _ in range(3):
        out = compiled(input_ids=ids).last_hidden_state
