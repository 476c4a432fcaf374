"""Calls mrcnn ops with arguments they reject, on the CPU, from Python: each must raise a
RuntimeError naming the op. On the H100 and H200 hosts of 2026-11-26 every such call killed
the process with SIGSEGV (the C++ exception crossing from our library into Python), so this
runs on its own, before the oracle tests, and says how the library was linked."""
import pathlib
import sys

import torch

library = pathlib.Path(sys.argv[1])
torch.ops.load_library(str(library))
ops = torch.ops.mrcnn
cases = {
    "nms, boxes N×5": lambda: ops.nms(torch.zeros(3, 5), torch.zeros(3), 0.5),
    "box_iou, boxes1 N×5": lambda: ops.box_iou(torch.zeros(3, 5), torch.zeros(2, 4)),
    "roi_align, input 3-D": lambda: ops.roi_align(torch.zeros(2, 4, 4), torch.zeros(1, 5), 1.0, 2, 2, 2, False),
}
failed = 0
for name, call in cases.items():
    print(f"calling {name} ...", flush=True)
    try:
        call()
    except RuntimeError as error:
        first = str(error).splitlines()[0]
        named = "mrcnn" in first
        failed += not named
        print(f"  raised RuntimeError{'' if named else ' without naming the op'}: {first[:160]}", flush=True)
    else:
        failed += 1
        print("  returned: it should have raised", flush=True)
print(f"raise probe: {len(cases) - failed} of {len(cases)} raised as they should")
sys.exit(1 if failed else 0)
