"""PyTorch's CNN training step (torch_peer.py's model_step) on the GPU, its kernels by CUDA time
(torch.profiler), beside Nsight Compute's durations of fluxion's kernels for the same step
(scripts/gpu-carry.sh call with FLUXION_GPU_PROFILE=1). Usage: torch_profile.py [batch] (default 256)."""
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_peer  # noqa: E402


def main():
    if not torch.cuda.is_available():
        print("torch_profile.py: no CUDA device", file=sys.stderr)
        return 1
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    g = torch.Generator(device="cuda").manual_seed(7)
    step = torch_peer.model_step(torch_peer.cnn(), (1, 28, 28), batch, g)
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    steps = 10
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    print(f"torch_profile.py: the CNN step at batch {batch}, {steps} steps; divide the totals by {steps}")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=40, max_name_column_width=90))
    return 0


if __name__ == "__main__":
    sys.exit(main())
