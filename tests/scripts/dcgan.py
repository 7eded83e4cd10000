"""
Style: pytorch/examples dcgan/main.py (opt = parser.parse_args(), Generator/Discriminator
nn.Modules built from ConvTranspose2d/Conv2d + BatchNorm, weights_init, BCELoss with
real_label/fake_label, optimizerD/optimizerG, the "(1) Update D network / (2) Update G
network" inner loop, checkpoints written to --outf per epoch). Own code at tiny scale:
8x8 images, synthetic TensorDataset instead of a torchvision dataset.

Tests: TWO models and TWO optimizers stepped in every batch (D on real, D on fake.detach(),
optimizerD.step(); then G through netD(fake), optimizerG.step()), i.e. two backward passes
and two optimizer steps per loader batch. Prints `batches N` and `final loss X` (Loss_D).
"""
import argparse
import os
import shutil
import tempfile

import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument('--batchSize', type=int, default=16, help='input batch size')
parser.add_argument('--numImages', type=int, default=64, help='synthetic training images')
parser.add_argument('--imageSize', type=int, default=8, help='height / width of the images (fixed at 8)')
parser.add_argument('--nz', type=int, default=8, help='size of the latent z vector')
parser.add_argument('--ngf', type=int, default=4)
parser.add_argument('--ndf', type=int, default=4)
parser.add_argument('--niter', type=int, default=2, help='number of epochs to train for')
parser.add_argument('--lr', type=float, default=0.0002, help='learning rate')
parser.add_argument('--beta1', type=float, default=0.5, help='beta1 for adam')
parser.add_argument('--outf', default=None, help='folder for checkpoints (default: a temp folder)')
parser.add_argument('--manualSeed', type=int, default=999, help='manual seed')
opt = parser.parse_args()
print(opt)
assert opt.imageSize == 8, 'this tiny DCGAN is laid out for 8x8 images'

outf = opt.outf or tempfile.mkdtemp(prefix='dcgan_')
os.makedirs(outf, exist_ok=True)
torch.manual_seed(opt.manualSeed)
device = torch.device('cpu')
nc, nz, ngf, ndf = 3, opt.nz, opt.ngf, opt.ndf

# synthetic "images" in [-1, 1]: smooth blobs, so D has something to learn
xs = torch.linspace(-1, 1, 8)
centres = torch.rand(opt.numImages, 2) * 1.4 - 0.7
blob = torch.exp(-((xs.view(1, 1, 8) - centres[:, 0, None, None]) ** 2
                   + (xs.view(1, 8, 1) - centres[:, 1, None, None]) ** 2) * 4)
images = (blob.unsqueeze(1).repeat(1, nc, 1, 1) * 2 - 1)
dataloader = DataLoader(TensorDataset(images), batch_size=opt.batchSize, shuffle=True)


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),   # -> (ngf*2) x 4 x 4
            nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),   # -> nc x 8 x 8
            nn.Tanh())

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),                # -> ndf x 4 x 4
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),           # -> (ndf*2) x 2 x 2
            nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 2, 1, 0, bias=False),             # -> 1 x 1 x 1
            nn.Sigmoid())

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


netG = Generator().to(device)
netG.apply(weights_init)
netD = Discriminator().to(device)
netD.apply(weights_init)

criterion = nn.BCELoss()
fixed_noise = torch.randn(opt.batchSize, nz, 1, 1, device=device)
real_label, fake_label = 1., 0.
optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))

batches = 0
for epoch in range(opt.niter):
    for i, (real_cpu,) in enumerate(dataloader, 0):
        ############################
        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        ###########################
        netD.zero_grad()
        real_cpu = real_cpu.to(device)
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)
        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()

        noise = torch.randn(batch_size, nz, 1, 1, device=device)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()

        ############################
        # (2) Update G network: maximize log(D(G(z)))
        ###########################
        netG.zero_grad()
        label.fill_(real_label)  # fake labels are real for generator cost
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()
        batches += 1

        print(f'[{epoch}/{opt.niter}][{i}/{len(dataloader)}] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} '
              f'D(x): {D_x:.4f} D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}')

    with torch.no_grad():
        netG.eval()
        samples = netG(fixed_noise)
        netG.train()
    torch.save(samples, f'{outf}/fake_samples_epoch_{epoch:03d}.pt')
    torch.save(netG.state_dict(), f'{outf}/netG_epoch_{epoch}.pth')
    torch.save(netD.state_dict(), f'{outf}/netD_epoch_{epoch}.pth')

print(f'batches {batches}')
print(f'final loss {errD.item():.4f}')
if opt.outf is None:
    shutil.rmtree(outf)  # the checkpoints only existed to exercise torch.save mid-run
