#!/usr/bin/env python3
"""Training step throughput: our C++ Mask R-CNN training step (build*/bin/train_step_bench:
the trainer's own step, engine::TrainStep — train-mode forward with RPN/ROI matching and
sampling, loss sum, backward, the engine's SGD) vs torchvision's Mask R-CNN training step
(the step of torchvision's references/detection/engine.py: model(images, targets), sum of
losses, zero_grad, backward, SGD step), in one run.

Same for both sides: weights (a torchvision R50-FPN Mask R-CNN with FrozenBatchNorm2d and
3 trainable backbone layers — what maskrcnn_resnet50_fpn builds for fine-tuning — written
to our model dir with scripts/convert_weights.py's helpers), the batch (synthetic images
with boxes, labels and bitmasks written once to a safetensors file that both read), image
size, precision, thread count, SGD settings (lr, momentum 0.9, weight decay 1e-4 on every
parameter). Both start from the same weights; their steps interleave one by one (our side
is a long-lived train_step_bench process taking one step per request), so both see the same
background load. Ratio = ours images/s / torchvision images/s over the measured steps.

Images are given at the training size. Our loader resizes and normalises on its worker
threads before the step, so by default torchvision's in-model resize (a scale-1.0
interpolation of images and masks here) is switched off too (--tv-resize keeps it);
normalisation and batching stay in its step.

Operator counts: after the timed steps, --count-steps steps per side run under an ATen
operator observer (ours: a RecordFunction callback in train_step_bench; torchvision: the
profiler, which records through the same RecordFunction mechanism), counting per step every
aten:: operator (a proxy for kernel launches) and the host-sync operators (.item()'s
_local_scalar_dense, nonzero, masked_select, unique, equal): each one makes a CUDA device's
launch queue wait for the host and keeps the step out of a CUDA graph. CPU and CUDA run the
same operators, so the counts measured here hold there.

  .venv/bin/python bench/model/bench_train_step.py [--device cpu|cuda] [--amp off|fp16|bf16]
      [--size HxW] [--batch B] [--objects G] [--num-classes K] [--iters N] [--warmup W]
      [--threads T] [--phases] [--tv-resize] [--optimizer sgd|novograd] [--count-steps N]
      [--loss-scaling] [--mask-rows auto|fixed|exact]
--loss-scaling runs our side with fp16's dynamic loss scaling (on by itself with --amp fp16)
at any precision, so a CPU run counts its overflow check, skip and scale update too.
--mask-rows fixed gives our mask head the fixed rows it has on CUDA (a CPU reads each image's
positive count instead, one .item() per image, where that costs nothing): a CPU run then
counts the operators of the CUDA step.
Defaults: CPU 512x512 batch 2 fp32; CUDA 800x1333 batch 8 fp16 (the issue's GPU setting).
"""
import argparse
import contextlib
import json
import math
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import torch
import torchvision
from safetensors.torch import save_file
from torchvision.models import resnet50
from torchvision.models.detection import MaskRCNN
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
from torchvision.ops import misc as misc_nn_ops

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import convert_weights  # noqa: E402


def torchvision_model(num_classes, height, width, resize):
    """maskrcnn_resnet50_fpn's construction when it is given weights (FrozenBatchNorm2d,
    trainable_backbone_layers=3). With weights=None torchvision would build plain
    BatchNorm2d and train all five stages, which is not the model fine-tuning runs and
    not ours (MODEL.BACKBONE.NORM FrozenBN, TRAINABLE_LAYERS 3)."""
    backbone = resnet50(weights=None, norm_layer=misc_nn_ops.FrozenBatchNorm2d)
    backbone = _resnet_fpn_extractor(backbone, 3)
    # min/max size equal to the image's sides: GeneralizedRCNNTransform's scale is 1.0.
    model = MaskRCNN(backbone, num_classes=num_classes + 1, min_size=min(height, width),
                     max_size=max(height, width))
    if not resize:
        model.transform.resize = lambda image, target=None: (image, target)
    return model


