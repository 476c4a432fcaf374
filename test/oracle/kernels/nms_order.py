"""How a batched-NMS result is compared with torchvision's across devices."""
import torch


def assert_same_keep(ours: torch.Tensor, theirs: torch.Tensor, scores: torch.Tensor, device: str, what: str = ""):
    """On the CPU, the exact kept list. On CUDA, torchvision itself orders survivors of
    equal score differently by device and path (its CUDA sort is not stable, and it keeps
    the offset trick up to 25000 boxes where the CPU switches to its per-class loop at
    1000), so there the kept set and the score of every position must match, and only
    the order among equal scores is free."""
    ours = ours.cpu()
    if device == "cpu":
        assert torch.equal(ours, theirs), f"{what}: {ours.tolist()} vs torchvision {theirs.tolist()}"
        return
    assert ours.shape == theirs.shape and torch.equal(ours.sort().values, theirs.sort().values), (
        f"{what}: kept set {sorted(ours.tolist())} vs torchvision {sorted(theirs.tolist())}")
    if torch.equal(ours, theirs):
        return
    # NaN scores (kept where torchvision keeps them) compare equal here.
    torch.testing.assert_close(scores[ours], scores[theirs], rtol=0, atol=0, equal_nan=True,
                               msg=f"{what}: score order differs from torchvision's")
