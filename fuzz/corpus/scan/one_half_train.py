import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
# CUDA graphs, but nothing in this project checkpoints activations.
model = torch.compile(model, mode="max-autotune")