def make_batch(batch, height, width, objects, num_classes, seed):
    """Images with G objects each (alternating rectangles and ellipses, 6-50% of a side):
    uint8 RGB HxWx3, tight boxes (x1 y1 x2 y2, pixel edges), labels 1..K, bitmasks."""
    g = torch.Generator().manual_seed(seed)
    tensors = {}
    ys = torch.arange(height, dtype=torch.float32)[:, None]
    xs = torch.arange(width, dtype=torch.float32)[None, :]
    for i in range(batch):
        image = torch.randint(0, 256, (height, width, 3), dtype=torch.uint8, generator=g)
        masks, boxes = [], []
        for k in range(objects):
            h = int(height * (0.06 + 0.44 * torch.rand((), generator=g)))
            w = int(width * (0.06 + 0.44 * torch.rand((), generator=g)))
            y0 = int(torch.randint(0, height - h, (), generator=g))
            x0 = int(torch.randint(0, width - w, (), generator=g))
            if k % 2 == 0:
                m = torch.zeros(height, width, dtype=torch.bool)
                m[y0:y0 + h, x0:x0 + w] = True
            else:
                cy, cx = y0 + h / 2, x0 + w / 2
                m = ((ys + 0.5 - cy) / (h / 2)) ** 2 + ((xs + 0.5 - cx) / (w / 2)) ** 2 <= 1
            color = torch.randint(0, 256, (3,), dtype=torch.uint8, generator=g)
            image[m] = color
            yy, xx = torch.nonzero(m, as_tuple=True)
            boxes.append([xx.min().item(), yy.min().item(), xx.max().item() + 1, yy.max().item() + 1])
            masks.append(m.to(torch.uint8))
        tensors[f"image.{i}"] = image
        tensors[f"boxes.{i}"] = torch.tensor(boxes, dtype=torch.float32)
        tensors[f"labels.{i}"] = torch.randint(1, num_classes + 1, (objects,), dtype=torch.int64, generator=g)
        tensors[f"masks.{i}"] = torch.stack(masks)
    return tensors


SYNC_OPS = {"aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::_unique",
            "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive", "aten::equal"}


def count_ops(names):
    """{"aten_ops", "sync_ops", "sync_by_op"} of the operator names one step dispatched."""
    aten = [n for n in names if n.startswith("aten::")]
    by_op = {}
    for n in aten:
        if n in SYNC_OPS:
            by_op[n] = by_op.get(n, 0) + 1
    return {"aten_ops": len(aten), "sync_ops": sum(by_op.values()), "sync_by_op": by_op}


@contextlib.contextmanager
def count_cuda_waits(cuda):
    """Counts torch's "synchronizing CUDA operation" warnings (sync debug mode) in the block
    into the yielded dict's "n": every wait of the host for the device that goes through
    torch's sync helpers, as ours is counted (bench/model/cuda_sync_counter.h)."""
    out = {"n": None}
    if not cuda:
        yield out
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield out
        finally:
            torch.cuda.set_sync_debug_mode("default")
    out["n"] = sum("synchronizing CUDA operation" in str(w.message) for w in caught)


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


