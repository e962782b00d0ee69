"""Generate the wgmma wrappers, one per shape:
- src/gemm_ladder/kernels/common/gl_wgmma_ops.cuh: m64nNk16 on fp16/bf16 operands;
- src/gemm_ladder/kernels/common/gl_wgmma_fp8_ops.cuh: m64nNk32 on fp8 (e4m3/e5m2) operands.

wgmma's inline asm needs every accumulator register spelled out (up to 128 of them),
which nobody should type by hand. Run: python tools/gen_wgmma.py
"""
from pathlib import Path

# N of m64nNk16; the accumulator holds N/2 floats per thread. 104-240: the production tile
# widths beside 256, chosen per shape against a ragged last wave (library/select.py).
SHAPES = (32, 64, 104, 128, 144, 168, 176, 192, 224, 232, 240, 256)
# N of the register-A m64nNk16 (A from registers: attention's P, converted in place from the
# first GEMM's accumulator): the attention family's head dims (families/attention.py).
RS_SHAPES = (64, 128, 256)
# N of m64nNk32 on fp8: the fp8 family's tile widths (families/fp8.py).
FP8_SHAPES = (64, 128, 192, 256)
COMMON = Path(__file__).resolve().parents[1] / "src/gemm_ladder/kernels/common"


def wrapper(n: int) -> str:
    regs = n // 2
    acc = ", ".join(f"%{i}" for i in range(regs))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    return f'''
// D[64x{n}] (+)= A[64x16] * B[{n}x16]^T, A and B in shared memory (descriptors), K-major
// unless MN_A / MN_B (the operand's M or N index is the contiguous one: wgmma's transpose
// bits). D in registers: {regs} floats per thread. scale_d = 0 overwrites D, 1 accumulates.
template <int MN_A = 0, int MN_B = 0>
GL_DEVICE void wgmma_m64n{n}k16(float (&d)[{regs}], u64 desc_a, u64 desc_b, u32 scale_d) {{
  asm volatile(
      "{{\\n .reg .pred p;\\n setp.ne.b32 p, %{regs + 2}, 0;\\n"
      "wgmma.mma_async.sync.aligned.m64n{n}k16.f32." GL_AB_TYPE "." GL_AB_TYPE
      " {{{acc}}}, %{regs}, %{regs + 1}, p, 1, 1, %{regs + 3}, %{regs + 4};\\n}}\\n"
      : {outs}
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(MN_A), "n"(MN_B));
}}
'''


def rs_wrapper(n: int) -> str:
    regs = n // 2
    acc = ", ".join(f"%{i}" for i in range(regs))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    return f'''
// D[64x{n}] (+)= A[64x16] * B[{n}x16]^T with A in registers: four 32-bit registers per thread,
// each two 16-bit elements, in the accumulator's own fragment layout (a[0]: row r, k 2t..2t+1;
// a[1]: row r+8; a[2], a[3]: the same at k+8), so an fp32 accumulator converts in place. B in
// shared memory (descriptor), K-major unless MN_B. The registers must keep their values until
// the wgmma retires (wait_group). scale_d = 0 overwrites D, 1 accumulates.
template <int MN_B = 0>
GL_DEVICE void wgmma_m64n{n}k16_rs(float (&d)[{regs}], const u32 (&a)[4], u64 desc_b, u32 scale_d) {{
  asm volatile(
      "{{\\n .reg .pred p;\\n setp.ne.b32 p, %{regs + 5}, 0;\\n"
      "wgmma.mma_async.sync.aligned.m64n{n}k16.f32." GL_AB_TYPE "." GL_AB_TYPE
      " {{{acc}}}, {{%{regs}, %{regs + 1}, %{regs + 2}, %{regs + 3}}}, %{regs + 4}, p, 1, 1, %{regs + 6};\\n}}\\n"
      : {outs}
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(MN_B));
}}
'''


