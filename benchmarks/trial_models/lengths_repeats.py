"""A small decoder block compiled with dynamic=False on six lengths, then three repeats (the first
two lengths, cached, and the last, past the recompile limit of 4): the baseline's steady calls
are the two cache hits (calls 6, 7) and its last call runs eagerly (call 8); under dynamic=true
every call after the first runs one graph."""
import torch

torch._dynamo.config.recompile_limit = 4
torch.manual_seed(0)
D = 256
emb = torch.nn.Embedding(64, D)
qkv = torch.nn.Linear(D, 3 * D)
mlp = torch.nn.Sequential(torch.nn.Linear(D, 4 * D), torch.nn.GELU(), torch.nn.Linear(4 * D, D))


def logits(ids):
    h = emb(ids)
    q, k, v = qkv(h).chunk(3, dim=-1)
    a = torch.softmax(q @ k.transpose(-1, -2) / D ** 0.5, dim=-1) @ v
    h = h + a
    h = h + mlp(h)
    return h @ emb.weight.T


f = torch.compile(logits, backend="eager", dynamic=False)
lengths = [64 + 32 * i for i in range(6)]
with torch.no_grad():
    for n in lengths + [lengths[0], lengths[1], lengths[-1]]:
        f(torch.randint(1, 64, (1, n), generator=torch.Generator().manual_seed(n)))
