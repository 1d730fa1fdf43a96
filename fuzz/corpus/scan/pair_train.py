"""Seed 001's Option A as a user writes it: the compile mode in the training
script, the checkpointing in the model's file."""
import argparse

import torch
from torch.utils.data import DataLoader

from model import Net

parser = argparse.ArgumentParser()
parser.add_argument("--debug", action="store_true")
args = parser.parse_args()

model = Net()
model = torch.compile(
    model,
    mode="reduce-overhead",
)
loader = DataLoader(torch.zeros(64, 8), batch_size=16, num_workers=2)
