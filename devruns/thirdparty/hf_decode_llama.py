"""A hand-written greedy decode loop over transformers' Llama (a small Llama-shaped model from its
config, bf16, batch 1, a static KV cache), one token per marked step, in the two forms the `graph`
edit predicts (docs/whatif.md, "Beyond GPT-2: third-party twins"): eager, or each token's forward,
argmax and the next token's inputs captured once as a CUDA graph and replayed (`--graph`). The
prompt is prefilled eagerly first (it fills the cache's first positions); both forms warm up on a
side stream. Each step_N range holds one token; the Python clock is read after the step's
synchronise (nsight_tui.capture.mark). `--probe` runs a few tokens without marks and says whether
the form runs here (a capture that cannot be graphed fails fast, outside nsys).

The variants that asked when a graph's GPU work starts (docs/whatif.md, "Beyond GPT-2"), each one
change from the plain loop: `--copy-first` begins each token with a device-to-device copy (a memcpy
node first), `--memset-first` with a cudaMemsetAsync of 768 bytes (a memset node first),
`--foreach-last` ends it with one torch._foreach_mul_ over 24 small tensors (a multi_tensor_apply
kernel, kilobytes of parameters, as an optimizer's), `--nvtx-inside` puts the forward in an NVTX range
pushed and popped inside what the graph captures (as a marked training step's phases are), `--dtype
fp32` runs it in fp32 with TF32 matmuls, `--no-cudnn-sdpa` keeps attention off cuDNN's kernels.
`--cut-layers` puts a cudaMemsetAsync of 768 bytes before every decoder layer but the first (a
forward pre-hook): in the graph, memset nodes that cut it into one segment per layer, which the
launch hands the GPU as it walks them (docs/whatif.md, "When a graph's GPU work starts").
    python hf_decode_llama.py [--layers 6] [--prompt 128] [--warmup 8] [--steps 24] [--graph] [--probe]
        [--copy-first] [--memset-first] [--foreach-last] [--nvtx-inside] [--dtype bf16|fp32] [--no-cudnn-sdpa]
        [--cut-layers]
"""
import argparse
import ctypes

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM, StaticCache

from nsight_tui.capture import mark

p = argparse.ArgumentParser()
p.add_argument("--layers", type=int, default=6)
p.add_argument("--prompt", type=int, default=128)
p.add_argument("--warmup", type=int, default=8)
p.add_argument("--steps", type=int, default=24)
p.add_argument("--graph", action="store_true", help="each token one CUDA graph replay (the twin of the eager loop)")
p.add_argument("--copy-first", action="store_true", help="each token begins with a device-to-device copy")
p.add_argument("--memset-first", action="store_true", help="each token begins with a cudaMemsetAsync")
p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
p.add_argument("--no-cudnn-sdpa", action="store_true", help="scaled_dot_product_attention without cuDNN's backend")
p.add_argument("--foreach-last", action="store_true", help="each token ends with a _foreach_mul_ over 24 tensors")
p.add_argument("--nvtx-inside", action="store_true", help="the forward inside an NVTX range of its own")
p.add_argument("--cut-layers", action="store_true", help="a cudaMemsetAsync before every decoder layer but the first")
p.add_argument("--probe", action="store_true", help="a few tokens, no marks: does this form run here")
a = p.parse_args()

config = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=a.layers,
                     num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048)
dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
torch.backends.cuda.matmul.allow_tf32 = True
if a.no_cudnn_sdpa:
    torch.backends.cuda.enable_cudnn_sdp(False)
model = LlamaForCausalLM(config).to("cuda", dtype).eval()
total = a.prompt + 2 * (a.warmup + a.steps) + 8
try:
    cache = StaticCache(config=config, max_cache_len=total)
except TypeError:  # the older signature
    cache = StaticCache(config=config, max_batch_size=1, max_cache_len=total, device="cuda", dtype=dtype)
prompt = torch.randint(0, 32000, (1, a.prompt), device="cuda", generator=torch.Generator("cuda").manual_seed(0))
mark.config(workload=f"greedy decode, Llama-shaped, static cache, {'CUDA graph' if a.graph else 'eager'}",
            layers=a.layers, prompt_tokens=a.prompt, batch_size=1, dtype=a.dtype, cudnn_sdpa=not a.no_cudnn_sdpa,
            cut_layers=a.cut_layers,
            torch=torch.__version__, transformers=transformers.__version__)

torch.set_grad_enabled(False)
logits = model(input_ids=prompt, past_key_values=cache, use_cache=True,
               cache_position=torch.arange(a.prompt, device="cuda")).logits
token = logits[:, -1:].argmax(-1)  # (1, 1): the next input, updated in place by each decode
position = torch.tensor([a.prompt], device="cuda")
previous = torch.empty_like(position)


scratch = torch.empty(192, device="cuda")
small = [torch.ones(256, device="cuda") for _ in range(24)]


def cudart():
    """The CUDA runtime torch loaded (its path from this process's maps), for cudaMemsetAsync,
    which no torch op exposes."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libcudart" in line}
    return ctypes.CDLL(sorted(paths)[0] if paths else "libcudart.so")


memset = cudart().cudaMemsetAsync if a.memset_first or a.cut_layers else None
if memset is not None:
    memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p]


def cut(*_):
    err = memset(scratch.data_ptr(), 0, 768, torch.cuda.current_stream().cuda_stream)
    assert err == 0, f"cudaMemsetAsync returned {err}"


if a.cut_layers:
    for layer in model.model.layers[1:]:
        layer.register_forward_pre_hook(cut)


def copy_first():
    if a.copy_first:
        previous.copy_(position)  # same dtype, contiguous, one device: one cudaMemcpyAsync
    if a.memset_first:
        cut()


def decode():
    copy_first()
    if a.nvtx_inside:
        torch.cuda.nvtx.range_push("forward")
    out = model(input_ids=token, past_key_values=cache, use_cache=True, cache_position=position).logits
    if a.nvtx_inside:
        torch.cuda.nvtx.range_pop()
    token.copy_(out[:, -1:].argmax(-1))
    position.add_(1)
    if a.foreach_last:
        torch._foreach_mul_(small, 1.0)


side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for i in range(2 if a.probe else a.warmup):
        if a.probe:
            decode()
        else:
            with mark.step(i, warmup=a.warmup):
                decode()
torch.cuda.current_stream().wait_stream(side)

graph = None
if a.graph:
    graph = torch.cuda.CUDAGraph()
    torch.cuda.nvtx.range_push("cuda_graph_capture")  # no iteration: the parsers' steady state skips it
    with torch.cuda.graph(graph):
        decode()
    graph.replay()  # the first replay uploads the graph
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()

run = graph.replay if graph is not None else decode
if a.probe:
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    print("probe ok", "graph" if a.graph else "eager", "position", int(position))
    raise SystemExit(0)
for i in range(a.warmup, a.warmup + a.steps):
    with mark.step(i, warmup=a.warmup):
        run()
for r in mark.clock.records:
    print(r["name"], f"{r['seconds'] * 1e3:.3f} ms")
