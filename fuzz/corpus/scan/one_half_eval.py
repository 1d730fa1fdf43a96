import torch


def evaluate(model, batch):
    with torch.no_grad():
        return model(batch)
