"""
Style: the small MobileNet(v1) reimplementations common on GitHub (a `conv_bn` stem
followed by `conv_dw` blocks -- depthwise 3x3 Conv2d with groups=channels, BatchNorm,
ReLU6, then pointwise 1x1 Conv2d, BatchNorm, ReLU6 -- global average pool and a Linear
classifier) trained with SGD + momentum + weight decay. Own code, synthetic 16x16 images.

Tests: grouped / depthwise convolutions (groups == in_channels) and BatchNorm running
statistics inside a timed training step, `--steps` plain SGD steps. Prints
`final loss X`.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser(description='Tiny MobileNet-style net on synthetic images')
parser.add_argument('--steps', type=int, default=6)
parser.add_argument('--batch-size', type=int, default=16)
parser.add_argument('--image-size', type=int, default=16)
parser.add_argument('--num-classes', type=int, default=10)
parser.add_argument('--width', type=int, default=8, help='channels after the stem')
parser.add_argument('--lr', type=float, default=0.05)
parser.add_argument('--momentum', type=float, default=0.9)
parser.add_argument('--weight-decay', type=float, default=4e-5)
args = parser.parse_args()


def conv_bn(inp, oup, stride):
    return nn.Sequential(
        nn.Conv2d(inp, oup, 3, stride, 1, bias=False),
        nn.BatchNorm2d(oup),
        nn.ReLU6(inplace=True))


def conv_dw(inp, oup, stride):
    return nn.Sequential(
        # depthwise: one 3x3 filter per input channel
        nn.Conv2d(inp, inp, 3, stride, 1, groups=inp, bias=False),
        nn.BatchNorm2d(inp),
        nn.ReLU6(inplace=True),
        # pointwise: 1x1 conv mixes channels
        nn.Conv2d(inp, oup, 1, 1, 0, bias=False),
        nn.BatchNorm2d(oup),
        nn.ReLU6(inplace=True))


class MobileNet(nn.Module):
    def __init__(self, num_classes, width):
        super().__init__()
        w = width
        self.features = nn.Sequential(
            conv_bn(3, w, 1),            # 16x16
            conv_dw(w, 2 * w, 2),        # 8x8
            conv_dw(2 * w, 2 * w, 1),
            conv_dw(2 * w, 4 * w, 2),    # 4x4
            conv_dw(4 * w, 4 * w, 1))
        self.classifier = nn.Linear(4 * w, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.classifier(x)


torch.manual_seed(0)
model = MobileNet(args.num_classes, args.width)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                            weight_decay=args.weight_decay)

# synthetic data: a fixed pool of images whose class shifts one colour channel
n = args.batch_size * 4
labels = torch.randint(0, args.num_classes, (n,))
images = torch.randn(n, 3, args.image_size, args.image_size)
images[torch.arange(n), labels % 3] += (labels.float() / args.num_classes).view(-1, 1, 1)

model.train()
for step in range(args.steps):
    start = time.time()
    idx = torch.randint(0, n, (args.batch_size,))
    inputs, targets = images[idx], labels[idx]
    outputs = model(inputs)
    loss = criterion(outputs, targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    acc = (outputs.argmax(1) == targets).float().mean().item()
    print(f'step {step}: loss {loss.item():.4f} acc {acc:.3f} ({(time.time() - start) * 1000:.1f} ms)')
print(f'final loss {loss.item():.4f}')
