import argparse

import torch

from blocks import Stack

parser = argparse.ArgumentParser()
parser.add_argument("--compile-mode", default="default")
args = parser.parse_args()

model = torch.compile(Stack(), mode=args.compile_mode)