class TorchvisionStep:
    """torchvision's training step (references/detection/engine.py's train_one_epoch body)
    on a fixed batch, one call per step."""

    def __init__(self, model, data, args):
        self.args = args
        self.model = model.to(args.device).train()
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.SGD(params, lr=args.lr, momentum=0.9, weight_decay=1e-4)
        self.dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.amp)
        self.use_amp = args.device == "cuda" and self.dtype is not None
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.use_amp and self.dtype == torch.float16)
        # The loader's output on torchvision's side: float RGB in [0, 1] CPU tensors and targets.
        self.images = [data[f"image.{i}"].permute(2, 0, 1).float().div(255) for i in range(args.batch)]
        self.targets = [{"boxes": data[f"boxes.{i}"], "labels": data[f"labels.{i}"], "masks": data[f"masks.{i}"]}
                        for i in range(args.batch)]

    def __call__(self, counted=False):
        """Returns (ms, losses, phases_ms). A counted step makes none of the bench's own
        waits for the device (timing, phases), which the counters would see."""
        device, model, phases = self.args.device, self.model, {}

        def mark(name, last):
            if not self.args.phases or counted:
                return last
            sync(device)
            now = time.perf_counter()
            phases[name] = (now - last) * 1000
            return now

        if not counted:
            sync(device)
        start = time.perf_counter()
        last = start
        imgs = [img.to(device, non_blocking=True) for img in self.images]
        tgts = [{k: v.to(device) for k, v in t.items()} for t in self.targets]
        with torch.autocast("cuda", dtype=self.dtype, enabled=self.use_amp):
            if self.args.phases and not counted:
                # GeneralizedRCNN.forward in train mode, stage by stage (same calls, timed).
                il, tgts = model.transform(imgs, tgts)
                last = mark("transform", last)
                features = model.backbone(il.tensors)
                last = mark("backbone_fpn", last)
                proposals, loss_dict = model.rpn(il, features, tgts)
                last = mark("rpn", last)
                _, det_losses = model.roi_heads(features, proposals, il.image_sizes, tgts)
                loss_dict = {**det_losses, **loss_dict}
                last = mark("roi_heads", last)
            else:
                loss_dict = model(imgs, tgts)
        losses = sum(loss for loss in loss_dict.values())
        values = {k: v.item() for k, v in loss_dict.items()}
        values["total"] = losses.item()
        if not math.isfinite(values["total"]):
            raise SystemExit(f"torchvision loss became {values['total']}: lower --lr")
        last = mark("loss_sum_item", last)
        self.optimizer.zero_grad()
        self.scaler.scale(losses).backward()
        last = mark("backward", last)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        last = mark("optimizer", last)
        if not counted:
            sync(device)
        return (time.perf_counter() - start) * 1000, values, phases


