"""timm's ViT (random init) trained by a plain loop, in the one-change-apart forms the replay's
edits predict beyond GPT-2 (docs/whatif.md, "Beyond GPT-2: third-party twins"):
  --graph  the whole step (forward, backward, AdamW(foreach, capturable)) captured once as a CUDA
           graph and replayed, against the same step run eagerly (`graph`);
  --graph-phases  each phase its own CUDA graph (forward with the loss, backward, the optimizer step;
           one memory pool), replayed inside its phase range: the form `fix:launch-bound` replays
           (`graph:forward graph:backward graph:optimizer`);
  --tf32   TF32 matmuls and convolutions against fp32 ones (`fix:fp32-gemm-without-tensor-cores`,
           `kernels-from:TWIN`);
  --optim foreach-off|fused  AdamW(foreach=False) against AdamW(fused=True), without a graph
           (`fix:unfused-optimizer`, `kernels-from:TWIN`);
  --inference  the forward alone under torch.no_grad (when a graph's GPU work starts: a training
           step's graph starts before its launch call returns, a decode loop's after, docs/whatif.md).
  --bf16   the forward and loss under bf16 autocast (weights and optimizer fp32), against TF32
  --compile  the model through torch.compile (Inductor's Triton kernels; the optimizer eager)
  --accum K  gradient accumulation: K forward/backward pairs (each its own forward and backward
           phase range) before each optimizer step, the loss divided by K (docs/no-nvtx.md).
  --manual-attn  timm's attention written out (`fused_attn = False`) against SDPA (`attention`);
  --alternate-attn  the two in one capture: written out in the odd steps (step_1, step_3, ...), SDPA in the
           even ones, on the same weights, so both sides share the minute's CPU (the twins table's "every
           other step" rows; file names with `attention-manual-every2` as devruns/interleaved_table.py reads).
Both forms warm up on a side stream as PyTorch's whole-network capture does (torch.cuda.graphs),
set the gradients to None before each step (no accumulate kernels either way) and mark each step
with nsight_tui.capture.mark (step_N ranges; the Python clock read after the step's synchronise,
which comes after its range).
    python timm_vit_twins.py [--model vit_small_patch16_224] [--batch 8] [--warmup 3] [--steps 8]
                             [--graph | --graph-phases] [--tf32] [--bf16] [--inference] [--optim capturable|foreach-off|fused] [--accum K]
                             [--depth N] [--compile] [--manual-attn | --alternate-attn]
"""
import argparse
import time

import timm
import torch

from nsight_tui.capture import mark

p = argparse.ArgumentParser()
p.add_argument("--model", default="vit_small_patch16_224")
p.add_argument("--batch", type=int, default=8)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--steps", type=int, default=8)
p.add_argument("--graph", action="store_true", help="replay the step as one CUDA graph (the twin of the eager step)")
p.add_argument("--graph-phases", action="store_true",
               help="forward, backward and the optimizer step each replayed as its own CUDA graph")
p.add_argument("--tf32", action="store_true", help="TF32 matmuls and convolutions (the twin of fp32)")
p.add_argument("--bf16", action="store_true", help="bf16 autocast over the forward and the loss")
p.add_argument("--inference", action="store_true", help="the forward alone, no gradients")
p.add_argument("--optim", default="capturable", choices=["capturable", "foreach-off", "fused"],
               help="AdamW(foreach, capturable) (a graph needs it), AdamW(foreach=False) or AdamW(fused=True)")
p.add_argument("--depth", type=int, default=0, help="blocks of the model (0: the model's own)")
p.add_argument("--compile", action="store_true", help="torch.compile(model) (Inductor's default mode)")
p.add_argument("--accum", type=int, default=1, help="forward/backward pairs a step (gradient accumulation)")
p.add_argument("--sleep-ms", type=float, default=0.0,
               help="a pause of the loop's own at each step's start, inside its range and before its work, "
                    "eager or graphed alike (time.sleep: the next batch, logging)")
p.add_argument("--manual-attn", action="store_true",
               help="timm's attention written out (q @ k^T, softmax, @ v) instead of F.scaled_dot_product_attention")
p.add_argument("--alternate-attn", action="store_true",
               help="attention written out in the odd steps, SDPA in the even ones (one capture, both sides)")
a = p.parse_args()

