"""The parts of parsers.model.inferred_ranges (issue 31): structure found in an unannotated
trace's kernel sequence, one step per module, in the order they run:

- kernel_sequence: a process's kernels in launch order (name codes, launch and GPU times);
- period: the iteration's period and where each iteration begins;
- kernel_kinds: a kernel's kind from its name (norm, GEMM, softmax, ...) and the phase markers;
- layers: the repeated layer inside an iteration (forward, and the backward's mirror);
- stage_names / backward_stage_names: one layer's stages named from its kinds in order;
- range_rows: forward/backward/optimizer and every part as rows like `Trace.ranges`;
- infer: the above put together, on a trace with no iteration ranges or inside its own;
- result: what was inferred (`Inference`, `InferredIteration`).
"""
