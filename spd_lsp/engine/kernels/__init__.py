"""Our C++ kernels for the CPU: one library, one op namespace (`torch.ops.spd`), built at run time.

`build.py` compiles (or loads the compiled) library from the sources here and says what it provides; each op group has
one source and one Python binding module beside it, which registers its ops' fake (shape) functions for tracing:

| group | source | binding | ops |
| --- | --- | --- | --- |
| decode attention | attention.cpp, attention.h | attention.py | `decode_attention` |
| prompt attention | prompt.cpp | prompt.py | `causal_attention` |
| weight-only matvec | matvec.cpp, matvec.h | matvec.py | `int4_matvec`, `q8_matvec`, `int8_matvec` |
| any GGUF block layout | blocks.cpp, blocks.h | blocks.py | `blocks_dequantize`, `blocks_matvec`, `blocks_linear` |
| pointwise | pointwise.cpp, pointwise.h | pointwise.py | `rms_norm`, `add_rms_norm`, `silu_mul`, `rotary` |
| the fused decode step | step.cpp | step.py | `decode_step`, class `StepModel` |
| AMX tiles | amx.cpp, amx.h | amx.py | `amx_int4_linear`, `amx_q8_linear` |
| verification's verdicts | verdict.cpp | verdict.py | `token_verdicts` |
| oneDNN's packed weights | (oneDNN, in torch) | onednn.py | `onednn_linear` |

It sits below both `engine/decoding` (verification's verdicts) and `engine/fast` (the rest) and imports neither.
Which of these serve a model is decided once at load by `engine/fast/plan.py`.
"""
