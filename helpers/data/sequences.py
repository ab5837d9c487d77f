"""Non-text sequences from the offline mirror for the anisotropy chapter's residue- and atom-level models:
antibody variable domains (Jain et al. 2017) and reaction SMILES (USPTO-50K test)."""

from __future__ import annotations

import csv
import random
import re

from .hublock import RevisionMoved, load_hub_dataset, record_mirror_file
from .loaders import DataUnavailable, data_root

#: atom-map numbers inside bracket atoms: `[CH3:1]` -> `[CH3]`
_ATOM_MAP = re.compile(r":\d+\]")
#: a bracket atom holding only an organic-subset element and an optional hydrogen count
_PLAIN_BRACKET = re.compile(r"\[(Cl|Br|B|C|N|O|P|S|F|I|b|c|n|o|p|s)(H\d?)?\]")


def load_antibody_chains() -> list[tuple[str, str, str]]:
    """The 274 variable-domain chains of the 137 clinical-stage antibodies of Jain et al. (2017, PNAS
    114(5)), from `antibody/jain2017_sequences.csv`: (antibody name, "VH" or "VL", one-letter residues)."""
    root = data_root()
    path = root / "antibody" / "jain2017_sequences.csv" if root else None
    if path is None or not path.is_file():
        raise DataUnavailable(f"antibody sequences (Jain et al. 2017): offline mirror file not found ({path}); "
                              "they are not on the Hugging Face hub under this name")
    record_mirror_file(path, "antibody chains (Jain et al. 2017)", root)
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return [(r["name"], chain.upper(), r[chain].strip()) for r in rows for chain in ("vh", "vl") if r[chain].strip()]


def strip_atom_maps(smiles: str) -> str:
    """Remove atom-map numbers (`[CH3:1]` -> `[CH3]`). Hydrogen counts stay in brackets: without RDKit
    the SMILES is not re-canonicalised (rxnmapper's vocabulary holds these bracket atoms)."""
    return _ATOM_MAP.sub("]", smiles)


def unbracket_organic(smiles: str) -> str:
    """Write bracket atoms that need no brackets once their map number is gone in the organic-subset
    form of canonical SMILES: `[CH3]` -> `C`, `[cH]` -> `c`, `[n]` -> `n`, `[OH]` -> `O`. Charged,
    isotopic and chiral atoms keep their brackets, and so do aromatic atoms carrying a hydrogen other
    than carbon (`[nH]`, whose H is not implied). Mapped SMILES write every atom in brackets with its
    exact hydrogen count; for atoms at their default valence (all but a handful in USPTO) the bare
    symbol implies the same count, so the molecule is unchanged (no RDKit here to check valences)."""
    def plain(m: re.Match) -> str:
        element, h = m.group(1), m.group(2)
        return m.group(0) if h and element in ("b", "n", "o", "p", "s") else element
    return _PLAIN_BRACKET.sub(plain, smiles)


def load_uspto50k_reactions(n: int | None = None, seed: int = 0, strip_maps: bool = True) -> list[str]:
    """Reaction SMILES (`reactants>>product`) of the USPTO-50K test split (5,007 reactions, from
    `chem/uspto50k_test.csv`); unless `strip_maps=False` the atom-map numbers are stripped and the
    bracket atoms that only carried them are unbracketed (`unbracket_organic`), as in the unmapped
    SMILES rxnmapper was trained on; `n` draws a seeded random subset."""
    root = data_root()
    path = root / "chem" / "uspto50k_test.csv" if root else None
    if path is not None and path.is_file():
        record_mirror_file(path, "USPTO-50K test reactions", root)
        with open(path, newline="", encoding="utf-8") as fh:
            rxns = [r["reactants>reagents>production"] for r in csv.DictReader(fh)]
    else:
        rxns = _uspto50k_hub(path)                       # no mirror: the hub's parquet copy
    if n is not None:
        rxns = random.Random(seed).sample(rxns, min(n, len(rxns)))
    return [unbracket_organic(strip_atom_maps(r)) for r in rxns] if strip_maps else rxns


#: USPTO-50K on the hub (parquet, config `default`, splits train/val/test with 40,008/5,001/5,007 rows):
#: repo id, split, reactants column, product column
USPTO50K_HUB = ("bisectgroup/USPTO_50K", "test", "reactants", "product")


def _uspto50k_hub(mirror_path) -> list[str]:
    """The USPTO-50K test reactions as `reactants>>product` from the hub copy (`USPTO50K_HUB`); its row
    order is the hub's, so a seeded subset differs from the mirror's. DataUnavailable when unreachable."""
    repo, split, reactants, product = USPTO50K_HUB
    try:
        ds = load_hub_dataset(repo, split=split)
    except RevisionMoved:
        raise
    except Exception as err:  # noqa: BLE001 - offline, unknown id or split: say which
        raise DataUnavailable(f"USPTO-50K test reactions: offline mirror file not found ({mirror_path}) and "
                              f"the hub copy {repo} ({split}) is not reachable ({type(err).__name__})") from None
    missing = {reactants, product} - set(ds.column_names)
    if missing:
        raise DataUnavailable(f"USPTO-50K on the hub ({repo}) has columns {ds.column_names}; "
                              f"expected {reactants!r} and {product!r}")
    return [f"{r}>>{p}" for r, p in zip(ds[reactants], ds[product], strict=True)]


__all__ = ["load_antibody_chains", "strip_atom_maps", "unbracket_organic", "load_uspto50k_reactions"]
