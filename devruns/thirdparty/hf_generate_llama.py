"""HF generate() on a small Llama-shaped model from its config (no download): greedy, batch 1,
a 128-token prompt and 32 new tokens; 1 warm-up call, then measured calls. The per-token Python
clock is taken where a user would, in a StoppingCriteria called after each new token (generate
synchronises there: it checks whether every sequence has finished). Kept with
nsight_tui.capture.mark.record (nothing in the trace); `--cache static` uses a static KV cache.
    python hf_generate_llama.py [--cache dynamic|static] [--layers 6] [--new 32] [--calls 3]
"""
import argparse
import time

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM, StoppingCriteria, StoppingCriteriaList

from nsight_tui.capture import mark

p = argparse.ArgumentParser()
p.add_argument("--cache", default="dynamic", choices=["dynamic", "static"])
p.add_argument("--layers", type=int, default=6)
p.add_argument("--prompt", type=int, default=128)
p.add_argument("--new", type=int, default=32)
p.add_argument("--calls", type=int, default=3)
p.add_argument("--warmup", type=int, default=1)
a = p.parse_args()


class TokenClock(StoppingCriteria):
    def __init__(self):
        self.times = []

    def __call__(self, input_ids, scores, **kw):
        self.times.append(time.perf_counter())
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


config = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=a.layers,
                     num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048)
model = LlamaForCausalLM(config).to("cuda", torch.bfloat16).eval()
prompt = torch.randint(0, 32000, (1, a.prompt), device="cuda", generator=torch.Generator("cuda").manual_seed(0))
mark.config(workload=f"HF generate(), Llama-shaped, {a.cache} cache", layers=a.layers, prompt_tokens=a.prompt,
            new_tokens=a.new, batch_size=1, dtype="bf16", torch=torch.__version__, transformers=transformers.__version__)
extra = {"cache_implementation": "static"} if a.cache == "static" else {}
for i in range(a.warmup + a.calls):
    clock = TokenClock()
    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=a.new, min_new_tokens=a.new, do_sample=False,
                             stopping_criteria=StoppingCriteriaList([clock]), pad_token_id=0, **extra)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    stamps = [start, *clock.times]
    per_token = [b - s for s, b in zip(stamps, stamps[1:])]
    name = mark.iteration_name(i, a.warmup)
    mark.record(name, seconds, new_tokens=int(out.shape[1] - a.prompt), prefill_s=per_token[0] if per_token else None,
                decode_token_s=per_token[1:])
    decode = sorted(per_token[1:])
    print(name, f"{seconds * 1e3:.1f} ms, prefill+first token {per_token[0] * 1e3:.2f} ms, "
          f"decode median {decode[len(decode) // 2] * 1e3:.3f} ms/token over {len(decode)}")
