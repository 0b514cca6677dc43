"""A training loop whose batch cannot fit: a small Qwen2-shaped model at batch 256 x 4096 tokens
(its logits alone: 256*4096*32000 bf16 = 67 GB). The loop is marked with mark.step/phase, so the
out-of-memory error is kept in the Python record (status oom, the range it struck in) and
`capture -- CMD` keeps the run as STEM.oom.sqlite + STEM.oom.json.
    python oom_qwen2.py [--batch 256] [--seq 4096]
"""
import argparse

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from nsight_tui.capture import mark

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=256)
p.add_argument("--seq", type=int, default=4096)
a = p.parse_args()
config = Qwen2Config(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                     num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=8192)
model = Qwen2ForCausalLM(config).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, 32000, (a.batch, a.seq), device="cuda")
mark.config(workload="Qwen2-shaped, a batch that cannot fit", batch_size=a.batch, seq=a.seq)
for i in range(3):
    with mark.step(i):
        with mark.phase("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
        with mark.phase("backward"):
            loss.backward()
        with mark.phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad()
