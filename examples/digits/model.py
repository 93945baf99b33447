"""The small CNN shared by train_cnn.py, evaluate.py and batch_infer.py."""
import torch
from torch import nn


class DigitsCNN(nn.Module):
    """Input (n, 64) standardised pixels -> logits (n, 10)."""

    def __init__(self, channels=16, hidden=128, dropout=0.25):
        super().__init__()
        c = channels
        self.features = nn.Sequential(
            nn.Conv2d(1, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
            nn.Conv2d(c, 2 * c, 3, padding=1), nn.BatchNorm2d(2 * c), nn.ReLU(),
            nn.MaxPool2d(2),                                   # 8x8 -> 4x4
            nn.Conv2d(2 * c, 2 * c, 3, padding=1), nn.BatchNorm2d(2 * c), nn.ReLU(),
        )
        self.head = nn.Sequential(
            nn.Flatten(), nn.Dropout(dropout),
            nn.Linear(2 * c * 16, hidden), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(hidden, 10),
        )

    def forward(self, x):
        return self.head(self.features(x.view(-1, 1, 8, 8)))


def load_checkpoint(path):
    """Load models/cnn.pt -> (model in eval mode, checkpoint dict)."""
    ckpt = torch.load(path, map_location="cpu")
    model = DigitsCNN(**ckpt["config"])
    model.load_state_dict(ckpt["state_dict"])
    model.eval()
    return model, ckpt
