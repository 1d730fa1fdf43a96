import torch.nn as nn
import torch.utils.checkpoint as cp


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(8, 8) for _ in range(4)])

    def forward(self, x):
        return cp.checkpoint_sequential(self.layers, 2, x, use_reentrant=False)
