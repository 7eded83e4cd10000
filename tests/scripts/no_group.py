"""
Style: pytorch/examples imagenet/main.py (argparse with --dist-url / --dist-backend /
--multiprocessing-distributed, main() -> main_worker(), train()/validate() per epoch,
AverageMeter, DataLoader with an optional DistributedSampler). Own code: a small CNN on
a synthetic TensorDataset instead of ImageNet.

Tests: a script that forms a process group ONLY when asked (`--multiprocessing-distributed`
or `--dist-url`). Under torchrun without those flags every rank trains on its own with no
process group and no collectives, and every rank prints its own `final loss X`.
Prints `training batches N` (per process) and `final loss X`.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser(description='Tiny image classifier (synthetic data)')
parser.add_argument('--epochs', default=2, type=int, metavar='N', help='number of total epochs to run')
parser.add_argument('-b', '--batch-size', default=32, type=int, metavar='N', help='mini-batch size')
parser.add_argument('--num-samples', default=256, type=int, help='synthetic training samples')
parser.add_argument('--lr', '--learning-rate', default=0.05, type=float, dest='lr')
parser.add_argument('--momentum', default=0.9, type=float)
parser.add_argument('--wd', '--weight-decay', default=1e-4, type=float, dest='weight_decay')
parser.add_argument('-p', '--print-freq', default=4, type=int, help='print frequency')
parser.add_argument('--world-size', default=-1, type=int, help='number of nodes (or processes with env://)')
parser.add_argument('--rank', default=-1, type=int, help='node rank')
parser.add_argument('--dist-url', default=None, type=str, help='url used to set up distributed training')
parser.add_argument('--dist-backend', default='gloo', type=str, help='distributed backend')
parser.add_argument('--multiprocessing-distributed', action='store_true',
                    help='spawn one process per device (2 on CPU) and train with DDP')
parser.add_argument('--seed', default=0, type=int)


class AverageMeter:
    def __init__(self, name):
        self.name, self.sum, self.count, self.val = name, 0.0, 0, 0.0

    def update(self, val, n=1):
        self.val, self.sum, self.count = val, self.sum + val * n, self.count + n

    @property
    def avg(self):
        return self.sum / max(1, self.count)


def make_model():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(16, 10))


def main():
    args = parser.parse_args()
    if args.dist_url == 'env://' and args.world_size == -1:
        args.world_size = int(os.environ.get('WORLD_SIZE', 1))
    args.distributed = args.multiprocessing_distributed or args.dist_url is not None
    if args.multiprocessing_distributed:
        nprocs = torch.cuda.device_count() or 2
        args.dist_url = args.dist_url or 'tcp://127.0.0.1:29533'
        args.world_size = nprocs * max(1, args.world_size)
        mp.spawn(main_worker, nprocs=nprocs, args=(nprocs, args))
    else:
        main_worker(None, 1, args)


def main_worker(local_rank, procs_per_node, args):
    if args.distributed:
        if args.dist_url == 'env://' and args.rank == -1:
            args.rank = int(os.environ['RANK'])
        if args.multiprocessing_distributed:
            args.rank = max(0, args.rank) * procs_per_node + local_rank
        dist.init_process_group(backend=args.dist_backend, init_method=args.dist_url,
                                world_size=args.world_size, rank=args.rank)
    torch.manual_seed(args.seed)
    model = make_model()
    if args.distributed:
        model = nn.parallel.DistributedDataParallel(model)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)

    # synthetic "images": the label decides the mean colour of the picture
    g = torch.Generator().manual_seed(args.seed)
    targets = torch.randint(0, 10, (args.num_samples,), generator=g)
    images = torch.randn(args.num_samples, 3, 8, 8, generator=g) + targets.view(-1, 1, 1, 1) / 5.0
    train_dataset = TensorDataset(images, targets)
    val_dataset = TensorDataset(images[:64], targets[:64])
    train_sampler = DistributedSampler(train_dataset) if args.distributed else None
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, shuffle=(train_sampler is None),
                              sampler=train_sampler, num_workers=0)
    val_loader = DataLoader(val_dataset, batch_size=args.batch_size, shuffle=False)

    batches = 0
    for epoch in range(args.epochs):
        if args.distributed:
            train_sampler.set_epoch(epoch)
        losses, batches = train(train_loader, model, criterion, optimizer, epoch, args, batches)
        acc = validate(val_loader, model)
        scheduler.step()
        print(f' * Epoch {epoch} train loss {losses.avg:.4f} val acc {acc:.1f}')
    if not args.distributed or args.rank == 0:
        print(f'training batches {batches}')
        print(f'final loss {losses.val:.4f}')
    if args.distributed:
        dist.destroy_process_group()


def train(train_loader, model, criterion, optimizer, epoch, args, batches):
    losses, batch_time = AverageMeter('Loss'), AverageMeter('Time')
    model.train()
    end = time.time()
    for i, (images, target) in enumerate(train_loader):
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.update(loss.item(), images.size(0))
        batch_time.update(time.time() - end)
        end = time.time()
        batches += 1
        if i % args.print_freq == 0:
            print(f'Epoch: [{epoch}][{i}/{len(train_loader)}]\tTime {batch_time.val:.3f}\tLoss {losses.val:.4f}')
    return losses, batches


def validate(val_loader, model):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, target in val_loader:
            correct += (model(images).argmax(1) == target).sum().item()
            total += target.numel()
    return 100.0 * correct / total


if __name__ == '__main__':
    main()
