"""HF Trainer on a small Qwen2-shaped model built from its config (no download), random tokens.

What a user would add to time the steps: a TrainerCallback taking the Python clock around each
optimizer step (nsight_tui.capture.mark.begin_step/end_step, nvtx=False: the trace stays
unannotated and the times go to STEM.steps.json beside it). Usage:
    python hf_trainer_qwen2.py [--layers 4] [--batch 8] [--seq 512] [--warmup 3] [--steps 6]
                               [--precision bf16|fp32|tf32] [--optim trainer|foreach-off|fused] [--accum K]
                               [--compile] [--attn sdpa|eager] [--no-nan-filter]
--precision: bf16 (the default, TrainingArguments(bf16=True)), or fp32 weights and activations with
TrainingArguments(tf32=False|True), the TF32 twin pair; --optim: the Trainer's own AdamW, or one passed
in through Trainer(optimizers=...) as torch.optim.AdamW(foreach=False) or (fused=True), the fused pair;
--accum: TrainingArguments(gradient_accumulation_steps=K), K micro-batches an optimizer step; --compile:
TrainingArguments(torch_compile=True); --attn: the model's attn_implementation, "sdpa" (transformers' default,
F.scaled_dot_product_attention) or "eager" (matmul, softmax, matmul written out), the unfused-attention pair;
--no-nan-filter: TrainingArguments(logging_nan_inf_filter=False) against the Trainer's default (True: each step
asks whether its loss is NaN or inf, a tensor read on the host, where the step waits for its GPU work).
"""
import argparse

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM, Trainer, TrainerCallback, TrainingArguments

from nsight_tui.capture import mark

p = argparse.ArgumentParser()
p.add_argument("--layers", type=int, default=4)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--seq", type=int, default=512)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--steps", type=int, default=6)
p.add_argument("--precision", choices=("bf16", "fp32", "tf32"), default="bf16")
p.add_argument("--optim", choices=("trainer", "foreach-off", "fused"), default="trainer")
p.add_argument("--accum", type=int, default=1)
p.add_argument("--compile", action="store_true", help="TrainingArguments(torch_compile=True)")
p.add_argument("--attn", choices=("sdpa", "eager"), default="sdpa", help="the model's attn_implementation")
p.add_argument("--no-nan-filter", action="store_true", help="TrainingArguments(logging_nan_inf_filter=False)")
a = p.parse_args()


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, seq, vocab):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (n, seq), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class StepClock(TrainerCallback):
    def on_step_begin(self, args, state, control, **kw):
        mark.begin_step(state.global_step, warmup=a.warmup, nvtx=False)

    def on_step_end(self, args, state, control, **kw):
        mark.end_step()


config = Qwen2Config(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=a.layers,
                     num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048)
config._attn_implementation = a.attn
model = Qwen2ForCausalLM(config)
print("attn_implementation", model.config._attn_implementation)
total = a.warmup + a.steps
args = TrainingArguments(output_dir="/tmp/hf_trainer_out", per_device_train_batch_size=a.batch, max_steps=total,
                         gradient_accumulation_steps=a.accum, torch_compile=a.compile,
                         bf16=a.precision == "bf16", tf32=a.precision == "tf32" if a.precision != "bf16" else None,
                         logging_steps=10_000, save_strategy="no", report_to="none",
                         dataloader_num_workers=0, disable_tqdm=True, learning_rate=1e-4,
                         logging_nan_inf_filter=not a.no_nan_filter)
mark.config(workload="HF Trainer, Qwen2-shaped", layers=a.layers, batch_size=a.batch, seq=a.seq,
            precision=a.precision, optim=a.optim, attention=model.config._attn_implementation,
            accumulation=a.accum, compiled=a.compile, nan_filter=not a.no_nan_filter, torch=torch.__version__,
            transformers=__import__("transformers").__version__)
optimizers = (None, None)
if a.optim != "trainer":
    kind = {"foreach-off": {"foreach": False}, "fused": {"fused": True}}[a.optim]
    optimizers = (torch.optim.AdamW(model.parameters(), lr=1e-4, **kind), None)
trainer = Trainer(model=model, args=args, train_dataset=Tokens(a.batch * a.accum * total, a.seq, 32000), callbacks=[StepClock()],
                  optimizers=optimizers)
trainer.train()
for r in mark.clock.records:
    print(r["name"], f"{r['seconds'] * 1e3:.2f} ms")
