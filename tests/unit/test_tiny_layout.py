"""tests/tiny is laid out like mmrun's loaders: one module per model family, named as the
family's module in mmrun/modalities/<modality>/, holding every row of that family it proves or
says why it cannot."""

from __future__ import annotations

from mmrun.plugins import builtin_registry
from tests.tiny import family_modules


def test_each_row_is_in_the_module_of_its_loaders_family() -> None:
    registry = builtin_registry()
    misplaced = []
    for module in family_modules():
        family = module.__name__.rsplit(".", 1)[1]
        rows = [*getattr(module, "PROOFS", {}), *getattr(module, "UNPROVEN", {})]
        assert rows, f"{module.__name__} proves no row and explains none"
        for modality, key in rows:
            loader = registry.get(modality, key).load.__module__
            if loader.rsplit(".", 1)[1] != family:
                misplaced.append(f"{modality}/{key} in {module.__name__}, its loader in {loader}")
    assert not misplaced, misplaced
