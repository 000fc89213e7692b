"""A Lightning ``Trainer`` over a compiled ``LightningModule`` (``torch.compile(model)``, which
Lightning unwraps and compiles its ``training_step`` with, as ``from_compiled`` does), the
aot_eager backend so each step's backward is compiled too: one epoch of 18 samples in batches of 8
(2 full batches and a short last one of 2), then ``fit done``."""

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

SAMPLES, BATCH = 18, 8


class Regressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


torch.manual_seed(0)
data = DataLoader(TensorDataset(torch.randn(SAMPLES, 8), torch.randn(SAMPLES, 1)), batch_size=BATCH)
model = torch.compile(Regressor(), backend="aot_eager")
trainer = L.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
trainer.fit(model, data)
print("fit done", trainer.global_step)