class OursStep:
    """train_step_bench --steps-from-stdin: one step per request."""

    def __init__(self, cmd):
        self.proc = subprocess.Popen(cmd + ["--steps-from-stdin"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"train_step_bench did not start (exit {self.proc.wait()})")

    def request(self, what):
        self.proc.stdin.write(what + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"train_step_bench failed (exit {self.proc.wait()})")
        return json.loads(line)

    def __call__(self, logging=False):
        r = self.request("log-step" if logging else "step")
        return r["ms"], r["losses"], r["phases_ms"]

    def count(self, logging):
        return self.request("count-log" if logging else "count")["ops"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--amp", default=None, choices=["off", "fp16", "bf16"], help="CUDA only; default fp16 there")
    p.add_argument("--size", default=None, help="HxW; default 512x512 on CPU, 800x1333 on CUDA")
    p.add_argument("--batch", type=int, default=None, help="default 2 on CPU, 8 on CUDA")
    p.add_argument("--objects", type=int, default=8, help="instances per image")
    p.add_argument("--num-classes", type=int, default=90, help="foreground classes")
    p.add_argument("--iters", type=int, default=6, help="measured steps per side")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured steps per side")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--lr", type=float, default=1e-4,
                   help="small: random weights without pretrained statistics give large losses that a larger lr turns to NaN within a few steps; the work per step does not depend on it")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--phases", action="store_true", help="time each part of the step on both sides")
    p.add_argument("--tv-resize", action="store_true", help="keep torchvision's in-step resize (scale 1.0)")
    p.add_argument("--build", default=os.environ.get("MRCNN_BUILD_DIR", str(REPO / "build")))
    p.add_argument("--optimizer", default="sgd", choices=["sgd", "novograd"],
                   help="our side's optimizer (SageMakerCV's recipe uses NovoGrad); torchvision's stays SGD")
    p.add_argument("--count-steps", type=int, default=2, help="untimed steps per side with operator counts (0: none)")
    p.add_argument("--loss-scaling", action="store_true",
                   help="our side with fp16's dynamic loss scaling at any precision (counts its operators on a CPU)")
    p.add_argument("--mask-rows", default="auto", choices=["auto", "fixed", "exact"],
                   help="our mask head's rows: auto as the trainer (fixed on CUDA, exact on CPU)")
    p.add_argument("--trace-op", default="", help="print the C++ stack of each call of this operator in our counted steps")
    args = p.parse_args()
    cuda = args.device == "cuda"
    args.amp = args.amp or ("fp16" if cuda else "off")
    if not cuda and args.amp != "off":
        raise SystemExit("--amp applies to CUDA only (the trainer runs CPU steps in fp32)")
    height, width = map(int, (args.size or ("800x1333" if cuda else "512x512")).split("x"))
    args.batch = args.batch or (8 if cuda else 2)
    torch.set_num_threads(args.threads)
    binary = pathlib.Path(args.build) / "bin" / "train_step_bench"
    if not binary.exists():
        raise SystemExit(f"{binary} not built (cmake --build <build> --target train_step_bench)")

    torch.manual_seed(args.seed)
    model = torchvision_model(args.num_classes, height, width, resize=args.tv_resize)
    machine = f"{platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    if cuda:
        machine = torch.cuda.get_device_name()
    print(f"# machine: {machine}; device {args.device}, amp {args.amp}, {args.threads} threads; "
          f"torch {torch.__version__}, torchvision {torchvision.__version__}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"# batch {args.batch} x {height}x{width}, {args.objects} instances/image, {args.num_classes} classes, "
          f"SGD lr {args.lr} momentum 0.9 wd 1e-4; {args.warmup} warm-up + {args.iters} measured steps "
          f"per side, interleaved; torchvision resize in step: {args.tv_resize}; our loss scaling: "
          f"{args.loss_scaling or args.amp == 'fp16'}; our mask rows: {args.mask_rows}", flush=True)

    ours_ms, tv_ms, ours_phases, tv_phases, ours_counts, ours_log_counts, tv_counts = [], [], [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = pathlib.Path(tmp) / "model"
        config = convert_weights.torchvision_config(
            args.num_classes, 1e-5,
            {"INPUT.MIN_SIZE_TRAIN": [min(height, width)], "INPUT.MAX_SIZE_TRAIN": max(height, width)})
        classes = [{"id": i, "name": f"c{i}"} for i in range(1, args.num_classes + 1)]
        convert_weights.write_model_dir(convert_weights.normalised_state_dict(model), model_dir, classes, config)
        data = make_batch(args.batch, height, width, args.objects, args.num_classes, args.seed)
        batch_file = pathlib.Path(tmp) / "batch.safetensors"
        save_file(data, str(batch_file))
        cmd = [str(binary), "--model-dir", str(model_dir), "--input", str(batch_file), "--batch", str(args.batch),
               "--threads", str(args.threads), "--device", args.device, "--amp", args.amp, "--lr", str(args.lr),
               "--seed", str(args.seed), "--optimizer", args.optimizer]
        if args.phases:
            cmd.append("--phases")
        if args.trace_op:
            cmd += ["--trace-op", args.trace_op]
        if args.loss_scaling:
            cmd.append("--loss-scaling")
        cmd += ["--mask-rows", args.mask_rows]
        ours = OursStep(cmd)
        theirs = TorchvisionStep(model, data, args)
        try:
            # Steps interleave one by one, and the order flips every step, so both sides see
            # the same background load on a shared machine.
            for it in range(args.warmup + args.iters):
                sides = [("ours", ours), ("torchvision", theirs)]
                if it % 2:
                    sides.reverse()
                # Ours reads its losses on the first step only, as the trainer reads them at
                # logging iterations only; torchvision's reference loop reads them every step.
                result = {name: side(it == 0) if name == "ours" else side() for name, side in sides}
                (o_ms, o_loss, o_ph), (t_ms, t_loss, t_ph) = result["ours"], result["torchvision"]
                if it == 0:
                    keys = sorted(set(o_loss) | set(t_loss))
                    print("first-step losses ours/torchvision (sampling is random, so close, not equal): " +
                          ", ".join(f"{k} {o_loss.get(k, math.nan):.4f}/{t_loss.get(k, math.nan):.4f}" for k in keys))
                measured = it >= args.warmup
                if measured:
                    ours_ms.append(o_ms)
                    tv_ms.append(t_ms)
                    ours_phases.append(o_ph)
                    tv_phases.append(t_ph)
                print(f"step {it + 1}{'' if measured else ' (warm-up)'}: ours {o_ms:.0f} ms, torchvision "
                      f"{t_ms:.0f} ms; load average {os.getloadavg()[0]:.2f}", flush=True)
            for _ in range(args.count_steps):
                ours_counts.append(ours.count(logging=False))
                ours_log_counts.append(ours.count(logging=True))
                sync(args.device)
                with count_cuda_waits(cuda) as waits, \
                        torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                    theirs(counted=True)
                sync(args.device)
                tv_counts.append(count_ops([e.name for e in prof.events()]))
                if cuda:
                    tv_counts[-1]["cuda_syncs"] = waits["n"]
        finally:
            ours.close()

    def summary(ms):
        mean = statistics.fmean(ms)
        return mean, statistics.median(ms), min(ms), 1000 * args.batch / mean

    o_mean, o_med, o_min, o_ips = summary(ours_ms)
    t_mean, t_med, t_min, t_ips = summary(tv_ms)
    print("| side | ms/step mean | median | min | images/s (mean) |")
    print("|---|---|---|---|---|")
    print(f"| ours (C++) | {o_mean:.1f} | {o_med:.1f} | {o_min:.1f} | {o_ips:.3f} |")
    print(f"| torchvision | {t_mean:.1f} | {t_med:.1f} | {t_min:.1f} | {t_ips:.3f} |")
    print(f"ratio ours/torchvision images/s: {o_ips / t_ips:.2f}x from means, {t_med / o_med:.2f}x from medians, "
          f"{t_min / o_min:.2f}x from the fastest steps")
    if args.phases:
        names = ["transform", "backbone_fpn", "rpn", "roi_heads", "loss_sum_item", "backward", "optimizer"]
        print("| phase (mean over measured steps) | ours ms | torchvision ms |")
        print("|---|---|---|")
        for n in names:
            o = [ph.get(n, 0.0) for ph in ours_phases]
            t = [ph.get(n, 0.0) for ph in tv_phases]
            print(f"| {n} | {statistics.fmean(o):.1f} | {statistics.fmean(t):.1f} |")
    if ours_counts:
        def span(counts, get):
            v = [get(c) for c in counts]
            return f"{min(v)}" if min(v) == max(v) else f"{min(v)}-{max(v)}"

        scaling = ", loss scaling" if args.loss_scaling or args.amp == "fp16" else ""
        print(f"| operators per step ({len(ours_counts)} counted steps of each kind) | ours ({args.optimizer}{scaling}), "
              f"non-logging step | ours, logging step (+ one read of its losses) | torchvision (sgd), every step "
              f"(reads its losses) |")
        print("|---|---|---|---|")
        for key, what in (("sync_ops", "host-sync operators"), ("aten_ops", "aten operators (launch proxy)")):
            print(f"| {what} | {span(ours_counts, lambda c: c[key])} | {span(ours_log_counts, lambda c: c[key])} | "
                  f"{span(tv_counts, lambda c: c[key])} |")
        if any("cuda_syncs" in c for c in ours_counts + tv_counts):
            def waits(c):
                return c.get("cuda_syncs", "-")
            print(f"| CUDA waits (torch's sync debug mode: blocking copies both ways, syncs) | "
                  f"{span(ours_counts, waits)} | {span(ours_log_counts, waits)} | {span(tv_counts, waits)} |")
        for op in sorted(SYNC_OPS):
            def get(c, op=op):
                return c["sync_by_op"].get(op, 0)
            if any(get(c) for c in ours_counts + ours_log_counts + tv_counts):
                print(f"| of which {op} | {span(ours_counts, get)} | {span(ours_log_counts, get)} | "
                      f"{span(tv_counts, get)} |")
        print("(on a GPU, copies from the device to the host wait too: ours counts them as \"device-to-host "
              "copy_\"; on CPU there are none to see, so a logging step's read of its losses shows there only "
              "on a GPU; torchvision's side is counted by the profiler, which has no such row)")
    print(json.dumps({"ours_ms": ours_ms, "torchvision_ms": tv_ms, "ours_images_per_s": o_ips,
                      "torchvision_images_per_s": t_ips, "ratio": o_ips / t_ips,
                      "ours_phases_ms": ours_phases, "torchvision_phases_ms": tv_phases,
                      "ours_op_counts": ours_counts, "ours_logging_op_counts": ours_log_counts,
                      "torchvision_op_counts": tv_counts}))


if __name__ == "__main__":
    main()