def fp8_wrapper(n: int) -> str:
    regs = n // 2
    acc = ", ".join(f"%{i}" for i in range(regs))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    return f'''
// D[64x{n}] (+)= A[64x32] * B[{n}x32]^T on fp8 operands in shared memory (descriptors), both
// K-major (fp8 wgmma has no transpose). D in registers: {regs} floats per thread. scale_d = 0
// overwrites D, 1 accumulates (in the tensor core's own accumulation precision).
GL_DEVICE void wgmma_m64n{n}k32_fp8(float (&d)[{regs}], u64 desc_a, u64 desc_b, u32 scale_d) {{
  asm volatile(
      "{{\\n .reg .pred p;\\n setp.ne.b32 p, %{regs + 2}, 0;\\n"
      "wgmma.mma_async.sync.aligned.m64n{n}k32.f32." GL_FP8_A_TYPE "." GL_FP8_B_TYPE
      " {{{acc}}}, %{regs}, %{regs + 1}, p, 1, 1;\\n}}\\n"
      : {outs}
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}}
'''


def dispatcher(shapes, *, has: str, name: str, call: str, template: str, header: str, what: str,
               operands: str = "", a_param: str = "u64 desc_a", a_arg: str = "desc_a") -> str:
    """`name`<N>: the wrapper of tile width N known at compile time; `has`<N>: whether one exists."""
    names = ", ".join(str(n) for n in shapes)
    branches = "\n".join(
        f"  {'if' if i == 0 else 'else if'} constexpr (N == {n}) {call.format(n=n)}(d, {a_arg}, desc_b, scale_d);"
        for i, n in enumerate(shapes))
    return f'''
template <int N> constexpr bool {has} = {" || ".join(f"N == {n}" for n in shapes)};

// One {what}{operands} for a tile width N known at compile time.
template <{template}>
GL_DEVICE void {name}(float (&d)[N / 2], {a_param}, u64 desc_b, u32 scale_d) {{
  static_assert({has}<N>, "{header} has {what} for N in {{{names}}} (tools/gen_wgmma.py)");
{branches}
}}
'''


FP8_TYPES = '''
// Operand formats of the fp8 wgmma: e4m3, or e5m2 with GL_FP8_A_E5M2 / GL_FP8_B_E5M2 = 1.
#if GL_FP8_A_E5M2
#define GL_FP8_A_TYPE "e5m2"
#else
#define GL_FP8_A_TYPE "e4m3"
#endif
#if GL_FP8_B_E5M2
#define GL_FP8_B_TYPE "e5m2"
#else
#define GL_FP8_B_TYPE "e4m3"
#endif
'''


def texts() -> dict[Path, str]:
    """Each generated header's path and text."""
    header = "#pragma once\n#include \"gl_common.cuh\"\n"
    return {
        COMMON / "gl_wgmma_ops.cuh":
            "// gl_wgmma_ops.cuh — GENERATED by tools/gen_wgmma.py; do not edit by hand.\n" + header
            + "".join(wrapper(n) for n in SHAPES)
            + dispatcher(SHAPES, has="has_wgmma_n", name="wgmma_m64k16", call="wgmma_m64n{n}k16<MN_A, MN_B>",
                         template="int N, int MN_A = 0, int MN_B = 0", header="gl_wgmma_ops.cuh", what="m64nNk16")
            + "".join(rs_wrapper(n) for n in RS_SHAPES)
            + dispatcher(RS_SHAPES, has="has_wgmma_rs_n", name="wgmma_m64k16_rs", call="wgmma_m64n{n}k16_rs<MN_B>",
                         template="int N, int MN_B = 0", header="gl_wgmma_ops.cuh", what="m64nNk16",
                         operands=" with A in registers", a_param="const u32 (&a)[4]", a_arg="a"),
        COMMON / "gl_wgmma_fp8_ops.cuh":
            "// gl_wgmma_fp8_ops.cuh — GENERATED by tools/gen_wgmma.py; do not edit by hand.\n" + header
            + FP8_TYPES + "".join(fp8_wrapper(n) for n in FP8_SHAPES)
            + dispatcher(FP8_SHAPES, has="has_wgmma_fp8_n", name="wgmma_m64k32_fp8", call="wgmma_m64n{n}k32_fp8",
                         template="int N", header="gl_wgmma_fp8_ops.cuh", what="m64nNk32", operands=" on fp8"),
    }


def main() -> None:
    for path, text in texts().items():
        path.write_text(text)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
