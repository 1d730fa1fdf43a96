"""A small training script shaped as seed 001's: frames through an encoder
with per-frame gradient checkpointing, attention over the frames, a
regression head; torch.compile with a mode from its flags; a validation
pass after each epoch; the seed's epoch lines
(`Epoch 1/3 | Train Loss: ... | Val Loss: ... | Time: ...s`).

  compile_ckpt.py [--torch_compile] [--torch_compile_mode MODE]
                  [--gradient_checkpointing] [--use_reentrant] [--epochs N]
                  [--legacy_cudagraphs] [--device cuda|cpu]

--legacy_cudagraphs sets what the PyTorch the seed ran (before 2.5) did by
default: torch._dynamo.config.inline_inbuilt_nn_modules = False and
torch._inductor.config.triton.cudagraph_support_input_mutation = False,
under which CUDA graph trees raise "static input data pointer changed"
where today's defaults re-record the graph; --use_reentrant is
torch.utils.checkpoint's default of that time (use_reentrant=True).
"""

import argparse
import time

import torch
import torch.nn.functional as F
import torch.utils.checkpoint


class Model(torch.nn.Module):
    def __init__(self, checkpointing, reentrant=False):
        super().__init__()
        self.checkpointing, self.reentrant = checkpointing, reentrant
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.embed = torch.nn.Linear(16, 64)
        self.attn = torch.nn.MultiheadAttention(64, 4, batch_first=True)
        self.head = torch.nn.Linear(64, 1)

    def frame(self, x):
        h = F.relu(self.conv(x))
        return self.embed(h.mean(dim=(2, 3)))

    def forward(self, frames):
        feats = []
        for t in range(frames.shape[1]):
            x = frames[:, t]
            if self.checkpointing and self.training:
                feats.append(torch.utils.checkpoint.checkpoint(self.frame, x, use_reentrant=self.reentrant))
            else:
                feats.append(self.frame(x))
        seq = torch.stack(feats, dim=1)
        out, _ = self.attn(seq, seq, seq)
        return self.head(out.mean(dim=1)).squeeze(-1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--torch_compile", action="store_true", help="compile the model")
    p.add_argument("--torch_compile_mode", default="default",
                   choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"],
                   help="torch.compile's mode (default: default)")
    p.add_argument("--gradient_checkpointing", action="store_true", help="checkpoint each frame")
    p.add_argument("--use_reentrant", action="store_true", help="torch.utils.checkpoint(use_reentrant=True)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--legacy_cudagraphs", action="store_true", help="torch < 2.5's CUDA graph settings")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    if a.legacy_cudagraphs:
        torch._dynamo.config.inline_inbuilt_nn_modules = False
        torch._inductor.config.triton.cudagraph_support_input_mutation = False
    torch.manual_seed(0)
    model = Model(a.gradient_checkpointing, a.use_reentrant).to(a.device)
    step = torch.compile(model, mode=a.torch_compile_mode) if a.torch_compile else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    frames = torch.randn(4, a.batch_size, 4, 3, 32, 32, generator=g).to(a.device)
    target = frames.mean(dim=(2, 3, 4, 5))
    val_frames = torch.randn(a.batch_size, 4, 3, 32, 32, generator=g).to(a.device)
    val_target = val_frames.mean(dim=(1, 2, 3, 4))
    print(f"compile: {a.torch_compile_mode if a.torch_compile else 'off'}, checkpointing: {a.gradient_checkpointing}, "
          f"reentrant: {a.use_reentrant}, legacy cudagraph settings: {a.legacy_cudagraphs}, torch {torch.__version__}", flush=True)
    for epoch in range(1, a.epochs + 1):
        start = time.perf_counter()
        model.train()
        for i in range(len(frames)):
            opt.zero_grad()
            loss = F.mse_loss(step(frames[i]), target[i])
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            val = F.mse_loss(step(val_frames), val_target).item()
        if a.device.startswith("cuda"):
            torch.cuda.synchronize()
        print(f"Epoch {epoch}/{a.epochs} | Train Loss: {loss.item():.4f} | Val Loss: {val:.4f} | "
              f"Time: {time.perf_counter() - start:.2f}s", flush=True)


if __name__ == "__main__":
    main()
