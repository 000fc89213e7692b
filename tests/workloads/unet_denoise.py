"""A toy denoising loop over a diffusers ``UNet2DConditionModel`` built from a tiny config (no
download), compiled whole with the eager backend, the timestep passed as a Python int (as toy
samplers do): 6 steps, then ``done``. Plain down and up blocks: what the test reads (the counts, the
timestep's guard, the frame behind diffusers' decorator) is the UNet's own ``forward``; cross-attention
blocks would triple Dynamo's tracing for nothing it reads."""

import torch
from diffusers import UNet2DConditionModel

STEPS = 6

torch.manual_seed(0)
unet = UNet2DConditionModel(
    sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(8,),
    down_block_types=("DownBlock2D",), up_block_types=("UpBlock2D",), mid_block_type=None,
    cross_attention_dim=8, attention_head_dim=2, norm_num_groups=4,
).eval()
denoise = torch.compile(unet, backend="eager")
x = torch.randn(1, 4, 8, 8)
text = torch.randn(1, 3, 8)
with torch.no_grad():
    for t in range(STEPS, 0, -1):
        eps = denoise(x, t, encoder_hidden_states=text).sample
        x = x - eps / STEPS
print("done", tuple(x.shape))
