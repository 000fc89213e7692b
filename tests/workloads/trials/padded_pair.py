"""Token ids and their attention mask, padded to the batch's longest text: one length, two inputs.

With ``--lazy-flag`` the model also sets an attribute on its first call, as transformers'
classification heads set ``config.problem_type``: a guard that fails once, whatever the inputs.
"""

import sys

import torch


class Classifier(torch.nn.Module):
    def __init__(self, lazy_flag: bool) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(64, 8)
        self.head = torch.nn.Linear(8, 2)
        self.problem_type = None if lazy_flag else "single_label"

    def forward(self, input_ids, attention_mask):
        hidden = self.emb(input_ids) * attention_mask.unsqueeze(-1)
        if self.problem_type is None:
            self.problem_type = "single_label"
        return self.head(hidden.sum(1) / attention_mask.sum(1, keepdim=True))


lazy = "--lazy-flag" in sys.argv
torch.manual_seed(0)
model = Classifier(lazy)
compiled = torch.compile(model, backend="eager")
for length in (8, 8, 12) if lazy else (8, 12, 16):
    ids = torch.randint(1, 64, (2, length))
    mask = torch.ones(2, length)
    compiled(ids, mask)
