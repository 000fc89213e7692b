"""A module whose forward branches on ``dim % 8`` of the input's height and width (as diffusers'
UNet does): with automatic dynamic shapes the recompile is fine; with
``automatic_dynamic_shapes_mark_as='unbacked'`` the guard is data-dependent and the frame's
recompile fails, falling back to eager."""
import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 2, 3, padding=1)

    def forward(self, sample):
        up = False
        for dim in sample.shape[-2:]:
            if dim % 8 != 0:
                up = True
                break
        y = self.conv(sample)
        return y * 2 if up else y


torch.manual_seed(0)
f = torch.compile(M(), backend="eager")
for n in (16, 24, 16, 24):
    f(torch.randn(1, 2, n, n))