torch.backends.cuda.matmul.allow_tf32 = a.tf32
torch.backends.cudnn.allow_tf32 = a.tf32
model = timm.create_model(a.model, pretrained=False, num_classes=100, **({"depth": a.depth} if a.depth else {})).cuda()
ATTENTION = [m for m in model.modules() if hasattr(m, "fused_attn")]


def written_out(manual: bool) -> None:
    """timm's own switch, per attention module: the path it takes where SDPA is unavailable."""
    for module in ATTENTION:
        module.fused_attn = not manual


written_out(a.manual_attn)
if a.alternate_attn and a.compile:
    raise SystemExit("--alternate-attn switches the modules per step: not with --compile")
if a.compile:
    model = torch.compile(model)
if (a.graph or a.graph_phases) and a.optim != "capturable":
    raise SystemExit("--graph and --graph-phases need --optim capturable")
if a.graph_phases and (a.graph or a.inference or a.accum > 1 or a.compile or a.alternate_attn):
    raise SystemExit("--graph-phases: a training step of one forward and backward, eager otherwise")
OPTIM = {"capturable": {"foreach": True, "capturable": True}, "foreach-off": {"foreach": False}, "fused": {"fused": True}}
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, **OPTIM[a.optim])
size = model.default_cfg.get("input_size", (3, 224, 224))[-1]
x = torch.randn(a.batch, 3, size, size, device="cuda")
y = torch.randint(0, 100, (a.batch,), device="cuda")
autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.bf16)
mark.config(workload=f"timm {a.model} training, " + ("bf16 autocast" if a.bf16 else "fp32")
            + (" (TF32 allowed)" if a.tf32 else ""),
            graph=a.graph, graph_phases=a.graph_phases, tf32=a.tf32, bf16=a.bf16, optim=a.optim, manual_attn=a.manual_attn,
            alternate_attn=a.alternate_attn, batch_size=a.batch,
            accumulation=a.accum, compiled=a.compile,
            torch=torch.__version__,
            timm=timm.__version__)


def step():
    if a.inference:
        with mark.phase("forward"), torch.no_grad(), autocast:
            model(x).argmax(-1)
        return
    for _ in range(a.accum):
        with mark.phase("forward"), autocast:
            loss = torch.nn.functional.cross_entropy(model(x), y) / a.accum
        with mark.phase("backward"):
            loss.backward()
    with mark.phase("optimizer"):
        optimizer.step()


side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for i in range(a.warmup):
        if a.alternate_attn:
            written_out(i % 2 == 1)
        with mark.step(i, warmup=a.warmup):
            optimizer.zero_grad(set_to_none=True)
            step()
torch.cuda.current_stream().wait_stream(side)

graph = None
if a.graph:
    optimizer.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    torch.cuda.nvtx.range_push("cuda_graph_capture")  # no iteration: the parsers' steady state skips it
    with torch.cuda.graph(graph):
        step()
    graph.replay()  # the first replay uploads the graph
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()

phases = None
if a.graph_phases:
    # one graph per phase, sharing a pool: the backward's graph reads what the forward's saved, the
    # optimizer's the gradients the backward's wrote (set to None before its capture: written, not added)
    pool = torch.cuda.graph_pool_handle()
    phases = {name: torch.cuda.CUDAGraph() for name in ("forward", "backward", "optimizer")}
    optimizer.zero_grad(set_to_none=True)
    torch.cuda.nvtx.range_push("cuda_graph_capture")  # no iteration: the parsers' steady state skips it
    with torch.cuda.graph(phases["forward"], pool=pool), autocast:
        static_loss = torch.nn.functional.cross_entropy(model(x), y)
    with torch.cuda.graph(phases["backward"], pool=pool):
        static_loss.backward()
    with torch.cuda.graph(phases["optimizer"], pool=pool):
        optimizer.step()
    for g in phases.values():
        g.replay()  # the first replay uploads the graph
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()

for i in range(a.warmup, a.warmup + a.steps):
    if a.alternate_attn:  # step_1, step_3, ... (mark names the step after the warm-ups: step_<i - warmup>)
        written_out((i - a.warmup) % 2 == 1)
    with mark.step(i, warmup=a.warmup):
        if a.sleep_ms:
            time.sleep(a.sleep_ms / 1e3)
        if phases is not None:
            for name, g in phases.items():
                with mark.phase(name):
                    g.replay()
        elif graph is not None:
            graph.replay()
        else:
            optimizer.zero_grad(set_to_none=True)
            step()
for r in mark.clock.records:
    print(r["name"], f"{r['seconds'] * 1e3:.2f} ms")
