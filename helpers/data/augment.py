"""CIFAR-10 AutoAugment (Cubuk et al. 2019's CIFAR-10 policy, with PIL: no torchvision needed) and tensor
conversion with the CIFAR-10 normalisation."""

from __future__ import annotations

import random

import numpy as np
import torch
from PIL import Image, ImageEnhance, ImageOps
from torch import Tensor


def _op(img: Image.Image, name: str, mag: float) -> Image.Image:
    fill = (128, 128, 128)
    if name == "ShearX":
        return img.transform(img.size, Image.AFFINE, (1, mag, 0, 0, 1, 0), fillcolor=fill)
    if name == "ShearY":
        return img.transform(img.size, Image.AFFINE, (1, 0, 0, mag, 1, 0), fillcolor=fill)
    if name == "TranslateX":
        return img.transform(img.size, Image.AFFINE, (1, 0, mag * img.size[0], 0, 1, 0), fillcolor=fill)
    if name == "TranslateY":
        return img.transform(img.size, Image.AFFINE, (1, 0, 0, 0, 1, mag * img.size[1]), fillcolor=fill)
    if name == "Rotate":
        return img.rotate(mag, fillcolor=fill)
    if name == "Color":
        return ImageEnhance.Color(img).enhance(1 + mag)
    if name == "Posterize":
        return ImageOps.posterize(img, int(mag))
    if name == "Solarize":
        return ImageOps.solarize(img, int(mag))
    if name == "Contrast":
        return ImageEnhance.Contrast(img).enhance(1 + mag)
    if name == "Sharpness":
        return ImageEnhance.Sharpness(img).enhance(1 + mag)
    if name == "Brightness":
        return ImageEnhance.Brightness(img).enhance(1 + mag)
    if name == "AutoContrast":
        return ImageOps.autocontrast(img)
    if name == "Equalize":
        return ImageOps.equalize(img)
    if name == "Invert":
        return ImageOps.invert(img)
    raise ValueError(name)


_MAG = {  # magnitude bins 0..9 -> value, as in Cubuk et al.'s reference implementation
    "ShearX": np.linspace(0, 0.3, 10), "ShearY": np.linspace(0, 0.3, 10),
    "TranslateX": np.linspace(0, 150 / 331, 10), "TranslateY": np.linspace(0, 150 / 331, 10),
    "Rotate": np.linspace(0, 30, 10), "Color": np.linspace(0.0, 0.9, 10),
    "Posterize": np.round(np.linspace(8, 4, 10)), "Solarize": np.linspace(256, 0, 10),
    "Contrast": np.linspace(0.0, 0.9, 10), "Sharpness": np.linspace(0.0, 0.9, 10),
    "Brightness": np.linspace(0.0, 0.9, 10), "AutoContrast": [0] * 10, "Equalize": [0] * 10, "Invert": [0] * 10,
}


_SIGNED = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Color", "Contrast", "Sharpness", "Brightness"}


#: the 25 CIFAR-10 sub-policies of AutoAugment (Cubuk et al. 2019): (op, prob, magnitude bin) × 2
CIFAR10_POLICY = (
    (("Invert", 0.1, 7), ("Contrast", 0.2, 6)), (("Rotate", 0.7, 2), ("TranslateX", 0.3, 9)),
    (("Sharpness", 0.8, 1), ("Sharpness", 0.9, 3)), (("ShearY", 0.5, 8), ("TranslateY", 0.7, 9)),
    (("AutoContrast", 0.5, 8), ("Equalize", 0.9, 2)), (("ShearY", 0.2, 7), ("Posterize", 0.3, 7)),
    (("Color", 0.4, 3), ("Brightness", 0.6, 7)), (("Sharpness", 0.3, 9), ("Brightness", 0.7, 9)),
    (("Equalize", 0.6, 5), ("Equalize", 0.5, 1)), (("Contrast", 0.6, 7), ("Sharpness", 0.6, 5)),
    (("Color", 0.7, 7), ("TranslateX", 0.5, 8)), (("Equalize", 0.3, 7), ("AutoContrast", 0.4, 8)),
    (("TranslateY", 0.4, 3), ("Sharpness", 0.2, 6)), (("Brightness", 0.9, 6), ("Color", 0.2, 8)),
    (("Solarize", 0.5, 2), ("Invert", 0.0, 3)), (("Equalize", 0.2, 0), ("AutoContrast", 0.6, 0)),
    (("Equalize", 0.2, 8), ("Equalize", 0.6, 4)), (("Color", 0.9, 9), ("Equalize", 0.6, 6)),
    (("AutoContrast", 0.8, 4), ("Solarize", 0.2, 8)), (("Brightness", 0.1, 3), ("Color", 0.7, 0)),
    (("Solarize", 0.4, 5), ("AutoContrast", 0.9, 3)), (("TranslateY", 0.9, 9), ("TranslateY", 0.7, 9)),
    (("AutoContrast", 0.9, 2), ("Solarize", 0.8, 3)), (("Equalize", 0.8, 8), ("Invert", 0.1, 3)),
    (("TranslateY", 0.7, 9), ("AutoContrast", 0.9, 1)),
)


def autoaugment(img: Image.Image, rng: random.Random) -> Image.Image:
    """Apply one randomly chosen CIFAR-10 AutoAugment sub-policy (the paper enables AutoAugment)."""
    for name, prob, bin_ in rng.choice(CIFAR10_POLICY):
        if rng.random() < prob:
            mag = float(_MAG[name][bin_])
            if name in _SIGNED and rng.random() < 0.5:
                mag = -mag
            img = _op(img, name, mag)
    return img


CIFAR_MEAN = (0.4914, 0.4822, 0.4465)


CIFAR_STD = (0.2470, 0.2435, 0.2616)


def to_tensor(images: list[Image.Image]) -> Tensor:
    """PIL images -> normalised float tensor (B, 3, 32, 32)."""
    x = torch.from_numpy(np.stack([np.asarray(im, dtype=np.float32) / 255.0 for im in images])).permute(0, 3, 1, 2)
    mean = torch.tensor(CIFAR_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(CIFAR_STD).view(1, 3, 1, 1)
    return (x - mean) / std
